# Issue 16, "nothing crashes, nothing is lost": the C backend's kernel cache and allocation errors.
#
# - long kernel names are shortened with a hash in cache file names (Linux allows 255 bytes per name);
# - the cache is shared safely by concurrent processes, a damaged entry is compiled again with one warning, a
#   cache directory that cannot be written is replaced by a private one for the run with one warning,
#   the key includes what -march=native means on this CPU, and compiler problems raise a RuntimeError that
#   names the compiler, quotes its message and names the kept source file;
# - a reduction of a broadcast constant is folded (no buffer), and an allocation the device cannot make
#   raises MemoryError naming shape, dtype, bytes and device.
# The cache tests run scripts in subprocesses with their own TENSORSCOPE_CACHE, so that the process-wide
# caches (compiled programs, the -march=native probe) start empty.
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from tensorscope import Tensor

# the package the tests import, for the subprocesses
_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__import__("tensorscope").__file__)))


def _run(code, cache, env=None, check=True):
    e = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_CACHE=str(cache), TENSORSCOPE_DEVICE="C")
    e.pop("TENSORSCOPE_RANDOM_PASSES", None)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True, timeout=120)
    if check:
        assert p.returncode == 0, f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    return p


def _cache_files(cache, suffix=".so"):
    d = os.path.join(str(cache), "c")
    return sorted(f for f in os.listdir(d) if f.endswith(suffix)) if os.path.isdir(d) else []


# A few kernels (elementwise, reduce, matmul) whose values the parent checks against NumPy.
_KERNELS = """
    import numpy as np
    from tensorscope import Tensor
    a = np.arange(96, dtype=np.float32).reshape(8, 12) / 7
    b = np.linspace(-1, 1, 12 * 5, dtype=np.float32).reshape(12, 5)
    x, w = Tensor(a), Tensor(b)
    print(repr(((x * 2 + 1).exp().sum(axis=1)).numpy().tolist()))
    print(repr((x @ w).relu().numpy().tolist()))
    print(repr((x.max(axis=0) - x.mean()).numpy().tolist()))
"""


def _expected_kernels():
    a = np.arange(96, dtype=np.float32).reshape(8, 12) / 7
    b = np.linspace(-1, 1, 12 * 5, dtype=np.float32).reshape(12, 5)
    t, u = torch.tensor(a), torch.tensor(b)
    return [(t * 2 + 1).exp().sum(1).numpy(), (t @ u).relu().numpy(), (t.max(0).values - t.mean()).numpy()]


def _check_kernel_output(stdout):
    lines = [ln for ln in stdout.splitlines() if ln.startswith("[")]
    assert len(lines) == 3, stdout
    for got, want in zip(lines, _expected_kernels()):
        np.testing.assert_allclose(np.array(eval(got), dtype=np.float32), want, rtol=1e-5, atol=1e-5)


# ---- 1. long kernel names ------------------------------------------------------------------------

