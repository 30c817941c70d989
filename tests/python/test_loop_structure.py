# Issue 13: loop structures the passes give kernels that no matmul heuristic was written for, checked on
# the generated code (the IR header's applied actions, the loops in the IR) and against NumPy/PyTorch:
#  - a reduce over adjacent axes that every view reads contiguously is one loop (lower.cpp merges them),
#    so UPCAST_REDUCE vectorizes it (a BatchNorm's statistics over (N, H, W));
#  - a transposing copy runs in 8x8 tiles that the C renderer transposes in registers (transpose_tile.cpp);
#  - on C, a matmul-like reduction followed by GELU stores the matmul: the epilogue gets its own kernel;
#  - a max over outputs upcast side by side keeps its float selects (no integer keys) and propagates NaN;
#  - attention's q @ kᵀ copies kᵀ contiguously first; a causal softmax's exp2(-inf) is an exact +0.
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from tensorscope import Tensor, GlobalCounters, nn
from ops_helper import check
from test_conv_backward import run_cli_out


def _kernels(tmp_path, body, listing=lambda k: k["ir"]):
    """{kernel name: its IR listing (or the file `listing` names)} of `body` run by tensorscope-cli."""
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n" + body)
    out = run_cli_out(script, tmp_path / "out")
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    return {k["name"]: (out / listing(k)).read_text() for k in kernels}


def _reduce_loops(ir):
    return [line for line in ir.splitlines() if "RANGE" in line and "; reduce" in line and "END" not in line]


def test_batchnorm_statistics_reduce_over_h_w_in_one_loop(tmp_path):
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((64, 8, 8, 8)).astype(np.float32))\n"
                            "x.sum(axis=(0, 2, 3)).realize()\n")
    (name, text), = [(n, t) for n, t in ir.items() if n.startswith("r_")]
    assert len(_reduce_loops(text.split("\n\n")[0])) == 2, text  # (N) and (H·W): 64 and 64, not 64, 8, 8
    assert "UPCAST_REDUCE" in text.splitlines()[0], text.splitlines()[0]
    x = np.random.default_rng(1).standard_normal((64, 8, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(Tensor(x).sum(axis=(0, 2, 3)).numpy(), x.sum(axis=(0, 2, 3)), rtol=1e-5, atol=1e-4)


def _global_loops(ir):
    """The trip counts of the global loops of an IR listing, outermost first."""
    body = ir.split("\n\n")[0]
    bounds = {line.split("= CONST.int32 ")[0].strip(): line.split("= CONST.int32 ")[1] for line in body.splitlines() if "= CONST.int32 " in line}
    return [bounds[line.split("RANGE.int32 ")[1].split()[0]] for line in body.splitlines() if "RANGE.int32" in line and "; global" in line]


def _the_kernel(ir, prefix):
    """(IR header line, IR listing) of the one kernel whose name starts with `prefix`."""
    (name,) = [n for n in ir if n.startswith(prefix)]
    return ir[name].splitlines()[0], ir[name].split("\n\n")[0]


def test_a_transposing_copy_runs_in_8x8_tiles_transposed_in_registers(tmp_path):
    # w.T.contiguous() (a Linear's weight packed for the matmul that reads it): TRANSPOSE_TILE on C; both sides
    # divide by 16, so blocks of 16 x 16 (four 8x8 tiles), the output's rows outside (16 at a time: 512 / 16 = 32
    # blocks), a loop along them inside (256 / 16 = 16); the C source writes each tile as one ts_transpose_8x8 call
    # (vector loads, shuffles, vector stores), no element by element copy
    ir = _kernels(tmp_path, "w = Tensor(rng.standard_normal((256, 512)).astype(np.float32)).realize()\n"
                            "w.T.contiguous().realize()\n"
                            "v = Tensor(rng.standard_normal((32, 784)).astype(np.float32)).realize()\n"
                            "v.T.contiguous().realize()\n")
    for name, loops in [("E_512_256", ["32", "16"]), ("E_784_32", ["49", "2"])]:
        assert "TRANSPOSE_TILE(8)" in ir[name].splitlines()[0], ir[name].splitlines()[0]
        assert "UPCAST" not in ir[name].splitlines()[0], ir[name].splitlines()[0]
        assert _global_loops(ir[name]) == loops, ir[name]
        body = ir[name].split("\n\n")[0]
        assert len([line for line in body.splitlines() if line.strip().startswith("STORE")]) == 4 * 64, body
    c = _kernels(tmp_path, "w = Tensor(rng.standard_normal((256, 512)).astype(np.float32)).realize()\n"
                           "w.T.contiguous().realize()\n", listing=lambda k: k["sources"]["C"])["E_512_256"]
    kernel = c[c.index("static void E_512_256_kernel"):]
    assert kernel.count("ts_transpose_8x8(data1 + ") == 4 and "data1[" not in kernel, kernel
    for shape in [(256, 512), (48, 1024), (16, 2048), (40, 512), (32, 784), (300, 784), (13, 27), (9, 8)]:
        a = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(Tensor(a).T.contiguous().numpy(), a.T)


def test_a_max_pool_after_a_bias_add_reads_its_rows_as_vectors(tmp_path):
    # A convolution's output + bias, max-pooled 2x2 (Caffe's LeNet: (64, 20, 24, 24) -> (64, 20, 12, 12)): each
    # output row of 12 is upcast 8 + 4, each lane reading every other element of the input row plus the bias. The
    # 8 lanes are one vector expression, ts_v8_max(acc, ts_v8_load2(row) + bias) (c_renderer.cpp, RowExpr's rows
    # of stride 2), where gcc had packed the scalar lanes with a compare per lane: 363 -> 136 us alone. The
    # backward counts each window's maxima, sum(float(x + b == m)), as one too (a CAST of a mask: 248 -> 214 us).
    # Values (NaN included: torch's max_pool2d propagates it) and gradients against PyTorch.
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n"
                      "x = Tensor(rng.standard_normal((4, 3, 24, 24)).astype(np.float32), requires_grad=True)\n"
                      "b = Tensor(rng.standard_normal((3, 1, 1)).astype(np.float32)).realize()\n"
                      "(x + b).max_pool2d(2).sum().backward()\n"
                      "x.grad.realize()\n")
    out = run_cli_out(script, tmp_path / "out")
    kernels = [(out / k["sources"]["C"]).read_text() for k in json.loads((out / "kernels.json").read_text())["kernels"]
               if k["name"] == "r_4_3_12_12_2_2"]  # the forward's max and the backward's count of maxima
    kernels = [k[k.index("static void r_4_3_12_12_2_2_kernel"):] for k in kernels]
    assert len(kernels) == 2, kernels
    assert any("= ts_v8_max(vacc" in k and "ts_v8_load2(data" in k for k in kernels), kernels
    assert any("ts_v8_where(((ts_m8)((ts_v8_load2(data" in k for k in kernels), kernels
    rng = np.random.default_rng(9)
    for shape in [(4, 3, 24, 24), (2, 5, 32, 32), (2, 3, 20, 18)]:
        x = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal((shape[1], 1, 1)).astype(np.float32)
        x[1, 1, 4:6, 6:8] = 0.5  # a window of ties: PyTorch's gradient picks one, this engine's (tinygrad's) splits
        xt, xr = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        got, want = (xt + Tensor(b)).max_pool2d(2), torch.nn.functional.max_pool2d(xr + torch.tensor(b), 2)
        np.testing.assert_array_equal(got.numpy(), want.detach().numpy())
        (got * got).sum().backward()
        (want * want).sum().backward()
        g, ref = xt.grad.numpy(), xr.grad.numpy()
        np.testing.assert_allclose(g[1, 1, 4:6, 6:8].sum(), ref[1, 1, 4:6, 6:8].sum(), rtol=1e-6)
        g[1, 1, 4:6, 6:8] = ref[1, 1, 4:6, 6:8] = 0
        np.testing.assert_allclose(g, ref, rtol=1e-6)
        x[0, 0, 3, 5] = np.nan  # the forward propagates it, as torch's max_pool2d does
        nan = torch.nn.functional.max_pool2d(torch.tensor(x) + torch.tensor(b), 2).numpy()
        np.testing.assert_array_equal((Tensor(x) + Tensor(b)).max_pool2d(2).numpy(), nan)


def test_a_transposing_copy_into_long_output_rows_writes_them_in_order(tmp_path):
    # An MLP's (100, 300) weight as the padded (300, 128) Wᵀ its matmul reads: output rows of 128 floats (64 or
    # more: whole lines), so the output's rows go outside though 300 divides by neither 16 nor 8 (transpose_tile.cpp,
    # rows_first): 37 trips of 8 output rows, 16 tiles of 8 input rows inside each (the padded rows 100..127 read
    # as zeros), then the last 4 output rows element by element (a tail of 4 rows by 128). The same weight
    # unpadded, (300, 100): 12 tiles a trip and the last 4 input rows by 8 output rows element by element, then
    # the 4 rows' tail. Short output rows keep the input's rows outside (E_4096_50 in the test below).
    ir = _kernels(tmp_path, "w = Tensor(rng.standard_normal((100, 300)).astype(np.float32)).realize()\n"
                            "w.pad(((0, 28), (0, 0))).T.contiguous().realize()\n"
                            "w.T.contiguous().realize()\n")
    assert _global_loops(ir["E_300_128"]) == ["37", "16", "4", "128"], ir["E_300_128"]
    assert _global_loops(ir["E_300_100"]) == ["37", "12", "4", "8", "4", "100"], ir["E_300_100"]
    for name in ["E_300_128", "E_300_100"]:
        assert "TRANSPOSE_TILE(8)" in ir[name].splitlines()[0], ir[name].splitlines()[0]
    w = np.random.default_rng(7).standard_normal((100, 300)).astype(np.float32)
    np.testing.assert_array_equal(Tensor(w).pad(((0, 28), (0, 0))).T.contiguous().numpy(), np.pad(w, ((0, 28), (0, 0))).T)
    for shape in [(100, 300), (64, 9), (65, 17), (300, 50), (200, 321)]:
        a = np.random.default_rng(8).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(Tensor(a).T.contiguous().numpy(), a.T)
    # The tail rows are a loop after the tiles, at the top level: asked for two threads (a plan for every kernel,
    # as BEAM tries THREADS=2), such a kernel still runs on one (c_device.cpp, split_rows), so that no two threads
    # each copy the tail whole; one without a tail, 8 dividing its 304 output rows, takes the two.
    script = tmp_path / "threads.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\n"
                      "w = np.arange(30000, dtype=np.float32).reshape(100, 300)\n"
                      "assert (Tensor(w).T.contiguous().numpy() == w.T).all()\n"
                      "v = np.arange(30400, dtype=np.float32).reshape(100, 304)\n"
                      "assert (Tensor(v).T.contiguous().numpy() == v.T).all()\n")
    out = run_cli_out(script, tmp_path / "threads", env={"TENSORSCOPE_OPTS": "THREADS=2", "TENSORSCOPE_THREADS": "2"})
    heads = {k["name"]: (out / k["ir"]).read_text().splitlines()[0].split("; plan:")[0]  # the applied actions
             for k in json.loads((out / "kernels.json").read_text())["kernels"]}
    assert "TRANSPOSE_TILE(8)" in heads["E_300_100"] and "THREADS" not in heads["E_300_100"], heads
    assert "TRANSPOSE_TILE(8)" in heads["E_304_100"] and "THREADS(2)" in heads["E_304_100"], heads


