#!/usr/bin/env bash
# Builds Tensorscope and runs a tensor script in it (default: samples/quickstart.py).
#
#   ./scripts/run.sh [SCRIPT]
#
# With a display ($DISPLAY or $WAYLAND_DISPLAY) the debugger GUI opens, loads SCRIPT and runs it.
# Headless, the CLI runs SCRIPT and writes the kernel manifest, IR, sources and graph SVG to out/,
# then the GUI renders a screenshot offscreen to out/tensorscope.png.
set -euo pipefail
cd "$(dirname "$0")/.."

die() { echo "run.sh: error: $*" >&2; exit 1; }
trap 'echo "run.sh: failed at line $LINENO (exit $?): $BASH_COMMAND" >&2' ERR

script="${1:-samples/quickstart.py}"
[ -f "$script" ] || die "no such script: $script"

echo "==> installing dependencies (scripts/deps.sh)"
./scripts/deps.sh
echo "==> configuring (build/)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE=/usr/bin/python3
echo "==> building (2 jobs)"
cmake --build build -j2

[ -x build/bin/tensorscope-cli ] || die "build/bin/tensorscope-cli was not built"

if [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; then
  [ -x build/bin/tensorscope ] || die "build/bin/tensorscope (the GUI) was not built"
  echo "==> opening the debugger on $script"
  exec build/bin/tensorscope "$script" --run
fi

echo "==> no display: running $script headless"
rm -rf out   # out/ holds only this script's outputs; stale kernels of an earlier run would mislead
mkdir -p out
build/bin/tensorscope-cli run "$script" --out out --svg out/graph.svg
[ -x build/bin/tensorscope ] || die "build/bin/tensorscope (the GUI) was not built; no screenshot"
QT_QPA_PLATFORM=offscreen build/bin/tensorscope "$script" --screenshot out/tensorscope.png

echo
echo "==> outputs"
echo "  kernel manifest:  out/kernels.json"
echo "  graph (SVG):      out/graph.svg"
echo "  GUI screenshot:   out/tensorscope.png"
echo "  per kernel: final IR, generated source (IR after each pass: out/kNNN_<name>.<i>_<pass>.ir.txt)"
# The IR listings and generated sources named in the manifest, one line per kernel.
/usr/bin/python3 - <<'PY'
import json, os
with open("out/kernels.json") as f:
    manifest = json.load(f)
for k in manifest["kernels"]:
    files = [k["ir"]] + [src for src in k.get("sources", {}).values()]
    print(f"  kernel {k['id']:>3} {k['name']:<24} " + "  ".join(os.path.join("out", p) for p in files))
PY
