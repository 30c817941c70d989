#!/usr/bin/env bash
# Benchmarks Tensorscope against NumPy and PyTorch side by side (see scripts/bench.py).
#   scripts/bench.sh [--quick]      builds, then runs with 1 and with 2 threads; JSON in out/bench-*.json
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=/usr/bin/python3 >/dev/null
cmake --build build -j2 --target _C
mkdir -p out
for threads in 1 2; do
  BENCH_THREADS=$threads PYTHONPATH=build/python /usr/bin/python3 scripts/bench.py "$@" --json "out/bench-${threads}t.json"
done
# what watching costs: a sample plain, recorded and in the debugger; recordings' sizes and opening times
cmake --build build -j2 --target tensorscope_gui tensorscope-cli
PYTHONPATH=build/python /usr/bin/python3 scripts/bench_watch.py "$@" | tee out/bench-watch.txt
PYTHONPATH=build/python /usr/bin/python3 scripts/bench_training.py "$@" | tee out/bench-training.txt  # training steps: eager, jit, PyTorch
# graphs of any size: a 10,000-node graph laid out and painted, the longest GUI stall (issue 15)
cmake --build build -j2 --target test_graph_scale
/usr/bin/python3 scripts/bench_graph.py "$@" | tee out/bench-graph.txt