def test_a_transposing_copy_with_rows_8_does_not_divide_tiles_along_the_other_axis(tmp_path):
    # (50, 4096) -> (4096, 50): the input's 50 rows take no 8-row tiles; its 4096 columns do: blocks of 16
    # columns outside, six tiles of 8 rows inside, and the last 2 rows element by element (a tail loop of 2
    # rows by 16 columns). A padded Wᵀ (the head of a 10-class classifier, rows 10..15 zeros) keeps its tiles,
    # the padded rows read as zeros.
    ir = _kernels(tmp_path, "g = Tensor(rng.standard_normal((50, 4096)).astype(np.float32)).realize()\n"
                            "g.T.contiguous().realize()\n"
                            "h = Tensor(rng.standard_normal((10, 256)).astype(np.float32)).realize()\n"
                            "h.pad(((0, 6), (0, 0))).T.contiguous().realize()\n")
    assert "TRANSPOSE_TILE(8)" in ir["E_4096_50"].splitlines()[0], ir["E_4096_50"].splitlines()[0]
    assert _global_loops(ir["E_4096_50"]) == ["256", "6", "2", "16"], ir["E_4096_50"]
    assert "TRANSPOSE_TILE(8)" in ir["E_256_16"].splitlines()[0], ir["E_256_16"].splitlines()[0]
    for shape in [(50, 4096), (20, 36864), (11, 48)]:
        a = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(Tensor(a).T.contiguous().numpy(), a.T)
    h = np.random.default_rng(6).standard_normal((10, 256)).astype(np.float32)
    np.testing.assert_array_equal(Tensor(h).pad(((0, 6), (0, 0))).T.contiguous().numpy(), np.pad(h, ((0, 6), (0, 0))).T)


def test_a_transposing_copy_with_a_bias_and_relu_copies_in_tiles_then_applies_them_in_place(tmp_path):
    # A convolution computed as a matmul stores its output NHWC, (N·OH·OW, C_out); the bias and ReLU fuse into the
    # copy to NCHW, whose loads lie C_out floats apart: gcc left it scalar (LeNet-5's second convolution, (32·100,
    # 16) -> (32, 16, 10, 10): 0.115 ms in its training step). TRANSPOSE_TILE copies the loaded elements in 8x8
    # tiles unchanged, then a second loop nest reads the output back in place, contiguous, and applies the bias and
    # ReLU (44 -> 8 us alone on Zen 3). Inside the batch loop both: the threads split it. Values against PyTorch,
    # on this CPU's own target too. (At stride 2, the same output: LeNet-5's own shape, stride 1, is a flat-row
    # convolution since the forty-fourth session, which stores NCHW.)
    body = ("x = Tensor(rng.standard_normal((32, 6, 24, 24)).astype(np.float32))\n"
            "w = Tensor(rng.standard_normal((16, 6, 5, 5)).astype(np.float32))\n"
            "b = Tensor(rng.standard_normal(16).astype(np.float32))\n"
            "x.conv2d(w, b, stride=2).relu().realize()\n")
    ir = _kernels(tmp_path, body)
    name = "E_32_16_10_10"
    head = ir[name].splitlines()[0]
    assert "TRANSPOSE_TILE(8)" in head, head
    listing = ir[name].split("\n\n")[0]
    stores = [line for line in listing.splitlines() if line.strip().startswith("STORE")]
    assert len(stores) == 128 + 1 + 1, len(stores)  # two tiles' 64 each, the tail's (4 rows left by 96), the second nest's
    assert stores[-1].split()[-1] not in {line.split()[0] for line in listing.splitlines() if " LOAD" in line}, stores[-1]
    rng = np.random.default_rng(2)
    for shape, cout in [((32, 6, 14, 14), 16), ((4, 3, 12, 12), 24), ((2, 5, 9, 9), 8)]:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((cout, shape[1], 5, 5)).astype(np.float32)
        b = rng.standard_normal(cout).astype(np.float32)
        got = Tensor(x).conv2d(Tensor(w), Tensor(b)).relu().numpy()
        want = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b))).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_transposing_copy_that_computes_into_rows_of_one_vector_is_not_tiled(tmp_path):
    # MobileNet's last pointwise convolution, 64 -> 128 channels on 4x4 feature maps, is a channels-last matmul whose
    # NHWC output goes to NCHW through BatchNorm's (y - mean) * scale and ReLU. Each output row, a channel's 16
    # positions, is one AVX-512 vector: gathered 128 floats apart and computed once, 10 us in place; copied in tiles,
    # read back and stored again, 27 us (the fifty-sixth session's Xeon). With AVX2's 8 lanes the row is two vectors,
    # and the tiles stay (not measured there). A copy that also reads a whole NCHW tensor along the output's rows
    # (times y below; the backward's ReLU mask and BatchNorm gradient) keeps them too: untiled, gcc gathered that
    # tensor along the channels as well (0.14 against 0.04 ms in MobileNet's step). Values against PyTorch.
    body = ("x = Tensor(rng.standard_normal((32, 64, 4, 4)).astype(np.float32))\n"
            "w = Tensor(rng.standard_normal((128, 64, 1, 1)).astype(np.float32))\n"
            "m = Tensor(rng.standard_normal((1, 128, 1, 1)).astype(np.float32))\n"
            "s = Tensor(rng.standard_normal((1, 128, 1, 1)).astype(np.float32))\n"
            "y = Tensor(rng.standard_normal((32, 128, 4, 4)).astype(np.float32)).realize()\n")

    def applied(last_line, vector_bytes):
        script = tmp_path / f"k{vector_bytes}{len(last_line)}.py"
        script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n" + body + last_line)
        out = run_cli_out(script, tmp_path / f"out{vector_bytes}{len(last_line)}", env={"TENSORSCOPE_VECTOR_BYTES": vector_bytes})
        (k,) = [k for k in json.loads((out / "kernels.json").read_text())["kernels"] if k["name"] == "E_32_128_4_4"]
        return k["actions"]["applied"]

    forward, backward = "((x.conv2d(w) - m) * s).relu().realize()\n", "(((x.conv2d(w) - m) * s).relu() * y).realize()\n"
    assert not any(a.startswith("TRANSPOSE_TILE") for a in applied(forward, "64")), applied(forward, "64")
    assert "TRANSPOSE_TILE(8)" in applied(forward, "32"), applied(forward, "32")
    assert "TRANSPOSE_TILE(8)" in applied(backward, "64"), applied(backward, "64")
    rng = np.random.default_rng(3)
    x, w = rng.standard_normal((32, 64, 4, 4)).astype(np.float32), rng.standard_normal((128, 64, 1, 1)).astype(np.float32)
    m, sc = rng.standard_normal((1, 128, 1, 1)).astype(np.float32), rng.standard_normal((1, 128, 1, 1)).astype(np.float32)
    got = ((Tensor(x).conv2d(Tensor(w)) - Tensor(m)) * Tensor(sc)).relu().numpy()
    want = torch.relu((torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w)) - torch.from_numpy(m)) *
                      torch.from_numpy(sc)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_a_convolutions_merged_reduce_over_channels_and_taps_runs_as_nested_loops(tmp_path):
    # delinearize_reduce: LeNet-5's first convolution, 3 -> 6 channels, 5x5, is register-tiled over one reduce
    # loop of 75 (channels x taps, merged so that the tile has one loop); the input is read at k / 25, k / 5 % 5
    # and k % 5, a division per axis in every step of k. After the tiling the loop runs as three nested loops
    # (3, 5, 5) and no division or modulo is left in the kernel (420 -> 263 us alone on Zen 3). Values and
    # gradients against PyTorch.
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((32, 3, 32, 32)).astype(np.float32))\n"
                            "w = Tensor(rng.standard_normal((6, 3, 5, 5)).astype(np.float32))\n"
                            "x.conv2d(w).realize()\n")
    (name,) = [n for n in ir if n.startswith("r_") and n.endswith("_75")]
    head, listing = ir[name].splitlines()[0], ir[name].split("\n\n")[0]
    assert "REGISTER_TILE" in head, head
    assert len(_reduce_loops(listing)) == 3, _reduce_loops(listing)
    assert " IDIV" not in listing and " MOD" not in listing, listing
    rng = np.random.default_rng(4)
    for shape, cout, k in [((32, 3, 32, 32), 6, 5), ((4, 5, 13, 11), 8, 3), ((2, 2, 9, 9), 16, 5)]:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((cout, shape[1], k, k)).astype(np.float32)
        g = rng.standard_normal((shape[0], cout, shape[2] - k + 1, shape[3] - k + 1)).astype(np.float32)
        tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
        y = tx.conv2d(tw)
        y.backward(Tensor(g))
        px, pw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()
        py = torch.nn.functional.conv2d(px, pw)
        py.backward(torch.from_numpy(g))
        for got, want in ((y, py), (tx.grad, px.grad), (tw.grad, pw.grad)):
            np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-3)


def test_a_copy_of_heads_back_into_rows_runs_as_nested_loops_without_divisions(tmp_path):
    # delinearize_reduce on an elementwise kernel: attention's heads (B, H, T, D) copied back into rows (B, T, H·D)
    # loop over H·D = 128 in one loop and read the input at j / 32 · 1024 + j % 32. The loop runs as (4, 32)
    # instead, the copy is contiguous in its inner loop and the C compiler vectorizes it (16 x 4 x 32 x 32 alone:
    # 0.065 -> 0.016 ms). The same in a concatenation of three such pieces (the gradient of a qkv projection's
    # output, d128's E_16_32_384: split_index_set's loop per piece starts its index at 128 or 256, which the
    # division folds: 0.16 -> 0.044 ms in the training step). The outermost loop, which the threads split, stays
    # as it is. Values against NumPy.
    ir = _kernels(tmp_path, "h = [Tensor(rng.standard_normal((16, 4, 32, 32)).astype(np.float32)).realize() for _ in range(3)]\n"
                            "rows = [t.permute(0, 2, 1, 3).reshape(16, 32, 128) for t in h]\n"
                            "rows[0].contiguous().realize()\n"
                            "Tensor.cat(*rows, dim=-1).realize()\n")
    for name, pieces in [("E_16_32_128", 1), ("E_16_32_384", 3)]:
        listing = ir[name].split("\n\n")[0]
        assert " IDIV" not in listing and " MOD" not in listing, listing
        loops = [line.split("RANGE.int32 ")[1] for line in listing.splitlines() if "RANGE.int32" in line]
        assert len(loops) == 2 + 2 * pieces, loops  # (16, 32), then (4, 32) per piece
    rng = np.random.default_rng(5)
    h = [rng.standard_normal((16, 4, 32, 32)).astype(np.float32) for _ in range(3)]
    rows = [t.transpose(0, 2, 1, 3).reshape(16, 32, 128) for t in h]
    np.testing.assert_array_equal(Tensor(h[0]).permute(0, 2, 1, 3).reshape(16, 32, 128).numpy(), rows[0])
    got = Tensor.cat(*[Tensor(t).permute(0, 2, 1, 3).reshape(16, 32, 128) for t in h], dim=-1).numpy()
    np.testing.assert_array_equal(got, np.concatenate(rows, axis=-1))
    # an odd split whose divisor does not divide the piece's offset (rows of 5 x 3 placed after 7 columns) keeps
    # its division and its values
    a = rng.standard_normal((6, 3, 5)).astype(np.float32)
    b = rng.standard_normal((6, 7)).astype(np.float32)
    got = Tensor.cat(Tensor(b), Tensor(a).permute(0, 2, 1).reshape(6, 15), dim=-1).numpy()
    np.testing.assert_array_equal(got, np.concatenate([b, a.transpose(0, 2, 1).reshape(6, 15)], axis=-1))


