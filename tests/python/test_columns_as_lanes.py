# Issue 13: the columns_as_lanes pass (engine/src/opt/columns_as_lanes.cpp). A column sum over more columns than
# upcast_global covers in one pass (a bias's or a LayerNorm weight's gradient summed over the batch) walks its
# rows once, every column's accumulator side by side in a DEFINE_LOCAL array. Checked on the IR tensorscope-cli
# writes (which kernels get it, which do not), against PyTorch on C and INTERP (where the pass runs too), and
# with the pass turned off.
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from ops_helper import devices
from tensorscope import Tensor
from test_rows_as_lanes import _final_ir, _has_lanes

SHAPES = ("g = Tensor(rng.standard_normal((512, 128)).astype(np.float32))\n"
          "x = Tensor(rng.standard_normal((512, 128)).astype(np.float32))\n"
          "m = Tensor(rng.standard_normal((512, 1)).astype(np.float32))\n"
          "(g * ((x - m) * 2.0)).sum(0).realize()\n"                                       # r_128_512: lanes
          "Tensor(rng.standard_normal((512, 32)).astype(np.float32)).sum(0).realize()\n"   # r_32_512: one upcast pass
          "Tensor(rng.standard_normal((64, 100)).astype(np.float32)).sum(0).realize()\n"   # r_100_64: 16 does not divide
          "Tensor(rng.standard_normal((96, 512)).astype(np.float32)).sum(1).realize()\n"   # r_96_512: a row sum
          "Tensor(rng.standard_normal((4, 64, 144)).astype(np.float32)).sum(1).realize()\n"  # r_4_144_64: per batch
          "Tensor(rng.standard_normal((64, 512)).astype(np.float32)).sum(0).realize()\n"   # r_512_64: 256 at a time
          "a = Tensor(rng.standard_normal((64, 96)).astype(np.float32))\n"
          "w = Tensor(rng.standard_normal((96, 128)).astype(np.float32))\n"
          "(a @ w).realize()\n")                                                              # r_64_128_96: a matmul


def test_column_sums_wider_than_one_upcast_take_their_columns_as_lanes(tmp_path):
    ir = _final_ir(tmp_path, SHAPES)
    for name, lanes in (("r_128_512", 128), ("r_4_144_64", 144), ("r_512_64", 256)):
        (text,) = ir[name]
        header = text.split("\n")[0]
        assert _has_lanes(text) and "UPCAST_GLOBAL" not in header and f"LANES({lanes})" in header, text
    (text,) = ir["r_512_64"]
    assert "DEFINE_LOCAL.float32 [256]" in text, text  # 256 columns side by side, two trips of the global loop
    for name in ("r_32_512", "r_100_64", "r_96_512", "r_64_128_96"):
        (text,) = ir[name]
        assert not _has_lanes(text), text
    assert "REGISTER_TILE" in ir["r_64_128_96"][0].split("\n")[0]  # the matmul keeps its register tile


def test_a_plans_lanes_turn_the_passes_off_or_choose_the_lanes(tmp_path):
    # LANES=0 (TENSORSCOPE_OPTS, or a BEAM candidate): neither a column sum nor a cross-entropy's short rows get
    # lanes; LANES=64: the column sum's 128 columns in two blocks of 64
    body = ("Tensor(rng.standard_normal((512, 128)).astype(np.float32)).sum(0).realize()\n"
            "Tensor(rng.standard_normal((64, 11)).astype(np.float32)).exp().sum(1).realize()\n")
    default = _final_ir(tmp_path, body)
    assert "LANES(128)" in default["r_128_512"][0].split("\n")[0] and "LANES(16)" in default["r_64_11"][0].split("\n")[0]
    off = _final_ir(tmp_path, body, env={"TENSORSCOPE_OPTS": "LANES=0"})
    assert not _has_lanes(off["r_128_512"][0]) and not _has_lanes(off["r_64_11"][0]), off
    (tmp_path / "out_off").rename(tmp_path / "out_off0")
    asked = _final_ir(tmp_path, body, env={"TENSORSCOPE_OPTS": "LANES=64"})
    assert "LANES(64)" in asked["r_128_512"][0].split("\n")[0] and "DEFINE_LOCAL.float32 [64]" in asked["r_128_512"][0]


