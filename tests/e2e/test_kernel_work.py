# Every kernel's work, counted once at schedule time (KernelInfo::flops / bytes; issue 14, item 5): FLOPs are
# the fused ALU ops times the elements each computes (a reduce: its input's elements), so a matmul counts its
# multiply-adds twice (2·M·N·K, the field's convention), and bytes are the sizes of the buffers the kernel reads
# and writes. Seen through kernels.json, DEBUG=2 and the Chrome trace; and the peak calibration that the
# roofline plot divides by (`tensorscope-cli calibrate`, cached per device).
import json
import os
import subprocess
import textwrap

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("TS_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "bin", "tensorscope-cli")

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"{CLI} is not built")


def run(tmp_path, body, *args, env=None):
    script = tmp_path / "script.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\n" + textwrap.dedent(body))
    e = dict(os.environ)
    e.pop("DEBUG", None)
    e.update(env or {})
    r = subprocess.run([CLI, "run", str(script), *args], capture_output=True, text=True, env=e, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def kernels_of(tmp_path, body):
    run(tmp_path, body, "--out", str(tmp_path / "out"))
    return json.loads((tmp_path / "out" / "kernels.json").read_text())["kernels"]


MATMUL = """
M, K, N = 8, 48, 32
x = Tensor(np.ones((M, K), dtype=np.float32))
w = Tensor(np.ones((K, N), dtype=np.float32))
(x @ w).realize()
"""


def test_a_matmul_counts_two_flops_per_multiply_add_and_moves_its_operands_once(tmp_path):
    kernels = kernels_of(tmp_path, MATMUL)
    (mm,) = [k for k in kernels if {"MUL", "SUM"} <= {n["op"] for n in k["nodes"]}]
    M, K, N = 8, 48, 32
    assert mm["flops"] == 2 * M * N * K
    assert mm["bytes"] == 4 * (M * K + K * N + M * N)


def test_an_elementwise_kernel_counts_one_flop_per_op_and_element(tmp_path):
    kernels = kernels_of(tmp_path, """
        a = Tensor(np.ones(1000, dtype=np.float32))
        b = Tensor(np.ones(1000, dtype=np.float32))
        c = Tensor(np.ones(1000, dtype=np.float32))
        ((a + b) * c).realize()
    """)
    (k,) = kernels
    assert k["flops"] == 2 * 1000  # ADD and MUL over 1000 elements
    assert k["bytes"] == 4 * 4 * 1000  # three inputs read, one output written


def test_debug_2_prints_a_kernels_work(tmp_path):
    r = run(tmp_path, MATMUL, env={"DEBUG": "2"})
    assert f"work: {2 * 8 * 48 * 32} FLOPs, {4 * (8 * 48 + 48 * 32 + 8 * 32)} bytes" in r.stderr


def test_the_trace_gives_each_launch_its_work_and_rates(tmp_path):
    run(tmp_path, MATMUL, "--trace", str(tmp_path / "t.json"))
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    launches = [e for e in events if e.get("cat") == "C launches"]
    mm = [e for e in launches if e["args"].get("flops") == 2 * 8 * 48 * 32]
    assert len(mm) == 1
    args = mm[0]["args"]
    assert args["GFLOP/s"] == pytest.approx(args["flops"] / mm[0]["dur"] / 1e3)
    assert args["GB/s"] == pytest.approx(args["bytes"] / mm[0]["dur"] / 1e3)


def test_calibrate_measures_once_and_then_reads_the_cache(tmp_path):
    env = dict(os.environ, TENSORSCOPE_CACHE=str(tmp_path / "cache"))
    first = subprocess.run([CLI, "calibrate", "--device", "C"], capture_output=True, text=True, env=env, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "measured in" in first.stdout and "cached" not in first.stdout.split(";")[1]
    peaks = json.loads((tmp_path / "cache" / "peaks.json").read_text())["peaks"]
    (peak,) = peaks.values()
    assert peak["device"] == "C" and peak["gflops"] > 0.1 and peak["gbps"] > 0.1
    assert peak["seconds"] < 120  # mostly compiles: this cache directory starts empty
    again = subprocess.run([CLI, "calibrate", "--device", "C"], capture_output=True, text=True, env=env, timeout=60)
    assert again.returncode == 0 and "cached, measured in" in again.stdout
