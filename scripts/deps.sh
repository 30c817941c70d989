#!/usr/bin/env bash
# Installs (with apt-get) every Debian 12 package Tensorscope needs to build, run and test.
# Safe to run again: packages already present are skipped without touching the network.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  # GUI: Qt6 widgets + SVG, QScintilla editor, graphviz layout
  qt6-base-dev qt6-svg-dev libqscintilla2-qt6-dev libgraphviz-dev graphviz libgl-dev
  # Python module and embedded interpreter
  pybind11-dev python3-dev python3-numpy nlohmann-json3-dev
  # Boost's header-only containers (small_vector) for the engine
  libboost-dev
  # recordings (.tsrec): SQLite; sqlite3 to look inside one
  libsqlite3-dev sqlite3
  # tests: GoogleTest, pytest, PyTorch as the numerical reference, digits data set
  libgtest-dev googletest python3-pytest python3-pytest-xdist python3-torch python3-sklearn
  # OpenBLAS for NumPy and PyTorch: the benchmarks compare with it (without it they use the
  # reference BLAS, ~50x slower at sgemm, and the comparison would flatter Tensorscope)
  libopenblas0-pthread
  # headless GUI checks and screenshots
  xvfb xauth x11-apps imagemagick
  # GPU backends, tested on CPU drivers: OpenCL (ICD loader + PoCL) and Vulkan (loader + lavapipe,
  # glslang in-process for GLSL -> SPIR-V, SPIRV-Tools for the disassembly); clinfo/vulkan-tools to inspect
  ocl-icd-opencl-dev opencl-c-headers opencl-clhpp-headers pocl-opencl-icd clinfo
  libvulkan-dev mesa-vulkan-drivers glslang-dev glslang-tools spirv-tools vulkan-tools
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps.sh: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