def test_the_pass_is_visible_after_its_own_name(tmp_path):
    from test_conv_backward import run_cli_out
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\n"
                      "Tensor(np.ones((64, 256), np.float32)).sum(0).realize()\n")
    out = run_cli_out(script, tmp_path / "out")
    assert [p.name for p in out.glob("k000_*columns_as_lanes.ir.txt")], sorted(p.name for p in out.iterdir())


@devices
@pytest.mark.parametrize("shape, axis", [((512, 128), 0), ((4, 64, 144), 1), ((64, 512), 0), ((16, 32, 64), (0, 1)),
                                         ((300, 48), 0), ((20, 96), 0)], ids=str)
def test_column_sums_match_pytorch(shape, axis, dev):
    rng = np.random.default_rng(1)
    a, b = (rng.standard_normal(shape).astype(np.float32) for _ in range(2))
    got = (Tensor(a, device=dev) * Tensor(b, device=dev).relu()).sum(axis).numpy()
    want = (torch.tensor(a) * torch.tensor(b).relu()).sum(axis).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    ints = rng.integers(-50, 50, shape).astype(np.int32)
    np.testing.assert_array_equal(Tensor(ints, device=dev).sum(axis).numpy(), torch.tensor(ints).sum(axis).numpy())
    nan = a.copy()
    nan[3, 5] = np.nan
    np.testing.assert_array_equal(np.isnan(Tensor(nan, device=dev).sum(axis).numpy()), np.isnan(torch.tensor(nan).sum(axis).numpy()))


@devices
def test_layernorm_and_linear_gradients_match_pytorch(dev):
    # the wide transformer's LayerNorm weight and bias gradients (512 rows of 128) and a Linear's bias gradient
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in ((16, 32, 128), (128,), (128,), (96, 128), (96,), (16, 32, 96))]
    ours = [Tensor(a, device=dev, requires_grad=True) for a in arrays[:5]]
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays[:5]]
    x, w, b, lw, lb = ours
    (x.layernorm(-1, 1e-5).mul(w).add(b).linear(lw.T, lb) * Tensor(arrays[5], device=dev)).sum().backward()
    tx, tw, tb, tlw, tlb = theirs
    (torch.nn.functional.linear(torch.nn.functional.layer_norm(tx, (128,), tw, tb), tlw, tlb) * torch.tensor(arrays[5])).sum().backward()
    for t, p in zip(ours, theirs):
        np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=2e-3)


def test_the_pass_changes_no_result_beyond_rounding():
    # with the pass, the lanes' sums add each product rounded (mul, then add); upcast_global's accumulators fused
    # them into one multiply-add: equal up to that rounding
    code = ("import numpy as np, sys\nfrom tensorscope import Tensor\nrng = np.random.default_rng(3)\n"
            "a, b = (Tensor(rng.standard_normal((512, 128)).astype(np.float32)) for _ in range(2))\n"
            "np.save(sys.argv[1], np.stack([(a * b).sum(0).numpy(), a.sum(0).numpy()]))\n")
    results = []
    for i, env in enumerate([{}, {"TENSORSCOPE_DISABLE_PASSES": "columns_as_lanes"}]):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ts_columns_{os.getpid()}_{i}.npy")
        r = subprocess.run([sys.executable, "-c", code, path], env={**os.environ, **env}, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        results.append(np.load(path))
        os.unlink(path)
    np.testing.assert_allclose(results[0][0], results[1][0], rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(results[0][1], results[1][1])  # a plain sum: the same additions in the same order
