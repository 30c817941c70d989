# tensorscope-cli, end to end: `tensorscope-cli run SCRIPT --out DIR --svg FILE` runs a tensor script
# in the embedded interpreter and writes the kernel manifest (kernels.json), one IR listing per pass,
# the generated sources, and the graph as SVG (--dot and --png: as DOT text and a PNG image). Expected
# values come from PyTorch, not from the CLI.
import json
import os
import re
import struct
import subprocess
import xml.etree.ElementTree as ET

import numpy as np
import pytest
import torch

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("TS_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "bin", "tensorscope-cli")
QUICKSTART = os.path.join(REPO, "samples", "quickstart.py")
MLP_DIGITS = os.path.join(REPO, "samples", "mlp_digits.py")

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"{CLI} is not built")


def run_cli(*args, env=None, timeout=300):
    full_env = dict(os.environ)
    full_env.pop("DEBUG", None)
    full_env.update(env or {})
    return subprocess.run([CLI, *args], capture_output=True, text=True, env=full_env, timeout=timeout, cwd=REPO)


def run_quickstart(out_dir, *extra, env=None):
    out_dir = str(out_dir)
    r = run_cli("run", QUICKSTART, "--out", out_dir, "--svg", os.path.join(out_dir, "g.svg"), *extra, env=env)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r


def quickstart_expected_output():
    """What samples/quickstart.py prints, computed with PyTorch and printed by NumPy."""
    x = torch.eye(3, requires_grad=True)
    y = torch.tensor([[2.0, 0, -2.0]], requires_grad=True)
    y.matmul(x).sum().backward()
    return [str(x.grad.numpy()), str(y.grad.numpy())]


def load_manifest(out_dir):
    with open(os.path.join(str(out_dir), "kernels.json")) as f:
        return json.load(f)


def check_buffer_list(buffers):
    assert isinstance(buffers, list)
    for b in buffers:
        assert isinstance(b["node"], int)
        assert isinstance(b["shape"], list) and all(isinstance(d, int) and d >= 0 for d in b["shape"])
        assert b["dtype"] in ("float32", "int32", "bool", "float16")


def check_nonempty_file(out_dir, name):
    assert isinstance(name, str) and name
    assert not os.path.isabs(name), f"{name}: files are named relative to kernels.json"
    path = os.path.join(str(out_dir), name)
    assert os.path.isfile(path), f"{path} is referenced by kernels.json but missing"
    assert os.path.getsize(path) > 0, f"{path} is empty"
    return path


def check_manifest(out_dir, device, script=QUICKSTART):
    m = load_manifest(out_dir)
    assert set(m) >= {"script", "device", "kernels"}
    assert os.path.basename(m["script"]) == os.path.basename(script)
    assert m["device"] == device
    kernels = m["kernels"]
    assert len(kernels) >= 1
    ids = [k["id"] for k in kernels]
    assert ids == sorted(ids) and len(set(ids)) == len(ids), f"kernels not in launch order: {ids}"
    schedules = [k["schedule"] for k in kernels]
    assert schedules == sorted(schedules), "a kernel of an earlier schedule was listed after a later one"
    for k in kernels:
        assert isinstance(k["name"], str) and k["name"]
        assert k["device"] == device
        assert isinstance(k["schedule"], int)
        assert k["nodes"], f"kernel {k['id']} fuses no nodes"
        for node in k["nodes"]:
            assert isinstance(node["uid"], int) and isinstance(node["op"], str) and node["op"]
        check_buffer_list(k["inputs"])
        check_buffer_list(k["outputs"])
        assert len(k["outputs"]) >= 1
        assert isinstance(k["boundary_reasons"], list) and all(isinstance(r, str) for r in k["boundary_reasons"])
        check_nonempty_file(out_dir, k["ir"])
        assert k["ir_passes"], "no IR snapshots"
        for p in k["ir_passes"]:
            assert isinstance(p["pass"], str) and p["pass"]
            check_nonempty_file(out_dir, p["file"])
        # The final IR listing is the one after the last pass.
        with open(os.path.join(str(out_dir), k["ir"])) as a, open(os.path.join(str(out_dir), k["ir_passes"][-1]["file"])) as b:
            assert a.read() == b.read()
        assert isinstance(k["sources"], dict)
        for renderer, name in k["sources"].items():
            check_nonempty_file(out_dir, name)
        if device == "C":
            assert "C" in k["sources"]
        assert isinstance(k["time_ms"], (int, float)) and k["time_ms"] >= 0
        assert isinstance(k["compile_ms"], (int, float)) and k["compile_ms"] >= 0
        assert isinstance(k["compile_cache_hit"], bool)
    return m


