#!/usr/bin/env bash
# Proves edgeprof's GPU path on a machine with an NVIDIA GPU and its driver, in one go (a few
# minutes; at most eight), and says per check why it cannot run where something is missing:
#
#   probe      the driver and its GPUs, through NVML (what `edgeprof probe` sees)
#   ceilings   `edgeprof roofline measure-gpu --quick`: the fp32 peak and the memory bandwidth
#              (with the fp16, int8 dp4a and tensor-core peaks where the GPU has them),
#              each beside the theoretical figure of the GPU the driver describes
#   framework  a Python whose onnxruntime has the CUDA provider: EDGEPROF_GPU_PYTHON, else
#              onnxruntime-gpu installed into a temporary environment (needs PyPI)
#   run        `edgeprof run` of mobilenet_v2 (3x224x224) on gpu:0 through onnxruntime, with the
#              roofline on: its median and interval
#   monitor    `edgeprof monitor` for 10 s while that run goes on: samples with GPUs, the
#              highest load and memory
#   place      `edgeprof place` of mobilenet_v2 (3x224x224, 6 blocks) over the first two CPUs
#              and GPU 0 served by that onnxruntime: its memory, the links, the plan, and the
#              split run's latency and output against the prediction and the whole model
#   profiler   `edgeprof roofline profile-gpu` (ncu, or nvprof before compute capability 7.2)
#              of the same model in onnxruntime's own loop: its place on the GPU roofline
#
# One line per check: `NAME: ok: FIGURE`, `NAME: failed: WHY` or `NAME: cannot run: WHY`.
# Exit status: 0 every check ran and passed; 1 one failed; 3 none could run (no NVIDIA GPU
# here); 4 some could not run and the rest passed; 2 usage. Whatever it starts is stopped, and
# its temporary directory removed, on every exit.
#
#   scripts/gpu-check.sh [EDGEPROF]     (EDGEPROF: target/release/edgeprof, else on PATH)
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
case "${1:-}" in
-h | --help)
    sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
if [ $# -gt 1 ]; then
    sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
bin="${1:-}"
if [ -z "$bin" ]; then
    if [ -x "$here/../target/release/edgeprof" ]; then
        bin="$here/../target/release/edgeprof"
    else
        bin="$(command -v edgeprof || true)"
    fi
fi
if [ -z "$bin" ] || ! [ -x "$bin" ]; then
    echo "gpu-check.sh: no edgeprof binary (build it with cargo build --release, or name it)" >&2
    exit 2
fi
command -v python3 >/dev/null || {
    echo "gpu-check.sh: python3 is needed (to read edgeprof's JSON)" >&2
    exit 2
}

work="$(mktemp -d)"
monitor_pid=""
cleanup() {
    if [ -n "$monitor_pid" ]; then
        kill "$monitor_pid" 2>/dev/null
        wait "$monitor_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ran=0 passed=0 failed=0 missing=0
ok() {
    echo "$1: ok: $2"
    ran=$((ran + 1)) passed=$((passed + 1))
}
bad() {
    echo "$1: failed: $2"
    ran=$((ran + 1)) failed=$((failed + 1))
}
cannot() {
    echo "$1: cannot run: $2"
    missing=$((missing + 1))
}
# The last non-empty line of a file, for a one-line reason.
last_line() { grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1; }

# What edgeprof sees: availability and detail of one of probe's sources.
"$bin" probe --json >"$work/probe.json" 2>"$work/probe.err" || true
source_of() {
    python3 - "$work/probe.json" "$1" <<'EOF'
import json, sys
try:
    rows = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print(f"no\tedgeprof probe gave no JSON ({e})")
    sys.exit()
for row in rows:
    if row.get("source") == sys.argv[2]:
        print(("yes" if row.get("available") else "no") + "\t" + row.get("detail", ""))
        break
else:
    print("no\tedgeprof probe does not list it")
EOF
}
IFS=$'\t' read -r nvml nvml_detail < <(source_of "NVIDIA GPU (NVML)")
IFS=$'\t' read -r cuda cuda_detail < <(source_of "CUDA driver + NVRTC (GPU ceilings)")
IFS=$'\t' read -r prof prof_detail < <(source_of "GPU profilers (ncu, nvprof)")
no_gpu="no NVIDIA GPU here: $nvml_detail"

# probe
if [ "$nvml" = yes ]; then
    ok probe "$nvml_detail"
else
    cannot probe "$nvml_detail"
fi

# ceilings
if [ "$nvml" != yes ]; then
    cannot ceilings "$no_gpu"
elif [ "$cuda" != yes ]; then
    cannot ceilings "$cuda_detail"
elif timeout 240 "$bin" roofline measure-gpu --quick >"$work/ceilings.txt" 2>&1; then
    figures="$(grep -E '(fp32 peak|memory|DRAM).*% of|^[[:space:]]*(fp16|bf16|int8) peak' "$work/ceilings.txt" | sed 's/^[[:space:]]*//' | paste -sd ';' - | sed 's/;/; /g')"
    ok ceilings "${figures:-measured (no theoretical figure to compare with)}"
else
    bad ceilings "$(last_line "$work/ceilings.txt")"
fi

# framework
python=""
if [ "$nvml" != yes ]; then
    cannot framework "$no_gpu"
else
    if [ -n "${EDGEPROF_GPU_PYTHON:-}" ]; then
        python="$EDGEPROF_GPU_PYTHON"
    elif python3 -m venv "$work/venv" >"$work/venv.log" 2>&1 &&
        timeout 300 "$work/venv/bin/pip" install -q onnxruntime-gpu numpy >>"$work/venv.log" 2>&1; then
        python="$work/venv/bin/python"
    fi
    if [ -z "$python" ]; then
        cannot framework "onnxruntime-gpu could not be installed: $(last_line "$work/venv.log") (set EDGEPROF_GPU_PYTHON to a Python that has it)"
    elif providers="$("$python" -c 'import onnxruntime as o; print(o.__version__, ",".join(o.get_available_providers()))' 2>&1)"; then
        case "$providers" in
        *CUDAExecutionProvider*) ok framework "onnxruntime ${providers%% *} with the CUDA provider ($python)" ;;
        *)
            bad framework "onnxruntime ${providers%% *} has no CUDA provider: ${providers#* }"
            python=""
            ;;
        esac
    else
        bad framework "$python cannot import onnxruntime: $(echo "$providers" | tail -n 1)"
        python=""
    fi
