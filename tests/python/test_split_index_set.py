# Issue 13: the split_index_set pass (engine/src/opt/split_index_set.cpp). A concatenation — forward, or
# the gradient of a chunk / split, as in a transformer's qkv projection — reads each output element from
# one input chosen by comparing the loop index with constants. On C the innermost loop runs as one loop
# per range, and the simplify pass folds every comparison: the generated code has no masked loads left.
# Checked on the IR tensorscope-cli writes and against NumPy / PyTorch; TENSORSCOPE_DISABLE_PASSES turns
# the pass off to show the masked form it replaces.
import json
import os
import subprocess
import sys

import numpy as np
import torch

from tensorscope import Tensor
from test_conv_backward import run_cli_out


def _final_ir(tmp_path, body, env=None):
    """{kernel name: the IR after the last pass} of `body` run by tensorscope-cli."""
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n" + body)
    out = run_cli_out(script, tmp_path / ("out_masked" if env else "out"), env=env)
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    return {k["name"]: (out / k["ir"]).read_text().split("\n\n")[0] for k in kernels}


def _loops(ir, kind):
    return [line for line in ir.splitlines() if "RANGE.int32" in line and f"; {kind}" in line and "END" not in line]


def _gated_loads(ir):
    """LOADs with a third operand (the gate: a masked load that reads 0 where the gate is false)."""
    return [line for line in ir.splitlines() if "= LOAD." in line and line.count(",") == 2]


CAT = ("a = Tensor(rng.standard_normal((4, 6, 32)).astype(np.float32)).realize()\n"
       "b = Tensor(rng.standard_normal((4, 6, 16)).astype(np.float32)).realize()\n"
       "c = Tensor(rng.standard_normal((4, 6, 48)).astype(np.float32)).realize()\n"
       "a.cat(b, c, dim=-1).realize()\n")


def test_a_concatenation_runs_one_loop_per_input_without_masks(tmp_path):
    ir = _final_ir(tmp_path, CAT)["E_4_6_96"]
    # the 24 rows, and in each row three loops one after another: 32 + 16 + 48 columns
    assert len(_loops(ir, "global")) == 1 and len(_loops(ir, "reduce")) == 3, ir
    assert not _gated_loads(ir), ir
    assert "CMPLT" not in ir and "MAX" not in ir, ir  # the comparisons and the address clamps folded away
    masked = _final_ir(tmp_path, CAT, env={"TENSORSCOPE_DISABLE_PASSES": "split_index_set"})["E_4_6_96"]
    assert len(_loops(masked, "global")) == 2 and len(_gated_loads(masked)) == 3, masked


def test_concatenations_match_numpy():
    rng = np.random.default_rng(1)
    for shapes, dim in [([(4, 6, 32), (4, 6, 16), (4, 6, 48)], -1), ([(3, 5, 7), (3, 5, 1), (3, 5, 2)], 2),
                        ([(2, 3, 4), (2, 5, 4)], 1), ([(17, 9), (17, 1)], 1), ([(7,), (9,)], 0)]:
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        got = Tensor(arrays[0]).cat(*[Tensor(a) for a in arrays[1:]], dim=dim).numpy()
        np.testing.assert_array_equal(got, np.concatenate(arrays, axis=dim))


def test_padding_on_the_inner_axis_matches_numpy():
    # a pad on the last axis compares the loop index with constants on both sides: three ranges
    x = np.random.default_rng(2).standard_normal((5, 3, 10)).astype(np.float32)
    got = Tensor(x).pad((3, 4)).numpy()
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (3, 4))))
    got = (Tensor(x).pad((2, 1)) * 2 + 1).numpy()
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (2, 1))) * 2 + 1)


