# edgeprof harness part: TensorFlow Lite (LiteRT) runs the .tflite file converted from the Keras
# model TensorFlow builds from the zoo model's description (same seeded weights), or the user's
# own .tflite file as it is, through the LiteRT interpreter with its default XNNPACK delegate (or
# the plain built-in kernels).
FRAMEWORK = "tflite"

OPTIONS = ("xnnpack",)


class Session:
    def __init__(self, request, np):
        litert = need("ai_edge_litert.interpreter")
        condition = request["condition"]
        options = options_of(request, OPTIONS)
        if condition["device"] != "cpu":
            raise HarnessError("the tflite harness runs on the CPU (no GPU delegate is set up)")
        self.threads = threads_of(condition)
        xnnpack = bool(options.get("xnnpack", True))
        resolver = (
            litert.OpResolverType.AUTO
            if xnnpack
            else litert.OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
        )
        path = request["model_file"]
        self.interpreter = litert.Interpreter(
            model_path=path, num_threads=self.threads, experimental_op_resolver_type=resolver
        )
        self.interpreter.allocate_tensors()
        if request.get("input_file"):
            # The zoo model's conversion: the input every engine is fed, NCHW to NHWC.
            index = self.interpreter.get_input_details()[0]["index"]
            self.feeds = [(index, np.ascontiguousarray(read_input(np, request).transpose(0, 2, 3, 1)))]
        else:
            self.feeds = own_inputs(np, self.interpreter, request["seed"])
        self.output_indices = [d["index"] for d in self.interpreter.get_output_details()]
        # The parameters of the Keras model the file was converted from (the converter folds
        # batch normalisation into the convolutions, so the file's own tensors count fewer).
        try:
            with open(path + ".json") as f:
                made = json.load(f)
        except (OSError, ValueError):
            made = {}
        self.parameters = made.get("parameters")
        self.device = "cpu"
        try:
            from importlib import metadata

            self.version = metadata.version("ai-edge-litert")
        except Exception:
            self.version = "unknown"
        self.note = "LiteRT interpreter, %s, %d thread(s); %s" % (
            "XNNPACK" if xnnpack else "built-in kernels without XNNPACK",
            self.threads,
            "converted by TensorFlow %s to %s" % (made["tensorflow"], made.get("precision", "float32"))
            if "tensorflow" in made
            else "the .tflite file as given",
        )

    def infer(self):
        for index, value in self.feeds:
            self.interpreter.set_tensor(index, value)
        self.interpreter.invoke()
        return [self.interpreter.get_tensor(i) for i in self.output_indices]

    def output(self, out):
        return out[0]

    def outputs(self, out):
        return out


def own_inputs(np, interpreter, seed):
    """A .tflite file's own inputs, at the shapes and types it declares: floating-point ones
    seeded uniform in [-1, 1), 8-bit ones (a quantized image) seeded over their range, the
    others zeros."""
    rng = np.random.default_rng(seed)
    feeds = []
    for d in interpreter.get_input_details():
        shape = [max(int(n), 1) for n in d["shape"]]
        dtype = np.dtype(d["dtype"])
        if dtype.kind == "f":
            value = rng.uniform(-1.0, 1.0, shape).astype(dtype)
        elif dtype in (np.dtype(np.uint8), np.dtype(np.int8)):
            info = np.iinfo(dtype)
            value = rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
        else:
            value = np.zeros(shape, dtype)
        feeds.append((d["index"], value))
    return feeds


def load(request, np):
    return Session(request, np)
