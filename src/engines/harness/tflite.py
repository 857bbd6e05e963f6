# edgeprof harness part: TensorFlow Lite (LiteRT) runs the .tflite file converted from the Keras
# model TensorFlow builds from the zoo model's description (same seeded weights), through the
# LiteRT interpreter with its default XNNPACK delegate (or the plain built-in kernels).
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
        self.input_index = self.interpreter.get_input_details()[0]["index"]
        self.output_index = self.interpreter.get_output_details()[0]["index"]
        self.input = np.ascontiguousarray(read_input(np, request).transpose(0, 2, 3, 1))
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
        self.note = "LiteRT interpreter, %s, %d thread(s); converted by TensorFlow %s" % (
            "XNNPACK" if xnnpack else "built-in kernels without XNNPACK",
            self.threads,
            made.get("tensorflow", "(unknown)"),
        )

    def infer(self):
        self.interpreter.set_tensor(self.input_index, self.input)
        self.interpreter.invoke()
        return self.interpreter.get_tensor(self.output_index)


def load(request, np):
    return Session(request, np)