def test_a_weight_packed_into_panels_transposes_each_panel_in_8x8_tiles(tmp_path):
    # Tensor::matmul_packed: W (N, K) of a Linear, read as Wᵀ, is copied into panels (N/NR, K, NR), each panel a
    # transpose of NR of W's rows; the panels' loop is a batch loop around the two the tiles take (TRANSPOSE_TILE
    # with the panel's offset a constant per tile). NR is 32 on this target (AVX-512's: run_cli_out); (640, 784):
    # 20 panels. A padded W (1000 rows to 1024) is not tiled: its gate, panel · 32 + lane < 1000, depends on the
    # batch loop (split_index_set splits the panels' loop instead). Values checked against NumPy on this CPU's
    # own target, padded ones among them.
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((128, 784)).astype(np.float32))\n"
                            "w = Tensor(rng.standard_normal((640, 784)).astype(np.float32))\n"
                            "(x @ w.T).realize()\n")
    assert "TRANSPOSE_TILE(8)" in ir["E_20_784_32"].splitlines()[0], ir["E_20_784_32"].splitlines()[0]
    assert _global_loops(ir["E_20_784_32"])[0] == "20", ir["E_20_784_32"]  # the panels' loop stays outermost
    rng = np.random.default_rng(8)
    for (m, k, n) in [(128, 784, 640), (128, 400, 1000), (128, 1024, 300), (64, 200, 1000)]:
        x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32)
        got = (Tensor(x) @ Tensor(w).T).numpy()
        np.testing.assert_allclose(got, x.astype(np.float64) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_gelu_after_a_matmul_runs_in_its_own_kernel():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((384, 32)).astype(np.float32), rng.standard_normal((32, 128)).astype(np.float32)
    GlobalCounters.reset()
    # the C device's rule (schedule.cpp); named, so that TENSORSCOPE_DEVICE=CUDA:0 runs of this file still test C
    y = (Tensor(x, device="C") @ Tensor(w, device="C")).gelu().numpy()
    assert GlobalCounters.kernel_count == 2  # the register-tiled matmul, then the vectorized GELU
    ref = torch.nn.functional.gelu(torch.from_numpy(x) @ torch.from_numpy(w), approximate="tanh").numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5)
    GlobalCounters.reset()
    (Tensor(x, device="C") @ Tensor(w, device="C")).relu().numpy()  # no transcendental: the epilogue stays fused
    assert GlobalCounters.kernel_count == 1


def test_max_over_upcast_outputs_propagates_nan_without_integer_keys(tmp_path):
    # a max whose neighbouring outputs are upcast side by side (channels last): the float select stays
    # (max_reduce_as_int leaves such kernels alone) and a NaN anywhere in a window still wins, as in torch
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((64, 2, 2, 16)).astype(np.float32))\n"
                            "x.max(axis=(1, 2)).realize()\n")
    (text,) = [t for n, t in ir.items() if n.startswith("r_")]
    assert "UPCAST_GLOBAL(16)" in text.splitlines()[0] and "BITCAST" not in text, text.splitlines()[0]
    x = np.random.default_rng(5).standard_normal((64, 2, 2, 16)).astype(np.float32)
    x[3, 1, 0, 5] = np.nan
    x[7, :, :, 2] = -np.inf
    ref = torch.from_numpy(x).amax(dim=(1, 2)).numpy()
    np.testing.assert_array_equal(Tensor(x).max(axis=(1, 2)).numpy(), ref)


def test_row_max_uses_integer_keys_only_for_long_rows(tmp_path):
    # max_reduce_as_int: a 4096-long row max runs on integer keys (vectorized integer max); a 12-long one
    # (attention's scores) keeps its float selects, which the upcast accumulators vectorize. NaN wins in both.
    ir = _kernels(tmp_path, "a = Tensor(rng.standard_normal((64, 4096)).astype(np.float32))\n"
                            "a.max(axis=1).realize()\n"
                            "b = Tensor(rng.standard_normal((1536, 12)).astype(np.float32))\n"
                            "b.max(axis=1).realize()\n")
    assert "BITCAST" in ir["r_64_4096"], ir["r_64_4096"].splitlines()[0]
    assert "BITCAST" not in ir["r_1536_12"] and "UPCAST_REDUCE" in ir["r_1536_12"].splitlines()[0], ir["r_1536_12"]
    for shape in [(64, 4096), (1536, 12)]:
        x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
        x[5, 3] = np.nan
        x[9, :] = -np.inf
        np.testing.assert_array_equal(Tensor(x).max(axis=1).numpy(), torch.from_numpy(x).amax(dim=1).numpy())


def _div_mods(ir):
    body = ir.split("\n\n")[0]
    return sum(1 for line in body.splitlines() if "= IDIV." in line or "= MOD." in line)


def test_a_padded_view_of_a_reshape_indexes_like_the_view_itself(tmp_path):
    # A concatenation's gradient (attention's q, k, v split from one projection): each input is a permuted
    # and reshaped view, then padded into its place. Its position is computed from the index clamped to the
    # padding's mask and shifted back to 0 (lower.cpp), so the unflatten below needs no more div/mod than
    # the same view without the padding (was: six per load, through the padding's offset). Compared as
    # lowered (the plain view's 32-long row is upcast later, which folds its divisions away).
    view = "x.reshape(32, 12, 4, 8).permute(0, 1, 2, 3).reshape(32, 4, 12, 8).permute(0, 2, 1, 3).reshape(32, 12, 32)"
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((32, 12, 32)).astype(np.float32)).realize()\n"
                            f"({view} + 1).realize()\n"
                            f"({view}.pad(((0, 0), (0, 0), (64, 0))) + 1).realize()\n",
                  listing=lambda k: next(p["file"] for p in k["ir_passes"] if p["pass"] == "lower"))
    plain, padded = ir["E_32_12_32"], ir["E_32_12_96"]
    assert _div_mods(padded) <= _div_mods(plain), (plain, padded)
    x = np.random.default_rng(4).standard_normal((32, 12, 32)).astype(np.float32)
    want = np.pad(x.reshape(32, 4, 12, 8).transpose(0, 2, 1, 3).reshape(32, 12, 32), ((0, 0), (0, 0), (64, 0))) + 1
    t = Tensor(x)
    got = (t.reshape(32, 4, 12, 8).permute(0, 2, 1, 3).reshape(32, 12, 32).pad(((0, 0), (0, 0), (64, 0))) + 1).numpy()
    np.testing.assert_array_equal(got, want)


def test_upcast_lanes_share_one_base_index(tmp_path):
    # ir::Builder adds a constant offset last: the 32 lanes of a register tile's panel load are base + c,
    # not (a + c) + b with a loop-invariant a + c per lane (which gcc did not see as contiguous loads)
    ir = _kernels(tmp_path, "a = Tensor(rng.standard_normal((1024, 1024)).astype(np.float32)).realize()\n"
                            "b = Tensor(rng.standard_normal((1024, 1024)).astype(np.float32)).realize()\n"
                            "(a @ b).realize()\n")
    body = ir["r_1024_1024_1024"].split("\n\n")[0]
    reduce_start = next(i for i, line in enumerate(body.splitlines()) if "; reduce" in line and "RANGE" in line)
    invariant = body.splitlines()[:reduce_start]
    # before the reduce loop: no per-lane "ADD %x, CONST" offsets for the panel (32 of them before)
    lane_offsets = [line for line in invariant if "= ADD.int32" in line and "CONST" not in line]
    assert len(lane_offsets) < 16, "\n".join(invariant)


def test_a_transposing_copy_keeps_no_more_lanes_than_the_l1_keeps_apart(tmp_path):
    # w (1024, 256) -> wᵀ: output rows 4 KiB apart all fall into one 8-way L1 set; 8x8 tiles (TRANSPOSE_TILE)
    # evicted each other's lines there (115 us against 56), so upcast_global's tiling takes it: 16 lanes, a
    # line of outputs side by side. w (256, 1024) -> wᵀ, output rows 1 KiB apart, gets the 8x8 tiles (its
    # upcast took 8 lanes, since its reads 4 KiB apart would share a set; 16 evicted each other: 0.16 ms
    # against 0.05 ms on Zen 4). (32, 1024, 16) -> (32, 16, 1024) (three loops, no tiles): its lanes read
    # lines side by side, all 16 of them
    ir = _kernels(tmp_path, "w = Tensor(rng.standard_normal((1024, 256)).astype(np.float32)).realize()\n"
                            "w.T.contiguous().realize()\n"
                            "u = Tensor(rng.standard_normal((256, 1024)).astype(np.float32)).realize()\n"
                            "u.T.contiguous().realize()\n"
                            "x = Tensor(rng.standard_normal((32, 1024, 16)).astype(np.float32)).realize()\n"
                            "x.permute(0, 2, 1).contiguous().realize()\n")
    assert "UPCAST_GLOBAL(16)" in ir["E_256_1024"].splitlines()[0], ir["E_256_1024"].splitlines()[0]
    assert "TRANSPOSE_TILE" not in ir["E_256_1024"].splitlines()[0], ir["E_256_1024"].splitlines()[0]
    assert "TRANSPOSE_TILE(8)" in ir["E_1024_256"].splitlines()[0], ir["E_1024_256"].splitlines()[0]
    assert "UPCAST_GLOBAL(16)" in ir["E_32_16_1024"].splitlines()[0], ir["E_32_16_1024"].splitlines()[0]
    for shape in [(1024, 256), (256, 1024)]:
        w = np.random.default_rng(4).standard_normal(shape).astype(np.float32)
        np.testing.assert_array_equal(Tensor(w).T.contiguous().numpy(), w.T)
    x = np.random.default_rng(5).standard_normal((32, 1024, 16)).astype(np.float32)
    np.testing.assert_array_equal(Tensor(x).permute(0, 2, 1).contiguous().numpy(), x.transpose(0, 2, 1))