fi

# run, with the monitor beside it
if [ -z "$python" ]; then
    why="$no_gpu"
    [ "$nvml" = yes ] && why="no Python with onnxruntime's CUDA provider (see framework)"
    cannot run "$why"
    cannot monitor "$why"
else
    cat >"$work/gpu-check.toml" <<EOF
name = "gpu-check"
[matrix]
engines = ["onnxruntime"]
models = ["mobilenet_v2"]
inputs = ["3x224x224"]
devices = ["gpu:0"]
threads = [1]
[measure]
warmup = 20
iterations = 200
repeats = 3
[output]
roofline = true
[frameworks.onnxruntime]
python = "$python"
EOF
    "$bin" monitor --headless --duration 10s --interval 250ms >"$work/monitor.jsonl" 2>"$work/monitor.err" &
    monitor_pid=$!
    if timeout 300 "$bin" run "$work/gpu-check.toml" --output "$work/results" --no-charts >"$work/run.log" 2>&1; then
        figure="$(python3 - "$work/results" <<'EOF'
import glob, json, sys
for path in glob.glob(sys.argv[1] + "/*/runs.jsonl"):
    for line in open(path):
        r = json.loads(line)
        if r.get("ok") and r.get("last"):
            s = r["stats"]
            low, high = s.get("median_interval_ms") or (None, None)
            spread = f" [{low:.3f}, {high:.3f}]" if low is not None else ""
            print(f"{r['condition']['id']}: median {s['latency']['median_ms']:.3f} ms{spread}")
EOF
)"
        if [ -n "$figure" ]; then
            ok run "$figure"
        else
            bad run "no condition succeeded: $(grep -m1 -E 'failed|error' "$work/run.log" || last_line "$work/run.log")"
        fi
    else
        reason="$(cat "$work"/results/*/runs.jsonl 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    r = json.loads(line)
    if not r.get("ok") and r.get("reason"):
        print(r["condition"]["id"] + ": " + r["reason"].splitlines()[0])
        break
' 2>/dev/null)"
        bad run "${reason:-$(last_line "$work/run.log")}"
    fi
    wait "$monitor_pid" 2>/dev/null
    monitor_pid=""
    seen="$(python3 - "$work/monitor.jsonl" <<'EOF'
import json, sys
samples = gpus = 0
load = memory = None
for line in open(sys.argv[1]):
    try:
        s = json.loads(line)
    except ValueError:
        continue
    samples += 1
    g = s.get("gpus") or []
    if g:
        gpus = max(gpus, len(g))
        for x in g:
            if x.get("load_pct") is not None:
                load = max(load or 0, x["load_pct"])
            if x.get("mem_used_bytes") is not None:
                memory = max(memory or 0, x["mem_used_bytes"])
