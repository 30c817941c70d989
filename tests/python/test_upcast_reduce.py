# The upcast_reduce pass (engine/src/opt/upcast_reduce.cpp) copies a reduce loop's body U times with the loop
# index i replaced by i·U + u, u = 0..U-1, and then rebuilds the kernel through the IR builder (simplify), so
# that every copy's address is one base shared by the U copies plus the constant u. That is what gcc's
# vectorizer needs to see U neighbouring loads: a window read as x[base + (o + k)] (the weight gradient of a
# convolution summed along its output rows o, k the tap) had kept each copy's o + k apart, and gcc compiled
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
    assert len(re.findall(r"float acc\d+ = 0\.0f;", src)) == 16, src  # 16 partial sums
    # the input x (2·1·3·36 = 216 floats) is data2; its 16 loads in the body of the unrolled loop
    x_slot = re.search(r"const float\* restrict (data\d+),\s*/\* input, 216 elements", src).group(1)
    indices = re.findall(rf"= {x_slot}\[(v\d+)\];", src)
    assert len(indices) == 16, src
    definitions = dict(re.findall(r"int (v\d+) = \((.*)\);", src))
    offsets = {}
    for v in indices:
        m = re.fullmatch(r"(v\d+) \+ (\d+)", definitions.get(v, ""))
        offsets[v] = (m.group(1), int(m.group(2))) if m else (v, 0)
    bases = {base for base, _ in offsets.values()}
    assert len(bases) == 1, offsets  # one base for the 16 copies ...
    assert sorted(c for _, c in offsets.values()) == list(range(16)), offsets  # ... plus 0..15


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