def test_the_gradient_of_a_chunk_matches_pytorch():
    # the transformer's qkv split: q, k, v of (B, S, 32) each, reshaped to heads; their gradients are
    # concatenated back into the (B, S, 96) gradient
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 12, 96)).astype(np.float32)
    g = [rng.standard_normal((8, 4, 12, 8)).astype(np.float32) for _ in range(3)]
    tx = Tensor(x, requires_grad=True)
    parts = [t.reshape(8, 12, 4, 8).transpose(1, 2) for t in tx.chunk(3, dim=-1)]
    sum((p * Tensor(gi)).sum() for p, gi in zip(parts, g)).backward()
    px = torch.tensor(x, requires_grad=True)
    pparts = [t.reshape(8, 12, 4, 8).transpose(1, 2) for t in px.chunk(3, dim=-1)]
    sum((p * torch.tensor(gi)).sum() for p, gi in zip(pparts, g)).backward()
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_the_interpreter_agrees_with_and_without_the_pass():
    # the same concatenation on INTERP, where the pass also runs (no workgroups), and on C without it
    code = ("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(4)\n"
            "a, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((6, 11)).astype(np.float32)\n"
            "dev = __import__('sys').argv[1]\n"
            "out = Tensor(a, device=dev).cat(Tensor(b, device=dev), dim=1).relu().numpy()\n"
            "assert np.array_equal(out, np.maximum(np.concatenate([a, b], 1), 0)), out\n")
    for dev, env in [("INTERP", {}), ("C", {"TENSORSCOPE_DISABLE_PASSES": "split_index_set"})]:
        r = subprocess.run([sys.executable, "-c", code, dev], env={**os.environ, **env}, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


COL2IM = ("from tensorscope import nn\nc = nn.Conv2d(20, 50, 5)\n"
          "x = Tensor(rng.standard_normal((8, 20, 12, 12)).astype(np.float32), requires_grad=True)\n"
          "g = Tensor(rng.standard_normal((8, 50, 8, 8)).astype(np.float32))\n"
          "(c(x) * g).sum().backward()\n"
          "x.grad.realize()\n")


def test_a_col2im_splits_its_rows_and_its_columns(tmp_path):
    # Caffe's LeNet's second layer (20 -> 50 channels, 5x5 on 12x12, no padding): its input gradient is a
    # matmul and a col2im (ops_nn.cpp), an elementwise kernel that sums the taps reaching each input element.
    # Which taps reach it depends on its row and on its column: both loops are split (9 ranges each), and no
    # load is masked any more. Built channel-major (C_in, N, H, W), the stores run along the batch of a channel.
    irs = _final_ir(tmp_path, COL2IM)
    name = next(n for n in irs if n.startswith("E_20_8_12_12"))
    ir = irs[name]
    assert len(_loops(ir, "global")) == 2 and len(_loops(ir, "reduce")) == 9 + 9 * 9, ir
    assert not _gated_loads(ir) and "CMPLT" not in ir, ir
    # without the pass: the four loops of (C_in, N, H, W), every one of the 25 taps a masked load
    masked = _final_ir(tmp_path, COL2IM, env={"TENSORSCOPE_DISABLE_PASSES": "split_index_set"})[name]
    assert len(_loops(masked, "global")) == 4 and len(_gated_loads(masked)) == 25, masked


def test_col2im_gradients_match_pytorch_on_c_and_interp():
    # the col2im input gradient (each case has the work and the shrink that pick it) against torch: LeNet-5's
    # and Caffe's second layers, a strided and a dilated one; both loops split on C and INTERP
    rng = np.random.default_rng(5)
    for (n, cin, h, cout, k, stride, dilation) in [(8, 20, 12, 50, 5, 1, 1), (2, 6, 14, 16, 5, 1, 1),
                                                   (4, 16, 17, 32, 3, 2, 1), (4, 16, 13, 32, 3, 1, 2)]:
        x = rng.standard_normal((n, cin, h, h)).astype(np.float32)
        w = rng.standard_normal((cout, cin, k, k)).astype(np.float32) * 0.1
        px, pw = torch.tensor(x, requires_grad=True), torch.tensor(w)
        py = torch.nn.functional.conv2d(px, pw, stride=stride, dilation=dilation)
        g = rng.standard_normal(py.shape).astype(np.float32)
        (py * torch.tensor(g)).sum().backward()
        for dev in ("C", "INTERP"):
            tx = Tensor(x, requires_grad=True, device=dev)
            ty = tx.conv2d(Tensor(w, device=dev), stride=stride, dilation=dilation)
            (ty * Tensor(g, device=dev)).sum().backward()
            np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"{dev} {x.shape} k{k} s{stride} d{dilation}")


PADDED_TILE = ("a = Tensor(rng.standard_normal((10, 100)).astype(np.float32)).realize()\n"
               "b = Tensor(rng.standard_normal((100, 100)).astype(np.float32)).realize()\n"
               "(a @ b).realize()\n")


def test_a_padded_register_tile_runs_its_whole_blocks_unmasked(tmp_path):
    # (10, 100) @ (100, 100): PADTO pads the 100 columns to 112, the register tile takes 10 rows x 16 columns,
    # and the 7 blocks of 16 columns gate their loads of b and their stores with 16·j0 + c < 100. Split at
    # j0 = 6: 6 blocks without a gate, then one whose 4 real lanes are all it computes (10 + 4 loads).
    ir = _final_ir(tmp_path, PADDED_TILE)["r_10_100_100"]
    assert not _gated_loads(ir) and "CMPLT" not in ir, ir
    assert ir.count("= LOAD.") == (10 + 16) + (10 + 4), ir
    assert ir.count("STORE ") == 10 * 16 + 10 * 4, ir
    masked = _final_ir(tmp_path, PADDED_TILE, env={"TENSORSCOPE_DISABLE_PASSES": "split_index_set"})["r_10_100_100"]
    assert len(_gated_loads(masked)) == 12, masked  # the 12 lanes past column 100 - 16·6 = 4


def test_padded_tiles_match_numpy_on_c_and_interp():
    # tiles whose last block of columns is partly padding, with an epilogue (bias, ReLU) and a transposed operand
    rng = np.random.default_rng(6)
    for m, k, n in [(10, 100, 100), (10, 64, 500), (8, 84, 10), (5, 120, 84), (3, 33, 300), (10, 100, 17)]:
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        bias = rng.standard_normal(n).astype(np.float32)
        want = np.maximum(a @ b + bias, 0)
        for dev in ("C", "INTERP"):
            got = (Tensor(a, device=dev) @ Tensor(b, device=dev) + Tensor(bias, device=dev)).relu().numpy()
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{dev} {m}x{k}x{n}")
            got = (Tensor(np.ascontiguousarray(a.T), device=dev).T @ Tensor(b, device=dev)).numpy()
            np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4, err_msg=f"{dev} transposed {m}x{k}x{n}")
