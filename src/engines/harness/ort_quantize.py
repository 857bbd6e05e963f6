# edgeprof's converter to lower precision with onnxruntime's own tools: reads a request (JSON) on
# stdin, writes the converted ONNX file, and answers one JSON line on stdout ("converted" or
# "error"). It runs under the onnxruntime environment's interpreter.
#   {"model": PATH, "output": PATH, "precision": "int8" | "fp16",
#    "method": "static" | "dynamic",                       (int8)
#    "calibration": [[{"name": NAME or null, "file": NPY}, ...], ...]}   (static int8)
# Static int8 writes the QDQ format (QuantizeLinear/DequantizeLinear pairs around the float
# operators), which onnxruntime fuses into integer kernels and tract reads; weights are signed
# int8 per channel, activations unsigned int8 per tensor, ranges from the calibration batches
# (MinMax). The model is first pre-processed as the tool advises (batch normalization folded
# into convolutions, shapes inferred). fp16 uses onnxruntime's float16 converter with float32
# inputs and outputs kept, so that every engine is fed the same values.
import json
import os
import sys


class Refused(Exception):
    """A failure to report as one sentence, without a traceback."""


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def need(module, what):
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Refused(
            "%s needs the Python package %s, which %s lacks (%s); add it with: "
            "edgeprof env setup onnxruntime" % (what, module.split(".")[0], sys.executable, e)
        )


class Batches:
    """onnxruntime's calibration reader over the batches edgeprof wrote."""

    def __init__(self, np, batches, inputs):
        self.np, self.batches, self.inputs = np, list(batches), inputs

    def get_next(self):
        if not self.batches:
            return None
        feed = {}
        for given in self.batches.pop(0):
            name = given.get("name") or self.inputs[0]
            feed[name] = self.np.load(given["file"], allow_pickle=False)
        return feed

    def rewind(self):
        pass


def int8(request, source, output, work):
    quantization = need("onnxruntime.quantization", "onnxruntime's quantization tool")
    onnx = need("onnx", "onnxruntime's quantization tool")
    np = need("numpy", "onnxruntime's quantization tool")
    method = request.get("method", "static")
    prepared = os.path.join(work, "prepared.onnx")
    try:
        from onnxruntime.quantization.shape_inference import quant_pre_process

        quant_pre_process(source, prepared, skip_symbolic_shape=True)
    except Exception as e:  # the tool's own pre-processing is advice, not a requirement
        sys.stderr.write("pre-processing skipped: %s: %s\n" % (type(e).__name__, e))
        prepared = source
    if method == "dynamic":
        quantization.quantize_dynamic(prepared, output, weight_type=quantization.QuantType.QInt8)
        return
    if method != "static":
        raise Refused("unknown quantization method %r (static or dynamic)" % method)
    batches = request.get("calibration") or []
    if not batches:
        raise Refused("static quantization needs calibration batches, and none were given")
    inputs = [i.name for i in onnx.load(prepared, load_external_data=False).graph.input]
    quantization.quantize_static(
        prepared,
        output,
        Batches(np, batches, inputs),
        quant_format=quantization.QuantFormat.QDQ,
        activation_type=quantization.QuantType.QUInt8,
        weight_type=quantization.QuantType.QInt8,
        per_channel=True,
    )


def fp16(request, source, output, work):
    onnx = need("onnx", "onnxruntime's float16 converter")
    float16 = need("onnxruntime.transformers.float16", "onnxruntime's float16 converter")
    model = onnx.load(source)
    onnx.save(float16.convert_float_to_float16(model, keep_io_types=True), output)


def main():
    import tempfile

    try:
        request = json.load(sys.stdin)
        source, output, precision = request["model"], request["output"], request["precision"]
    except (ValueError, KeyError) as e:
        raise Refused("the conversion request is not valid JSON: %s" % e)
    convert = {"int8": int8, "fp16": fp16}.get(precision)
    if convert is None:
        raise Refused("no conversion to %s (int8 or fp16)" % precision)
    folder = os.path.dirname(os.path.abspath(output))
    with tempfile.TemporaryDirectory(prefix="edgeprof-convert-", dir=folder) as work:
        written = os.path.join(work, "converted.onnx")
        convert(request, source, written, work)
        # Whole or not at all: a conversion cut short leaves no file under the final name.
        os.replace(written, output)
    emit({"type": "converted", "file": output})


try:
    main()
except Refused as e:
    emit({"type": "error", "message": str(e)})
    sys.exit(1)
except Exception as e:
    import traceback

    traceback.print_exc()
    emit({"type": "error", "message": "onnxruntime's conversion failed: %s: %s" % (type(e).__name__, e)})
    sys.exit(1)
