#!/usr/bin/env python3
"""PyTorch's own plain loop, for checking edgeprof's harness against it: builds torchvision's
definition of the zoo model (weights=None) and loads the zoo's seeded weights from edgeprof's
model description, as the harness does; sets torch.set_num_threads (and one inter-op thread), then
feeds a random input of the model's shape and times the eager forward pass under
torch.inference_mode with time.perf_counter. Prints one JSON line: the median and every latency,
in ms.

    python plain-loop-pytorch.py MODEL.json [--threads N] [--warmup N] [--iterations N] [--batch N]

Run it with the interpreter edgeprof uses for pytorch (`edgeprof env list` names it), on the
description edgeprof feeds its harness: after `edgeprof run` of the condition it is in edgeprof's
cache, DATA/cache/models/NAME-CxHxW-bB-c1000-seed20240601.json (DATA: $EDGEPROF_DATA_DIR, else
~/.local/share/edgeprof), with its .weights.f32 beside it. scripts/fidelity.sh pytorch does it all."""
import argparse
import json
import statistics
import time

import numpy as np
import torch
import torchvision

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--warmup", type=int, default=10)
parser.add_argument("--iterations", type=int, default=100)
parser.add_argument("--batch", type=int, default=1)
args = parser.parse_args()

torch.set_num_threads(args.threads)
torch.set_num_interop_threads(1)
with open(args.model) as f:
    d = json.load(f)
model = d["model"]
weights = np.memmap(d["weights_file"], dtype="<f4", mode="r")
state = {}
for p in d["params"]:
    count = int(np.prod(p["dims"]))
    array = np.array(weights[p["offset"] : p["offset"] + count]).reshape(p["dims"])
    state[p["name"]] = torch.from_numpy(array)
classes = model["layers"][model["output"]["Layer"]]["output_shape"][-1]
net = getattr(torchvision.models, model["name"])(weights=None, num_classes=classes).eval()
loaded = net.load_state_dict(state, strict=False)
missing = [k for k in loaded.missing_keys if not k.endswith("num_batches_tracked")]
if missing or loaded.unexpected_keys:
    raise SystemExit("torchvision's %s does not take these weights: %s" % (model["name"], missing))
shape = [args.batch] + model["input_shape"][1:]
x = torch.from_numpy(np.random.default_rng(0).random(shape, dtype=np.float32))
times = []
with torch.inference_mode():
    for _ in range(args.warmup):
        net(x)
    for _ in range(args.iterations):
        start = time.perf_counter()
        net(x)
        times.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"median_ms": statistics.median(times), "latencies_ms": times}))
