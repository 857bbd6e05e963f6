# edgeprof's harness for an external framework: the framework's part (above) defines FRAMEWORK
# and load(request, np); this common part reads the worker request (JSON) on stdin, times the
# session load() returns, and writes the worker protocol's JSON lines on stdout. Conditions reach
# it only as that JSON: nothing in this program is generated from them.
import json
import os
import sys
import time


class HarnessError(Exception):
    """A failure to report as one sentence, without a traceback."""


def emit(record):
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def need(module):
    """Imports a framework package, or says which interpreter lacks it and how to set it up."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise HarnessError(
            "the Python package %s is not installed for %s (%s); set it up with: "
            "edgeprof env setup %s" % (module, sys.executable, e, FRAMEWORK)
        )


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def threads_of(condition):
    """The condition's thread count; 0 means every core this process may use."""
    return condition["threads"] or cores()


def options_of(request, known):
    """The framework options of the config ([frameworks.NAME] options), checked by name."""
    options = request.get("options") or {}
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise HarnessError(
            "unknown %s option(s) %s; known: %s"
            % (FRAMEWORK, ", ".join(unknown), ", ".join(sorted(known)))
        )
    return options


def choice(options, key, allowed, default):
    value = options.get(key, default)
    if value not in allowed:
        raise HarnessError(
            "%s option %s = %r is not one of %s" % (FRAMEWORK, key, value, ", ".join(map(str, allowed)))
        )
    return value


def input_shape(condition):
    """(batch, channels, height, width); the input is written CxHxW, as in configs."""
    channels, height, width = (int(n) for n in str(condition["input"]).split("x"))
    return (condition["batch"], channels, height, width)


def read_input(np, request):
    """The input edgeprof wrote for this condition (the same bytes every engine is fed)."""
    shape = input_shape(request["condition"])
    data = np.fromfile(request["input_file"], dtype="<f4")
    if data.size != int(np.prod(shape)):
        raise HarnessError(
            "the input file %s holds %d values, not the %d of %s"
            % (request["input_file"], data.size, int(np.prod(shape)), "x".join(map(str, shape)))
        )
    return data.reshape(shape)


def read_inputs(np, request):
    """An ONNX file's inputs by name, each from the .npy file edgeprof wrote (the values every
    engine is fed)."""
    feeds = {}
    for given in request.get("inputs", []):
        try:
            feeds[given["name"]] = np.load(given["file"], allow_pickle=False)
        except (OSError, ValueError) as e:
            raise HarnessError("cannot read input %s from %s: %s" % (given["name"], given["file"], e))
    return feeds


def read_description(np, path):
    """The zoo model's description (layers), its parameters by name (PyTorch's names, read
    from the weights file the description indexes) and its batch-norm epsilon."""
    with open(path) as f:
        d = json.load(f)
    weights = np.memmap(d["weights_file"], dtype="<f4", mode="r")
    params = {}
    for p in d["params"]:
        count = int(np.prod(p["dims"]))
        params[p["name"]] = np.array(weights[p["offset"] : p["offset"] + count]).reshape(p["dims"])
    return d["model"], params, d.get("batch_norm_epsilon", 1e-5)


def ms(seconds):
    return seconds * 1e3


def timed(session):
    t = time.perf_counter()
    out = session.infer()
    return ms(time.perf_counter() - t), out


def main():
    try:
        request = json.load(sys.stdin)
        condition = request["condition"]
    except (ValueError, KeyError) as e:
        raise HarnessError("the worker request is not valid JSON for a condition: %s" % e)
    np = need("numpy")
    start = time.perf_counter()
    session = load(request, np)
    init_ms = ms(time.perf_counter() - start)
    emit(
        {
            "type": "ready",
            "init_ms": init_ms,
            "engine": FRAMEWORK,
            "engine_version": session.version,
            "device": session.device,
            "threads": session.threads,
            "parameters": session.parameters,
        }
    )
    first_ms, out = timed(session)
    emit({"type": "first", "latency_ms": first_ms})
    if request.get("outputs_dir"):
        values = session.outputs(out) if hasattr(session, "outputs") else [out]
        for k, value in enumerate(values):
            np.save(os.path.join(request["outputs_dir"], "output_%d.npy" % k), np.asarray(value))
    if request.get("output_file"):
        value = session.output(out) if hasattr(session, "output") else out
        np.ascontiguousarray(np.asarray(value), dtype="<f4").tofile(request["output_file"])
    warm = []
    warm_start = time.perf_counter()
    while len(warm) < request["warmup"] or time.perf_counter() - warm_start < request.get(
        "warmup_seconds", 0.0
    ):
        warm.append(timed(session)[0])
    emit({"type": "warmup", "latencies_ms": warm})
    iterations = max(request["iterations"], 1)
    min_duration = request.get("min_duration_s", 0.0)
    for repeat in range(max(request["repeats"], 1)):
        times = []
        repeat_start = told = time.perf_counter()
        while True:
            now = time.perf_counter()
            if len(times) >= iterations and now - repeat_start >= min_duration:
                break
            # About once a second, between two timed inferences: how far the repeat has got.
            if now - told >= 1.0:
                emit({"type": "progress", "done": len(times), "repeat": repeat})
                told = now
            times.append(timed(session)[0])
        emit({"type": "iterations", "latencies_ms": times, "repeat": repeat})
    layer_runs = request.get("layer_runs", 0)
    if layer_runs and hasattr(session, "profile_layers"):
        emit({"type": "layers", "runs": layer_runs, "nodes": session.profile_layers(layer_runs)})
    summary = {"type": "summary"}
    if getattr(session, "note", None):
        summary["note"] = session.note
    emit(summary)


try:
    main()
except HarnessError as e:
    emit({"type": "error", "message": str(e)})
    sys.exit(1)
except Exception as e:
    import traceback

    traceback.print_exc()
    emit({"type": "error", "message": "%s failed: %s: %s" % (FRAMEWORK, type(e).__name__, e)})
    sys.exit(1)
