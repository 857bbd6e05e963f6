#!/usr/bin/env bash
# Opt-in (not CI: PyTorch and TensorFlow are gigabytes): set up every external framework in
# edgeprof's own environments, then run configs/default.toml with all six engines and print the
# frameworks side by side, each engine's output against tract's, and where the results are.
#
#   scripts/test-frameworks.sh [CONFIG] [-- PIP_ARGS...]
#
# CONFIG defaults to configs/default.toml (about an hour on a 2-core x86 machine, candle being
# the slowest). PIP_ARGS go to every `pip install` (e.g. -- --index-url URL for a mirror, or the
# CPU-only PyTorch wheels). EDGEPROF_DATA_DIR chooses where the environments go (default
# ~/.local/share/edgeprof); RESULTS where the results directory goes (default results/).
set -euo pipefail
cd "$(dirname "$0")/.."

config=configs/default.toml
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    config=$1
    shift
fi
pip_args=()
if [ $# -gt 0 ] && [ "$1" = "--" ]; then
    shift
    pip_args=(-- "$@")
fi

cargo build --release --quiet
bin=target/release/edgeprof

for framework in onnxruntime pytorch tensorflow tflite; do
    "$bin" env setup "$framework" "${pip_args[@]}"
done
"$bin" env list

"$bin" config check "$config"
"$bin" run --no-charts "$config" --output "${RESULTS:-results}"

# The cost model's PyTorch layer profiles (eager modules timed through the harness; the probes
# run from their description), into a scratch database, and what a fit learns from them.
db=$(mktemp --suffix=.jsonl)
"$bin" costmodel profile --engine pytorch --model mobilenet_v2 --model resnet18 --probes 2 \
    --threads 1 --rounds 1 --db "$db"
"$bin" costmodel fit --engine pytorch --db "$db"
rm -f "$db"
