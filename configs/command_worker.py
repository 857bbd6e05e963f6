#!/usr/bin/env python3
"""A minimal `command` engine worker: benchmarks your own Python code under edgeprof.

edgeprof starts this program once per run, writes the request (JSON) on its stdin, and reads
JSON lines from its stdout: `ready`, then the timings, then `summary` (or `error`). Replace
`load` and `infer` with your own model; everything else is the protocol.

    edgeprof run configs/command-example.toml
"""
import json
import sys
import time


def load(condition):
    """Build or load the model for this condition; here, a matrix-vector product."""
    n = 64 * condition["batch"]
    return [[float((i * j) % 7) for j in range(n)] for i in range(n)], [1.0] * n


def infer(model):
    matrix, vector = model
    return [sum(a * b for a, b in zip(row, vector)) for row in matrix]


def say(record):
    print(json.dumps(record), flush=True)


def main():
    request = json.load(sys.stdin)
    try:
        t = time.perf_counter()
        model = load(request["condition"])
        say({"type": "ready", "init_ms": (time.perf_counter() - t) * 1e3,
             "engine": "my-python-code", "engine_version": sys.version.split()[0]})

        def timed():
            t = time.perf_counter()
            infer(model)
            return (time.perf_counter() - t) * 1e3

        say({"type": "first", "latency_ms": timed()})
        say({"type": "warmup", "latencies_ms": [timed() for _ in range(request["warmup"])]})
        for repeat in range(request["repeats"]):
            times = [timed() for _ in range(request["iterations"])]
            say({"type": "iterations", "latencies_ms": times, "repeat": repeat})
        say({"type": "summary"})
    except Exception as e:  # report, then fail: edgeprof records the message
        say({"type": "error", "message": str(e)})
        sys.exit(1)


if __name__ == "__main__":
    main()
