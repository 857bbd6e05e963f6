#!/usr/bin/env bash
# Opt-in (not CI: PyTorch is gigabytes): distributed-training scaling with PyTorch's own launcher
# (torchrun, DistributedDataParallel over gloo) on 1, 2 and 4 local nodes (processes), on a
# synthetic set in CIFAR-10's binary format (or your CIFAR-10 directory), then the scaling table,
# the terminal charts and where the SVG charts are.
#
#   scripts/train-scaling.sh [-- EDGEPROF_TRAIN_ARGS...]
#
# e.g. scripts/train-scaling.sh -- --nodes 1,2,4,8 --epochs 5 --data ~/cifar-10-batches-bin
# Defaults: --nodes 1,2,4 --epochs 3 --synthetic 2000 (the model: cnn).
# PyTorch comes from `edgeprof env setup pytorch` (EDGEPROF_DATA_DIR chooses where; PIP_ARGS in
# the environment go to pip, e.g. PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu").
set -euo pipefail
cd "$(dirname "$0")/.."

args=(--nodes 1,2,4 --epochs 3 --synthetic 2000)
if [ $# -gt 0 ] && [ "$1" = "--" ]; then
    shift
    args=("$@")
fi

cargo build --release --quiet
bin=target/release/edgeprof
# shellcheck disable=SC2086
"$bin" env setup pytorch ${PIP_ARGS:+-- $PIP_ARGS}
"$bin" train "${args[@]}"
