#!/usr/bin/env bash
# The long fuzz campaign: every parser (tegrastats, ncu and nvprof CSV, ERT JSON and sweeps,
# config TOML, the worker protocol, results records, the cost-model database, sysfs/procfs
# trees, ceilings files, the ONNX reader and ONNX loading through tract) is fed COUNT mutated inputs, a million by default, in an
# optimised build with overflow checks and debug assertions on, so that an arithmetic overflow
# panics here as it does in a debug build. The short run of the same harness is part of
# `cargo test`.
#
#   scripts/fuzz.sh [COUNT] [TARGET,TARGET…] [SEED]
#   scripts/fuzz.sh 1000000                  # every target, a million inputs each
#   scripts/fuzz.sh 200000 tegrastats,ncu 7  # two targets, another seed
#
# Every input that panics is saved under target/fuzz-failures (named TARGET-SEED.bin) and
# named in the report; replay one with
#   EDGEPROF_FUZZ_REPLAY=target/fuzz-failures/FILE EDGEPROF_FUZZ_TARGET=TARGET \
#     cargo test --lib fuzz::replay -- --ignored --nocapture
# EDGEPROF_FUZZ_TRACE=1 names (and saves) each input before it runs, for a crash that ends the
# process without a report (an abort). The build lives in target/fuzz, apart from the usual
# release build; it uses every core.
set -euo pipefail
cd "$(dirname "$0")/.."

export EDGEPROF_FUZZ_COUNT="${1:-${EDGEPROF_FUZZ_COUNT:-1000000}}"
if [ -n "${2:-}" ]; then
    export EDGEPROF_FUZZ_TARGETS="$2"
fi
if [ -n "${3:-}" ]; then
    export EDGEPROF_FUZZ_SEED="$3"
fi
export CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true
export CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true

exec cargo test --release --target-dir target/fuzz --lib fuzz::campaign -- \
    --ignored --exact --nocapture --test-threads 1