def test_sum_of_300_reductions_compiles_with_a_long_kernel_name(tmp_path):
    # one kernel fusing 300 reductions has a name of thousands of characters (r_64_64_64_...); it was used
    # as the cache file's name: "filesystem error: File name too long"
    out = _run("""
        import numpy as np
        from tensorscope import Tensor
        a = (np.arange(64 * 64, dtype=np.float32).reshape(64, 64) % 13) / 13
        x = Tensor(a)
        total = x.sum(axis=1)
        for i in range(1, 300):
            total = total + (x * (i % 7)).sum(axis=1)
        print(repr(total.numpy().tolist()))
    """, tmp_path)
    a = (np.arange(64 * 64, dtype=np.float64).reshape(64, 64) % 13) / 13
    want = a.sum(axis=1) * (1 + sum(i % 7 for i in range(1, 300)))
    got = np.array(eval(out.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(got, want, rtol=1e-4)
    names = _cache_files(tmp_path)
    assert names and max(len(n) for n in names) <= 255
    # shortened names keep a readable prefix and end in a 16-hex-digit hash of the full name
    long = [n for n in names if len(n) > 120]
    assert not long, long


def test_long_kernel_name_shortened_in_file_but_full_where_shown(tmp_path):
    # the full name is what events (DEBUG, the GUI, kernels.json) show: only the file name is shortened
    out = _run("""
        import numpy as np
        from tensorscope import Tensor
        x = Tensor(np.ones((4, 8), dtype=np.float32))
        total = x.sum(axis=1)
        for i in range(1, 60):
            total = total + (x * i).sum(axis=1)
        print(repr(total.numpy().tolist()))
    """, tmp_path, env={"DEBUG": "2"})
    np.testing.assert_allclose(eval(out.stdout.strip().splitlines()[-1]), [8 * (1 + sum(range(1, 60)))] * 4, rtol=1e-6)
    shown = [w for w in (out.stdout + out.stderr).split() if w.startswith("r_")]
    files = _cache_files(tmp_path)
    longest = max(files, key=len)
    full = max(shown, key=len)
    assert len(full) > 96, out.stdout + out.stderr
    assert longest.startswith(full[:64]) and len(longest) < len(full)


def test_cli_export_of_a_long_kernel_name(tmp_path):
    # tensorscope-cli run --out writes each kernel's listings under the kernel's name: shortened there too,
    # while kernels.json keeps the full name
    import json
    cli = os.path.join(os.environ.get("TS_BUILD_DIR", os.path.join(_PKG, "..")), "bin", "tensorscope-cli")
    if not os.path.exists(cli):
        pytest.skip("tensorscope-cli is not built")
    script = tmp_path / "long.py"
    script.write_text("from tensorscope import Tensor\nx = Tensor.rand(4, 8).realize()\ntotal = x.sum(axis=1)\n"
                      "for i in range(1, 150):\n    total = total + (x * i).sum(axis=1)\nprint(total.numpy())\n")
    env = dict(os.environ, TENSORSCOPE_CACHE=str(tmp_path / "cache"), TENSORSCOPE_DEVICE="C")
    p = subprocess.run([cli, "run", str(script), "--out", str(tmp_path / "out")], env=env, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    files = os.listdir(tmp_path / "out")
    assert max(len(f) for f in files) <= 255
    names = [k["name"] for k in json.load(open(tmp_path / "out" / "kernels.json"))["kernels"]]
    assert max(len(n) for n in names) > 255  # the full name


# ---- 2. a cache shared by processes, damaged entries, the CPU in the key, compiler errors ---------

def test_concurrent_processes_share_one_fresh_cache(tmp_path):
    env = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_CACHE=str(tmp_path), TENSORSCOPE_DEVICE="C")
    env.pop("TENSORSCOPE_RANDOM_PASSES", None)
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(_KERNELS)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        _check_kernel_output(out)
    # no temporaries are left behind, every entry is whole
    left = [f for f in os.listdir(tmp_path / "c") if not (f.endswith(".so") or f == "ts_math.h")]
    assert not left, left
    assert _cache_files(tmp_path)


def test_truncated_cache_entry_is_compiled_again_with_one_warning(tmp_path):
    first = _run(_KERNELS, tmp_path)
    _check_kernel_output(first.stdout)
    entries = _cache_files(tmp_path)
    assert entries
    for name in entries:  # a full disk or a killed copy leaves half a file
        path = tmp_path / "c" / name
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 3])
    second = _run(_KERNELS, tmp_path)
    _check_kernel_output(second.stdout)
    warnings = [ln for ln in second.stderr.splitlines() if "warning" in ln and "cache entry" in ln]
    assert len(warnings) == len(entries), second.stderr
    for name in entries:
        assert sum(name in w for w in warnings) == 1
    # the entries are whole again: a third run loads them without a warning
    third = _run(_KERNELS, tmp_path)
    _check_kernel_output(third.stdout)
    assert "warning" not in third.stderr


def test_unusable_cache_directory_falls_back_with_one_warning(tmp_path):
    # a cache path through a regular file can never be created (as root, permissions would not stop it)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    p = _run(_KERNELS, blocker / "cache")
    _check_kernel_output(p.stdout)
    warnings = [ln for ln in p.stderr.splitlines() if "warning" in ln]
    assert len(warnings) == 1, p.stderr
    assert str(blocker / "cache" / "c") in warnings[0] and "TENSORSCOPE_CACHE" in warnings[0]
    assert blocker.read_text() == "not a directory"  # nothing of the user's was touched


def test_cache_key_includes_the_cpu_that_march_native_means(tmp_path):
    # a compiler wrapper whose answer to `-march=native -###` depends on $FAKE_CPU: another CPU model must miss
    # the cache (a carried cache directory would otherwise load AVX-512 code on a CPU without it: SIGILL)
    cc = tmp_path / "fakecc"
    cc.write_text('#!/bin/sh\nif [ "$1" = "-march=native" ] && [ "$2" = "-###" ]; then echo "cpu $FAKE_CPU"; exit 0; fi\n'
                  'exec cc "$@"\n')
    cc.chmod(0o755)
    cache = tmp_path / "cache"
    _check_kernel_output(_run(_KERNELS, cache, env={"TENSORSCOPE_CC": str(cc), "FAKE_CPU": "zen5"}).stdout)
    zen5 = set(_cache_files(cache))
    _check_kernel_output(_run(_KERNELS, cache, env={"TENSORSCOPE_CC": str(cc), "FAKE_CPU": "sapphirerapids"}).stdout)
    both = set(_cache_files(cache))
    assert len(both) == 2 * len(zen5)
    _check_kernel_output(_run(_KERNELS, cache, env={"TENSORSCOPE_CC": str(cc), "FAKE_CPU": "zen5"}).stdout)
    assert set(_cache_files(cache)) == both  # the same CPU hits


