#!/usr/bin/env python3
"""TensorFlow Lite's (LiteRT's) own plain loop, for checking edgeprof's harness against it: loads
MODEL.tflite in the LiteRT interpreter with its defaults (XNNPACK) but for the thread count, feeds
a random NHWC input of the model's shape, and times set_tensor + invoke + get_tensor with
time.perf_counter. Prints one JSON line: the median and every latency, in ms.

    python plain-loop-tflite.py MODEL.tflite [--threads N] [--warmup N] [--iterations N] [--batch N]

Run it with the interpreter edgeprof uses for tflite (`edgeprof env list` names it), on the file
edgeprof runs: TensorFlow's conversion of its Keras model, which `edgeprof run` of the condition
leaves in edgeprof's cache, DATA/cache/models/NAME-CxHxW-bB-c1000-seed20240601.tflite (DATA:
$EDGEPROF_DATA_DIR, else ~/.local/share/edgeprof; converting needs `edgeprof env setup tensorflow`
too). The model's batch is fixed: --batch must be its (B). scripts/fidelity.sh tflite does it all."""
import argparse
import json
import statistics
import time

import numpy as np
from ai_edge_litert.interpreter import Interpreter

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--warmup", type=int, default=10)
parser.add_argument("--iterations", type=int, default=100)
parser.add_argument("--batch", type=int, default=1)
args = parser.parse_args()

interpreter = Interpreter(model_path=args.model, num_threads=args.threads)
interpreter.allocate_tensors()
first = interpreter.get_input_details()[0]
if args.batch != first["shape"][0]:
    raise SystemExit("%s is built for batch %d, not %d" % (args.model, first["shape"][0], args.batch))
x = np.random.default_rng(0).random(first["shape"], dtype=np.float32)
out = interpreter.get_output_details()[0]["index"]


def infer():
    interpreter.set_tensor(first["index"], x)
    interpreter.invoke()
    return interpreter.get_tensor(out)


for _ in range(args.warmup):
    infer()
times = []
for _ in range(args.iterations):
    start = time.perf_counter()
    infer()
    times.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"median_ms": statistics.median(times), "latencies_ms": times}))