def test_attention_scores_copy_k_transposed_into_rows_of_n():
    # q @ kᵀ with a batch of small matrices (samples/transformer_tiny.py: 12×12 scores over K = 8 per head):
    # on C, kᵀ is copied contiguously first (copies_transposed_w), so the scores kernel reads N values per
    # step of K from one row; a plain (non-transposed) batched w is used as it is.
    rng = np.random.default_rng(5)
    q, k = (rng.standard_normal((32, 4, 12, 8)).astype(np.float32) for _ in range(2))
    GlobalCounters.reset()
    scores = (Tensor(q, device="C") @ Tensor(k, device="C").transpose(-1, -2)).numpy()
    assert GlobalCounters.kernel_count == 2  # the copy of kᵀ, then the scores (C only: the device is named)
    np.testing.assert_allclose(scores, q @ k.transpose(0, 1, 3, 2), rtol=1e-5, atol=1e-5)
    kt = np.ascontiguousarray(k.transpose(0, 1, 3, 2))
    GlobalCounters.reset()
    (Tensor(q, device="C") @ Tensor(kt, device="C")).numpy()
    assert GlobalCounters.kernel_count == 1
    # and the gradients through the copy, against PyTorch
    tq, tk = torch.from_numpy(q).requires_grad_(), torch.from_numpy(k).requires_grad_()
    (tq @ tk.transpose(-1, -2)).square().sum().backward()
    xq, xk = Tensor(q, requires_grad=True), Tensor(k, requires_grad=True)
    (xq @ xk.transpose(-1, -2)).square().sum().backward()
    np.testing.assert_allclose(xq.grad.numpy(), tq.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(xk.grad.numpy(), tk.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_softmax_with_a_causal_mask_gives_exact_zeros():
    # exp2 of x < -151 (here -inf, a causal mask) is +0 without going through the arithmetic (ts_exp2f);
    # the rows still sum to 1 and match PyTorch
    x = np.random.default_rng(6).standard_normal((64, 12, 12)).astype(np.float32)
    mask = np.triu(np.ones((12, 12), dtype=bool), 1)
    x[:, mask] = -np.inf
    x[:, 0, 0] = -200.0  # finite, but 2^(-200·log2 e) rounds to 0 too (with the row's max subtracted)
    y = Tensor(x).softmax(-1).numpy()
    ref = torch.from_numpy(x).softmax(-1).numpy()
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-7)
    assert (y[:, mask] == 0).all() and not np.signbit(y[:, mask]).any()
    np.testing.assert_allclose(Tensor(np.array([-151.5, -151.0, -149.0, -126.5, -np.inf], np.float32)).exp2().numpy(),
                               np.exp2(np.array([-151.5, -151.0, -149.0, -126.5, -np.inf], np.float32)),
                               rtol=3e-7, atol=3e-45)  # ts_exp2f's bound: 2 ulp, subnormals too


def test_a_bool_shared_by_an_upcast_group_is_selected_on_not_masked(tmp_path):
    # An embedding as one-hot @ E (tinygrad's, and this engine's, way): every lane of the register tile selects
    # E[v, j] by the same loaded onehot[t, v]. The C renderer writes that WHERE as `c ? a : b`, which gcc
    # vectorizes (the bit mask made from a 1-byte load kept the tile scalar, 10x slower); a bool mask loaded per
    # lane over a matmul's outputs keeps the mask form, which vectorizes there.
    src = _kernels(tmp_path, "from tensorscope import nn\n"
                            "emb = nn.Embedding(11, 32)\n"
                            "idx = Tensor(rng.integers(0, 11, (32, 12)).astype(np.int32))\n"
                            "emb(idx).realize()\n"
                            "x = Tensor(rng.standard_normal((128, 64)).astype(np.float32)).realize()\n"
                            "w = Tensor(rng.standard_normal((64, 128)).astype(np.float32)).realize()\n"
                            "m = Tensor(rng.random((128, 128)) > 0.5).realize()\n"
                            "m.where(x @ w, 0.0).realize()\n", listing=lambda k: k["sources"]["C"])
    (embedding,) = [c for n, c in src.items() if n.startswith("r_32_12_32_11")]
    assert " ? " in embedding and "ts_where_f32(" not in embedding.split("static void ")[-1], embedding[-3000:]
    (masked,) = [c for n, c in src.items() if n.startswith("r_128_128_64")]
    assert "ts_where_f32(" in masked.split("static void ")[-1], masked[-3000:]
    rng = np.random.default_rng(7)
    table = rng.standard_normal((11, 32)).astype(np.float32)
    idx = rng.integers(0, 11, (32, 12)).astype(np.int32)
    from tensorscope import nn
    emb = nn.Embedding(11, 32)
    emb.weight = Tensor(table)
    np.testing.assert_array_equal(emb(Tensor(idx)).numpy(), table[idx])


def test_an_upcast_group_stored_strided_is_staged_and_its_max_is_branch_free(tmp_path):
    # A max-pool reading an NHWC activation (a conv's matmul output) and writing NCHW: the reduce is upcast over
    # the 16 channels (contiguous in the input), whose outputs lie 4 apart. gcc's SLP vectorizes a group only
    # from stores side by side, so the C renderer stages the lanes in an array and writes them with a loop; the
    # group's MAX is the bit-mask ts_fmaxf_lanes (the branchy NaN check keeps it scalar). NaN and -inf as torch.
    body = ("x = rng.standard_normal((64, 4, 4, 16)).astype(np.float32)\n"
            "s = rng.standard_normal(16).astype(np.float32)\n"
            "y = (Tensor(x).permute(0, 3, 1, 2) * Tensor(s).reshape(1, 16, 1, 1)).relu().max_pool2d(kernel_size=(2, 2))\n"
            "y.realize()\n")
    src = _kernels(tmp_path, body, listing=lambda k: k["sources"]["C"])
    (pool,) = [c for n, c in src.items() if n.startswith("r_64_16_2_2_2_2")]
    code = pool.split("static void ")[-1]
    assert "_Pragma(\"GCC unroll 1\") for (int ts_l = 0; ts_l < 16; ts_l++)" in code and "+ 4 * ts_l" in code, code[-2500:]
    assert "ts_fmaxf_lanes(" in code and "ts_fmaxf(" not in code, code[-2500:]
    import torch
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 4, 4, 16)).astype(np.float32)
    x[0, 0, 0, 3] = np.nan
    x[1, :2, :2, 5] = -np.inf
    s = rng.standard_normal(16).astype(np.float32)
    y = (Tensor(x).permute(0, 3, 1, 2) * Tensor(s).reshape(1, 16, 1, 1)).relu().max_pool2d(kernel_size=(2, 2))
    ref = torch.nn.functional.max_pool2d(
        (torch.from_numpy(x).permute(0, 3, 1, 2) * torch.from_numpy(s).reshape(1, 16, 1, 1)).relu(), 2)
    np.testing.assert_array_equal(y.numpy(), ref.numpy())


def test_a_max_pools_lane_that_no_vector_takes_is_a_select(tmp_path):
    # A 2x2 max-pool into rows of 5 (LeNet-5's second pool, 10x10 -> 5x5) upcasts each row as a vector of 4 lanes and
    # 1 left over, and a row of 7 as 4 and 3. gcc's SLP packs two scalar lanes into a vector, not a lone one, which
    # the bit-mask ts_fmaxf_lanes kept a chain of integer compares and masks per tap (24.9 us for the pool of
    # (32, 16, 10, 10) alone on Zen 5): such a lane is the select ts_fmaxf (8.5 us; c_renderer.cpp,
    # unpaired_max_lane), a pair stays in the mask form. Values, NaN and -inf included, and gradients against PyTorch.
    body = ("Tensor(rng.standard_normal((4, 3, 10, 10)).astype(np.float32)).max_pool2d(kernel_size=(2, 2)).realize()\n"
            "Tensor(rng.standard_normal((4, 3, 14, 14)).astype(np.float32)).max_pool2d(kernel_size=(2, 2)).realize()\n")
    src = _kernels(tmp_path, body, listing=lambda k: k["sources"]["C"])
    five = src["r_4_3_5_5_2_2"].split("static void ")[-1]
    seven = src["r_4_3_7_7_2_2"].split("static void ")[-1]
    assert "ts_v4_max(vacc" in five and five.count("ts_fmaxf(acc") == 1 and "ts_fmaxf_lanes(" not in five, five
    assert seven.count("ts_fmaxf(acc") == 1 and seven.count("ts_fmaxf_lanes(acc") == 2, seven
    rng = np.random.default_rng(5)
    for shape in [(4, 3, 10, 10), (4, 3, 14, 14), (2, 5, 18, 10)]:
        x = rng.standard_normal(shape).astype(np.float32)
        x[0, 0, 0, 8] = np.nan  # in the last column's window: the lane no vector takes
        x[1, 1, 2:4, 8:10] = -np.inf
        x[1, 2, 4:6, 4:6] = 0.25  # ties
        got = Tensor(x).max_pool2d(kernel_size=(2, 2))
        want = torch.nn.functional.max_pool2d(torch.from_numpy(x), 2)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        x = rng.standard_normal(shape).astype(np.float32)  # no ties: PyTorch's gradient picks one, tinygrad's splits
        xt, xr = Tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
        xt.max_pool2d(kernel_size=(2, 2)).square().sum().backward()
        torch.nn.functional.max_pool2d(xr, 2).square().sum().backward()
        np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-6)


