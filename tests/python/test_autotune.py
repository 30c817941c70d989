# Issue 14: the BEAM search over optimization plans (engine/src/runtime/autotune.h). A run with
# TENSORSCOPE_BEAM=2 searches each kernel it compiles, gives the same results as NumPy, and keeps the plans in
# <cache>/autotune.db; a second run with that cache searches nothing. Subprocesses: the beam width and the
# caches are per process.
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import time

import numpy as np

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__import__("tensorscope").__file__)))

_SCRIPT = textwrap.dedent("""
    import numpy as np
    from tensorscope import Tensor
    rng = np.random.default_rng(0)
    a = rng.standard_normal((48, 80)).astype(np.float32)
    b = rng.standard_normal((80, 64)).astype(np.float32)
    out = (Tensor(a) @ Tensor(b)).relu().numpy()
    s = (Tensor(a) * 2).exp().sum(axis=1).numpy()
    np.save("out.npy", out)
    np.save("sum.npy", s)
""")


# A loaded machine (CI, parallel test workers) can take seconds to compile one candidate: past the default
# per-candidate timeout (2 s) even the default plan would be a timeout trial and its kernel not searched. The
# tests that are not about the timeout give it a minute.
_NO_TIMEOUT_MS = "60000"


def _run(tmp_path, cache, *args, env=None):
    e = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_CACHE=str(cache), TENSORSCOPE_DEVICE="C", DEBUG="1",
             TENSORSCOPE_BEAM="2", TENSORSCOPE_BEAM_SECONDS="4", TENSORSCOPE_BEAM_TIMEOUT_MS=_NO_TIMEOUT_MS)
    e.pop("TENSORSCOPE_RANDOM_PASSES", None)
    e.update(env or {})
    (tmp_path / "script.py").write_text(_SCRIPT)
    p = subprocess.run([sys.executable, "script.py", *args], cwd=tmp_path, env=e, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p.stdout


def test_beam_search_finds_plans_caches_them_and_keeps_results(tmp_path):
    cache = tmp_path / "cache"
    first = _run(tmp_path, cache)
    searched = [ln for ln in first.splitlines() if ln.startswith("BEAM ") and "candidates compiled" in ln]
    assert len(searched) == 2, first  # the matmul+relu kernel and the exp-sum kernel
    rng = np.random.default_rng(0)
    a = rng.standard_normal((48, 80)).astype(np.float32)
    b = rng.standard_normal((80, 64)).astype(np.float32)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.load(tmp_path / "sum.npy"), np.exp(a * 2).sum(axis=1), rtol=1e-4)

    db = sqlite3.connect(cache / "autotune.db")
    rows = db.execute("SELECT kernel, plan, ms, default_ms, candidates FROM plans").fetchall()
    db.close()
    assert len(rows) == 2, rows
    for kernel, plan, ms, default_ms, candidates in rows:
        assert candidates >= 2 and 0 < ms <= default_ms, rows  # the chosen plan is never slower than the default

    second = _run(tmp_path, cache)
    assert "candidates compiled" not in second, second
    assert sum(ln.startswith("BEAM ") and "cached plan" in ln for ln in second.splitlines()) == 2, second
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_cli_beam_flag_is_checked(tmp_path):
    cli = os.path.join(_PKG, "..", "bin", "tensorscope-cli")
    (tmp_path / "s.py").write_text("print(1)\n")
    p = subprocess.run([cli, "run", str(tmp_path / "s.py"), "--beam", "two"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--beam two: expected a beam width" in p.stderr, p.stderr


def _trials(recording):
    """The recording's trial events as dicts, in order."""
    db = sqlite3.connect(recording)
    rows = [json.loads(p) for (p,) in db.execute("SELECT payload FROM events WHERE kind = 'trial' ORDER BY seq")]
    db.close()
    return rows


def _kernel_order(recording):
    """(kind, kernel_id) of every trial and launch, in order."""
    db = sqlite3.connect(recording)
    rows = [(k, json.loads(p)["kernel_id"]) for k, p in
            db.execute("SELECT kind, payload FROM events WHERE kind IN ('trial', 'launch') ORDER BY seq")]
    db.close()
    return rows


def test_a_recording_of_a_beam_run_holds_every_trial_with_its_outcome(tmp_path):
    cache = tmp_path / "cache"
    _run(tmp_path, cache, env={"TENSORSCOPE_RECORD": str(tmp_path / "first.tsrec")})
    trials = _trials(tmp_path / "first.tsrec")
    kernels = {t["kernel_id"] for t in trials}
    assert len(kernels) == 2, trials  # both kernels were searched
    for k in kernels:
        mine = [t for t in trials if t["kernel_id"] == k]
        assert mine[0]["plan"] == "" and mine[0]["outcome"] == "timed", mine[0]  # the default first, timed
        assert [t["outcome"] for t in mine].count("kept") == 1, [t["outcome"] for t in mine]
        assert mine[-1]["outcome"] in ("kept", "timed")  # the side-by-side timing ends the search
        assert len(mine[0]["ir_hash"]) == 16 and all(t["ir_hash"] == mine[0]["ir_hash"] for t in mine)
        for t in mine:
            assert t["outcome"] in ("timed", "kept", "dropped-slow", "duplicate", "failed-compile"), t
            assert t["reason"], t  # every outcome says why
            if t["outcome"] in ("timed", "kept"):
                assert t["time_ms"] > 0, t
    assert any(t["outcome"] == "duplicate" for t in trials), trials  # illegal amounts render like "off"
    assert any(t["compile_ms"] > 0 for t in trials), trials
    # a kernel's trials come before its launch
    order = _kernel_order(tmp_path / "first.tsrec")
    for k in kernels:
        last_trial = max(i for i, (kind, kid) in enumerate(order) if kind == "trial" and kid == k)
        launch = min(i for i, (kind, kid) in enumerate(order) if kind == "launch" and kid == k)
        assert last_trial < launch, order

    # the second run: one cache-hit trial per kernel, with the plan the first one kept
    _run(tmp_path, cache, env={"TENSORSCOPE_RECORD": str(tmp_path / "second.tsrec")})
    again = _trials(tmp_path / "second.tsrec")
    assert [t["outcome"] for t in again] == ["cache-hit", "cache-hit"], again
    kept = {t["name"]: t["plan"] for t in trials if t["outcome"] == "kept"}
    assert {t["name"]: t["plan"] for t in again} == kept


def test_kernels_json_and_info_list_the_plan_and_the_trials(tmp_path):
    cli = os.path.join(_PKG, "..", "bin", "tensorscope-cli")
    (tmp_path / "script.py").write_text(_SCRIPT)
    env = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_CACHE=str(tmp_path / "cache"), TENSORSCOPE_DEVICE="C",
               TENSORSCOPE_BEAM_SECONDS="4", TENSORSCOPE_BEAM_TIMEOUT_MS=_NO_TIMEOUT_MS)
    env.pop("TENSORSCOPE_RANDOM_PASSES", None)
    p = subprocess.run([cli, "run", "script.py", "--beam", "2", "--out", "out", "--record", "run.tsrec"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    kernels = json.loads((tmp_path / "out" / "kernels.json").read_text())["kernels"]
    searched = [k for k in kernels if k["actions"] and k["actions"]["from"] == "BEAM search"]
    assert len(searched) == 2, [k["actions"] for k in kernels]
    for k in searched:
        kept = [t for t in k["autotune_trials"] if t["outcome"] == "kept"]
        assert len(kept) == 1 and kept[0]["plan"] == k["actions"]["plan"], k
        assert k["actions"]["applied"] == (kept[0]["applied"].split() if kept[0]["applied"] else []), k
        # the final IR listing's header says the same
        header = (tmp_path / "out" / k["ir"]).read_text().splitlines()[0]
        for a in k["actions"]["applied"]:
            assert a in header, (a, header)
    info = subprocess.run([cli, "info", "run.tsrec"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert info.returncode == 0 and "trials:" in info.stdout and "2 kept" in info.stdout, info.stdout


def test_a_candidate_that_fails_to_compile_is_a_skipped_trial(tmp_path):
    # the test hook puts an #error line into every candidate but the default: the real compiler rejects them
    cache = tmp_path / "cache"
    out = _run(tmp_path, cache, env={"TENSORSCOPE_RECORD": str(tmp_path / "run.tsrec"),
                                     "TENSORSCOPE_BEAM_FAIL_COMPILE": "1"})
    trials = _trials(tmp_path / "run.tsrec")
    failed = [t for t in trials if t["outcome"] == "failed-compile"]
    assert len(failed) >= 4, trials
    for t in failed:
        assert t["plan"] != "" and "TENSORSCOPE_BEAM_FAIL_COMPILE" in t["reason"] and t["time_ms"] == 0, t
    kept = [t for t in trials if t["outcome"] == "kept"]
    assert len(kept) == 2 and all(t["plan"] == "" for t in kept), kept  # nothing else ran: the default stays
    assert "the default: no candidate beats it" in kept[0]["reason"]
    rng = np.random.default_rng(0)
    a = rng.standard_normal((48, 80)).astype(np.float32)
    b = rng.standard_normal((80, 64)).astype(np.float32)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
    assert "candidates compiled" in out


def test_a_compile_past_the_timeout_is_stopped_and_the_kernel_keeps_its_default(tmp_path):
    # a C compiler that takes 3 s per kernel; the limit is 300 ms: the compiler is stopped, the default stays
    slow = tmp_path / "slowcc"
    slow.write_text('#!/bin/sh\ncase "$*" in *-shared*) sleep 3;; esac\nexec cc "$@"\n')
    slow.chmod(0o755)
    t0 = time.monotonic()
    _run(tmp_path, tmp_path / "cache", env={"TENSORSCOPE_RECORD": str(tmp_path / "run.tsrec"), "TENSORSCOPE_CC": str(slow),
                                            "TENSORSCOPE_BEAM_TIMEOUT_MS": "300"})
    seconds = time.monotonic() - t0
    trials = _trials(tmp_path / "run.tsrec")
    assert [t["outcome"] for t in trials] == ["timeout", "timeout"], trials  # the default of each kernel
    for t in trials:
        assert "the compiler was stopped" in t["reason"] and t["plan"] == "", t
        assert 250 <= t["compile_ms"] < 2500, t  # stopped at the limit, not after the compiler's 3 s
    assert seconds < 2 * 3 + 2 * 1.5 + 20, seconds  # the two real compiles, not the search's
    rng = np.random.default_rng(0)
    a = rng.standard_normal((48, 80)).astype(np.float32)
    np.testing.assert_allclose(np.load(tmp_path / "sum.npy"), np.exp(a * 2).sum(axis=1), rtol=1e-4)


def test_a_launch_past_the_timeout_is_not_repeated(tmp_path):
    # every candidate's program is in the compile cache after a first search; searched again (FRESH) with a
    # limit of 1 µs, the first launch of the default is past it: a timeout, launched once, and the search stops
    cache = tmp_path / "cache"
    _run(tmp_path, cache)
    _run(tmp_path, cache, env={"TENSORSCOPE_RECORD": str(tmp_path / "run.tsrec"), "TENSORSCOPE_BEAM_FRESH": "1",
                               "TENSORSCOPE_BEAM_TIMEOUT_MS": "0.001"})
    trials = _trials(tmp_path / "run.tsrec")
    assert [t["outcome"] for t in trials] == ["timeout", "timeout"], trials
    for t in trials:
        assert "a launch took" in t["reason"] and "not launched again" in t["reason"], t
        assert t["compile_ms"] == 0 and t["time_ms"] > 0, t


def test_the_search_can_be_narrowed_to_one_kernel(tmp_path):
    cache = tmp_path / "cache"
    _run(tmp_path, cache, env={"TENSORSCOPE_RECORD": str(tmp_path / "all.tsrec")})
    hashes = {t["name"]: t["ir_hash"] for t in _trials(tmp_path / "all.tsrec")}
    assert len(hashes) == 2, hashes
    name, other = sorted(hashes)
    for key in (name, hashes[name]):  # by name or by IR hash
        _run(tmp_path, cache, env={"TENSORSCOPE_RECORD": str(tmp_path / "one.tsrec"), "TENSORSCOPE_BEAM_KERNEL": key,
                                   "TENSORSCOPE_BEAM_FRESH": "1"})
        trials = _trials(tmp_path / "one.tsrec")
        assert {t["name"] for t in trials} == {name}, trials
        assert "cache-hit" not in {t["outcome"] for t in trials}  # FRESH: searched again


def test_threads_candidates_are_timed_not_skipped_as_duplicates_of_the_same_source(tmp_path):
    # THREADS=2 renders the same C as one thread (the split is a launch action): the dedup key holds the applied
    # actions, so it is compiled and timed; THREADS=1 is what the default does for these small kernels, a duplicate
    # a budget that lets the first round reach every kind, however slowly a loaded machine compiles
    out = _run(tmp_path, tmp_path / "cache", env={"DEBUG": "2", "TENSORSCOPE_THREADS": "2", "TENSORSCOPE_BEAM_SECONDS": "60"})
    # a trial line is "BEAM <kernel>: '<plan>' <outcome> ..."; a later round's duplicates name 'THREADS=2' too,
    # as the source they copy, so the plan is matched where it stands
    def trials_of(plan):
        return [ln for ln in out.splitlines() if re.match(rf"BEAM \S+: '{plan}' ", ln)]

    two, one = trials_of("THREADS=2"), trials_of("THREADS=1")
    # never a duplicate of a one-thread source; a later round that proposes 'THREADS=2' again (when the first round
    # kept the default, its candidates come round again) is a duplicate of the first 'THREADS=2' only
    assert any(" timed " in ln for ln in two), out
    assert all(" duplicate" not in ln or ln.endswith("the same source as 'THREADS=2': not compiled again") for ln in two), out
    assert one and all(" duplicate" in ln for ln in one), out


_PADTO_SCRIPT = textwrap.dedent("""
    import numpy as np
    from tensorscope import Tensor
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 784)).astype(np.float32)  # under 16 rows: no padded copy of w (Tensor::matmul)
    for width in (784, 10, 97):
        w = rng.standard_normal((784, width)).astype(np.float32)
        np.save(f"out{width}.npy", (Tensor(a) @ Tensor(w)).numpy())
        np.save(f"want{width}.npy", a @ w)
""")


def test_padto_with_upcast_global_matches_numpy_on_odd_widths(tmp_path):
    # TENSORSCOPE_OPTS sets one plan for every kernel: 784 is a multiple of 8 (nothing to pad, UPCAST 8 applies
    # as it is); 10 and 97 are padded to 16 and 104 and upcast by 8, the padded columns masked
    cli = os.path.join(_PKG, "..", "bin", "tensorscope-cli")
    (tmp_path / "script.py").write_text(_PADTO_SCRIPT)
    env = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_CACHE=str(tmp_path / "cache"), TENSORSCOPE_DEVICE="C",
               TENSORSCOPE_OPTS="PADTO=8,UPCAST_GLOBAL=8")
    env.pop("TENSORSCOPE_RANDOM_PASSES", None)
    p = subprocess.run([cli, "run", "script.py", "--out", "out"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    for width in (784, 10, 97):
        np.testing.assert_allclose(np.load(tmp_path / f"out{width}.npy"), np.load(tmp_path / f"want{width}.npy"),
                                   rtol=1e-4, atol=1e-3)
    kernels = json.loads((tmp_path / "out" / "kernels.json").read_text())["kernels"]
    padded = [k for k in kernels if k["actions"] and "PADTO(8)" in k["actions"]["applied"]]
    assert len(padded) == 2, [k["actions"] for k in kernels]
    for k in padded:
        assert "UPCAST_GLOBAL(8)" in k["actions"]["applied"], k["actions"]
        assert k["actions"]["plan"] == "UPCAST_GLOBAL=8,PADTO=8", k["actions"]


_LONG_SCRIPT = textwrap.dedent("""
    import numpy as np
    from tensorscope import Tensor
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    np.save("out.npy", (Tensor(a) @ Tensor(b)).numpy())
""")


def test_a_candidate_far_slower_than_a_long_best_is_dropped_from_a_part_of_its_rows(tmp_path):
    # a 1024² matmul takes 8-20 ms (over the 2 ms from which the search probes); its first-round candidates with a small upcast (UPCAST_GLOBAL=2: pairs
    # of outputs, each reading a strided column of b) would take 0.3-0.6 s a launch. On C such a candidate runs
    # 1/32 of its rows first (Program::estimate_launch_ms) and is dropped from that estimate.
    (tmp_path / "long.py").write_text(_LONG_SCRIPT)
    e = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_CACHE=str(tmp_path / "cache"), TENSORSCOPE_DEVICE="C", DEBUG="2",
             TENSORSCOPE_BEAM="1", TENSORSCOPE_BEAM_SECONDS="30", TENSORSCOPE_BEAM_TIMEOUT_MS=_NO_TIMEOUT_MS,
             TENSORSCOPE_BEAM_KERNEL="r_1024_1024_1024", TENSORSCOPE_THREADS="1")
    e.pop("TENSORSCOPE_RANDOM_PASSES", None)
    p = subprocess.run([sys.executable, "long.py"], cwd=tmp_path, env=e, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    # which of the small upcasts is dropped from its part and which from a whole first launch depends on the
    # machine (a part read from cache can look fast): one of them is dropped from its part
    probed = [ln for ln in p.stdout.splitlines() if re.match(r"BEAM r_1024_1024_1024: 'UPCAST_GLOBAL=\d+' dropped-slow ", ln)
              and "1/32 of its rows took" in ln]
    assert probed and "not launched" in probed[0], p.stdout
    # the estimate is the part's time scaled to all rows: over 4x the best plan timed before it (the default,
    # 8-20 ms, or a candidate that beat it)
    estimate_ms = float(re.search(r"dropped-slow ([\d.]+) ms", probed[0]).group(1))
    best_ms = float(re.search(r"over 4x the best \(([\d.]+) ms\)", probed[0]).group(1))
    assert estimate_ms > 4 * best_ms, p.stdout
    rng = np.random.default_rng(2)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), a @ b, rtol=1e-3, atol=1e-3)


def test_beam_tries_the_amounts_that_divide_the_kernels_loops(tmp_path):
    # Beside the powers of two, the UPCAST actions try every amount up to 32 that divides one of the kernel's
    # loops of their kind: for x (48, 80) @ w (80, 28) the output row of 28 gives UPCAST_GLOBAL 7, 14 and 28
    # (a depthwise convolution's weight gradient is fastest at 14). Results against NumPy.
    script = textwrap.dedent("""
        import numpy as np
        from tensorscope import Tensor
        rng = np.random.default_rng(0)
        a = rng.standard_normal((48, 80)).astype(np.float32)
        b = rng.standard_normal((80, 28)).astype(np.float32)
        np.save("out.npy", (Tensor(a) @ Tensor(b)).numpy())
    """)
    (tmp_path / "script.py").write_text(script)
    e = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_CACHE=str(tmp_path / "cache"), TENSORSCOPE_DEVICE="C",
             TENSORSCOPE_BEAM="2", TENSORSCOPE_BEAM_SECONDS="30", TENSORSCOPE_BEAM_TIMEOUT_MS=_NO_TIMEOUT_MS,
             TENSORSCOPE_RECORD=str(tmp_path / "run.tsrec"))
    e.pop("TENSORSCOPE_RANDOM_PASSES", None)
    p = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=e, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    plans = {t["plan"] for t in _trials(tmp_path / "run.tsrec")}
    for amount in (7, 14, 28):
        assert f"UPCAST_GLOBAL={amount}" in plans, sorted(plans)
    assert "UPCAST_REDUCE=5" in plans and "UPCAST_REDUCE=10" in plans, sorted(plans)  # the reduce loop of 80
    assert not any(re.search(r"UPCAST_REDUCE=(7|14|28)\b", pl) for pl in plans), sorted(plans)  # 80 has no 7
    rng = np.random.default_rng(0)
    a = rng.standard_normal((48, 80)).astype(np.float32)
    b = rng.standard_normal((80, 28)).astype(np.float32)
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), a @ b, rtol=1e-4, atol=1e-4)
