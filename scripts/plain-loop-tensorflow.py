#!/usr/bin/env python3
"""TensorFlow's own plain loop, for checking edgeprof's harness against it: builds the same Keras
model as the harness, layer by layer from edgeprof's model description with the zoo's seeded
weights (it borrows the harness's build_keras from src/engines/harness/tensorflow.py, so run it
from a checkout), sets TensorFlow's intra-op threads (and one inter-op thread) on the CPU, then
feeds a random NHWC input of the model's shape to the model wrapped in tf.function and times
`fn(x).numpy()` with time.perf_counter. Prints one JSON line: the median and every latency, in ms.

    python plain-loop-tensorflow.py MODEL.json [--threads N] [--warmup N] [--iterations N] [--batch N]

Run it with the interpreter edgeprof uses for tensorflow (`edgeprof env list` names it), on the
description edgeprof feeds its harness: after `edgeprof run` of the condition it is in edgeprof's
cache, DATA/cache/models/NAME-CxHxW-bB-c1000-seed20240601.json (DATA: $EDGEPROF_DATA_DIR, else
~/.local/share/edgeprof). The model's batch is fixed: --batch must be the description's (B).
scripts/fidelity.sh tensorflow does it all."""
import argparse
import json
import os
import statistics
import time

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--warmup", type=int, default=10)
parser.add_argument("--iterations", type=int, default=100)
parser.add_argument("--batch", type=int, default=1)
args = parser.parse_args()

tf.config.threading.set_intra_op_parallelism_threads(args.threads)
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.set_visible_devices([], "GPU")
harness = {"HarnessError": RuntimeError}
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "..", "src", "engines", "harness", "tensorflow.py")) as f:
    exec(f.read(), harness)
with open(args.model) as f:
    d = json.load(f)
model = d["model"]
n, c, h, w = model["input_shape"]
if args.batch != n:
    raise SystemExit("%s is built for batch %d, not %d" % (args.model, n, args.batch))
weights = np.memmap(d["weights_file"], dtype="<f4", mode="r")
params = {}
for p in d["params"]:
    count = int(np.prod(p["dims"]))
    params[p["name"]] = np.array(weights[p["offset"] : p["offset"] + count]).reshape(p["dims"])
with tf.device("/CPU:0"):
    net = harness["build_keras"](tf, np, model, params, d.get("batch_norm_epsilon", 1e-5))
    x = tf.constant(np.random.default_rng(0).random((n, h, w, c), dtype=np.float32))
    fn = tf.function(lambda t: net(t, training=False))
    for _ in range(args.warmup):
        fn(x).numpy()
    times = []
    for _ in range(args.iterations):
        start = time.perf_counter()
        fn(x).numpy()
        times.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"median_ms": statistics.median(times), "latencies_ms": times}))
