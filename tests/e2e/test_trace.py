# `tensorscope-cli run SCRIPT --trace FILE` and `tensorscope-cli export REC --trace FILE` write the run as a
# Chrome trace (Trace Event Format, what chrome://tracing and Perfetto open; issue 14, item 6): one trace
# thread per lane (schedules, compiles, each device's launches), a complete event ("X") per launch and
# compile with its measured duration, an instant ("i") per schedule. Checked against the format's rules and
# against kernels.json of the same run.
import json
import os
import subprocess

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("TS_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "bin", "tensorscope-cli")
QUICKSTART = os.path.join(REPO, "samples", "quickstart.py")

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"{CLI} is not built")


def cli(*args):
    env = dict(os.environ)
    env.pop("DEBUG", None)
    r = subprocess.run([CLI, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    return r


def validate_chrome_trace(path):
    """The Trace Event Format's JSON object form; returns {lane name: [events in file order]}."""
    with open(path) as f:
        trace = json.load(f)
    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    names, lanes = {}, {}
    for e in trace["traceEvents"]:
        assert isinstance(e["name"], str) and e["ph"] in ("X", "i", "M"), e
        assert isinstance(e["pid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("thread_name", "process_name") and isinstance(e["args"]["name"], str), e
            if e["name"] == "thread_name":
                names[e["tid"]] = e["args"]["name"]
            continue
        assert isinstance(e["tid"], int) and isinstance(e["ts"], (int, float)) and e["ts"] >= 0, e
        if e["ph"] == "X":
            assert isinstance(e["dur"], (int, float)) and e["dur"] > 0, e
        lanes.setdefault(names[e["tid"]], []).append(e)  # a thread is named before its first event
    for lane, events in lanes.items():  # spans of one lane follow each other
        for a, b in zip(events, events[1:]):
            assert b["ts"] >= a["ts"] + a.get("dur", 0) - 1e-3, (lane, a, b)
    return lanes


def test_run_and_export_write_the_same_launches(tmp_path):
    rec, out = tmp_path / "run.tsrec", tmp_path / "out"
    cli("run", QUICKSTART, "--trace", str(tmp_path / "run.json"), "--out", str(out), "--record", str(rec))
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    lanes = validate_chrome_trace(tmp_path / "run.json")
    launches = lanes["C launches"]
    assert [e["name"] for e in launches] == [k["name"] for k in kernels]
    for e, k in zip(launches, kernels):
        assert e["args"]["kernel"] == str(k["id"])
        assert e["dur"] == pytest.approx(k["time_ms"] * 1e3, rel=1e-6)
    assert len(lanes["schedules"]) == len({k["schedule"] for k in kernels if "replay_of" not in k})
    compiled = [k for k in kernels if not k["compile_cache_hit"] and k["compile_ms"] > 0]
    assert len(lanes.get("compiles", [])) == len(compiled)

    cli("export", str(rec), "--trace", str(tmp_path / "export.json"))
    exported = validate_chrome_trace(tmp_path / "export.json")
    assert [(e["name"], e["dur"]) for e in exported["C launches"]] == [(e["name"], e["dur"]) for e in launches]
