#!/usr/bin/env python3
"""onnxruntime's own plain loop, for checking edgeprof's harness against it: loads MODEL.onnx
with onnxruntime's defaults but for the thread count, feeds a random input of the model's shape,
and times `InferenceSession.run` with time.perf_counter. Prints one JSON line: the median and
every latency, in ms.

    python plain-loop-onnxruntime.py MODEL.onnx [--threads N] [--warmup N] [--iterations N]
                                     [--device cpu|cuda]

Run it with the interpreter edgeprof uses for onnxruntime (`edgeprof env list` names it), on the
same model edgeprof runs (`edgeprof models export NAME --input CxHxW -o MODEL.onnx`), and
interleave it with `edgeprof run` of that condition: the medians should agree within a few
percent on a quiet machine."""
import argparse
import json
import statistics
import time

import numpy as np
import onnxruntime as ort

parser = argparse.ArgumentParser()
parser.add_argument("model")
parser.add_argument("--threads", type=int, default=1)
parser.add_argument("--warmup", type=int, default=10)
parser.add_argument("--iterations", type=int, default=100)
parser.add_argument("--batch", type=int, default=1)
parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
args = parser.parse_args()

options = ort.SessionOptions()
options.intra_op_num_threads = args.threads
provider = "CUDAExecutionProvider" if args.device == "cuda" else "CPUExecutionProvider"
session = ort.InferenceSession(args.model, options, providers=[provider])
first = session.get_inputs()[0]
shape = [args.batch if not isinstance(d, int) else d for d in first.shape]
feed = {first.name: np.random.default_rng(0).random(shape, dtype=np.float32)}
for _ in range(args.warmup):
    session.run(None, feed)
times = []
for _ in range(args.iterations):
    start = time.perf_counter()
    session.run(None, feed)
    times.append((time.perf_counter() - start) * 1e3)
print(json.dumps({"median_ms": statistics.median(times), "latencies_ms": times}))