def test_a_few_short_rows_are_kept_scalar_and_compact(tmp_path):
    # The loss's x + b - max(x + b) over rows of 10 classes: gcc vectorized its loop over the rows (16 rows a vector,
    # each element gathered across them, remainders for the thread's bounds), 6.5 KB of machine code that a training
    # step fetches from memory each time (3-6 us in the step against 0.16 us warm); kept scalar it is 655 bytes
    # (c_renderer.cpp, is_few_short_rows). Not for 512 rows (slower scalar when warm), nor for rows with an
    # exponential (the vectorizer takes 16 rows' at once). Values and gradients against PyTorch.
    body = ("for n in (32, 512):\n"
            "    x = Tensor(rng.standard_normal((n, 16)).astype(np.float32))\n"
            "    z = x[:, :10] + Tensor(rng.standard_normal(10).astype(np.float32))\n"
            "    (z - z.max(axis=1, keepdim=True)).realize()\n"
            "Tensor(rng.standard_normal((32, 10)).astype(np.float32)).softmax().realize()\n")
    src = _kernels(tmp_path, body, listing=lambda k: k["sources"]["C"])
    scalar = '__attribute__((optimize("no-tree-loop-vectorize")))\n__attribute__((noinline))\nstatic void '
    assert scalar + "r_32_10_10_kernel(" in src["r_32_10_10"], src["r_32_10_10"][-2000:]
    assert "no-tree-loop-vectorize" not in src["r_512_10_10"], src["r_512_10_10"][-2000:]
    softmax = [n for n in src if n not in ("r_32_10_10", "r_512_10_10") and "ts_exp2f(" in src[n].split("static void ")[-1]]
    assert softmax and not any("no-tree-loop-vectorize" in src[n] for n in softmax), {n: src[n][-1500:] for n in src}
    rng = np.random.default_rng(3)
    logits = rng.standard_normal((32, 10)).astype(np.float32)
    logits[0, 3], logits[1, :] = np.nan, -np.inf
    y = rng.integers(0, 10, 32).astype(np.int32)
    bias = rng.standard_normal(10).astype(np.float32)
    z = Tensor(logits) + Tensor(bias)
    zr = torch.from_numpy(logits) + torch.from_numpy(bias)
    np.testing.assert_array_equal((z - z.max(axis=1, keepdim=True)).numpy(), (zr - zr.amax(1, keepdim=True)).numpy())
    xt, xr = Tensor(logits[2:], requires_grad=True), torch.tensor(logits[2:], requires_grad=True)
    loss = xt.sparse_categorical_crossentropy(Tensor(y[2:]))
    loss.backward()
    want = torch.nn.functional.cross_entropy(xr, torch.from_numpy(y[2:]).long())
    want.backward()
    np.testing.assert_allclose(loss.numpy(), want.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(xt.grad.numpy(), xr.grad.numpy(), rtol=1e-5, atol=1e-7)


def test_a_max_pool_gradient_upcasts_its_divided_row(tmp_path):
    # The gradient of a 2x2 max-pool writes (N, C, H, W) and reads the pooled values at (h / 2, w / 2): gcc
    # cannot analyse that load and left the row scalar. Its innermost loop (W = 8) is upcast completely, every
    # lane's w / 2 is a constant, and no division is left in the row (h / 2 stays, once a row); the bool compare reaches float through
    # int (gcc's SLP packs no conversion from _Bool). Gradient against PyTorch, ties included.
    body = ("x = Tensor(rng.standard_normal((64, 8, 8, 8)).astype(np.float32), requires_grad=True)\n"
            "x.relu().max_pool2d(kernel_size=(2, 2)).square().sum().backward()\n"
            "x.grad.realize()\n")
    ir = _kernels(tmp_path, body)
    (tmp_path / "src").mkdir()
    src = _kernels(tmp_path / "src", body, listing=lambda k: k["sources"]["C"])
    (grad,) = [n for n in ir if n.startswith("E_64_8_8_8") and "; opts: UPCAST_GLOBAL(8)" in ir[n].splitlines()[0]]
    code = src[grad].split("static void ")[-1]
    assert code.count(" / 2)") == 1 and "(float)(int)" in code, code[-3000:]  # h / 2 once per row, no w / 2
    import torch
    x = np.random.default_rng(5).standard_normal((64, 8, 8, 8)).astype(np.float32)
    x[:, :, ::2, :] = np.abs(x[:, :, ::2, :])
    x[0, 0, 0, 0] = x[0, 0, 0, 1] = 2.0  # a tie: PyTorch's max_pool2d picks one; this engine's max reduce (tinygrad's) splits
    t = Tensor(x, requires_grad=True)
    t.relu().max_pool2d(kernel_size=(2, 2)).square().sum().backward()
    r = torch.from_numpy(x).requires_grad_()
    torch.nn.functional.max_pool2d(r.relu(), 2).square().sum().backward()
    g, ref = t.grad.numpy(), r.grad.numpy()
    np.testing.assert_allclose(g[1:], ref[1:], rtol=1e-6)
    np.testing.assert_allclose(g[0, 0, 0, :2].sum(), ref[0, 0, 0, :2].sum(), rtol=1e-6)


def test_a_max_pool_gradient_over_rows_of_24_runs_its_row_as_nested_loops(tmp_path):
    # A row that becomes (Q >= 6, g <= 4) loops is not upcast (upcast_global's kLoopRowMinOuter, kLoopRowMaxGroup):
    # delinearize_reduce runs the rows as (12, 2) and each row as (12, 2), so that no division is left and gcc's
    # loop vectorizer takes the 12 pooled columns with their two lanes as an interleaved group (Caffe's LeNet's
    # 64 x 20 x 24 x 24: 0.81 -> 0.29 ms alone). Gradient against PyTorch, ties included.
    body = ("x = Tensor(rng.standard_normal((64, 20, 24, 24)).astype(np.float32), requires_grad=True)\n"
            "x.relu().max_pool2d(kernel_size=(2, 2)).square().sum().backward()\n"
            "x.grad.realize()\n")
    ir = _kernels(tmp_path, body)
    head, listing = _the_kernel(ir, "E_64_20_24_24")
    assert "UPCAST" not in head, head
    assert " IDIV" not in listing and " MOD" not in listing, listing
    loops = [line.split("RANGE.int32 ")[1].split()[0] for line in listing.splitlines() if "RANGE.int32" in line]
    bounds = {line.split("= CONST.int32 ")[0].strip(): line.split("= CONST.int32 ")[1] for line in listing.splitlines()
              if "= CONST.int32 " in line}
    assert [bounds[v] for v in loops[-4:]] == ["12", "2", "12", "2"], [bounds[v] for v in loops]
    for shape in [(4, 3, 24, 24), (2, 5, 12, 20), (3, 2, 16, 10)]:
        x = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
        x[0, 0, 0, 0] = x[0, 0, 0, 1] = 2.0  # a tie: this engine splits the gradient between the two (tinygrad's)
        t = Tensor(x, requires_grad=True)
        t.relu().max_pool2d(kernel_size=(2, 2)).square().sum().backward()
        r = torch.from_numpy(x).requires_grad_()
        torch.nn.functional.max_pool2d(r.relu(), 2).square().sum().backward()
        g, ref = t.grad.numpy(), r.grad.numpy()
        np.testing.assert_allclose(g[1:], ref[1:], rtol=1e-6)
        np.testing.assert_allclose(g[0, 1:], ref[0, 1:], rtol=1e-6)
        np.testing.assert_allclose(g[0, 0, 0, :2].sum(), ref[0, 0, 0, :2].sum(), rtol=1e-6)
        np.testing.assert_allclose(g[0, 0, 0, 2:], ref[0, 0, 0, 2:], rtol=1e-6)
        np.testing.assert_allclose(g[0, 0, 1:], ref[0, 0, 1:], rtol=1e-6)


def test_a_max_pool_gradient_into_widened_rows_runs_its_row_as_nested_loops(tmp_path):
    # LeNet-5's first layer (3 -> 6 channels 5x5 on 32x32) takes widened rows: its weight gradient reads g padded
    # from rows of 28 to 32 and stored (N, OH, C_out, 32), written by the ReLU's and the max-pool's gradient. That
    # row of 32 is divided by 2, 28, 56 and 784 until split_index_set splits it at 28 and simplify folds the pad's
    # clamps; upcast_global tries those passes on a copy, finds no division left in the row, and leaves it to
    # delinearize_reduce (E_32_28_6_32 in the step: 0.21 -> 0.065 ms). Weight gradient against PyTorch.
    body = ("x = Tensor(rng.standard_normal((32, 3, 32, 32)).astype(np.float32))\n"
            "w = Tensor(rng.standard_normal((6, 3, 5, 5)).astype(np.float32), requires_grad=True)\n"
            "x.conv2d(w).relu().max_pool2d(kernel_size=(2, 2)).square().sum().backward()\n"
            "w.grad.realize()\n")
    ir = _kernels(tmp_path, body)
    head, listing = _the_kernel(ir, "E_32_28_6_32")
    assert "UPCAST" not in head, head
    assert " IDIV" not in listing and " MOD" not in listing, listing
    rng = np.random.default_rng(7)
    x = rng.standard_normal((32, 3, 32, 32)).astype(np.float32)
    w = rng.standard_normal((6, 3, 5, 5)).astype(np.float32)
    t = Tensor(w, requires_grad=True)
    Tensor(x).conv2d(t).relu().max_pool2d(kernel_size=(2, 2)).square().sum().backward()
    r = torch.from_numpy(w).requires_grad_()
    torch.nn.functional.max_pool2d(torch.nn.functional.conv2d(torch.from_numpy(x), r).relu(), 2).square().sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-2)


def test_an_im2col_whose_taps_split_into_rows_of_5_stays_upcast(tmp_path):
    # The other side of upcast_global's kLoopRowMinOuter / kLoopRowMaxGroup: Caffe's LeNet's first layer (1 -> 20
    # channels 5x5 on 28x28) copies its windows with the 25 taps padded to 32 for its weight gradient; the taps'
    # t / 5, t % 5 would split the row into loops of 5 x 5, too short for the loop vectorizer (0.28 ms upcast, 0.76
    # as loops, in the step). The row stays upcast and no division is left in it. Weight gradient against PyTorch.
    body = ("x = Tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))\n"
            "w = Tensor(rng.standard_normal((20, 1, 5, 5)).astype(np.float32), requires_grad=True)\n"
            "x.conv2d(w).relu().sum().backward()\n"
            "w.grad.realize()\n")
    ir = _kernels(tmp_path, body)
    head, listing = _the_kernel(ir, "E_64_24_24_32")
    assert "UPCAST_GLOBAL(32)" in head, head
    assert " IDIV" not in listing and " MOD" not in listing, listing
    rng = np.random.default_rng(8)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    w = rng.standard_normal((20, 1, 5, 5)).astype(np.float32)
    t = Tensor(w, requires_grad=True)
    Tensor(x).conv2d(t).relu().sum().backward()
    r = torch.from_numpy(w).requires_grad_()
    torch.nn.functional.conv2d(torch.from_numpy(x), r).relu().sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), r.grad.numpy(), rtol=1e-4, atol=1e-2)


def test_a_kernel_left_to_the_loop_vectorizer_selects_with_a_plain_select(tmp_path):
    # A float WHERE is a bit mask in upcast kernels (for gcc's SLP) and a plain select elsewhere: gcc's loop
    # vectorizer left a BatchNorm-like scale + ReLU written from NHWC to NCHW scalar with the mask (23 us; 2.6 as
    # a select). ReLU keeps NaN as PyTorch does.
    body = ("x = Tensor(rng.standard_normal((64, 4, 4, 16)).astype(np.float32))\n"
            "s = Tensor(rng.standard_normal(16).astype(np.float32))\n"
            "(x * s).permute(0, 3, 1, 2).relu().contiguous().realize()\n")
    src = _kernels(tmp_path, body, listing=lambda k: k["sources"]["C"])
    (code,) = [c.split("static void ")[-1] for n, c in src.items() if n.startswith("E_")]
    assert "ts_select_f32(" in code and "ts_where_f32(" not in code, code
    import torch
    rng = np.random.default_rng(8)
    x = rng.standard_normal((64, 4, 4, 16)).astype(np.float32)
    x[3, 1, 2, 5] = np.nan
    s = rng.standard_normal(16).astype(np.float32)
    got = (Tensor(x) * Tensor(s)).permute(0, 3, 1, 2).relu().numpy()
    np.testing.assert_array_equal(got, (torch.from_numpy(x) * torch.from_numpy(s)).permute(0, 3, 1, 2).relu().numpy())


