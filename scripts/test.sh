#!/usr/bin/env bash
# Builds Tensorscope and runs every test registered in CTest: GoogleTest (engine), pytest (Python
# API against PyTorch), QtTest (GUI, offscreen) and the CLI end-to-end tests, then the engine under ASan +
# UBSan (scripts/test_sanitizers.sh). Exits non-zero when either fails.
set -euo pipefail
cd "$(dirname "$0")/.."

trap 'echo "test.sh: failed at line $LINENO (exit $?): $BASH_COMMAND" >&2' ERR

echo "==> installing dependencies (scripts/deps.sh)"
./scripts/deps.sh
echo "==> configuring (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=/usr/bin/python3
echo "==> building (2 jobs)"
cmake --build build -j2

echo "==> running the tests"
trap - ERR
status=0
ctest --test-dir build --output-on-failure || status=$?
if [ "$status" -ne 0 ]; then
  echo "test.sh: some tests failed (ctest exit status $status)" >&2
fi

echo "==> the engine under ASan + UBSan (scripts/test_sanitizers.sh, build-asan/)"
sanitizers=0
./scripts/test_sanitizers.sh || sanitizers=$?
if [ "$sanitizers" -ne 0 ]; then
  echo "test.sh: the sanitizer run failed (exit status $sanitizers)" >&2
  [ "$status" -ne 0 ] || status=$sanitizers
fi
exit "$status"
