# Issue 13: the coalesce_short_rows pass (engine/src/opt/coalesce_short_rows.cpp). The elementwise loop over a
# row of 3 to 15 elements (not a power of two) runs over several rows at once as one loop (8 of 12, 16 of 11), the values each row
# computes first (its max) spread out into a DEFINE_LOCAL array. Checked on the IR and C source tensorscope-cli
# writes (which kernels get it, which do not), against PyTorch on C and INTERP (where the pass runs too), and
# against the same run with the pass turned off (bit for bit: the pass moves work, it changes no arithmetic).
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from ops_helper import devices
from tensorscope import Tensor
from test_conv_backward import run_cli_out
from test_rows_as_lanes import _final_ir

SHAPES = ("q, k, v = (Tensor(rng.standard_normal((32, 4, 12, 8)).astype(np.float32), requires_grad=True)"
          " for _ in range(3))\n"
          "q.scaled_dot_product_attention(k, v, is_causal=True).sum().backward()\n"
          "Tensor.realize(q.grad, k.grad, v.grad)\n"                                  # r_32_4_12_12_12 x2: rows of 12
          "x = Tensor(rng.standard_normal((64, 10)).astype(np.float32))\n"
          "(x - x.max(1, keepdim=True)).exp().realize()\n"                             # r_64_10_10: rows of 10
          "y = Tensor(rng.standard_normal((64, 8)).astype(np.float32))\n"
          "(y - y.max(1, keepdim=True)).exp().realize()\n"                             # r_64_8_8: a whole vector
          "z = Tensor(rng.standard_normal((6, 12)).astype(np.float32))\n"
          "(z - z.max(1, keepdim=True)).exp().realize()\n"                             # r_6_12_12: 4 does not divide 6
          "t = Tensor(rng.standard_normal((12, 64)).astype(np.float32))\n"
          "(t.T.contiguous() * 3.0).realize()\n")                                      # E_64_12: a transposed read


def _kernels(tmp_path, body):
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n" + body)
    out = run_cli_out(script, tmp_path / "src")
    return out, json.loads((out / "kernels.json").read_text())["kernels"]


def test_short_rows_run_several_rows_per_loop(tmp_path):
    ir = _final_ir(tmp_path, SHAPES)
    assert len(ir["r_32_4_12_12_12"]) == 2, sorted(ir)  # the softmax's exponentials and its backward
    for text in ir["r_32_4_12_12_12"]:
        assert "DEFINE_LOCAL.float32 [96]" in text and "; local" in text, text  # 8 rows of 12 side by side
    (rows_of_10,) = ir["r_64_10_10"]
    assert "DEFINE_LOCAL.float32 [80]" in rows_of_10, rows_of_10  # 8 rows of 10: five 16-lane vectors
    for name in ("r_64_8_8", "r_6_12_12", "E_64_12"):
        assert ir[name] and not any("DEFINE_LOCAL" in text for text in ir[name]), ir[name]


def test_the_rows_max_is_combined_in_vector_registers_and_the_pass_is_visible(tmp_path):
    out, kernels = _kernels(tmp_path, SHAPES)
    softmax = [k for k in kernels if k["name"] == "r_32_4_12_12_12"]
    assert softmax and all(any(p["pass"] == "coalesce_short_rows" for p in k["ir_passes"]) for k in softmax)
    forward = (out / softmax[0]["sources"]["C"]).read_text()
    # the row max's 4 partial maxima combined by ts_v4_hmax (no branch on the data), the row's exponentials in
    # one loop over the 8 rows' 96 elements
    assert "ts_v4_hmax(vacc" in forward and "< 96;" in forward, forward
    assert (out / softmax[0]["sources"]["OpenCL C"]).read_text()  # the other renderers take the IR too


@devices
@pytest.mark.parametrize("length", [3, 5, 6, 7, 10, 11, 12, 13, 15])
def test_softmax_and_log_softmax_over_short_rows_match_pytorch(length, dev):
    rng = np.random.default_rng(length)
    x = rng.standard_normal((2, 48, length)).astype(np.float32) * 4
    x[0, 3, 1] = -np.inf   # a masked key
    x[1, 5, :] = -np.inf   # a row masked whole: NaN in both
    x[1, 7, 2] = np.nan    # a NaN stays in its row
    t = torch.tensor(x)
    np.testing.assert_allclose(Tensor(x, device=dev).softmax(-1).numpy(), t.softmax(-1).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(Tensor(x, device=dev).log_softmax(-1).numpy(), t.log_softmax(-1).numpy(), rtol=1e-5,
                               atol=1e-5)
    ints = rng.integers(-50, 50, (64, length)).astype(np.int32)
    ti = torch.tensor(ints)
    got = (Tensor(ints, device=dev) - Tensor(ints, device=dev).max(1, keepdim=True)).numpy()
    np.testing.assert_array_equal(got, (ti - ti.max(1, keepdim=True).values).numpy())


@devices
@pytest.mark.parametrize("classes", [10, 11])
def test_cross_entropy_and_attention_gradients_match_pytorch(classes, dev):
    rng = np.random.default_rng(classes)
    logits = rng.standard_normal((128, classes)).astype(np.float32)
    labels = rng.integers(0, classes, 128).astype(np.int32)
    ours = Tensor(logits, device=dev, requires_grad=True)
    ours.sparse_categorical_crossentropy(Tensor(labels, device=dev), label_smoothing=0.1).backward()
    theirs = torch.tensor(logits, requires_grad=True)
    torch.nn.functional.cross_entropy(theirs, torch.tensor(labels).long(), label_smoothing=0.1).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-5, atol=1e-6)
    qkv = [rng.standard_normal((4, 2, 12, 8)).astype(np.float32) for _ in range(3)]
    ts = [Tensor(a, device=dev, requires_grad=True) for a in qkv]
    th = [torch.tensor(a, requires_grad=True) for a in qkv]
    ts[0].scaled_dot_product_attention(ts[1], ts[2], is_causal=True).square().sum().backward()
    _attention(*th).square().sum().backward()
    for a, b in zip(ts, th):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-5)


def _attention(q, k, v):
    """PyTorch's math path of scaled_dot_product_attention with is_causal=True (torch 1.13 has no such function)."""
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    mask = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
    return s.masked_fill(~mask, float("-inf")).softmax(-1) @ v


def test_the_pass_changes_no_result():
    code = ("import numpy as np, sys\nfrom tensorscope import Tensor\nrng = np.random.default_rng(3)\n"
            "x = rng.standard_normal((96, 12)).astype(np.float32) * 3\nx[4, 7:] = -np.inf\n"
            "w = Tensor(rng.standard_normal((96, 12)).astype(np.float32))\n"
            "p = Tensor(x, requires_grad=True)\n(p.softmax(-1) * w).sum().backward()\n"
            "np.save(sys.argv[1], np.stack([p.softmax(-1).numpy(), p.grad.numpy(), Tensor(x).log_softmax(-1).numpy()]))\n")
    results = []
    for i, env in enumerate([{}, {"TENSORSCOPE_DISABLE_PASSES": "coalesce_short_rows"}]):
        path = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ts_coalesce_{os.getpid()}_{i}.npy")
        r = subprocess.run([sys.executable, "-c", code, path], env={**os.environ, "TENSORSCOPE_DEVICE": "C", **env},
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        results.append(np.load(path))
        os.remove(path)
    np.testing.assert_array_equal(results[0], results[1])
