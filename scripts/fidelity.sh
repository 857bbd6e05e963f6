#!/usr/bin/env bash
# Does edgeprof's harness time what a framework's own loop times? ROUNDS interleaved rounds of
# `edgeprof run` of one condition (ENGINE, MODEL, INPUT, batch 1, 1 thread, 10 warm-up and 100
# timed iterations, one repeat) and of scripts/plain-loop-ENGINE.py on the same model, threads and
# iterations, in the interpreter edgeprof uses for ENGINE. Prints each round's two medians and
# edgeprof's verdict, then the median round of each side, their ratio, and whether they agree
# within 5 % (or the machine was too noisy to tell); exits 1 when they differ on a quiet machine.
#
#   scripts/fidelity.sh ENGINE [MODEL] [INPUT] [ROUNDS]
#   EDGEPROF=target/release/edgeprof scripts/fidelity.sh pytorch mobilenet_v2 3x224x224 5
#
# ENGINE: onnxruntime, pytorch, tensorflow or tflite; defaults shufflenet_v2_x0_5, 3x64x64, 7.
# EDGEPROF (default: edgeprof on PATH) is the binary; EDGEPROF_DATA_DIR chooses its environments
# and cache. A framework that is not ready is set up (`edgeprof env setup`, from the package index;
# tflite needs tensorflow too, which converts the model). The onnxruntime loop runs
# `edgeprof models export`; the others run the file the harness reads, from edgeprof's cache.
set -euo pipefail

if [ $# -eq 0 ]; then
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
ENGINE="$1" MODEL="${2:-shufflenet_v2_x0_5}" INPUT="${3:-3x64x64}" ROUNDS="${4:-7}"
EDGEPROF="${EDGEPROF:-edgeprof}"
SCRIPT="$(cd "$(dirname "$0")" && pwd)/plain-loop-$ENGINE.py"
CLASSES=1000 SEED=20240601 # the config's defaults, named in the files edgeprof caches
die() { echo "fidelity.sh: $*" >&2; exit 1; }
[ -f "$SCRIPT" ] || die "no plain loop for $ENGINE; ENGINE is onnxruntime, pytorch, tensorflow or tflite"
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS is a whole number above 0, not $ROUNDS"
command -v "$EDGEPROF" >/dev/null || die "no edgeprof binary at $EDGEPROF (set EDGEPROF)"
command -v python3 >/dev/null || die "python3 is needed"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# The interpreter edgeprof runs framework $1 in, as `edgeprof env list` names it; empty if not ready.
interpreter() {
    "$EDGEPROF" env list --json | python3 -c 'import json, sys
print("".join(e["python"] for e in json.load(sys.stdin) if e["engine"] == sys.argv[1] and e["state"] == "ready"))' "$1"
}
needs=("$ENGINE")
[ "$ENGINE" = tflite ] && needs=(tensorflow tflite)
for f in "${needs[@]}"; do
    py="$(interpreter "$f")" || die "edgeprof env list failed"
    [ -n "$py" ] || "$EDGEPROF" env setup "$f" >&2 || die "edgeprof env setup $f failed (see above)"
done
PY="$(interpreter "$ENGINE")" || die "edgeprof env list failed"
[ -n "$PY" ] || die "$ENGINE is still not ready after its setup (see: $EDGEPROF env list)"

# The file the plain loop runs: the export (onnxruntime), or what edgeprof keeps in its cache for
# the harness (made by the first run): the zoo model's description, or the .tflite conversion.
DATA="${EDGEPROF_DATA_DIR:-${XDG_DATA_HOME:-$HOME/.local/share}/edgeprof}"
CACHED="$DATA/cache/models/$MODEL-$INPUT-b1-c$CLASSES-seed$SEED"
case "$ENGINE" in
onnxruntime)
    FILE="$WORK/model.onnx"
    "$EDGEPROF" models export "$MODEL" --input "$INPUT" --classes "$CLASSES" --seed "$SEED" \
        -o "$FILE" >"$WORK/export.log" 2>&1 || die "edgeprof models export failed: $(tail -n 1 "$WORK/export.log")"
    ;;
