# The upcast_reduce pass (engine/src/opt/upcast_reduce.cpp) copies a reduce loop's body U times with the loop
# index i replaced by i·U + u, u = 0..U-1, and then rebuilds the kernel through the IR builder (simplify), so
# that every copy's address is one base shared by the U copies plus the constant u. That is what gcc's
# vectorizer (and the C renderer's vector accumulators) need to see U neighbouring loads: a window read as
# x[base + (o + k)] (the weight gradient of a convolution summed along its output rows o, k the tap) had kept
# each copy's o + k apart, and gcc compiled
# such a kernel to scalar code (3.8 ms instead of 1.0 for a 3 -> 6 channels 5x5 weight gradient).
# Checked on the C source tensorscope-cli writes, and the values against PyTorch.
import json
import re

import numpy as np
import torch

from tensorscope import Tensor
from test_conv_backward import run_cli_out

# A weight gradient small enough for the direct loop nest (conv_weight_grad's last form): per tap, the sum
# over the batch, the rows and the 32 output positions of a row of g times the input shifted by the tap.
WINDOWS = ("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n"
           "x = Tensor(rng.standard_normal((2, 1, 3, 36)).astype(np.float32)).realize()\n"
           "w = Tensor(rng.standard_normal((1, 1, 1, 5)).astype(np.float32), requires_grad=True)\n"
           "g = Tensor(rng.standard_normal((2, 1, 3, 32)).astype(np.float32)).realize()\n"
           "x.conv2d(w).backward(g)\n"
           "w.grad.realize()\n")


def _kernel_source(tmp_path, body, name):
    script = tmp_path / "k.py"
    script.write_text(body)
    out = run_cli_out(script, tmp_path / "out")
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    return next((out / k["sources"]["C"]).read_text() for k in kernels if k["name"] == name)


def test_the_copies_of_a_window_read_share_one_base(tmp_path):
    src = _kernel_source(tmp_path, WINDOWS, "r_5_2_3_32")
    # the 16 partial sums are one vector of 16 (CRenderer::vector_accumulators), and each copy's product of g and
    # x one vector expression of two rows: the renderer reads x's 16 copies as one vector load only when they are
    # one base plus 0..15 (a copy with its own base would leave the run scalar)
    assert len(re.findall(r"ts_v16 vacc\d+ = ts_v16_splat\(0\.0f\);", src)) == 1, src
    x_slot = re.search(r"const float\* restrict (data\d+),\s*/\* input, 216 elements", src).group(1)
    g_slot = re.search(r"const float\* restrict (data\d+),\s*/\* input, 192 elements", src).group(1)
    update = re.findall(r"vacc\d+ = vacc\d+ \+ \(ts_v16_load\((data\d+) \+ v\d+\) \* ts_v16_load\((data\d+) \+ v\d+\)\);", src)
    assert len(update) == 1 and set(update[0]) == {x_slot, g_slot}, src
    assert not re.search(rf"= {x_slot}\[", src), src  # no scalar load of x is left