def test_missing_compiler_raises_a_clear_error(tmp_path):
    p = _run("""
        import numpy as np
        from tensorscope import Tensor
        try:
            (Tensor(np.ones(5, dtype=np.float32)) * 3).numpy()
        except RuntimeError as e:
            print("RuntimeError:", e)
    """, tmp_path, env={"TENSORSCOPE_CC": "/nonexistent/bin/cc"})
    assert "RuntimeError:" in p.stdout, p.stdout + p.stderr
    assert "/nonexistent/bin/cc" in p.stdout and "TENSORSCOPE_CC" in p.stdout


def test_failed_compile_quotes_the_compiler_and_keeps_the_source(tmp_path):
    cc = tmp_path / "badcc"
    cc.write_text('#!/bin/sh\nif [ "$2" = "-###" ]; then exit 0; fi\necho "kernel.c:1:1: error: the compiler says no" >&2\nexit 1\n')
    cc.chmod(0o755)
    p = _run("""
        import numpy as np
        from tensorscope import Tensor
        try:
            (Tensor(np.ones(5, dtype=np.float32)) * 3).numpy()
        except RuntimeError as e:
            print("RuntimeError:", e)
    """, tmp_path / "cache", env={"TENSORSCOPE_CC": str(cc)})
    msg = p.stdout
    assert "RuntimeError:" in msg, msg + p.stderr
    assert "the compiler says no" in msg and str(cc) in msg
    kept = [w for w in msg.split() if w.endswith(".failed.c")]
    assert kept and os.path.exists(kept[0]), msg
    assert "void" in open(kept[0]).read()  # the generated C, for the user to read


# ---- 3. constant reductions and allocations that cannot be made ----------------------------------

def test_sum_of_a_huge_broadcast_constant_is_folded():
    # was MemoryError: std::bad_alloc (a 4 TiB buffer of ones)
    big = Tensor.ones(2**20, 2**20)
    assert big.sum().item() == float(2**40)
    assert big.mean().item() == 1.0
    assert big.max().item() == 1.0
    np.testing.assert_allclose(Tensor.full((2**20, 2**20), -2.5).sum(axis=1)[:3].numpy(), [-2.5 * 2**20] * 3)


@pytest.mark.parametrize("shape,axis", [((3, 4), None), ((3, 4), 0), ((2, 3, 4), (0, 2)), ((0, 3), None), ((0, 3), 0),
                                        ((3, 0), 1)])
def test_constant_reductions_match_torch(shape, axis):
    for value in (1.0, -2.5, float("inf")):
        t = torch.full(shape, value)
        s = Tensor.full(shape, value)
        np.testing.assert_allclose(s.sum(axis=axis).numpy(), (t.sum() if axis is None else t.sum(dim=axis)).numpy())
        np.testing.assert_allclose(s.mean(axis=axis).numpy(), (t.mean() if axis is None else t.mean(dim=axis)).numpy())
        if 0 not in shape:
            np.testing.assert_allclose(s.max(axis=axis).numpy(),
                                       (t.max() if axis is None else t.amax(dim=axis)).numpy())


def test_constant_reduction_gradients_match_torch():
    t = torch.full((3, 4), 2.0, requires_grad=True)
    s = Tensor.full((3, 4), 2.0, requires_grad=True)
    ((t.sum(0) * torch.tensor([1.0, 2, 3, 4])).sum() + t.amax(1).sum()).backward()
    ((s.sum(0) * Tensor([1.0, 2, 3, 4])).sum() + s.max(1).sum()).backward()
    np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=1e-6)


def test_impossible_allocation_raises_memoryerror_naming_shape_dtype_bytes_device():
    x = Tensor.ones(2**20, 2**20) + 1  # needs a 4 TiB buffer
    with pytest.raises(MemoryError) as info:
        x.realize()
    msg = str(info.value)
    for part in ("(1048576, 1048576)", "float32", "4.0 TiB", "device C"):
        assert part in msg, msg
    # the engine goes on working
    np.testing.assert_allclose((Tensor([1.0, 2.0]) * 2).numpy(), [2.0, 4.0])


def test_impossible_allocation_on_interp_names_that_device():
    x = Tensor.ones(2**19, 2**19, device="INTERP").contiguous()
    with pytest.raises(MemoryError, match=r"\(524288, 524288\) float32 needs 1\.0 TiB; device INTERP"):
        x.realize()