tflite) FILE="$CACHED.tflite" ;;
*) FILE="$CACHED.json" ;;
esac

cat >"$WORK/fidelity.toml" <<TOML
name = "fidelity"
[matrix]
engines = ["$ENGINE"]
models = ["$MODEL"]
inputs = ["$INPUT"]
threads = [1]
classes = $CLASSES
[measure]
warmup = 10
iterations = 100
repeats = 1
retries = 0
seed = $SEED
check_outputs = false
TOML

OURS=() THEIRS=() VERDICTS=()
for round in $(seq 1 "$ROUNDS"); do
    out="$WORK/r$round"
    "$EDGEPROF" run --no-charts "$WORK/fidelity.toml" --output "$out" >"$WORK/run.log" 2>&1 ||
        die "edgeprof run failed in round $round: $({ grep -m 1 '(failed):' "$WORK/run.log" || tail -n 1 "$WORK/run.log"; } | sed 's/^ *//')"
    # runs.jsonl's last record (its median) and summary.json's verdict, of the one results directory.
    got="$(python3 -c 'import glob, json, sys
d, = glob.glob(sys.argv[1] + "/*/")
run = json.loads(open(d + "runs.jsonl").read().splitlines()[-1])
if not run["ok"]:
    sys.exit("edgeprof run of %s failed: %s" % (run["condition"]["id"], run["run"].get("error")))
print(run["stats"]["latency"]["median_ms"], json.load(open(d + "summary.json"))["conditions"][0]["verdict"] or "none")' "$out" 2>"$WORK/err")" ||
        die "no result from edgeprof in round $round: $(tail -n 1 "$WORK/err")"
    read -r ours verdict <<<"$got"
    [ -f "$FILE" ] || die "no model file $FILE for the plain loop (edgeprof keeps it there after a run)"
    "$PY" "$SCRIPT" "$FILE" --threads 1 --warmup 10 --iterations 100 --batch 1 >"$WORK/plain.json" 2>"$WORK/plain.err" ||
        die "the plain loop failed in round $round: $(tail -n 1 "$WORK/plain.err")"
    theirs="$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])["median_ms"])' "$WORK/plain.json")" ||
        die "the plain loop printed no median in round $round"
    printf 'round %d: edgeprof %.3f ms (%s), %s'"'"'s own loop %.3f ms\n' "$round" "$ours" "$verdict" "$ENGINE" "$theirs"
    OURS+=("$ours") THEIRS+=("$theirs") VERDICTS+=("$verdict")
done

python3 - "$ENGINE" "${OURS[*]}" "${THEIRS[*]}" "${VERDICTS[*]}" <<'PY'
import sys

engine, ours, theirs, verdicts = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), sys.argv[4].split()
ours, theirs = [float(v) for v in ours], [float(v) for v in theirs]
middle = lambda v: sorted(v)[len(v) // 2]
spread = lambda v: (sorted(v)[len(v) * 3 // 4] - sorted(v)[len(v) // 4]) / middle(v)
a, b = middle(ours), middle(theirs)
print("median round: edgeprof %.3f ms, %s's own loop %.3f ms; ratio %.3f" % (a, engine, b, a / b))
noise = []
if any(v != "clean" for v in verdicts):
    noise.append("%d of %d edgeprof runs not judged clean" % (sum(v != "clean" for v in verdicts), len(verdicts)))
if max(spread(ours), spread(theirs)) > 0.05:
    noise.append("rounds spread (IQR) %.1f %% and %.1f %% of their medians" % (100 * spread(ours), 100 * spread(theirs)))
close = abs(a / b - 1) < 0.05
line = "agree within 5 %" if close else "differ by %.1f %%" % (100 * abs(a / b - 1))
if noise:
    line += "; the machine was too noisy to resolve 5 % (" + "; ".join(noise) + ")"
print(line)
sys.exit(0 if close or noise else 1)
PY
