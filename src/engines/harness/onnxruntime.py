# edgeprof harness part: onnxruntime runs the ONNX file edgeprof exported (or the user's own).
FRAMEWORK = "onnxruntime"

OPTIONS = (
    "graph_optimization_level",
    "inter_op_threads",
    "execution_mode",
    "spinning",
    "providers",
    "quantization",  # how edgeprof quantizes to int8 (static or dynamic), read before the run
)
LEVELS = ("disable", "basic", "extended", "all")
# Inputs of these operators that hold trainable parameters (weights, biases, batch-norm scale
# and shift); batch-norm statistics and the constants edgeprof's export adds are not trained.
TRAINABLE_INPUTS = {
    "Conv": (1, 2),
    "ConvTranspose": (1, 2),
    "Gemm": (1, 2),
    "BatchNormalization": (1, 2),
}


def varint(buf, pos):
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(buf, start, end):
    """(field number, wire type, value or (start, end) of the bytes) of a protobuf message."""
    pos = start
    while pos < end:
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
            yield number, wire, value
        elif wire == 1:
            pos += 8
        elif wire == 2:
            length, pos = varint(buf, pos)
            yield number, wire, (pos, pos + length)
            pos += length
        elif wire == 5:
            pos += 4
        else:
            raise ValueError("unsupported protobuf wire type %d" % wire)


def trainable_parameters(path):
    """Counts the trainable parameters of an ONNX file from its initializers' shapes, reading
    only the message headers (the file is mapped, not loaded, so weights stay on disk)."""
    import mmap

    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        graph = None
        for number, wire, value in fields(buf, 0, len(buf)):
            if number == 7 and wire == 2:
                graph = value
        if graph is None:
            raise HarnessError("%s holds no ONNX graph" % path)
        sizes = {}
        used = set()
        for number, wire, value in fields(buf, *graph):
            if wire != 2:
                continue
            if number == 5:  # initializer: TensorProto
                name, size = "", 1
                for n, w, v in fields(buf, *value):
                    if n == 1 and w == 0:
                        size *= v
                    elif n == 1 and w == 2:
                        pos, end = v
                        while pos < end:
                            d, pos = varint(buf, pos)
                            size *= d
                    elif n == 8 and w == 2:
                        name = bytes(buf[v[0] : v[1]]).decode("utf-8", "replace")
                sizes[name] = size
            elif number == 1:  # node: NodeProto
                inputs, op = [], ""
                for n, w, v in fields(buf, *value):
                    if n == 1 and w == 2:
                        inputs.append(bytes(buf[v[0] : v[1]]).decode("utf-8", "replace"))
                    elif n == 4 and w == 2:
                        op = bytes(buf[v[0] : v[1]]).decode("utf-8", "replace")
                for i in TRAINABLE_INPUTS.get(op, ()):
                    if i < len(inputs):
                        used.add(inputs[i])
        return sum(size for name, size in sizes.items() if name in used)


class Session:
    def __init__(self, request, np):
        ort = need("onnxruntime")
        condition = request["condition"]
        options = options_of(request, OPTIONS)
        so = ort.SessionOptions()
        self.threads = threads_of(condition)
        so.intra_op_num_threads = self.threads
        so.inter_op_num_threads = int(options.get("inter_op_threads", 1))
        level = choice(options, "graph_optimization_level", LEVELS, "all")
        so.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
        }[level]
        mode = choice(options, "execution_mode", ("sequential", "parallel"), "sequential")
        so.execution_mode = (
            ort.ExecutionMode.ORT_PARALLEL if mode == "parallel" else ort.ExecutionMode.ORT_SEQUENTIAL
        )
        spinning = options.get("spinning", True)
        so.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        so.add_session_config_entry("session.inter_op.allow_spinning", "1" if spinning else "0")
        available = ort.get_available_providers()
        device = condition["device"]
        if device == "cpu":
            wanted = ["CPUExecutionProvider"]
            provider_options = [{}]
        else:
            gpu = int(device.split(":")[1])
            wanted = options.get("providers") or [
                p for p in ("TensorrtExecutionProvider", "CUDAExecutionProvider") if p in available
            ]
            if not wanted:
                raise HarnessError(
                    "this onnxruntime has no GPU execution provider (it has %s); install "
                    "onnxruntime-gpu for CUDA and TensorRT" % ", ".join(available)
                )
            provider_options = [{"device_id": gpu} for _ in wanted]
        missing = [p for p in wanted if p not in available]
        if missing:
            raise HarnessError(
                "onnxruntime here lacks %s (it has %s)" % (", ".join(missing), ", ".join(available))
            )
        self.parameters = trainable_parameters(request["model_file"])
        self.session = ort.InferenceSession(
            request["model_file"], so, providers=wanted, provider_options=provider_options
        )
        self.options, self.providers, self.provider_options = so, wanted, provider_options
        self.model_file = request["model_file"]
        used = self.session.get_providers()
        if device != "cpu" and used[0] == "CPUExecutionProvider":
            raise HarnessError("onnxruntime fell back to the CPU instead of %s" % device)
        self.device = device
        self.version = ort.__version__
        if request.get("inputs") or not self.session.get_inputs():
            self.feeds = read_inputs(np, request)
        else:
            self.feeds = {self.session.get_inputs()[0].name: read_input(np, request)}
        self.note = "providers %s, graph optimization %s, %s execution" % (
            ", ".join(used),
            level,
            mode,
        )

    def infer(self):
        return self.session.run(None, self.feeds)

    def output(self, out):
        return out[0]

    def outputs(self, out):
        return out

    def profile_layers(self, runs):
        """Each node's median time over `runs` inferences, from onnxruntime's own profiler (a
        second session with the same options, profiling on): the kernel events of each run,
        attributed to the run whose model_run event holds them and summed per node."""
        import json
        import tempfile

        ort = need("onnxruntime")
        so = self.options
        with tempfile.TemporaryDirectory(prefix="edgeprof-ort-") as tmp:
            so.enable_profiling = True
            so.profile_file_prefix = os.path.join(tmp, "profile")
            try:
                session = ort.InferenceSession(
                    self.model_file, so, providers=self.providers, provider_options=self.provider_options
                )
            finally:
                so.enable_profiling = False
            for _ in range(runs):
                session.run(None, self.feeds)
            with open(session.end_profiling()) as f:
                events = json.load(f)
        spans = sorted(
            (e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"
        )
        per_run = [dict() for _ in spans]
        ops = {}
        for e in events:
            if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
                continue
            name = e["name"][: -len("_kernel_time")]
            if name.endswith("_nchwc"):
                name = name[: -len("_nchwc")]
            ops[name] = (e.get("args") or {}).get("op_name", "")
            for i, (start, end) in enumerate(spans):
                if start <= e["ts"] <= end:
                    per_run[i][name] = per_run[i].get(name, 0.0) + e["dur"] / 1e3
                    break
        nodes = []
        for name, op in ops.items():
            times = sorted(run.get(name, 0.0) for run in per_run)
            if times:
                nodes.append({"name": name, "op": op, "ms": times[len(times) // 2]})
        return nodes


def load(request, np):
    return Session(request, np)
