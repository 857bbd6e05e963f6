# edgeprof harness part: PyTorch runs torchvision's own definition of the zoo model
# (weights=None), loaded with the zoo's seeded weights from the model description (the zoo
# names its parameters as torchvision does), eagerly, as TorchScript or compiled.
FRAMEWORK = "pytorch"


OPTIONS = ("mode", "inter_op_threads")
MODES = ("eager", "torchscript", "compile")


class Session:
    def __init__(self, request, np):
        torch = need("torch")
        torchvision = need("torchvision")
        condition = request["condition"]
        options = options_of(request, OPTIONS)
        model = condition["model"]
        if model.get("kind") != "zoo":
            raise HarnessError("pytorch runs the zoo's models through torchvision, not ONNX files")
        name = model["name"]
        build = getattr(torchvision.models, name, None)
        if build is None:
            raise HarnessError("torchvision %s has no model %s" % (torchvision.__version__, name))
        # Threads are fixed before any parallel work starts (PyTorch refuses it after).
        self.threads = threads_of(condition)
        torch.set_num_threads(self.threads)
        torch.set_num_interop_threads(int(options.get("inter_op_threads", 1)))
        torch.manual_seed(request.get("seed", 0))
        device = condition["device"]
        if device == "cpu":
            target = torch.device("cpu")
        else:
            gpu = int(device.split(":")[1])
            if not torch.cuda.is_available():
                raise HarnessError(
                    "this PyTorch %s sees no CUDA GPU (built with CUDA %s)"
                    % (torch.__version__, torch.version.cuda)
                )
            if gpu >= torch.cuda.device_count():
                raise HarnessError(
                    "PyTorch sees %d GPU(s); there is no %s" % (torch.cuda.device_count(), device)
                )
            target = torch.device("cuda", gpu)
        self.cuda = target.type == "cuda"
        net = build(weights=None, num_classes=request["classes"]).eval()
        self.parameters = sum(p.numel() for p in net.parameters())
        if request.get("model_file"):
            _, params, _ = read_description(np, request["model_file"])
            state = {name: torch.from_numpy(array) for name, array in params.items()}
            try:
                result = net.load_state_dict(state, strict=False)
            except RuntimeError as e:
                raise HarnessError(
                    "torchvision's %s does not take the zoo's weights: %s"
                    % (name, str(e).splitlines()[0] if str(e) else e)
                )
            missing = [k for k in result.missing_keys if not k.endswith("num_batches_tracked")]
            if missing or result.unexpected_keys:
                raise HarnessError(
                    "torchvision's %s and the zoo's name different parameters (missing %s, "
                    "unexpected %s)" % (name, missing[:3], result.unexpected_keys[:3])
                )
            del state
        net = net.to(target)
        self.input = torch.from_numpy(read_input(np, request)).to(target)
        self.mode = choice(options, "mode", MODES, "eager")
        with torch.inference_mode():
            if self.mode == "torchscript":
                net = torch.jit.freeze(torch.jit.trace(net, self.input))
            elif self.mode == "compile":
                net = torch.compile(net)
        self.net = net
        self.torch = torch
        self.device = device
        self.version = "%s (torchvision %s)" % (torch.__version__, torchvision.__version__)
        self.note = "%s mode, %d intra-op thread(s)" % (self.mode, torch.get_num_threads())

    def infer(self):
        with self.torch.inference_mode():
            out = self.net(self.input)
            if self.cuda:
                self.torch.cuda.synchronize()
        return out

    def output(self, out):
        return out.detach().cpu().numpy()


def load(request, np):
    return Session(request, np)