if gpus:
    tail = f", load up to {load:.0f} %" if load is not None else ""
    tail += f", memory up to {memory / 2**20:.0f} MiB" if memory is not None else ""
    print(f"{samples} samples of {gpus} GPU(s){tail}")
else:
    print(f"-{samples} samples, none with a GPU")
EOF
)"
    case "$seen" in
    -*) bad monitor "${seen#-} ($(last_line "$work/monitor.err"))" ;;
    *) ok monitor "$seen" ;;
    esac
fi

# place
if [ "$nvml" != yes ]; then
    cannot place "$no_gpu"
elif [ -z "$python" ]; then
    cannot place "no Python with onnxruntime's CUDA provider (see framework)"
elif timeout 420 "$bin" place --model mobilenet_v2 --input 3x224x224 --blocks 6 --runs 10 \
    --python "$python" --json >"$work/place.json" 2>"$work/place.log"; then
    if placed="$(python3 - "$work/place.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
names = [u["name"] for u in d["units"]]
if "gpu" not in names:
    print("-the GPU was not a unit: " + d.get("gpu", ""))
    sys.exit(0)
g = names.index("gpu")
links = d["links"]["links"]
def gbps(l):
    beta = l.get("beta")
    return "inf" if beta is None else f"{beta * 1e3 / 1e9:.2f}"
gpu_ms = sum(s["ms"][g] for s in d["stages"])
cpu_ms = sum(s["ms"][0] for s in d["stages"])
m, p = d.get("measured") or {}, d.get("ran") or {}
plan = " ".join(names[u] for u in d["optimal"]["units"])
print(f"{d['gpu'].split(';')[0]}; blocks {gpu_ms:.3f} ms on the GPU, {cpu_ms:.3f} ms on {names[0]}; "
      f"to GPU {gbps(links[0][g])} GB/s, back {gbps(links[g][0])} GB/s; plan {plan}: "
      f"measured {m.get('median_ms', float('nan')):.3f} ms against {p.get('predicted_ms', float('nan')):.3f} ms, "
      f"output within {m.get('max_relative_difference', float('nan')):.1e} of the whole model")
EOF
)"; then
        case "$placed" in
        -*) bad place "${placed#-}" ;;
        *) ok place "$placed" ;;
        esac
    else
        bad place "unreadable output of place: $(head -c 200 "$work/place.json")"
    fi
else
    bad place "$(last_line "$work/place.log")"
fi

# profiler
if [ "$nvml" != yes ]; then
    cannot profiler "$no_gpu"
elif [ "$prof" != yes ]; then
    cannot profiler "$prof_detail"
elif [ -z "$python" ]; then
    cannot profiler "no Python with onnxruntime's CUDA provider (see framework)"
elif ! "$bin" models export mobilenet_v2 --input 3x224x224 -o "$work/mobilenet_v2.onnx" >"$work/export.log" 2>&1; then
    bad profiler "cannot export the model: $(last_line "$work/export.log")"
elif timeout 300 "$bin" roofline profile-gpu --json --output "$work/profile" --label mobilenet_v2 -- \
    "$python" "$here/plain-loop-onnxruntime.py" "$work/mobilenet_v2.onnx" --device cuda \
    --warmup 5 --iterations 20 >"$work/profile.json" 2>"$work/profile.log"; then
    if placed="$(python3 - "$work/profile.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
p = d.get("program") or {}
flops, seconds = p.get("flops"), p.get("seconds")
rate = f"{flops / seconds / 1e9:.1f} GFLOP/s" if flops and seconds else "no FLOP rate"
def first_advice(v):
    if isinstance(v, dict):
        for k, x in v.items():
            if k == "advice" and isinstance(x, list) and x:
                return x[0] if isinstance(x[0], str) else json.dumps(x[0])
            found = first_advice(x)
            if found:
                return found
    if isinstance(v, list):
        for x in v:
            found = first_advice(x)
            if found:
                return found
    return None
advice = first_advice(d.get("analysis"))
print(f"{d.get('tool', '?')}: {len(d.get('kernels') or [])} kernels, {rate}"
      + (f"; first advice: {advice}" if advice else "; no advice (no ceilings)"))
EOF
)"; then
        ok profiler "$placed"
    else
        bad profiler "unreadable output of profile-gpu: $(head -c 200 "$work/profile.json")"
    fi
else
    bad profiler "$(last_line "$work/profile.log")"
fi

if [ "$failed" -gt 0 ]; then
    exit 1
elif [ "$ran" -eq 0 ]; then
    exit 3
elif [ "$missing" -gt 0 ]; then
    exit 4
fi
exit 0