def test_quickstart_prints_the_gradients(tmp_path):
    r = run_quickstart(tmp_path)
    for line in quickstart_expected_output():
        assert line in r.stdout, f"expected {line!r} in stdout:\n{r.stdout}"


def test_quickstart_manifest_schema_and_files(tmp_path):
    run_quickstart(tmp_path)
    check_manifest(tmp_path, "C")


def test_svg_has_one_cluster_per_kernel(tmp_path):
    run_quickstart(tmp_path)
    kernels = load_manifest(tmp_path)["kernels"]
    root = ET.parse(os.path.join(str(tmp_path), "g.svg")).getroot()
    assert root.tag.endswith("svg")
    clusters = [g for g in root.iter() if g.tag.endswith("}g") or g.tag == "g"]
    clusters = [g for g in clusters if "cluster" in g.get("class", "").split()]
    assert len(clusters) == len(kernels), f"{len(clusters)} clusters in the SVG, {len(kernels)} kernels in the manifest"


def png_size(path):
    """(width, height) from a PNG's IHDR chunk; fails unless the file starts with the PNG signature."""
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG: {head[:8]!r}"
    assert head[12:16] == b"IHDR"
    return struct.unpack(">II", head[16:24])


def test_dot_and_png_of_a_run_and_of_its_recording(tmp_path):
    rec = str(tmp_path / "q.tsrec")
    run_quickstart(tmp_path, "--dot", str(tmp_path / "g.dot"), "--png", str(tmp_path / "g.png"), "--record", rec)
    kernels = load_manifest(tmp_path)["kernels"]
    dot = (tmp_path / "g.dot").read_text()
    assert dot.startswith("digraph"), dot[:80]
    clusters = re.findall(r"subgraph cluster_k(\d+) \{", dot)
    assert sorted(int(c) for c in clusters) == sorted(k["id"] for k in kernels), "not one cluster per kernel"
    assert dot.count("{") == dot.count("}")
    # the same graph from the recording, its PNG at twice the size
    r = run_cli("export", rec, "--dot", str(tmp_path / "e.dot"), "--png", str(tmp_path / "e.png"), "--png-scale", "2")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "e.dot").read_text() == dot
    w1, h1 = png_size(str(tmp_path / "g.png"))
    w2, h2 = png_size(str(tmp_path / "e.png"))
    assert w1 > 20 and h1 > 20
    assert abs(w2 - 2 * w1) <= 2 and abs(h2 - 2 * h1) <= 2, f"1x {w1}x{h1}, 2x {w2}x{h2}"
    bad = run_cli("export", rec, "--png", str(tmp_path / "bad.png"), "--png-scale", "0")
    assert bad.returncode == 2 and "--png-scale" in bad.stderr
    assert not os.path.exists(str(tmp_path / "bad.png"))


def test_second_run_hits_the_compile_cache(tmp_path):
    # A fresh cache directory (the C backend's $TENSORSCOPE_CACHE): the first run compiles every kernel.
    env = {"TENSORSCOPE_CACHE": str(tmp_path / "cache")}
    run_quickstart(tmp_path / "first", env=env)
    run_quickstart(tmp_path / "second", env=env)
    first, second = load_manifest(tmp_path / "first"), load_manifest(tmp_path / "second")
    assert [k["name"] for k in first["kernels"]] == [k["name"] for k in second["kernels"]]
    # Identical kernels within one run may share a program, but something was compiled the first time.
    assert any(not k["compile_cache_hit"] and k["compile_ms"] > 0 for k in first["kernels"])
    misses = [k["name"] for k in second["kernels"] if k["compile_cache_hit"] is not True]
    assert not misses, f"kernels compiled again on an identical run: {misses}"