def test_a_short_row_is_padded_to_16_and_upcast_by_8(tmp_path):
    # Rows of 9 to 15 outputs (attention's 12 keys, a 10-class layer) are padded to 16 and upcast by 8 by default
    # (padto.cpp: q @ kT 26.7 -> 13.4 us); a row of 8 or 16 needs no padding. Values against NumPy, the padded
    # lanes masked off (nothing written past the row).
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((128, 64)).astype(np.float32)).realize()\n"
                            "for n in (10, 12, 14, 16):\n"
                            "    (x @ Tensor(rng.standard_normal((64, n)).astype(np.float32))).realize()\n")
    for n in (10, 12, 14):
        head = ir[f"r_128_{n}_64"].splitlines()[0]
        assert "PADTO(8)" in head and "UPCAST_GLOBAL(8)" in head, head
    assert "PADTO" not in ir["r_128_16_64"].splitlines()[0], ir["r_128_16_64"].splitlines()[0]
    rng = np.random.default_rng(9)
    x = rng.standard_normal((128, 64)).astype(np.float32)
    for n in (10, 12, 14):
        w = rng.standard_normal((64, n)).astype(np.float32)
        np.testing.assert_allclose((Tensor(x) @ Tensor(w)).numpy(), x @ w, rtol=1e-5, atol=1e-5)
    q, k = (rng.standard_normal((32, 4, 12, 8)).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose((Tensor(q) @ Tensor(k).transpose(-1, -2)).numpy(), q @ k.transpose(0, 1, 3, 2),
                               rtol=1e-5, atol=1e-5)


def test_a_short_reduce_keeps_four_trips_of_its_upcast_loop(tmp_path):
    # Dot products of K = 32 for 11 outputs per row (the transformer sample's classifier head before matmul
    # copied such a head padded to 16 columns; written here as the product and sum): each output's partial sums
    # are combined by U - 1 scalar adds after the loop, so 16 accumulators need at least 4 trips: U = 8 for
    # K = 32 (head 19.3 -> 10.8 us), 16 for K = 64; a streaming sum still takes 64. Values vs NumPy.
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((384, 32)).astype(np.float32)).realize()\n"
                            "w = Tensor(rng.standard_normal((11, 32)).astype(np.float32)).realize()\n"
                            "(x.reshape(384, 1, 32) * w.reshape(1, 11, 32)).sum(-1).realize()\n"
                            "y = Tensor(rng.standard_normal((384, 64)).astype(np.float32)).realize()\n"
                            "v = Tensor(rng.standard_normal((11, 64)).astype(np.float32)).realize()\n"
                            "(y.reshape(384, 1, 64) * v.reshape(1, 11, 64)).sum(-1).realize()\n"
                            "Tensor(rng.standard_normal(1 << 16).astype(np.float32)).sum().realize()\n")
    assert "UPCAST_REDUCE(8)" in ir["r_384_11_32"].splitlines()[0], ir["r_384_11_32"].splitlines()[0]
    assert "UPCAST_REDUCE(16)" in ir["r_384_11_64"].splitlines()[0], ir["r_384_11_64"].splitlines()[0]
    assert "UPCAST_REDUCE(64)" in ir["r_65536"].splitlines()[0], ir["r_65536"].splitlines()[0]
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((384, 32)).astype(np.float32), rng.standard_normal((11, 32)).astype(np.float32)
    np.testing.assert_allclose((Tensor(x) @ Tensor(w).T).numpy(), x @ w.T, rtol=1e-5, atol=1e-5)


def test_a_reduce_that_16_does_not_divide_gets_16_accumulators_and_a_tail_loop(tmp_path):
    # Dot products over K = 84 (LeNet's 10-output layer before matmul copied such a head padded to 16 columns;
    # written here as the product and sum): U = 16 for 5 trips and a tail loop of the last 4 (was U = 4 over 21
    # trips, which gcc turns into in-order vector reductions: 15 -> 4.4 us).
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((64, 84)).astype(np.float32)).realize()\n"
                            "w = Tensor(rng.standard_normal((10, 84)).astype(np.float32)).realize()\n"
                            "(x.reshape(64, 1, 84) * w.reshape(1, 10, 84)).sum(-1).realize()\n")
    text = ir["r_64_10_84"]
    assert "UPCAST_REDUCE(16)" in text.splitlines()[0], text.splitlines()[0]
    assert len(_reduce_loops(text)) == 2, _reduce_loops(text)  # the 5 trips of 16, then the tail of 4


@pytest.mark.parametrize("device", ["C", "INTERP"])
@pytest.mark.parametrize("k", [67, 84, 100, 120])
def test_reductions_with_a_tail_loop_match_pytorch(device, k):
    # sums, dot products and NaN-propagating maxes whose reduce loop has a tail (K % 16 != 0, K >= 64);
    # a NaN in the tail wins the max, as in torch
    rng = np.random.default_rng(k)
    x, w = rng.standard_normal((48, k)).astype(np.float32), rng.standard_normal((10, k)).astype(np.float32)
    tx, tw = Tensor(x, device=device), Tensor(w, device=device)
    np.testing.assert_allclose((tx @ tw.T).numpy(), (torch.tensor(x) @ torch.tensor(w).T).numpy(), rtol=1e-5, atol=1e-5)
    e = (tx * 0.5).exp()
    np.testing.assert_allclose(e.sum(axis=1).numpy(), torch.tensor(x * 0.5).exp().sum(1).numpy(), rtol=1e-5)
    x[3, k - 1] = np.nan
    x[5, k - 2] = 100.0
    got = (Tensor(x, device=device) * 2).max(axis=1).numpy()
    np.testing.assert_array_equal(got, (torch.tensor(x) * 2).max(1).values.numpy())
    assert np.isnan(got[3]) and got[5] == 200.0


def test_a_row_count_8_does_not_divide_is_tiled_ten_rows_at_a_time(tmp_path):
    # register_tile.cpp: 8 rows when 8 divides M, else 10 or 9, else the most rows below 8 that divide M. A batch
    # of 100 (the 784-300-100 MLP) and Caffe's 50 and 500 go 10 at a time (five rows: 7 loads for 10
    # multiply-adds), 64 rows 8 at a time, 6 channels 6 at a time. Values against NumPy.
    rng = np.random.default_rng(3)
    shapes = ((100, 784, 320), (50, 500, 64), (64, 96, 64), (6, 75, 256), (18, 40, 32))
    script = "".join(f"x{i} = Tensor(rng.standard_normal(({m}, {k})).astype(np.float32)).realize()\n"
                     f"w{i} = Tensor(rng.standard_normal(({k}, {n})).astype(np.float32)).realize()\n"
                     f"(x{i} @ w{i}).realize()\n" for i, (m, k, n) in enumerate(shapes))
    ir = _kernels(tmp_path, script)
    for (m, k, n), rows in zip(shapes, (10, 10, 8, 6, 9)):
        head = ir[f"r_{m}_{n}_{k}"].splitlines()[0]
        assert f"REGISTER_TILE({rows})" in head, head
        x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        np.testing.assert_allclose((Tensor(x) @ Tensor(w)).numpy(), x @ w, rtol=1e-4, atol=1e-4)


def test_a_matmul_of_odd_width_is_padded_to_16_and_register_tiled(tmp_path):
    # Widths 16 does not divide (LeNet's 120 and 84, 100, 1000) pad to a multiple of 16 in a matmul-like
    # reduce, so REGISTER_TILE applies (padto.cpp: (64, 400) @ 120: 381 -> 88 us); a column sum too, now that
    # split_index_set runs its whole blocks of 16 unmasked (masked it was slower than its plain upcast of 4:
    # 4096 x 100, 91 -> 31 us). Values against NumPy.
    # From 16 rows of x on, the C device copies w once padded with zero columns instead (E_400_128, as a BLAS
    # pads its packed panels; Tensor::matmul) and the tile runs unmasked; below, PADTO masks the extra lanes.
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((64, 400)).astype(np.float32)).realize()\n"
                            "w = Tensor(rng.standard_normal((400, 120)).astype(np.float32)).realize()\n"
                            "(x @ w).realize()\n"
                            "x8 = Tensor(rng.standard_normal((8, 400)).astype(np.float32)).realize()\n"
                            "(x8 @ w).realize()\n"
                            "c = Tensor(rng.standard_normal((4096, 100)).astype(np.float32)).realize()\n"
                            "c.sum(axis=0).realize()\n")
    assert "E_400_128" in ir, sorted(ir)
    head = ir["r_64_128_400"].splitlines()[0]
    assert "PADTO" not in head and "UPCAST_GLOBAL(32)" in head and "REGISTER_TILE(8)" in head, head
    head = ir["r_8_120_400"].splitlines()[0]
    assert "PADTO(16)" in head and "REGISTER_TILE" in head, head
    head = ir["r_100_4096"].splitlines()[0]
    assert "PADTO(16)" in head and "UPCAST_GLOBAL(16)" in head, head
    assert not [line for line in ir["r_100_4096"].splitlines() if "= LOAD." in line and line.count(",") == 2]
    rng = np.random.default_rng(11)
    for rows, n in ((4096, 100), (100, 300), (64, 500), (7, 17)):  # column sums, padded or not
        c = rng.standard_normal((rows, n)).astype(np.float32)
        np.testing.assert_allclose(Tensor(c).sum(axis=0).numpy(), c.sum(axis=0), rtol=1e-4, atol=1e-3)
    for m, k, n in ((64, 400, 120), (64, 120, 84), (33, 50, 100)):
        x, w = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((k, n)).astype(np.float32)
        np.testing.assert_allclose((Tensor(x) @ Tensor(w)).numpy(), x @ w, rtol=1e-4, atol=1e-4)
    # nn.Linear(400, 120) forward and backward (W transposed, bias, the weight gradient) against PyTorch
    x = rng.standard_normal((64, 400)).astype(np.float32)
    W, b = rng.standard_normal((120, 400)).astype(np.float32) * 0.05, rng.standard_normal(120).astype(np.float32)
    tx, tW, tb = (Tensor(a, requires_grad=True) for a in (x, W, b))
    out = (tx @ tW.T + tb).relu()
    out.sum().backward()
    px, pW, pb = (torch.tensor(a, requires_grad=True) for a in (x, W, b))
    ref = (px @ pW.T + pb).relu()
    ref.sum().backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-4)
    for t, p in ((tx, px), (tW, pW), (tb, pb)):
        np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_a_padded_copy_of_w_is_32_wide_for_short_k_and_16_wide_for_long_k(tmp_path):
    # Tensor::matmul's padded copy of an odd-width w (K, N), from 64 columns on: a multiple of 32 (two vectors
    # per register-tile row) for K below 512, of 16 for longer K, where the 32-wide tiles measured 5-38% slower
    # ((64, 1000) @ 1000 -> 1000: 1777 us padded to 1024, 1291 to 1008). Values against NumPy and PyTorch.
    ir = _kernels(tmp_path, "".join(
        f"x{i} = Tensor(rng.standard_normal(({m}, {k})).astype(np.float32)).realize()\n"
        f"w{i} = Tensor(rng.standard_normal(({n}, {k})).astype(np.float32)).realize()\n"
        f"(x{i} @ w{i}.T).realize()\n" for i, (m, k, n) in enumerate(((100, 784, 300), (100, 300, 300), (64, 1000, 1000)))))
    assert {"r_100_304_784", "r_100_320_300", "r_64_1008_1000"} <= set(ir), sorted(ir)
    assert not {"r_100_320_784", "r_64_1024_1000"} & set(ir), sorted(ir)
    rng = np.random.default_rng(12)
    for m, k, n in ((100, 784, 300), (64, 1000, 1000), (20, 520, 70)):
        _linear_relu_matches_pytorch(rng, m, k, n)


