# edgeprof harness part: PyTorch runs torchvision's own definition of the zoo model
# (weights=None), loaded with the zoo's seeded weights from the model description (the zoo
# names its parameters as torchvision does), eagerly, as TorchScript or compiled. A model
# torchvision does not have (the cost model's operator probes) is run from its description,
# layer by layer, with torch's functional operators. A user's own PyTorch program (TorchScript
# or an exported program) runs as it is, fed by argument name.
FRAMEWORK = "pytorch"


OPTIONS = ("mode", "inter_op_threads")
# The lower floating precisions, run under torch.autocast.
AUTOCAST = {"fp16": "float16", "bf16": "bfloat16"}
MODES = ("eager", "torchscript", "compile")
# Parameters the zoo's descriptions hold that are not trained (batch-norm statistics).
UNTRAINED = ("running_mean", "running_var", "num_batches_tracked")


def step(torch, layer, ins, weights, epsilon):
    """One layer of a description, on the tensors `ins` it reads."""
    F = torch.nn.functional
    op, name = layer["op"], layer["name"]
    kind = op["kind"]
    x = ins[0] if ins else None
    if kind == "conv2d":
        bias = weights[name + ".bias"] if op["bias"] else None
        return F.conv2d(
            x, weights[name + ".weight"], bias, tuple(op["stride"]), tuple(op["padding"]), 1, op["groups"]
        )
    if kind == "batch_norm2d":
        return F.batch_norm(
            x,
            weights[name + ".running_mean"],
            weights[name + ".running_var"],
            weights[name + ".weight"],
            weights[name + ".bias"],
            False,
            0.0,
            op.get("eps", epsilon),
        )
    if kind == "linear":
        return F.linear(x, weights[name + ".weight"], weights[name + ".bias"] if op["bias"] else None)
    if kind == "max_pool2d":
        return F.max_pool2d(
            x, tuple(op["kernel"]), tuple(op["stride"]), tuple(op["padding"]), ceil_mode=op["ceil"]
        )
    if kind == "adaptive_avg_pool2d":
        return F.adaptive_avg_pool2d(x, tuple(op["output"]))
    if kind == "channel_shuffle":
        n, c, h, w = x.shape
        g = op["groups"]
        return x.view(n, g, c // g, h, w).transpose(1, 2).contiguous().view(n, c, h, w)
    if kind == "channel_slice":
        return x[:, op["start"] : op["end"]]
    simple = {
        "relu": F.relu,
        "relu6": F.relu6,
        "hardswish": F.hardswish,
        "hardsigmoid": F.hardsigmoid,
        "sigmoid": torch.sigmoid,
        "silu": F.silu,
        "flatten": lambda t: torch.flatten(t, 1),
        "dropout": lambda t: t,
        "add": lambda t: t + ins[1],
        "channel_scale": lambda t: t * ins[1],
        "concat": lambda t: torch.cat(ins, 1),
    }
    if kind not in simple:
        raise HarnessError("the PyTorch harness cannot build a %s layer (%s)" % (kind, name))
    return simple[kind](x)


def described(torch, model, params, epsilon, target):
    """A module that runs a zoo description layer by layer; `forward(x, clock, times)` adds each
    layer's seconds to `times` by name when given a clock."""

    class Described(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = {k: torch.from_numpy(v).to(target) for k, v in params.items()}
            self.layers = model["layers"]
            self.output = model["output"]["Layer"]

        def forward(self, x, clock=None, times=None):
            values = []
            for layer in self.layers:
                ins = [x if v == "Input" else values[v["Layer"]] for v in layer["inputs"]]
                if clock is None:
                    values.append(step(torch, layer, ins, self.weights, epsilon))
                    continue
                start = clock()
                values.append(step(torch, layer, ins, self.weights, epsilon))
                times[layer["name"]] = times.get(layer["name"], 0.0) + clock() - start
            return values[self.output]

    return Described()


class Session:
    def __init__(self, request, np):
        torch = need("torch")
        torchvision = need("torchvision")
        condition = request["condition"]
        options = options_of(request, OPTIONS)
        model = condition["model"]
        if model.get("kind") != "zoo":
            raise HarnessError(
                "pytorch runs the zoo's models through torchvision and PyTorch programs as they "
                "are, not ONNX files"
            )
        name = model["name"]
        build = getattr(torchvision.models, name, None)
        if build is None and not request.get("model_file"):
            raise HarnessError("torchvision %s has no model %s" % (torchvision.__version__, name))
        # Threads are fixed before any parallel work starts (PyTorch refuses it after).
        self.threads = threads_of(condition)
        torch.set_num_threads(self.threads)
        torch.set_num_interop_threads(int(options.get("inter_op_threads", 1)))
        torch.manual_seed(request.get("seed", 0))
        device = condition["device"]
        target = target_device(torch, device)
        self.cuda = target.type == "cuda"
        if build is None:
            # Not a torchvision model (an operator probe): its description, run layer by layer.
            description, params, epsilon = read_description(np, request["model_file"])
            self.parameters = int(
                sum(a.size for k, a in params.items() if not k.endswith(UNTRAINED))
            )
            net = described(torch, description, params, epsilon, target).eval()
            self.source = "run from the zoo's description (torchvision has no %s)" % name
        else:
            net = self.torchvision(torch, np, build, name, request).to(target)
            self.source = "torchvision's definition"
        self.described = build is None
        self.input = torch.from_numpy(read_input(np, request)).to(target)
        self.mode = choice(options, "mode", MODES, "eager")
        self.precision = condition.get("precision", "fp32")
        self.target = target
        precision_note = ""
        if self.precision == "int8":
            if self.described:
                raise HarnessError(
                    "PyTorch's int8 quantizes torchvision's models (FX tracing); %s is run from "
                    "its description" % name
                )
            net, backend, batches = quantized(torch, np, net, self.input, request, target)
            precision_note = ", int8 (FX static quantization, %s backend, %d calibration batches)" % (
                backend,
                batches,
            )
        elif self.precision in AUTOCAST:
            precision_note = ", %s autocast" % self.precision
        with torch.inference_mode(), cast(torch, target, self.precision):
            if self.mode == "torchscript":
                net = torch.jit.freeze(torch.jit.trace(net, self.input))
            elif self.mode == "compile":
                net = torch.compile(net)
        self.net = net
        self.torch = torch
        self.device = device
        self.version = "%s (torchvision %s)" % (torch.__version__, torchvision.__version__)
        self.note = "%s, %s mode, %d intra-op thread(s)%s" % (
            self.source,
            self.mode,
            torch.get_num_threads(),
            precision_note,
        )

    def torchvision(self, torch, np, build, name, request):
        net = build(weights=None, num_classes=request["classes"]).eval()
        self.parameters = sum(p.numel() for p in net.parameters())
        if request.get("model_file"):
            _, params, _ = read_description(np, request["model_file"])
            import collections

            own = net.state_dict()
            state = collections.OrderedDict(
                (name, torch.from_numpy(array)) for name, array in params.items()
            )
            # The modules' own metadata: the layout version MNASNet's loader insists on.
            state._metadata = getattr(own, "_metadata", None)
            del own
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
        return net

    def infer(self):
        with self.torch.inference_mode(), cast(self.torch, self.target, self.precision):
            out = self.net(self.input)
            if self.cuda:
                self.torch.cuda.synchronize()
        return out

    def output(self, out):
        out = out.detach().cpu()
        # Under autocast the output may be float16 or bfloat16 (numpy has no bfloat16).
        return (out.float() if self.precision in AUTOCAST else out).numpy()

    def profile_layers(self, runs):
        """Each layer's median time over `runs` eager inferences. A description is timed layer
        by layer. A torchvision model is timed by hooks before and after every module's
        forward: a module's own time is its time less its sub-modules' (a leaf module is one
        layer; a block's own time is its functional operators': the residual addition, the
        concatenation). A module called again in one inference (ResNet's ReLU) is named
        `name_1`, `name_2`, as the zoo names those layers; the model itself is named ""."""
        if self.mode != "eager":
            raise HarnessError(
                "PyTorch's layer times are taken in eager mode only (this session runs %s)" % self.mode
            )
        torch = self.torch
        clock = time.perf_counter
        wait = torch.cuda.synchronize if self.cuda else (lambda: None)

        def timed_clock():
            wait()
            return clock()

        per_run, ops = [], {}
        if self.described:
            for layer in self.net.layers:
                ops[layer["name"]] = layer["op"]["kind"]
            for _ in range(runs):
                times = {}
                with torch.inference_mode():
                    self.net(self.input, timed_clock, times)
                per_run.append(times)
        else:
            paths = {}
            for path, module in self.net.named_modules():
                paths[id(module)] = path
                ops[path] = type(module).__name__
            stack, calls, times = [], {}, {}

            def before(module, args):
                path = paths[id(module)]
                n = calls.get(path, 0)
                calls[path] = n + 1
                stack.append([path if n == 0 else "%s_%d" % (path, n), timed_clock(), 0.0])

            def after(module, args, out):
                end = timed_clock()
                name, start, inner = stack.pop()
                spent = end - start
                times[name] = times.get(name, 0.0) + spent - inner
                if stack:
                    stack[-1][2] += spent

            handles = []
            try:
                for module in self.net.modules():
                    handles.append(module.register_forward_pre_hook(before))
                    handles.append(module.register_forward_hook(after))
                for _ in range(runs):
                    stack.clear()
                    calls.clear()
                    times = {}
                    self.infer()
                    per_run.append(times)
            finally:
                for handle in handles:
                    handle.remove()
        names = sorted(set().union(*per_run)) if per_run else []
        nodes = []
        for name in names:
            values = sorted(run.get(name, 0.0) for run in per_run)
            base = name.rsplit("_", 1)[0] if name not in ops else name
            nodes.append({"name": name, "op": ops.get(base, ""), "ms": ms(values[len(values) // 2])})
        return nodes


class Unchanged:
    """A context that changes nothing (contextlib.nullcontext is not in Python 3.6)."""

    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def cast(torch, target, precision):
    """The autocast context of a lower floating precision on `target`; for fp32 and int8 one
    that changes nothing."""
    name = AUTOCAST.get(precision)
    if name is None:
        return Unchanged()
    if not hasattr(torch, "autocast"):
        raise HarnessError(
            "PyTorch %s has no torch.autocast for %s (1.10 and later have it)"
            % (torch.__version__, precision)
        )
    return torch.autocast(device_type=target.type, dtype=getattr(torch, name))


def quantized(torch, np, net, example, request, target):
    """`net` quantized to int8 by PyTorch's FX graph mode (static: observers calibrated on the
    batches edgeprof wrote, then converted), with the backend and the batches it took."""
    import platform
    import warnings

    if target.type != "cpu":
        raise HarnessError("PyTorch's int8 quantization runs on the CPU, not %s" % target)
    arm = platform.machine().lower() in ("aarch64", "arm64", "armv7l")
    backend = "qnnpack" if arm else "x86"
    if backend not in torch.backends.quantized.supported_engines:
        raise HarnessError(
            "this PyTorch has no %s quantized backend (it has %s)"
            % (backend, ", ".join(torch.backends.quantized.supported_engines))
        )
    torch.backends.quantized.engine = backend
    batches = request.get("calibration") or []
    if not batches:
        raise HarnessError("int8 is calibrated on batches edgeprof writes, and the request has none")
    from torch.ao.quantization import get_default_qconfig_mapping
    from torch.ao.quantization.quantize_fx import convert_fx, prepare_fx

    with warnings.catch_warnings():
        # FX graph mode is deprecated in favour of torchao; it is what this PyTorch ships.
        warnings.simplefilter("ignore")
        prepared = prepare_fx(net, get_default_qconfig_mapping(backend), example_inputs=(example,))
        with torch.no_grad():
            for batch in batches:
                prepared(torch.from_numpy(np.load(batch[0]["file"], allow_pickle=False)))
        return convert_fx(prepared), backend, len(batches)


def target_device(torch, device):
    """The torch.device of a condition's device (`cpu` or `gpu:N`), checked against this torch."""
    if device == "cpu":
        return torch.device("cpu")
    gpu = int(device.split(":")[1])
    if not torch.cuda.is_available():
        raise HarnessError(
            "this PyTorch %s sees no CUDA GPU (built with CUDA %s)" % (torch.__version__, torch.version.cuda)
        )
    if gpu >= torch.cuda.device_count():
        raise HarnessError("PyTorch sees %d GPU(s); there is no %s" % (torch.cuda.device_count(), device))
    return torch.device("cuda", gpu)


def flatten(value, out):
    """A program's outputs in order: tensors as they are, tuples, lists and dicts opened."""
    if isinstance(value, (tuple, list)):
        for v in value:
            flatten(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            flatten(v, out)
    else:
        out.append(value)
    return out


class Program:
    """A PyTorch program the user gives, run as it is: TorchScript (torch.jit.save) or an
    exported program (torch.export.save), fed the inputs edgeprof wrote, by argument name."""

    def __init__(self, request, np):
        torch = need("torch")
        condition = request["condition"]
        options = options_of(request, OPTIONS)
        mode = choice(options, "mode", MODES, "eager")
        if mode != "eager":
            raise HarnessError(
                "a PyTorch program runs as it is (mode = eager); torchscript and compile apply to "
                "the zoo's models"
            )
        self.threads = threads_of(condition)
        torch.set_num_threads(self.threads)
        torch.set_num_interop_threads(int(options.get("inter_op_threads", 1)))
        target = target_device(torch, condition["device"])
        self.cuda = target.type == "cuda"
        self.target = target
        self.precision = condition.get("precision", "fp32")
        if self.precision == "int8":
            raise HarnessError(
                "a PyTorch program runs as it is: quantize it yourself and run it at fp32 "
                "(PyTorch's int8 here quantizes torchvision's models)"
            )
        path = request["model_file"]
        net, kind, names = self.read(torch, path, target)
        self.parameters = int(sum(p.numel() for p in net.parameters()))
        fed = read_inputs(np, request)
        given = list(fed)
        if names is not None and all(n in names for n in given):
            order = [n for n in names if n in fed]
            missing = [n for n in names if n not in fed]
            if missing:
                raise HarnessError(
                    "%s takes %s; give %s too (--input NAME=DIMS, or NAME=int64:VALUE for a number)"
                    % (path, ", ".join(names), ", ".join(missing))
                )
        elif names is not None and len(given) != len(names):
            raise HarnessError(
                "%s takes %d input(s) (%s), not the %d given (%s)"
                % (path, len(names), ", ".join(names), len(given), ", ".join(given))
            )
        else:
            order = given
        types = self.types or {}
        args = []
        for name in order:
            array = fed[name]
            kind_of = types.get(name, "Tensor")
            if kind_of in ("int", "float", "bool"):
                if array.size != 1:
                    raise HarnessError(
                        "%s takes %s as a number (%s), not a tensor of shape %s"
                        % (path, name, kind_of, "x".join(map(str, array.shape)))
                    )
                args.append({"int": int, "float": float, "bool": bool}[kind_of](array.reshape(-1)[0]))
            else:
                args.append(torch.from_numpy(np.ascontiguousarray(array)).to(target))
        self.args = args
        self.net = net
        self.torch = torch
        self.device = condition["device"]
        self.version = torch.__version__
        self.note = "%s as it is, eager, %d intra-op thread(s)%s" % (
            kind,
            torch.get_num_threads(),
            ", %s autocast" % self.precision if self.precision in AUTOCAST else "",
        )

    def read(self, torch, path, target):
        """The program in `path`, what it is, and its arguments' names where it says them."""
        self.types = None
        try:
            net = torch.jit.load(path, map_location=target)
        except Exception as script_error:
            try:
                exported = torch.export.load(path)
            except Exception:
                # torch's reason, to its first sentence (it goes on about corrupted checkpoints).
                reason = (str(script_error).strip().splitlines() or [type(script_error).__name__])[0]
                raise HarnessError(
                    "%s is neither TorchScript (torch.jit.save) nor an exported program "
                    "(torch.export.save): %s; a file of weights alone (torch.save of a state_dict) "
                    "holds no program to run" % (path, reason.split(". ")[0])
                )
            net = exported.module().to(target)
            import inspect

            names = [p for p in inspect.signature(net.forward).parameters]
            return net, "exported program", names
        net.eval()
        arguments = net.forward.schema.arguments[1:]
        self.types = {a.name: str(a.type) for a in arguments}
        return net, "TorchScript", [a.name for a in arguments]

    def infer(self):
        with self.torch.inference_mode(), cast(self.torch, self.target, self.precision):
            out = self.net(*self.args)
            if self.cuda:
                self.torch.cuda.synchronize()
        return out

    def outputs(self, out):
        values = []
        for v in flatten(out, []):
            if hasattr(v, "detach"):
                v = v.detach().cpu()
                lowered = self.precision in AUTOCAST and v.is_floating_point()
                values.append((v.float() if lowered else v).numpy())
            else:
                values.append(v)
        return values

    def output(self, out):
        values = self.outputs(out)
        if not values:
            raise HarnessError("the program returned no output")
        return values[0]


def load(request, np):
    if request["condition"]["model"].get("kind") == "torch":
        return Program(request, np)
    return Session(request, np)