def test_interp_device_prints_the_same_values(tmp_path):
    c = run_quickstart(tmp_path / "c")
    interp = run_quickstart(tmp_path / "interp", "--device", "INTERP")
    for line in quickstart_expected_output():
        assert line in interp.stdout
    assert interp.stdout == c.stdout
    check_manifest(tmp_path / "interp", "INTERP")


def test_environment_variable_picks_the_device(tmp_path):
    r = run_quickstart(tmp_path, env={"TENSORSCOPE_DEVICE": "INTERP"})
    for line in quickstart_expected_output():
        assert line in r.stdout
    assert load_manifest(tmp_path)["device"] == "INTERP"


def test_script_error_exits_nonzero_with_traceback(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("from tensorscope import Tensor\n"
                      "x = Tensor([1.0, 2.0])\n"
                      "print((x * 2).numpy())\n"
                      "raise ValueError('deliberate failure for the test')\n")
    r = run_cli("run", str(script), "--out", str(tmp_path / "out"))
    assert r.returncode > 0, f"exit {r.returncode}"  # an error exit, not a crash by signal
    assert "ValueError" in r.stderr and "deliberate failure for the test" in r.stderr
    assert "Traceback" in r.stderr
    assert re.search(r"line 4\b", r.stderr), f"no line number in:\n{r.stderr}"
    assert "[2. 4.]" in r.stdout  # output before the error is not lost


def test_missing_script_is_a_clear_error(tmp_path):
    missing = str(tmp_path / "no_such_script.py")
    r = run_cli("run", missing)
    assert r.returncode > 0, f"exit {r.returncode}"
    assert "no_such_script.py" in r.stderr
    for crash in ("Segmentation fault", "terminate called", "core dumped", "Aborted"):
        assert crash not in r.stderr


def test_debug4_prints_kernels_ir_and_source(tmp_path):
    r = run_quickstart(tmp_path, env={"DEBUG": "4"})
    kernels = load_manifest(tmp_path)["kernels"]
    for k in kernels:
        assert k["name"] in r.stderr, f"kernel name {k['name']} not printed"
        # Some line of the final IR listing and of the C source appear in the debug output.
        for name in (k["ir"], k["sources"]["C"]):
            with open(os.path.join(str(tmp_path), name)) as f:
                lines = [line.strip() for line in f if len(line.strip()) > 8]
            assert lines and any(line in r.stderr for line in lines), f"{name} not printed with DEBUG=4"
    # Debug output never goes to stdout: the script's own output stays clean.
    for line in quickstart_expected_output():
        assert line in r.stdout


def test_debug2_prints_the_schedule_with_boundary_reasons(tmp_path):
    r = run_quickstart(tmp_path, env={"DEBUG": "2"})
    for k in load_manifest(tmp_path)["kernels"]:
        assert k["name"] in r.stderr
        for reason in k["boundary_reasons"]:
            assert reason in r.stderr, f"boundary reason {reason!r} not printed with DEBUG=2"


def test_no_debug_output_by_default(tmp_path):
    r = run_quickstart(tmp_path)
    for k in load_manifest(tmp_path)["kernels"]:
        assert k["name"] not in r.stderr


def test_mlp_digits_sample_trains(tmp_path):
    r = run_cli("run", MLP_DIGITS, "--out", str(tmp_path), timeout=600)
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    match = re.search(r"test accuracy: ([0-9.]+)", r.stdout)
    assert match, r.stdout
    assert float(match.group(1)) >= 0.95, r.stdout
    losses = [float(v) for v in re.findall(r"loss ([0-9.]+)", r.stdout)]
    assert len(losses) >= 2 and losses[-1] < losses[0]