def _linear_relu_matches_pytorch(rng, m, k, n):
    """relu(x @ Wᵀ) for x (m, k), W (n, k): the output and both gradients against PyTorch."""
    x, W = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal((n, k)).astype(np.float32) * 0.05
    tx, tW = Tensor(x, requires_grad=True), Tensor(W, requires_grad=True)
    out = (tx @ tW.T).relu()
    out.sum().backward()
    px, pW = torch.tensor(x, requires_grad=True), torch.tensor(W, requires_grad=True)
    ref = (px @ pW.T).relu()
    ref.sum().backward()
    np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(tW.grad.numpy(), pW.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_a_padded_weight_that_is_packed_into_panels_is_copied_once(tmp_path):
    # x @ Wᵀ with W (500, 800) (Caffe's LeNet's first Linear): Wᵀ (800, 500) is padded to 512 columns and
    # packed into panels (16, 800, 32). Both happen in one copy kernel (pad, transpose and panels), not in
    # a padded copy E_800_512 and then the panels (0.43 + 0.17 -> 0.47 ms in the step). Values against PyTorch.
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((64, 800)).astype(np.float32)).realize()\n"
                            "w = Tensor(rng.standard_normal((500, 800)).astype(np.float32)).realize()\n"
                            "(x @ w.T).realize()\n")
    assert sorted(ir) == ["E_16_800_32", "E_64_500", "E_8_800_8", "r_64_512_800"], sorted(ir)
    _linear_relu_matches_pytorch(np.random.default_rng(13), 64, 800, 500)