def test_the_window_weight_gradient_matches_torch():
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((2, 1, 3, 36)).astype(np.float32)
    w_np = rng.standard_normal((1, 1, 1, 5)).astype(np.float32)
    g_np = rng.standard_normal((2, 1, 3, 32)).astype(np.float32)
    w = Tensor(w_np, requires_grad=True)
    Tensor(x_np).conv2d(w).backward(Tensor(g_np))
    pw = torch.from_numpy(w_np).requires_grad_()
    torch.nn.functional.conv2d(torch.from_numpy(x_np), pw).backward(torch.from_numpy(g_np))
    np.testing.assert_allclose(w.grad.numpy(), pw.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_rows_of_8_or_16_read_contiguously_are_left_whole(tmp_path):
    # A reduce over rows of 16 (or 8), contiguous and without a transcendental, is not upcast: gcc unrolls the short
    # loop and vectorizes the loop over the rows, one row a lane (x.sum(-1) over (8192, 16): 27.4 -> 13.8 us,
    # attention's q·k over 16 features 59.4 -> 26.2 on the fifty-sixth session's Xeon). Rows of 12 and 32 keep their
    # upcast, and rows of 16 with an exp their lanes. Read from kernels.json's applied actions; values against NumPy.
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n"
                      "for n in (8, 12, 16, 32):\n"
                      "    Tensor(rng.standard_normal((256, n)).astype(np.float32)).realize().sum(-1).realize()\n"
                      "x, m = Tensor(np.ones((256, 16), np.float32)).realize(), Tensor(np.ones((256, 1), np.float32)).realize()\n"
                      "((x - m) * (x - m)).sum(-1).realize()\n"
                      "Tensor(np.ones((256, 16), np.float32)).realize().exp().sum(-1).realize()\n")
    out = run_cli_out(script, tmp_path / "out")
    applied = [(k["name"], k["actions"]["applied"]) for k in json.loads((out / "kernels.json").read_text())["kernels"]]
    reduces = [(name, a) for name, a in applied if name.startswith("r_256_")]
    assert [name for name, _ in reduces] == ["r_256_8", "r_256_12", "r_256_16", "r_256_32", "r_256_16", "r_256_16"], applied
    upcast = [any(x.startswith("UPCAST_REDUCE") for x in a) for _, a in reduces]
    assert upcast[:5] == [False, True, False, True, False], reduces
    assert reduces[5][1], reduces  # exp: rows as lanes or an upcast, not left to gcc
    rng = np.random.default_rng(4)
    for n in (8, 12, 16, 32):
        x = rng.standard_normal((300, n)).astype(np.float32)
        np.testing.assert_allclose(Tensor(x).sum(-1).numpy(), x.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-5)
        m = x.mean(-1, keepdims=True)
        np.testing.assert_allclose(((Tensor(x) - Tensor(m)) ** 2).sum(-1).numpy(), ((x - m) ** 2).sum(-1), rtol=1e-4, atol=1e-5)


def test_sums_over_the_pixels_of_nchw_rows_are_upcast_along_the_rows(tmp_path):
    # A BatchNorm backward's sums over (N, H, W) of NCHW tensors, with a per-(image, channel) term (a mean-pool's
    # gradient) and a per-channel one: only those two loads move by one element from channel to channel, and only
    # outside the loop over a channel's H·W pixels. upcast_global had upcast the channels by 32 (each lane then
    # gathered its pixels from another row, 16 floats apart); the rows are left to UPCAST_REDUCE, whose vector
    # reads a row of pixels (three of MobileNet's r_128_32_4_4 alone: 23-26 -> 11-13 us). A matmul keeps its
    # UPCAST_GLOBAL. Values against PyTorch.
    script = tmp_path / "k.py"
    script.write_text(
        "import numpy as np\nimport torch\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n"
        "for s in ((32, 128, 4, 4), (32, 64, 8, 8)):\n"
        "    g, x = rng.standard_normal(s).astype(np.float32), rng.standard_normal(s).astype(np.float32)\n"
        "    p = rng.standard_normal(s[:2] + (1, 1)).astype(np.float32)\n"
        "    c = rng.standard_normal((1, s[1], 1, 1)).astype(np.float32)\n"
        "    got = ((Tensor(g) + Tensor(p)) * (Tensor(x) < 0).where(0, Tensor(x)) * Tensor(c)).sum((0, 2, 3)).numpy()\n"
        "    tg, tx, tp, tc = (torch.from_numpy(a).double() for a in (g, x, p, c))\n"
        "    want = ((tg + tp) * torch.where(tx < 0, 0.0, tx) * tc).sum((0, 2, 3)).numpy()\n"
        "    assert np.allclose(got, want, rtol=1e-4, atol=1e-4), np.abs(got - want).max()\n"
        "a, b = (Tensor(rng.standard_normal((64, 64)).astype(np.float32)).realize() for _ in range(2))\n"
        "(a @ b).realize()\n")
    out = run_cli_out(script, tmp_path / "out")
    applied = {k["name"]: k["actions"]["applied"] for k in json.loads((out / "kernels.json").read_text())["kernels"]}
    for name in ("r_128_32_4_4", "r_64_32_8_8"):
        assert not any(a.startswith("UPCAST_GLOBAL") for a in applied[name]), applied
        assert any(a.startswith("UPCAST_REDUCE") for a in applied[name]), applied
    assert any(a.startswith("UPCAST_GLOBAL") for a in applied["r_64_64_64"]), applied
