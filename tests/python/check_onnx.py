"""Check an ONNX file exported by `edgeprof models export --test-data DIR`.

1. onnx.checker.check_model(path, full_check=True) (structure, types, shape inference);
2. onnxruntime runs DIR/test_data_set_0/input_0.pb and its output must equal tract's
   output_0.pb within a relative tolerance of 1e-4 (plus an absolute floor of 1e-4 times the
   largest reference magnitude, for outputs that are nearly zero).

Prints one line per model and exits non-zero on any failure.
"""
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper

RTOL = 1e-4


def load_tensor(path):
    tensor = onnx.TensorProto()
    with open(path, "rb") as f:
        tensor.ParseFromString(f.read())
    return numpy_helper.to_array(tensor)


def check(model_path, data_dir):
    onnx.checker.check_model(model_path, full_check=True)
    model = onnx.load(model_path, load_external_data=False)
    opset = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    x = load_tensor(f"{data_dir}/test_data_set_0/input_0.pb")
    expected = load_tensor(f"{data_dir}/test_data_set_0/output_0.pb")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x})
    if got.shape != expected.shape:
        raise AssertionError(f"shape {got.shape} from onnxruntime, {expected.shape} from tract")
    atol = RTOL * float(np.max(np.abs(expected)))
    diff = np.abs(got - expected)
    # Share of the allowed error used by the worst element (numpy.allclose passes at <= 1).
    tolerance_used = float(np.max(diff / (atol + RTOL * np.abs(expected))))
    ok = np.allclose(got, expected, rtol=RTOL, atol=atol)
    print(
        f"{model_path}: opset {opset}, checker ok, output {list(got.shape)}, "
        f"max |ort - tract| = {float(np.max(diff)):.3e}, tolerance used {tolerance_used:.2f}, "
        f"{'MATCH' if ok else 'MISMATCH'}"
    )
    return ok


def main(argv):
    if len(argv) < 3 or len(argv) % 2 == 0:
        print("usage: check_onnx.py MODEL.onnx DATA_DIR [MODEL.onnx DATA_DIR ...]", file=sys.stderr)
        return 2
    failures = 0
    for model_path, data_dir in zip(argv[1::2], argv[2::2]):
        try:
            if not check(model_path, data_dir):
                failures += 1
        except Exception as error:  # report every model, then fail
            print(f"{model_path}: FAILED: {error}")
            failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