def test_a_matmul_stored_transposed_stages_every_row_of_its_register_tile(tmp_path):
    # (a @ b).T.contiguous(): the register tile's 32 lanes (columns of a @ b) land 256 floats apart, so each of
    # its 8 rows is staged in a small array and written by a loop (CStyleRenderer::render); rows 1-7 start at
    # base + 1 .. base + 7, which the staging missed before, and gcc then left half the tile scalar (4.7 ms
    # against 0.85 ms now, 0.3 ms for a @ b)
    src = _kernels(tmp_path, "a = Tensor(rng.standard_normal((256, 256)).astype(np.float32)).realize()\n"
                             "b = Tensor(rng.standard_normal((256, 256)).astype(np.float32)).realize()\n"
                             "(a @ b).T.contiguous().realize()\n", listing=lambda k: k["sources"]["C"])
    (code,) = src.values()
    assert code.count("for (int ts_l = 0; ts_l < 32; ts_l++)") == 8, code
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((200, 96)).astype(np.float32), rng.standard_normal((96, 264)).astype(np.float32))
    got = (Tensor(a, device="C") @ Tensor(b, device="C")).T.contiguous().numpy()
    np.testing.assert_allclose(got, (torch.from_numpy(a) @ torch.from_numpy(b)).T.numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cols", [slice(None, None, 2), slice(1, None, 3), slice(None, None, -2)])
def test_a_weight_sliced_with_a_step_is_copied_before_the_matmul(cols):
    # w[:, ::2]: neighbours are apart along both of w's axes, so neither the register tile (N neighbours per
    # step of K) nor the dot form (K neighbours) has a contiguous load and the kernel stayed scalar (256² @
    # w[:, ::2]: 6.8 ms); on C w is copied contiguous first (strided_in_both_axes in ops.cpp), 0.17 ms
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((64, 96)).astype(np.float32), rng.standard_normal((96, 90)).astype(np.float32)
    GlobalCounters.reset()
    got = (Tensor(a, device="C") @ Tensor(b, device="C")[:, cols]).numpy()
    assert GlobalCounters.kernel_count == 2  # the copy, then the register-tiled matmul
    np.testing.assert_allclose(got, a @ b[:, cols], rtol=1e-4, atol=1e-4)
    GlobalCounters.reset()
    (Tensor(a[:, :48], device="C") @ Tensor(b, device="C")[::2]).numpy()  # rows with a step: columns still neighbours
    assert GlobalCounters.kernel_count == 1


def test_a_row_reduction_fused_into_its_row_keeps_the_row_loop_outside(tmp_path):
    # LayerNorm's backward over rows of 256: the row's sums are fused into the kernel that writes the row
    # (is_row_local_expand) and computed once per row because the loop along the row is innermost.
    # reorder_global_loops moved the row loop inside (a per-row value loads with stride 1 along it), and
    # every element recomputed its row's sum: 8.9 ms instead of 0.09 ms.
    ir = _kernels(tmp_path, "from tensorscope import nn\n"
                            "a = Tensor(rng.standard_normal((32, 64, 256)).astype(np.float32), requires_grad=True)\n"
                            "(nn.LayerNorm(256)(a) * a).mean().backward()\n"
                            "a.grad.realize()\n")
    fused = [text for name, text in ir.items() if name == "r_32_64_256_256"]
    assert fused and all(_global_loops(text)[-1] == "256" for text in fused), [_global_loops(t) for t in fused]
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16, 256)).astype(np.float32)
    a = Tensor(x, requires_grad=True)
    (nn.LayerNorm(256)(a) * a).mean().backward()
    p = torch.tensor(x, requires_grad=True)
    (torch.nn.functional.layer_norm(p, (256,)) * p).mean().backward()
    np.testing.assert_allclose(a.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_a_concatenation_gradient_with_a_transposed_part_is_split_not_tiled(tmp_path):
    # x.chunk(3) into q, k, v; the attention's backward leaves k's gradient laid out transposed, so the kernel
    # that writes the three gradients back into x's reads one part across its loop (upcast_transpose's case).
    # Tiled across the three parts, every lane kept its part's mask and gcc left the tile scalar (0.25 ms for
    # (16, 32, 384)); the loop is left to split_index_set, which writes one loop per part (0.11 ms).
    body = ("x = Tensor(rng.standard_normal((16, 32, 384)).astype(np.float32), requires_grad=True)\n"
            "q, k, v = x.chunk(3, dim=-1)\n"
            "((q @ k.transpose(-2, -1)) @ v).sum().backward()\n"
            "x.grad.realize()\n")
    ir = _kernels(tmp_path, body)
    assert "E_16_32_384" in ir and "UPCAST_GLOBAL" not in ir["E_16_32_384"].splitlines()[0], ir.get("E_16_32_384", sorted(ir))
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((4, 8, 48)).astype(np.float32)
    x = Tensor(xv, device="C", requires_grad=True)
    q, k, v = x.chunk(3, dim=-1)
    ((q @ k.transpose(-2, -1)) @ v).sum().backward()
    p = torch.tensor(xv, requires_grad=True)
    pq, pk, pv = p.chunk(3, dim=-1)
    ((pq @ pk.transpose(-2, -1)) @ pv).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_a_weight_packed_in_padded_panels_loses_its_mask_where_every_panel_is_full(tmp_path):
    # x @ Wᵀ with W (500, 800) (Caffe's LeNet's fc layer) packs W in 16 panels of 32 rows, the last holding 20:
    # every load is masked with 32·panel + lane < 500, which no range of lanes alone decides. split_index_set
    # splits the panel loop (the kernel runs on one thread): panels 0-14 are full and unmasked, panel 15 keeps
    # the mask (the masked loop was gcc-scalar: 258 -> 84 us alone).
    body = ("x = Tensor(rng.standard_normal((64, 800)).astype(np.float32)).realize()\n"
            "w = Tensor(rng.standard_normal((500, 800)).astype(np.float32)).realize()\n"
            "(x @ w.T).realize()\n")
    ir = _kernels(tmp_path, body)
    (pack,) = [n for n in ir if n.startswith("E_16_800_32")]
    body_ir = ir[pack].split("\n\n")[0]
    bounds = [line.split("= CONST.int32 ")[1] for line in body_ir.splitlines() if "= CONST.int32 " in line]
    assert "15" in bounds and "1" in bounds, body_ir  # the two ranges of panels
    assert body_ir.count("CMPLT") == 1, body_ir  # only the last panel compares
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((64, 800)).astype(np.float32), rng.standard_normal((500, 800)).astype(np.float32)
    got = (Tensor(x, device="C") @ Tensor(w, device="C").T).numpy()
    np.testing.assert_allclose(got, torch.tensor(x) @ torch.tensor(w).T, rtol=1e-4, atol=1e-3)


def test_bools_loaded_side_by_side_by_the_lanes_are_masks_even_when_the_rows_share_them(tmp_path):
    # out[d, p] = sum over t of (m[t, p] ? g[t, d] : 0), a one-hot's product laid out as the wide transformer's
    # position-embedding gradient (r_128_32_32): the tile's 32 lanes load 32 neighbouring bools m[t, p..p+31]
    # and its 8 register-tile rows select on each of them. The C renderer's vector accumulators read the row of
    # bools as one lane mask (ts_v16_select_bytes: AVX-512BW's vptestmb, then a masked move of the broadcast
    # g[t, d]) and add it to a vector of 16 sums (as a select, gcc left the tile scalar: 85 us; the WHERE's mask
    # form lane by lane 12 us, alone 4.6 us; as vectors 3.3 us).
    body = ("m = Tensor(rng.random((32, 32)) > 0.5).realize()\n"
            "g = Tensor(rng.standard_normal((32, 128)).astype(np.float32)).realize()\n"
            "m.reshape(1, 32, 32).where(g.T.reshape(128, 32, 1), 0.0).sum(1).realize()\n")
    src = _kernels(tmp_path, body, listing=lambda k: k["sources"]["C"])
    (kernel,) = [c for n, c in src.items() if n.startswith("r_128_32_32")]
    code = kernel.split("static void ")[-1]
    assert code.count("ts_v16_select_bytes(data2") == 16 and "ts_where_f32(" not in code and " ? " not in code, code[-3000:]
    rng = np.random.default_rng(3)
    m, g = rng.random((32, 32)) > 0.5, rng.standard_normal((32, 128)).astype(np.float32)
    g[3, 5] = np.inf  # selected off, a non-finite value adds nothing (a select, not a multiply by 0)
    want = np.where(m[None], g.T[:, :, None], np.float32(0)).sum(1, dtype=np.float64)
    got = Tensor(m, device="C").reshape(1, 32, 32).where(Tensor(g, device="C").T.reshape(128, 32, 1), 0.0).sum(1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_prime_row_count_up_to_12_is_register_tiled_whole_unless_its_rows_select_on_bools(tmp_path):
    # (11, 512) @ (512, 128): a transformer head's weight gradient over an 11-token vocabulary. 11 is prime,
    # no MR from the heuristic's list divides it; the whole 11 rows are one tile (22 vector accumulators):
    # 41 -> 13 us. An embedding's gradient over the same 11 rows (a one-hot's product: each row selects on a
    # loaded bool) stays untiled: gcc makes each row's select a branch that skips the false rows.
    body = ("from tensorscope import nn\n"
            "a = Tensor(rng.standard_normal((11, 512)).astype(np.float32)).realize()\n"
            "b = Tensor(rng.standard_normal((512, 128)).astype(np.float32)).realize()\n"
            "(a @ b).realize()\n"
            "emb = nn.Embedding(11, 128)\n"
            "idx = Tensor(rng.integers(0, 11, (16, 32)).astype(np.int32))\n"
            "(emb(idx) * Tensor(rng.standard_normal((16, 32, 128)).astype(np.float32))).sum().backward()\n"
            "emb.weight.grad.realize()\n")
    ir = _kernels(tmp_path, body)
    assert "REGISTER_TILE(11)" in ir["r_11_128_512"].splitlines()[0], ir["r_11_128_512"].splitlines()[0]
    onehot = [n for n, text in ir.items() if "in bool" in text.splitlines()[0] and n.startswith("r_")]
    assert onehot and all("REGISTER_TILE" not in ir[n].splitlines()[0] for n in onehot), [ir[n].splitlines()[0] for n in onehot]
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((11, 512)).astype(np.float32), rng.standard_normal((512, 128)).astype(np.float32)
    got = (Tensor(a, device="C") @ Tensor(b, device="C")).numpy()
    np.testing.assert_allclose(got, torch.tensor(a) @ torch.tensor(b), rtol=1e-4, atol=1e-3)


def test_an_elementwise_kernel_nests_the_loop_its_one_line_reads_jump_along_outside(tmp_path):
    # out[c, b] = up(x[b, c]) * z[c, b]: x (64, C, 4, 4) is read one 64-byte line per (c, b), 3,200 bytes
    # apart along b, the loop inside c in the output's order; z and out move 256 bytes along b. With its
    # buffers beyond the L2 (C = 50: 2 MB) the batch loop goes outside the channel loop (the max-pool backward
    # of Caffe's LeNet: 0.28 -> 0.15 ms in its training step); with C = 8 (0.3 MB, cached) the order stays.
    body = ("for c in (50, 8):\n"
            "    x = Tensor(rng.standard_normal((64, c, 4, 4)).astype(np.float32)).realize()\n"
            "    z = Tensor(rng.standard_normal((c, 64, 8, 8)).astype(np.float32)).realize()\n"
            "    up = x.permute(1, 0, 2, 3).reshape(c, 64, 4, 1, 4, 1).expand(c, 64, 4, 2, 4, 2).reshape(c, 64, 8, 8)\n"
            "    (up * z).realize()\n")
    ir = _kernels(tmp_path, body)
    assert _global_loops(ir["E_50_64_8_8"])[:2] == ["64", "50"], ir["E_50_64_8_8"]
    assert _global_loops(ir["E_8_64_8_8"])[:2] == ["8", "64"], ir["E_8_64_8_8"]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((64, 50, 4, 4)).astype(np.float32)
    z = rng.standard_normal((50, 64, 8, 8)).astype(np.float32)
    up = Tensor(x).permute(1, 0, 2, 3).reshape(50, 64, 4, 1, 4, 1).expand(50, 64, 4, 2, 4, 2).reshape(50, 64, 8, 8)
    ref = np.repeat(np.repeat(x.transpose(1, 0, 2, 3), 2, axis=2), 2, axis=3) * z
    np.testing.assert_array_equal((up * Tensor(z)).numpy(), ref)


def test_a_depthwise_convolution_on_28_wide_rows_is_register_tiled_forward_and_backward(tmp_path):
    # A depthwise 3x3 (groups = channels) of 28x28 images. Forward: the output row of 28, padded to 32, is upcast
    # by 16 (two blocks) so that REGISTER_TILE takes 7 output rows (0.167 -> 0.121 ms on Zen 4); unrolled whole
    # (32) it kept one row per pass. Weight gradient (9 taps x 28 columns, summed over batch and rows): from the
    # input and the output gradient stored in rows widened to 32 (ops_nn.cpp, depthwise_conv_wide), the 32
    # columns are upcast whole with a register tile of all 9 taps (0.62 -> 0.28 ms as 14 columns x 3 taps of
    # masked loads, 0.14 ms this way), in chunks of 2 images (r_2_16_9_32_2_28). Results against PyTorch.
    body = ("x = Tensor(rng.standard_normal((4, 16, 28, 28)).astype(np.float32), requires_grad=True)\n"
            "w = Tensor(rng.standard_normal((16, 1, 3, 3)).astype(np.float32), requires_grad=True)\n"
            "g = Tensor(rng.standard_normal((4, 16, 28, 28)).astype(np.float32))\n"
            "x.conv2d(w, padding=1, groups=16).backward(g)\n"
            "x.grad.realize(w.grad)\n")
    ir = _kernels(tmp_path, body)
    heads = {n: text.splitlines()[0] for n, text in ir.items()}
    forward = [h for n, h in heads.items() if n.startswith("r_4_16_28_28_3_3")]
    assert forward and all("PADTO(16) UPCAST_GLOBAL(16) REGISTER_TILE(7)" in h for h in forward), heads
    (weight_grad,) = [h for n, h in heads.items() if n.startswith("r_2_16_9_32_2_28")]
    assert "UPCAST_GLOBAL(32) REGISTER_TILE(9)" in weight_grad, heads
    conv = dict(padding=1, groups=16)
    check([(4, 16, 28, 28), (16, 1, 3, 3)], lambda x, w: torch.nn.functional.conv2d(x, w, **conv),
          lambda x, w: x.conv2d(w, **conv), dev="C", atol=1e-4, grad_atol=1e-3)


def test_a_head_of_9_to_15_outputs_is_a_register_tiled_matmul_over_a_padded_copy_of_w(tmp_path):
    # x @ Wᵀ for W (10, 84) (LeNet's output layer): Wᵀ is copied padded to 16 columns (E_84_16), the product is
    # a register tile over the 16 columns, stored whole-width, and the 10 are cropped; before, each output was
    # a dot product of 84 (4.1 -> 2.0 us, the copy included). Forward and gradients against PyTorch.
    ir = _kernels(tmp_path, "x = Tensor(rng.standard_normal((64, 84)).astype(np.float32)).realize()\n"
                            "w = Tensor(rng.standard_normal((10, 84)).astype(np.float32)).realize()\n"
                            "(x @ w.T).realize()\n")
    assert "E_84_16" in ir, sorted(ir)
    (product,) = [n for n in ir if n.startswith("r_64_16_84")]
    assert "REGISTER_TILE" in ir[product].splitlines()[0], ir[product].splitlines()[0]
    _linear_relu_matches_pytorch(np.random.default_rng(9), 64, 84, 10)  # forward and gradients



def test_a_concatenation_of_20_parts_along_a_middle_axis_is_split_into_20_loops(tmp_path):
    # A recurrent network unrolled over 20 steps assembles its input projection's gradient from 20 per-step
    # slices: (32, 1, 300) x 20 -> (32, 20, 300). Only the middle loop compares its index (the innermost compares
    # nothing and is stepped over), and it needs 20 ranges: every element reads one input, no gate left (a GRU's
    # step: 1.1 ms with 20 masked loads per element).
    ir = _kernels(tmp_path, "parts = [Tensor(rng.standard_normal((32, 1, 300)).astype(np.float32)).realize() for _ in range(20)]\n"
                            "parts[0].cat(*parts[1:], dim=1).realize()\n")
    assert list(ir) == ["E_32_20_300"], list(ir)
    assert "CMPLT" not in ir["E_32_20_300"] and "WHERE" not in ir["E_32_20_300"], ir["E_32_20_300"][:3000]
    rng = np.random.default_rng(4)
    parts = [rng.standard_normal((4, 1, 7)).astype(np.float32) for _ in range(20)]
    got = Tensor(parts[0], device="C").cat(*[Tensor(p, device="C") for p in parts[1:]], dim=1).numpy()
    np.testing.assert_array_equal(got, np.concatenate(parts, axis=1))


def test_copies_of_short_rows_are_vector_moves_not_calls_of_memmove(tmp_path):
    # Each kernel is a function of its own (noinline) with restrict parameters: inlined into its entry point,
    # gcc's loop distribution no longer trusted them and turned every short row of a copy into a call of libc's
    # memmove (d128's E_16_512_32, rows of 32 floats: 8,192 calls, 80 us alone; a GRU's weight padded from 50
    # to 64 columns: 9.4 us). Now a row of known length is a memcpy gcc expands into vector moves (52 and
    # 4.7 us). Run in a process of its own with an empty kernel cache, so that the shared objects read are the
    # ones compiled here; values against NumPy.
    pkg = os.path.dirname(os.path.dirname(os.path.abspath(__import__("tensorscope").__file__)))
    code = textwrap.dedent("""
        import numpy as np
        from tensorscope import Tensor
        rng = np.random.default_rng(0)
        x = rng.standard_normal((512, 16, 32)).astype(np.float32)
        w = rng.standard_normal((640, 50)).astype(np.float32)
        assert np.array_equal(Tensor(x).permute(1, 0, 2).contiguous().numpy(), x.transpose(1, 0, 2))
        assert np.array_equal(Tensor(w).pad(((0, 0), (0, 14))).numpy(), np.pad(w, ((0, 0), (0, 14))))
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=pkg, TENSORSCOPE_CACHE=str(tmp_path), TENSORSCOPE_DEVICE="C")
    env.pop("TENSORSCOPE_RANDOM_PASSES", None)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "ok" in p.stdout, p.stderr
    objects = sorted((tmp_path / "c").glob("E_*.so"))
    assert {o.name.rsplit("_", 1)[0] for o in objects} == {"E_16_512_32", "E_640_64"}, [o.name for o in objects]
    for o in objects:  # an imported function's name is in the object's dynamic string table
        data = o.read_bytes()
        assert b"memmove" not in data and b"memcpy" not in data, o.name
