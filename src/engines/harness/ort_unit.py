# edgeprof's placement unit on onnxruntime: a long-lived child of `edgeprof place-worker` that
# holds sub-models (blocks of a chain, exported by edgeprof as ONNX files) on one device, the
# CPU or a GPU, and serves requests on stdin: one JSON line each, followed by raw float32 bytes
# where the request says "bytes". Each answer is one JSON line, then its own bytes, if any.
#
#   {"op": "setup", "device": "cpu" | "cuda:N", "threads": T}  -> {"note": ...}
#   {"op": "load", "id": K, "path": P, "shape": [...]}         -> {} (K warmed up, its input on
#                                                                  the device)
#   {"op": "time", "id": K}                                     -> {"ms": one run of K, input
#                                                                  and output on the device}
#   {"op": "put", "bytes": N} + N bytes                         -> {} (copied to the device)
#   {"op": "fetch"}                                             -> {"bytes": N} + the last put's
#                                                                  N bytes, from the device
#   {"op": "run", "id": K, "shape": [...], "bytes": N} + bytes  -> {"shape": [...], "bytes": M}
#                                                                  + K's output
#
# A failure is answered {"error": "one sentence"}; the program then goes on serving.
# Python 3.6 (JetPack 4), numpy and onnxruntime only.
import json
import os
import sys
import time

IN = sys.stdin.buffer
# The answers go to a copy of stdout; stdout itself then goes to stderr, so that nothing a
# library prints (from Python or from C) can mix with them.
OUT = os.fdopen(os.dup(1), "wb")
os.dup2(2, 1)
sys.stdout = sys.stderr


class UnitError(Exception):
    """A failure to answer as one sentence."""


def answer(record, payload=b""):
    OUT.write((json.dumps(record) + "\n").encode("utf-8"))
    if payload:
        OUT.write(payload)
    OUT.flush()


def read_exactly(n):
    chunks = []
    while n > 0:
        chunk = IN.read(n)
        if not chunk:
            raise EOFError("the request's bytes ended early")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


class Unit:
    def __init__(self):
        self.ort = None
        self.np = None
        self.models = {}
        self.staged = None
        self.device_type, self.device_id = "cpu", 0

    def setup(self, request):
        try:
            import numpy as np
            import onnxruntime as ort
        except ImportError as e:
            raise UnitError(
                "onnxruntime or numpy is not installed for %s (%s); set it up with: "
                "edgeprof env setup onnxruntime" % (sys.executable, e)
            )
        device = request["device"]
        available = ort.get_available_providers()
        self.options = ort.SessionOptions()
        self.options.intra_op_num_threads = max(int(request.get("threads", 1)), 1)
        self.options.inter_op_num_threads = 1
        if device == "cpu":
            self.providers, self.provider_options = ["CPUExecutionProvider"], [{}]
        else:
            kind, _, index = device.partition(":")
            if kind != "cuda" or not index.isdigit():
                raise UnitError("unit device %r is neither cpu nor cuda:N" % device)
            if "CUDAExecutionProvider" not in available:
                raise UnitError(
                    "this onnxruntime (%s) has no CUDA execution provider (it has %s); install "
                    "onnxruntime-gpu in its environment" % (ort.__version__, ", ".join(available))
                )
            self.device_type, self.device_id = "cuda", int(index)
            self.providers = ["CUDAExecutionProvider"]
            self.provider_options = [{"device_id": self.device_id}]
        self.device = device
        # Set up only now: a unit whose device failed serves nothing.
        self.np, self.ort = np, ort
        return {"note": "onnxruntime %s, %s" % (ort.__version__, ", ".join(self.providers))}

    def to_device(self, array):
        return self.ort.OrtValue.ortvalue_from_numpy(array, self.device_type, self.device_id)

    def bound(self, session, value):
        binding = session.io_binding()
        binding.bind_ortvalue_input(session.get_inputs()[0].name, value)
        binding.bind_output(session.get_outputs()[0].name, self.device_type, self.device_id)
        return binding

    def execute(self, session, binding):
        session.run_with_iobinding(binding)
        if hasattr(binding, "synchronize_outputs"):
            binding.synchronize_outputs()

    def load(self, request):
        session = self.ort.InferenceSession(
            request["path"], self.options, providers=self.providers, provider_options=self.provider_options
        )
        used = session.get_providers()
        if self.device_type == "cuda" and used[0] == "CPUExecutionProvider":
            raise UnitError("onnxruntime fell back to the CPU instead of %s" % self.device)
        shape = [int(d) for d in request["shape"]]
        data = self.np.random.RandomState(int(request.get("seed", 0))).uniform(-1.0, 1.0, shape)
        value = self.to_device(self.np.ascontiguousarray(data, dtype=self.np.float32))
        binding = self.bound(session, value)
        for _ in range(2):
            self.execute(session, binding)
        self.models[request["id"]] = (session, binding, value)
        return {}

    def model(self, request):
        try:
            return self.models[request["id"]]
        except KeyError:
            raise UnitError("no sub-model %r is loaded" % request.get("id"))

    def time(self, request):
        session, binding, _ = self.model(request)
        start = time.perf_counter()
        self.execute(session, binding)
        return {"ms": (time.perf_counter() - start) * 1e3}

    def put(self, request, payload):
        array = self.np.frombuffer(payload, dtype="<f4")
        self.staged = self.to_device(array)
        return {}

    def fetch(self, request):
        if self.staged is None:
            raise UnitError("nothing was put on the device to fetch")
        data = self.np.ascontiguousarray(self.staged.numpy(), dtype="<f4").tobytes()
        return {"bytes": len(data)}, data

    def run(self, request, payload):
        session = self.model(request)[0]
        shape = [int(d) for d in request["shape"]]
        array = self.np.frombuffer(payload, dtype="<f4").reshape(shape)
        binding = self.bound(session, self.to_device(array))
        self.execute(session, binding)
        out = self.np.ascontiguousarray(binding.get_outputs()[0].numpy(), dtype="<f4")
        data = out.tobytes()
        return {"shape": list(out.shape), "bytes": len(data)}, data


def serve():
    unit = Unit()
    while True:
        line = IN.readline()
        if not line:
            return
        payload = b""
        try:
            request = json.loads(line.decode("utf-8"))
            n = int(request.get("bytes", 0))
            if n:
                payload = read_exactly(n)
            op = request.get("op")
            if op != "setup" and unit.ort is None:
                raise UnitError("the unit was not set up")
            if op == "setup":
                result = unit.setup(request)
            elif op == "load":
                result = unit.load(request)
            elif op == "time":
                result = unit.time(request)
            elif op == "put":
                result = unit.put(request, payload)
            elif op == "fetch":
                result = unit.fetch(request)
            elif op == "run":
                result = unit.run(request, payload)
            else:
                raise UnitError("unknown request %r" % op)
        except EOFError:
            return
        except UnitError as e:
            result = {"error": str(e)}
        except Exception as e:
            result = {"error": "onnxruntime failed: %s: %s" % (type(e).__name__, e)}
        if isinstance(result, tuple):
            answer(*result)
        else:
            answer(result)


serve()
