# Issue 14: the BEAM search over optimization plans (engine/src/runtime/autotune.h). A run with
# TENSORSCOPE_BEAM=2 searches each kernel it compiles, gives the same results as NumPy, and keeps the plans in
# <cache>/autotune.db; a second run with that cache searches nothing. Subprocesses: the beam width and the
# caches are per process.
import os
import sqlite3
import subprocess
import sys
import textwrap

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


def _run(tmp_path, cache, *args, env=None):
    e = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_CACHE=str(cache), TENSORSCOPE_DEVICE="C", DEBUG="1",
             TENSORSCOPE_BEAM="2", TENSORSCOPE_BEAM_SECONDS="4")
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
