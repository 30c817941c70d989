# Issue 13: convolutions, pooling and matmuls get PyTorch's backward instead of the chain rule through their
# movement ops. Checked against torch.nn.functional on C and INTERP over a grid of strides, paddings (also
# asymmetric), dilations, groups, kernel sizes (1x1, 3x3, 5x5, rectangular) and odd input sizes; and, on the
# generated code, that a weight gradient gets the register-tiled kernel a forward matmul gets.
import itertools
import json
import os
import re
import subprocess

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ops_helper import check

DEVICES = ["C", "INTERP"]

# (x shape, weight shape, conv2d kwargs): channel counts, groups and odd spatial sizes no heuristic targets
GRID = [
    ((2, 4, 7, 9), (6, 4, k, k), dict(stride=s, padding=p, dilation=d))
    for k, s, p, d in itertools.product([1, 3, 5], [1, 2], [0, 1, 2], [1, 2])
    if 7 + 2 * p - d * (k - 1) - 1 >= 0
] + [
    ((2, 4, 8, 8), (4, 2, 3, 3), dict(groups=2, padding=1)),
    ((1, 6, 9, 7), (3, 2, 3, 3), dict(groups=3, stride=2, padding=1)),
    ((2, 3, 5, 5), (3, 1, 3, 3), dict(groups=3, padding=(1, 1))),  # depthwise
    ((1, 2, 6, 5), (3, 2, 2, 3), dict(stride=(2, 1), padding=(1, 0))),
    ((1, 16, 6, 6), (16, 16, 3, 3), dict(padding=1)),  # channels >= 16
    ((2, 3, 9), (4, 3, 3), dict(padding=1, stride=2)),  # 1-d
    ((1, 2, 4, 5, 4), (2, 2, 2, 3, 2), dict(padding=1)),  # 3-d
    # >= 256 kFLOP with one group: computed as matmuls over im2col (ops_nn.cpp, kIm2colMinFlops), the output
    # channels as the vector axis (C_out >= 16) or the positions (C_out = 8, an input gradient into 8 channels)
    ((4, 16, 9, 11), (32, 16, 3, 3), dict(padding=1)),
    ((8, 16, 8, 8), (8, 16, 3, 3), dict(padding=1)),
    ((3, 16, 13, 12), (24, 16, 5, 3), dict(stride=2, padding=(2, 1), dilation=(1, 2))),
    ((2, 24, 300), (16, 24, 7), dict(padding=3, stride=3)),  # 1-d
    ((2, 8, 6, 7, 5), (16, 8, 3, 3, 3), dict(padding=1)),  # 3-d
    # >= 64 kFLOP of weight gradient with fewer than 16 output channels: the gradient as dot products of the
    # channel-major output gradient and the transposed im2col (kIm2colWeightGradMinFlops; a first layer)
    ((16, 1, 8, 8), (8, 1, 3, 3), dict(padding=1)),
    ((4, 3, 11, 10), (5, 3, 3, 3), dict(stride=2, padding=2, dilation=2)),
    # groups with >= 16 output channels each: batched matmuls over a grouped im2col, forward and weight gradient
    ((2, 32, 10, 9), (64, 8, 3, 3), dict(groups=4, padding=1)),
    # an im2col of >= 1 MiB is written in 8-row panels (kIm2colPackMinBytes), also grouped
    ((8, 16, 16, 16), (16, 16, 3, 3), dict(padding=1)),
    ((8, 32, 16, 16), (32, 16, 3, 3), dict(groups=2, padding=1)),
    # strided: the input gradient as a matmul and a col2im by stride phase (conv_input_grad_col2im), odd sizes
    # that leave the last phase short, stride 3, dilation, padding larger than the stride
    ((2, 16, 11, 13), (16, 16, 3, 3), dict(stride=2, padding=1)),
    ((2, 16, 14, 10), (16, 16, 5, 3), dict(stride=(3, 2), padding=(2, 1), dilation=(2, 1))),
    ((1, 16, 17, 9), (24, 16, 3, 3), dict(stride=3, padding=2)),
    # implicit GEMM (conv_direct): unit stride, rows of 32 output positions, >= 8 output channels per group: the
    # register tile reads the stored padded input at each tap; its input gradient is such a convolution too
    ((2, 16, 6, 32), (16, 16, 3, 3), dict(padding=1)),
    ((2, 8, 5, 36), (12, 8, 5, 5), dict()),  # no padding: 36 - 4 = 32 positions a row, 12 channels
    ((1, 8, 4, 64), (16, 4, 3, 3), dict(groups=2, padding=1)),  # per group
    ((2, 64, 8, 8), (32, 64, 1, 1), dict()),  # 1x1 without padding: the 64 positions of an image are one row
    ((4, 8, 64), (16, 8, 5), dict(padding=2)),  # 1-d
    # flat rows (conv_direct, flat_row_pitch): rows of 16 that 32 does not divide, the padded input's rows read
    # as one axis of 16 x 18 positions, per group
    ((2, 16, 16, 16), (32, 8, 3, 3), dict(groups=2, padding=1)),
    # strided depthwise: the input gradient by stride phases (depthwise_input_grad_by_phases), odd sizes that leave
    # the last phase short, stride 3 with a 1x1 kernel (phases no tap reaches), dilation, 1-d and 3-d
    ((2, 8, 11, 13), (8, 1, 3, 3), dict(groups=8, stride=2, padding=1)),
    ((1, 6, 10, 9), (6, 1, 5, 3), dict(groups=6, stride=(3, 2), padding=(2, 1), dilation=(1, 2))),
    ((2, 4, 9, 9), (4, 1, 1, 1), dict(groups=4, stride=3)),
    ((2, 4, 17), (4, 1, 3), dict(groups=4, stride=3, padding=2)),  # 1-d
    ((1, 3, 5, 6, 7), (3, 1, 3, 2, 3), dict(groups=3, stride=2, padding=1)),  # 3-d
]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("case", GRID, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_conv_forward_and_backward(case, dev):
    xs, ws, kw = case
    nd = len(ws) - 2
    check([xs, ws], lambda x, w: getattr(F, f"conv{nd}d")(x, w, **kw), lambda x, w: x.conv2d(w, **kw), dev=dev,
          atol=1e-4, grad_atol=2e-4)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("pad", [(1, 2, 0, 1), (2, 0, 1, 1)], ids=str)
def test_conv_asymmetric_padding_backward(pad, dev):
    check([(1, 2, 5, 6), (3, 2, 3, 3)], lambda x, w: F.conv2d(F.pad(x, pad), w), lambda x, w: x.conv2d(w, padding=pad),
          dev=dev, atol=1e-5)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("k,s,hw", [(2, 2, (8, 8)), (2, 2, (7, 9)), (2, 3, (7, 8)), ((2, 1), (3, 2), (9, 5)), (3, 3, (10, 7))],
                         ids=str)
@pytest.mark.parametrize("op", ["max", "avg"])
def test_disjoint_pooling_backward(op, k, s, hw, dev):
    # windows that do not overlap are a shrink + reshape (no repeated copies), their gradient a pad
    fn = "max_pool2d" if op == "max" else "avg_pool2d"
    check([(2, 3) + hw], lambda x: getattr(F, fn)(x, k, s), lambda x: getattr(x, fn)(kernel_size=k, stride=s), dev=dev,
          atol=1e-5)


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("xs,ws", [((5, 7), (7, 3)), ((2, 3, 5, 4), (2, 3, 4, 6)), ((3, 0), (0, 2)), ((4, 6, 5), (5, 3))],
                         ids=str)
def test_matmul_backward_shapes(xs, ws, dev):
    check([xs, ws], lambda x, w: x @ w, lambda x, w: x @ w, dev=dev, atol=1e-5)


def run_cli_out(script, out, env=None):
    """`tensorscope-cli run SCRIPT --out OUT` with `env` added to the environment; returns OUT (skips when the
    CLI is not built). The script runs on the C device, whose generated code the callers read, unless `env`
    names another: a run of the suite with TENSORSCOPE_DEVICE=OPENCL:0 or CUDA:0 still tests C's code here.
    The code is the AVX-512 target's (TENSORSCOPE_VECTOR_BYTES=64: the plans the callers expect were measured
    there) on any CPU, unless `env` names another width (test_vector_target.py reads AVX2's and SSE's)."""
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cli = os.path.join(os.environ.get("TS_BUILD_DIR", os.path.join(repo, "build")), "bin", "tensorscope-cli")
    if not os.path.exists(cli):
        pytest.skip("tensorscope-cli is not built")
    r = subprocess.run([cli, "run", str(script), "--out", str(out)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "TENSORSCOPE_DEVICE": "C", "TENSORSCOPE_VECTOR_BYTES": "64", **(env or {})})
    assert r.returncode == 0, r.stderr
    return out


def script_kernels(tmp_path, body, out_name="out"):
    """Runs `body` (after numpy, Tensor, nn and optim are imported) under the CLI; returns its --out folder and
    the kernels of kernels.json."""
    script = tmp_path / f"{out_name}.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor, nn\nfrom tensorscope.nn import optim\n" + body)
    out = run_cli_out(script, tmp_path / out_name)
    return out, json.loads((out / "kernels.json").read_text())["kernels"]


def conv_backward_kernels(tmp_path, conv, x_shape, after):
    """script_kernels for one convolution `nn.Conv2d(*conv)` on a random input of `x_shape`, `after` applied to
    its output, summed, backward, and the input, weight and bias gradients realized."""
    return script_kernels(tmp_path, f"c = nn.Conv2d{tuple(conv)}\n"
                                    f"x = Tensor(np.random.default_rng(0).standard_normal({tuple(x_shape)}).astype(np.float32), "
                                    "requires_grad=True)\n"
                                    f"c(x){after}.sum().backward()\n"
                                    "Tensor.realize(x.grad, c.weight.grad, c.bias.grad)\n")


def test_linear_weight_gradient_is_register_tiled(tmp_path):
    # The MLP 784-512 layer: the forward packs x into panels; its weight gradient used to be a reduction over
    # the batch read through that packing (2.6 GFLOP/s, no UPCAST). Now it is a matmul of its own.
    script = tmp_path / "step.py"
    script.write_text(
        "import numpy as np\n"
        "from tensorscope import Tensor, nn\n"
        "l = nn.Linear(784, 512)\n"
        "x = Tensor(np.random.default_rng(0).standard_normal((128, 784)).astype(np.float32))\n"
        "l(x).relu().sum().backward()\n"
        "l.weight.grad.realize()\n")
    out = run_cli_out(script, tmp_path / "out")
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    # the reduction over the batch of 128 whose output is W's (512, 784)
    grads = [k for k in kernels if k["name"].startswith("r_") and k["name"].endswith("_128")
             and k["outputs"][0]["shape"] == [512, 784]]
    assert len(grads) == 1, [k["name"] for k in kernels]
    header = (out / grads[0]["ir"]).read_text().splitlines()[0]
    assert "UPCAST_GLOBAL" in header and "REGISTER_TILE" in header, header


def test_a_large_linear_weight_gradient_is_stored_before_the_update(tmp_path):
    # Tensor::matmul: a Linear's weight gradient fused into the optimizer's update walks W and its state in the
    # register tile's order (32-column strips); from 1 MiB of weight it is stored by its matmul and the update
    # (SGD with momentum: W and the momentum buffer, one multi-output kernel) streams it. A small layer keeps
    # the update fused into the matmul. Values against PyTorch.
    _, kernels = script_kernels(tmp_path, "rng = np.random.default_rng(0)\n"
                                          "big, small = nn.Linear(800, 500), nn.Linear(400, 120)\n"
                                          "opt = optim.SGD([big.weight, small.weight], lr=0.1, momentum=0.9)\n"
                                          "x, x2 = (Tensor(rng.standard_normal(s).astype(np.float32)) for s in ((64, 800), (64, 400)))\n"
                                          "(big(x).relu().sum() + small(x2).relu().sum()).backward()\n"
                                          "opt.step()\n"
                                          "Tensor.realize(big.weight, small.weight)\n")
    shapes = {k["name"]: [o["shape"] for o in k["outputs"]] for k in kernels}
    assert shapes.get("r_500_800_64") == [[500, 800]], shapes  # dW alone
    updates = [n for n, s in shapes.items() if s == [[500, 800], [500, 800]] and n.startswith("E_")]
    assert len(updates) == 1, shapes  # the new momentum and W, from the stored dW
    assert shapes.get("r_120_400_64") == [[120, 400], [120, 400]], shapes  # dW fused into the small update
    from tensorscope import Tensor
    from tensorscope.nn import optim
    rng = np.random.default_rng(1)
    W = rng.standard_normal((500, 800)).astype(np.float32) * 0.05
    x = rng.standard_normal((64, 800)).astype(np.float32)
    tW, pW = Tensor(W, requires_grad=True), torch.tensor(W, requires_grad=True)
    opt, popt = optim.SGD([tW], lr=0.1, momentum=0.9), torch.optim.SGD([pW], lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        popt.zero_grad()
        (Tensor(x) @ tW.T).relu().sum().backward()
        (torch.tensor(x) @ pW.T).relu().sum().backward()
        opt.step()
        popt.step()
    np.testing.assert_allclose(tW.numpy(), pW.detach().numpy(), rtol=1e-4, atol=1e-4)


def test_convolution_backward_is_matmuls_over_im2col(tmp_path):
    # cnn_digits' second convolution (8 -> 16 channels, 3x3, 64 images of 4x4): the forward and the input
    # gradient each read the windows copied once (im2col) and run as register-tiled matmuls; read in place as one
    # merged reduce over N·O, the window view put a div/mod per element in the inner loop (3 GFLOP/s). The weight
    # gradient reads them in place, summed over the batch and the output rows and columns as nested reduce loops:
    # its taps' div/mods are the tile's, outside those loops (no im2col of its own: 51 -> 49 kernels a step)
    script = tmp_path / "conv.py"
    script.write_text(
        "import numpy as np\n"
        "from tensorscope import Tensor, nn\n"
        "c = nn.Conv2d(8, 16, 3, padding=1, bias=False)\n"
        "x = Tensor(np.random.default_rng(0).standard_normal((64, 8, 4, 4)).astype(np.float32), requires_grad=True)\n"
        "c(x).relu().sum().backward()\n"
        "Tensor.realize(x.grad, c.weight.grad)\n")
    out = run_cli_out(script, tmp_path / "out")
    kernels = {k["name"]: k for k in json.loads((out / "kernels.json").read_text())["kernels"]}
    # forward (N*O, C_in*K) @ (C_in*K, C_out); input gradient (C_out=8, C_in*K=144) @ (144, N*O);
    # weight gradient, transposed: (C_in*K, N, OH, OW) @ (N, OH, OW, C_out) with the output gradient channels-last
    for name in ("r_1024_16_72", "r_8_1024_144", "r_72_16_64_4_4"):
        assert name in kernels, sorted(kernels)
        header = (out / kernels[name]["ir"]).read_text().splitlines()[0]
        assert "UPCAST" in header, header
    assert not any(name.startswith("E_8_3_3_64") for name in kernels), sorted(kernels)  # no transposed im2col
    source = (out / kernels["r_72_16_64_4_4"]["sources"]["C"]).read_text()
    reduce_loops = source.split("_splat(0.0f);")[-1].split("data0[")[0]  # after the accumulators, before the stores
    assert " / " not in reduce_loops and " % " not in reduce_loops, reduce_loops


def test_a_convolution_over_rows_of_32_reads_its_input_in_place(tmp_path):
    # Implicit GEMM: 16 -> 16 channels 3x3 on 32x32 images is one register-tiled kernel reading the input
    # through the pad at every tap (masked vector loads: no padded copy), 8 output channels x 32 positions a
    # tile; no im2col (K times the input) is stored. The tile's loads overlap from one tap to the next: each tap's
    # row is one vector load (the C renderer's vector accumulators; before them gcc's predictive commoning
    # assembled the lanes from scalars, 2.8x slower, and is still turned off where such loads are plain).
    # (Its values: test_implicit_gemm_convolutions_read_through_the_pad_match_pytorch.)
    out, kernels = script_kernels(tmp_path, "x = Tensor(np.random.default_rng(0).standard_normal((4, 16, 32, 32)).astype(np.float32))\n"
                                            "w = Tensor(np.random.default_rng(1).standard_normal((16, 16, 3, 3)).astype(np.float32))\n"
                                            "x.conv2d(w, padding=1).realize()\n")
    names = [k["name"] for k in kernels]
    assert names == ["r_4_16_32_32_16_3_3"], names
    conv = kernels[0]
    header = (out / conv["ir"]).read_text().splitlines()[0]
    assert "UPCAST_GLOBAL(32)" in header and "REGISTER_TILE(8)" in header, header
    source = (out / conv["sources"]["C"]).read_text()
    assert "ts_v16_maskz_load(" in source, source
    assert "fmaf(" not in source.split("ts_v16 vacc")[-1], source  # every lane in a vector
    # a matmul (no overlapping loads) keeps gcc's default
    out, kernels = script_kernels(tmp_path, "a = Tensor(np.ones((64, 64), np.float32)).realize()\n(a @ a).realize()\n", "mm")
    assert "no-predictive-commoning" not in (out / kernels[0]["sources"]["C"]).read_text()


# A convolution with a bias: its gradient is summed from the copy of the output gradient the weight gradient
# stores (channel-major below 16 output channels, channels-last from 16, per group with groups), or from the
# gradient itself on the direct path; every branch against PyTorch.
BIAS_GRID = [
    ((2, 4, 7, 9), (6, 4, 3, 3), dict(padding=1)),  # direct (small)
    ((8, 3, 12, 12), (6, 3, 5, 5), dict()),  # im2col, 6 output channels: positions as the vector axis
    # an im2col over 1 MiB with 6 output channels: the weight gradient split along the positions (split-K,
    # 14 chunks of 448) and the chunks summed
    ((8, 3, 32, 32), (6, 3, 5, 5), dict()),
    ((4, 16, 9, 11), (32, 16, 3, 3), dict(padding=1)),  # im2col, 32 output channels: channels last
    ((2, 4, 12, 12), (20, 4, 5, 5), dict()),  # 20 channels (16 does not divide), 128 positions: channel-major
    # channel-major over 1 MiB of im2col: the forward reads it in column panels, the weight gradient a row-major
    # copy of its own, the col2im input gradient g in column panels
    ((16, 12, 12, 12), (20, 12, 5, 5), dict()),
    ((2, 32, 10, 9), (64, 8, 3, 3), dict(groups=4, padding=1)),  # grouped
    ((2, 16, 11, 13), (16, 16, 3, 3), dict(stride=2, padding=1)),  # strided: col2im input gradient
    # a short reduce (3 x 3 x 3 = 27 taps) into 16 channels: channel-major, and the weight gradient reads the
    # forward's im2col with g channels last (channels_last_im2col)
    ((8, 3, 16, 16), (16, 3, 3, 3), dict(stride=2, padding=1)),
]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("case", BIAS_GRID, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_conv_with_bias_forward_and_backward(case, dev):
    xs, ws, kw = case
    check([xs, ws, (ws[0],)], lambda x, w, b: F.conv2d(x, w, b, **kw), lambda x, w, b: x.conv2d(w, b, **kw), dev=dev,
          atol=1e-4, grad_atol=2e-4)


def test_a_convolution_into_20_channels_reads_column_panels(tmp_path):
    # Caffe's LeNet's second layer, smaller: 12 -> 20 channels 5x5 on 16 images of 19x19 at stride 2 (8x8
    # outputs, 1024 positions, 300 taps, 1.2 MB of im2col; at stride 1 on 12x12 images, the same outputs, it is a
    # flat-row convolution since the forty-fourth session). Channel-major, (20, 300) @ (300, 1024): the forward's
    # im2col is written in column panels (1024/32, 300, 32), so that a register tile's 32 columns of all 300 rows
    # lie together; the weight gradient dW = g (20, 1024) @ im2col (1024, 300) copies the windows for itself, its
    # taps padded to 320 in column panels (10, 16, 8, 8, 32); the output gradient is stored channel-major once, for
    # the weight gradient and the col2im input gradient, whose matmul reads a column-panel copy of it. Values
    # against PyTorch in BIAS_GRID.
    out, kernels = conv_backward_kernels(tmp_path, (12, 20, 5, 2), (16, 12, 19, 19), ".max_pool2d(kernel_size=(2, 2)).relu()")
    names = [k["name"] for k in kernels]
    assert "E_32_12_5_5_32" in names, names  # the forward's im2col, in column panels
    assert "E_10_16_8_8_32" in names and "r_20_320_1024" in names, names  # the weight gradient's, and its matmul
    assert names.count("E_20_16_8_8") == 1, names  # g channel-major, once
    assert "E_32_20_32" in names, names  # its column panels for the input gradient's matmul
    forward = next(k for k in kernels if k["name"] == "r_20_1024_300")
    header = (out / forward["ir"]).read_text().splitlines()[0]
    assert "UPCAST_GLOBAL(32)" in header and "REGISTER_TILE(10)" in header, header
    # the col2im's (300, 20) @ (20, 1024): w's panels (80 KB) fit in L2, so the groups of 10 rows are the outer
    # loop and the tiles store along the output's rows (register_tile.cpp)
    dcols = next(k for k in kernels if k["name"] == "r_300_1024_20")
    code = (out / dcols["ir"]).read_text()
    loops = [line for line in code.splitlines() if "RANGE" in line and "global" in line]
    assert "%" in loops[0] and len(loops) == 2, loops
    first_bound = code.split(loops[0].split("RANGE.int32 ")[1].split()[0] + " = CONST.int32 ")[1].split()[0]
    assert first_bound == "30", (first_bound, loops)


def test_an_rgb_stem_convolution_is_channel_major_and_its_weight_gradient_reads_the_forwards_im2col(tmp_path):
    # MobileNet's stem, smaller: 3 -> 16 channels 3x3 at stride 2 on 8 images of 32x32 (2048 positions, 27 taps).
    # Channels last, its im2col (2048, 27) was rows of 27 floats gathered from 3-float runs of every other column
    # (no axis vectorized: 52-58% of the memory bandwidth in the step); with a reduce shorter than 32 the forward is
    # channel-major, (16, 27) @ (27, 2048) over the transposed im2col copied along rows of positions, and the weight
    # gradient dWᵀ = im2col (27, 2048) @ g (2048, 16) reads that same copy: no second copy of the windows (the tap
    # panels E_8_16_16_32), no channels-last im2col. The input (data) needs no gradient, so g is stored channels
    # last by its producers, not copied channel-major first. Values against PyTorch.
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((8, 3, 32, 32)).astype(np.float32)
    w_np = rng.standard_normal((16, 3, 3, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x_np)
    np.save(tmp_path / "w.npy", w_np)
    out, kernels = script_kernels(tmp_path, f"w = Tensor(np.load(r'{tmp_path / 'w.npy'}'), requires_grad=True)\n"
                                            f"x = Tensor(np.load(r'{tmp_path / 'x.npy'}'))\n"
                                            "y = x.conv2d(w, stride=2, padding=1).relu()\n"
                                            "(y * y).sum().backward()\n"
                                            f"np.save(r'{tmp_path / 'dw.npy'}', w.grad.numpy())\n")
    names = [k["name"] for k in kernels]
    assert names.count("E_3_3_3_8_16_16") == 1, names  # the transposed im2col, once
    assert "r_16_2048_27" in names and "r_27_16_2048" in names, names  # the forward; the weight gradient
    assert "E_8_16_16_32" not in names and "E_8_16_16_3_3_3" not in names, names
    assert "E_16_8_16_16" not in names, names  # no channel-major copy of g
    forward = next(k for k in kernels if k["name"] == "r_16_2048_27")
    header = (out / forward["ir"]).read_text().splitlines()[0]
    assert "UPCAST_GLOBAL(32)" in header, header
    xt, wt = torch.from_numpy(x_np), torch.from_numpy(w_np).requires_grad_()
    yt = F.conv2d(xt, wt, stride=2, padding=1).relu()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(np.load(tmp_path / "dw.npy"), wt.grad.numpy(), rtol=1e-4, atol=1e-2)


def test_a_channels_last_weight_gradient_transposes_the_stored_channel_major_gradient(tmp_path):
    # LeNet-5's second layer (6 -> 16 channels, 5x5 on 14x14, then a max-pool): the weight gradient reads g
    # channels last (N*O, 16), the col2im input gradient channel-major (16, N*O). The max-pool's backward is
    # computed once, channel-major, and the weight gradient's copy is a 2-D transpose of it (E_3200_16), not
    # the max-pool's backward again in channels-last order (E_32_10_10_16: 0.15 ms against 0.03). Values
    # against PyTorch in BIAS_GRID and test_training_vs_torch.
    _, kernels = conv_backward_kernels(tmp_path, (6, 16, 5), (32, 6, 14, 14), ".relu().max_pool2d(kernel_size=(2, 2))")
    names = [k["name"] for k in kernels]
    assert "E_16_32_10_10" in names and "E_3200_16" in names and "E_32_10_10_16" not in names, names


def _lenet5_first_layer_script(tmp_path, size):
    """A script running LeNet-5's first layer (nn.Conv2d(3, 6, 5), ReLU) forward and backward on 8 images of
    size x size, its weight and bias gradients realized."""
    script = tmp_path / f"conv{size}.py"
    script.write_text(
        "import numpy as np\n"
        "from tensorscope import Tensor, nn\n"
        "c = nn.Conv2d(3, 6, 5)\n"
        f"x = Tensor(np.random.default_rng(0).standard_normal((8, 3, {size}, {size})).astype(np.float32))\n"
        "c(x).relu().sum().backward()\n"
        "Tensor.realize(c.weight.grad, c.bias.grad)\n")
    return script


def test_few_channel_convolution_copies_its_windows_once(tmp_path):
    # LeNet-5's first layer (3 -> 6 channels, 5x5): the forward computes over the transposed im2col (C_in*K,
    # N*O) and the weight gradient reads the same stored copy, not a second one (0.5 ms each at 32x32x32);
    # the bias gradient sums the channel-major output gradient the weight gradient stores
    out = run_cli_out(_lenet5_first_layer_script(tmp_path, 16), tmp_path / "out")
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    names = [k["name"] for k in kernels]
    # the im2col (3*5*5 taps, 8*12*12 positions) once; the forward, weight and bias gradients read it or g
    assert names.count("E_3_5_5_8_12_12") == 1, names
    assert "r_6_1152" in names, names  # dbias: a contiguous row sum per channel
    # the forward (6, 75) @ (75, 1152): all 6 output channels in one register tile (6 is no multiple of 4)
    forward = next(k for k in kernels if k["name"] == "r_6_1152_75")
    header = (out / forward["ir"]).read_text().splitlines()[0]
    assert "UPCAST_GLOBAL(32)" in header and "REGISTER_TILE(6)" in header, header
    # From 1 MiB of im2col on (8 images of 30x30 here: 5408 positions, 1.6 MB) the copy is written in column
    # panels (5408/32, 75, 32) for the forward, and the weight gradient's dot products read the same copy in
    # 13 chunks of 13 panels (split-K), each summed over two reduce axes (the panels, the 32 in each). (Rows of
    # 28 to 31 positions, LeNet-5's 32x32 images, take the widened rows of the next test instead.)
    out = run_cli_out(_lenet5_first_layer_script(tmp_path, 30), tmp_path / "out30")
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    names = [k["name"] for k in kernels]
    assert names.count("E_169_3_5_5_32") == 1 and not any(n.startswith("E_3_5_5") for n in names), names
    # a panel's 32 positions cross image rows of 26: each lane's div/mods by 26 and 676 are computed once per
    # panel, not once per tap (upcast_global.cpp, upcast_divided_index: 720 -> 440 us for LeNet-5's copy when
    # it still had one)
    copy = next(k for k in kernels if k["name"] == "E_169_3_5_5_32")
    header = (out / copy["ir"]).read_text().splitlines()[0]
    assert "UPCAST_GLOBAL(32)" in header, header
    assert "r_6_5408_75" in names and "r_13_6_75_13_32" in names and "r_6_75_13" in names, names


def test_a_few_channel_convolution_with_rows_of_28_widens_them_to_32_and_copies_no_windows(tmp_path):
    # LeNet-5's first layer at its size (3 -> 6 channels 5x5 on 32x32 images: output rows of 28; ops_nn.cpp,
    # widened_row): the input is stored padded to rows of 36 (E_8_3_32_36), the forward is a register tile of
    # the 6 channels x 32 positions reading it in place (r_8_6_28_32_75), the output gradient is stored as
    # (N, OH, C_out, 32) (E_8_28_6_32) and the weight gradient keeps the 32 positions as an output axis, one
    # partial sum per image (r_8_3_5_5_6_32_28, the same tile: split-K, an image's g and x stay in cache while
    # the 75 taps read them), summed over the images and the 32 afterwards (r_6_3_5_5_8_32). No im2col: in the
    # step, 1.7 -> 1.0 ms of kernels for this layer.
    out = run_cli_out(_lenet5_first_layer_script(tmp_path, 32), tmp_path / "out")
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    names = [k["name"] for k in kernels]
    assert {"E_8_3_32_36", "r_8_6_28_32_75", "E_8_28_6_32", "r_8_3_5_5_6_32_28", "r_6_3_5_5_8_32"} <= set(names), names
    assert not [n for n in names if "_5_5_32" in n and n.startswith("E_")], names  # no im2col
    for name in ("r_8_6_28_32_75", "r_8_3_5_5_6_32_28"):
        header = (out / next(k for k in kernels if k["name"] == name)["ir"]).read_text().splitlines()[0]
        assert "UPCAST_GLOBAL(32)" in header and "REGISTER_TILE(6)" in header, header


def test_a_grouped_weight_gradient_reads_the_windows_in_place(tmp_path):
    # 4 groups of 16 -> 16 channels, 3x3 on 16x16 maps: the forward and the input gradient are flat-row convolutions
    # (r_4_4_16_288_16_9, one each, over a padded copy with rows 18 apart: E_4_64_19_18), the weight gradient reads
    # the forward's padded copy in place, dWᵀ (G, C_in/G·K, C_out/G) summed over the batch and the map's rows and
    # columns as nested reduce loops (r_4_144_16_4_16_16, weight_grad_over_windows: no padded copy of its own, no
    # im2col). (Before flat rows the forward and the input gradient copied the grouped windows, 9 times the input; a
    # 4-group layer of 32 × 64 × 16 × 16 alone on this Xeon: forward 3.9-4.3 -> 2.1-2.3 ms, with both gradients 8.9-9.4
    # -> 7.3-8.0 ms.) Values and gradients against PyTorch.
    script = tmp_path / "g4.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n"
                      "x = Tensor(rng.standard_normal((4, 64, 16, 16)).astype(np.float32), requires_grad=True)\n"
                      "w = Tensor(rng.standard_normal((64, 16, 3, 3)).astype(np.float32) * 0.1, requires_grad=True)\n"
                      "y = x.conv2d(w, padding=1, groups=4)\n"
                      "y.backward(Tensor(rng.standard_normal((4, 64, 16, 16)).astype(np.float32)))\n"
                      f"np.save({str(tmp_path / 'y.npy')!r}, y.numpy())\n"
                      f"np.save({str(tmp_path / 'dx.npy')!r}, x.grad.numpy())\n"
                      f"np.save({str(tmp_path / 'dw.npy')!r}, w.grad.numpy())\n")
    out = run_cli_out(script, tmp_path / "out")
    names = [k["name"] for k in json.loads((out / "kernels.json").read_text())["kernels"]]
    assert "r_4_144_16_4_16_16" in names and names.count("r_4_4_16_288_16_9") == 2, names
    assert names.count("E_4_64_19_18") == 2 and "E_4_64_18_18" not in names, names
    rng = np.random.default_rng(0)
    px = torch.tensor(rng.standard_normal((4, 64, 16, 16)).astype(np.float32), requires_grad=True)
    pw = torch.tensor(rng.standard_normal((64, 16, 3, 3)).astype(np.float32) * 0.1, requires_grad=True)
    py = F.conv2d(px, pw, padding=1, groups=4)
    py.backward(torch.from_numpy(rng.standard_normal((4, 64, 16, 16)).astype(np.float32)))
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), py.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.load(tmp_path / "dx.npy"), px.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(np.load(tmp_path / "dw.npy"), pw.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("vector_bytes,tile", [("32", ("UPCAST_GLOBAL(16)", "REGISTER_TILE(6)")),
                                               ("64", ("UPCAST_GLOBAL(32)", "REGISTER_TILE(8)"))])
def test_a_convolution_into_16_or_more_channels_widens_rows_of_28_too(tmp_path, vector_bytes, tile):
    # 16 -> 32 channels 5x5 on 28x28 maps, padding 2 (widened_row from 16 output channels on too): the forward is
    # the register tile over the input stored in rows widened to 32 (E_2_16_32_36, then r_2_32_28_32_400), and so is
    # the input gradient's transposed convolution (r_2_16_28_32_800) — neither writes an im2col, which was K = 25
    # times the input, written and read again. The weight gradient stays the matmul over the transposed windows
    # (r_400_32_2_28_28, reading them in place: the widened form's tile was 3x slower there). 32 images, alone on
    # Zen 3: forward 11.9 -> 8.4 ms, with both gradients 38.3 -> 27.8 ms (25.3 with that weight gradient's windows
    # read in place instead of copied).
    script = tmp_path / "wide.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n"
                      "x = Tensor(rng.standard_normal((2, 16, 28, 28)).astype(np.float32), requires_grad=True)\n"
                      "w = Tensor(rng.standard_normal((32, 16, 5, 5)).astype(np.float32) * 0.1, requires_grad=True)\n"
                      "y = x.conv2d(w, padding=2)\n"
                      "y.backward(Tensor(rng.standard_normal((2, 32, 28, 28)).astype(np.float32)))\n"
                      "Tensor.realize(x.grad, w.grad)\n")
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": vector_bytes})
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    names = [k["name"] for k in kernels]
    assert {"E_2_16_32_36", "r_2_32_28_32_400", "r_2_16_28_32_800", "r_400_32_2_28_28"} <= set(names), names
    # the weight gradient reads the windows of the forward's widened copy (no second padded copy, E_2_16_32_32)
    assert "E_2_16_32_32" not in names and names.count("E_2_16_32_36") == 1, names
    # no im2col of the forward (taps after the positions) nor of the input gradient (32 channels' taps)
    assert not [n for n in names if n.startswith("E_") and ("_16_5_5_8" in n or "_32_5_5" in n)], names
    for name in ("r_2_32_28_32_400", "r_2_16_28_32_800"):
        applied = next(k for k in kernels if k["name"] == name)["actions"]["applied"]
        assert set(tile) <= set(applied), applied  # AVX2's 6 x 16 tile, AVX-512's 8 x 32


@pytest.mark.parametrize("n,ci,h,w,co,k,pad", [(32, 3, 32, 32, 6, 5, 0), (3, 4, 31, 32, 8, 4, 0), (2, 3, 28, 30, 5, 3, 1),
                                               (4, 2, 30, 33, 5, 3, 1), (2, 16, 28, 28, 32, 5, 2),
                                               (3, 8, 30, 31, 16, 3, 0)])
def test_widened_rows_match_pytorch(n, ci, h, w, co, k, pad):
    # output rows of 28 to 31 positions take the widened rows (all but the fourth; 16 or more output channels
    # too, the last two, whose weight gradient is the im2col's matmul), 32 or more the other paths; forward,
    # input, weight and bias gradients against PyTorch
    from tensorscope import Tensor
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n, ci, h, w)).astype(np.float32)
    wt = rng.standard_normal((co, ci, k, k)).astype(np.float32) * 0.2
    b = rng.standard_normal(co).astype(np.float32)
    g = rng.standard_normal((n, co, h + 2 * pad - k + 1, w + 2 * pad - k + 1)).astype(np.float32)
    tx, tw, tb = (Tensor(a, requires_grad=True) for a in (x, wt, b))
    out = tx.conv2d(tw, tb, padding=pad)
    (out * Tensor(g)).sum().backward()
    px, pw, pb = (torch.tensor(a, requires_grad=True) for a in (x, wt, b))
    ref = torch.nn.functional.conv2d(px, pw, pb, padding=pad)
    (ref * torch.tensor(g)).sum().backward()
    for got, want in ((out, ref), (tx.grad, px.grad), (tw.grad, pw.grad), (tb.grad, pb.grad)):
        want = want.detach().numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


def test_a_padded_depthwise_convolution_reads_its_input_through_the_pad_in_one_kernel():
    # groups = channels (MobileNet's depthwise 3x3) takes the direct form; read through the pad, every load of
    # its unrolled rows was a masked select that gcc left scalar (0.58 ms for 32 x 16 x 28 x 28), so the input
    # was stored padded first (0.23 ms); the C renderer now reads such a row as one masked vector load, and the
    # forward is one kernel (depthwise_conv_wide). Values and gradients against PyTorch.
    from tensorscope import GlobalCounters, Tensor
    rng = np.random.default_rng(7)
    x = rng.standard_normal((8, 16, 16, 16)).astype(np.float32)  # rows of 16: the partial-sum weight gradient
    w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    g = rng.standard_normal((8, 16, 16, 16)).astype(np.float32)
    tx, tw = Tensor(x, device="C", requires_grad=True), Tensor(w, device="C", requires_grad=True)
    GlobalCounters.reset()
    y = tx.conv2d(tw, padding=1, groups=16)
    y.realize()
    assert GlobalCounters.kernel_count == 1  # the convolution, reading x through the pad: no padded copy
    (y * Tensor(g, device="C")).sum().backward()
    px, pw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
    py = torch.nn.functional.conv2d(px, pw, padding=1, groups=16)
    (py * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(y.numpy(), py.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n,c,h,w,k,pad,bias", [(32, 16, 28, 28, 3, 1, False), (4, 8, 30, 28, 3, 0, True),
                                                (2, 16, 28, 28, 5, 2, True), (2, 16, 28, 28, 3, (0, 2, 1, 1), True),
                                                (3, 16, 20, 20, 3, 1, False), (8, 16, 14, 14, 3, 1, True),
                                                (4, 8, 13, 13, 3, 1, False)])
def test_depthwise_convolutions_on_widened_rows_match_pytorch(n, c, h, w, k, pad, bias):
    # groups = channels with output rows of 28 (widened to 32), 13 and 14 (to 16) or 16 and 32 (whole vectors), unit
    # stride (ops_nn.cpp, depthwise_conv_wide): forward, input, weight and bias gradients against PyTorch, also
    # without padding, with 5x5 taps and with padding on one side only (torch: F.pad first)
    from tensorscope import Tensor
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    tx, tw, tb = (Tensor(a, device="C", requires_grad=True) for a in (x, wt, b))
    out = tx.conv2d(tw, tb if bias else None, groups=c, padding=pad)
    g = rng.standard_normal(out.shape).astype(np.float32)
    (out * Tensor(g, device="C")).sum().backward()
    px, pw, pb = (torch.tensor(a, requires_grad=True) for a in (x, wt, b))
    if isinstance(pad, tuple):
        ref = F.conv2d(F.pad(px, pad), pw, pb if bias else None, groups=c)
    else:
        ref = F.conv2d(px, pw, pb if bias else None, padding=pad, groups=c)
    (ref * torch.tensor(g)).sum().backward()
    pairs = [(out, ref), (tx.grad, px.grad), (tw.grad, pw.grad)] + ([(tb.grad, pb.grad)] if bias else [])
    for got, want in pairs:
        want = want.detach().numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))


@pytest.mark.parametrize("n,c,hw,stride,row", [(32, 16, 12, 1, 12), (32, 24, 28, 2, 14), (16, 32, 7, 1, 7),
                                                (8, 16, 20, 1, 20)])
def test_a_depthwise_weight_gradient_over_short_rows_keeps_the_row_as_vectors_in_chunks_of_the_batch(tmp_path, n, c, hw,
                                                                                                     stride, row):
    # groups = channels with output rows under 16 (small feature maps, stride 2) or not widened: the weight
    # gradient keeps the row as its partial sums' vector axis (conv_weight_grad, from kRowPartialMinWidth = 4
    # positions; as one sum over the batch and the plane it was a single chain of scalar multiply-adds: 32 x 16 x
    # 14 x 14, forward and both gradients 1.24 -> 0.20 ms) and splits the batch into chunks whose planes stay in
    # L1 (kWeightGradPlaneChunkBytes), summed by a second kernel. The 3x3 taps are one axis of 9, the register
    # tile's rows: each row of the output gradient is loaded once for all taps, and nine accumulators chain their
    # multiply-adds side by side (7x7 maps, 32 x 64, that kernel alone: 0.057 -> 0.032 ms; with kh and kw apart
    # the tile took the 3 taps of one kh). The tap rows above and below the image (products by zero, kept for
    # their NaNs) are vectors too. Values and gradients against PyTorch.
    out, kernels = script_kernels(tmp_path, "rng = np.random.default_rng(5)\n"
                                  f"x = Tensor(rng.standard_normal(({n}, {c}, {hw}, {hw})).astype(np.float32), requires_grad=True)\n"
                                  f"w = Tensor(rng.standard_normal(({c}, 1, 3, 3)).astype(np.float32), requires_grad=True)\n"
                                  "y = x.conv2d(w, padding=1, stride=%d, groups=%d)\n" % (stride, c) +
                                  "g = rng.standard_normal(y.shape).astype(np.float32)\n"
                                  "y.backward(Tensor(g))\n"
                                  "Tensor.realize(x.grad, w.grad)\n"
                                  f"np.save({str(tmp_path / 'dx.npy')!r}, x.grad.numpy())\n"
                                  f"np.save({str(tmp_path / 'dw.npy')!r}, w.grad.numpy())\n")
    plane_bytes = (row * row + hw * hw) * 4
    chunk = max(d for d in range(1, n + 1) if n % d == 0 and (d == 1 or d * plane_bytes <= 16 << 10))
    chunks = f"_{n // chunk}" if chunk < n else ""  # (kernel names leave out axes of 1)
    partial = f"r{chunks}_{c}_9_{row}_{chunk}_{row}"  # (chunks, G, 9 taps, row) summed over (chunk, rows)
    names = [k["name"] for k in kernels]
    assert partial in names and f"r_{c}_3_3{chunks}_{row}" in names, names
    kernel = next(k for k in kernels if k["name"] == partial)
    source = (out / kernel["sources"]["C"]).read_text()
    assert "REGISTER_TILE(9)" in kernel["actions"]["applied"], kernel["actions"]
    if row >= 5:  # vector multiply-adds along the row, no lane of them scalar (a product by zero included)
        assert re.search(r"vacc\d+ = ts_v\d+_fma\(", source), source[-3000:]
        assert "(0.0f * v" not in source, source[-3000:]
    rng = np.random.default_rng(5)
    px = torch.tensor(rng.standard_normal((n, c, hw, hw)).astype(np.float32), requires_grad=True)
    pw = torch.tensor(rng.standard_normal((c, 1, 3, 3)).astype(np.float32), requires_grad=True)
    py = F.conv2d(px, pw, padding=1, stride=stride, groups=c)
    py.backward(torch.from_numpy(rng.standard_normal(py.shape).astype(np.float32)))
    np.testing.assert_allclose(np.load(tmp_path / "dx.npy"), px.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "dw.npy"), pw.grad.numpy(), rtol=1e-4, atol=1e-3)


def test_a_depthwise_weight_gradient_over_rows_of_8_scaled_per_channel_upcasts_the_row_under_a_tile_of_its_taps(tmp_path):
    # MobileNet's 64 channels on 8x8 maps, the output gradient scaled per channel (a BatchNorm in eval mode after the
    # convolution, as when fine-tuning with frozen BatchNorm): the partial sums (C, 9 taps, row of 8) read that scale
    # along the channels, and the channel loop stayed innermost; reorder_global_loops took only multiples of 16 as
    # the vector axis, so the row of 8 was summed a column at a time (UPCAST_REDUCE(4)). A loop of 8 is one 256-bit
    # vector: the row is upcast by 8 under a register tile of the 9 taps (the backward 0.98-1.32 -> 0.36 ms; its
    # multiply-adds still scalar: the C renderer's vector accumulators do not yet take a row scaled per channel
    # with a lane in the padding). Values and gradients against PyTorch.
    n, c, hw = 32, 64, 8
    out, kernels = script_kernels(tmp_path, "rng = np.random.default_rng(5)\n"
                                  f"x = Tensor(rng.standard_normal(({n}, {c}, {hw}, {hw})).astype(np.float32), requires_grad=True)\n"
                                  f"w = Tensor(rng.standard_normal(({c}, 1, 3, 3)).astype(np.float32), requires_grad=True)\n"
                                  f"s = Tensor(rng.standard_normal((1, {c}, 1, 1)).astype(np.float32))\n"
                                  f"y = x.conv2d(w, padding=1, groups={c}) * s\n"
                                  "g = rng.standard_normal(y.shape).astype(np.float32)\n"
                                  "y.backward(Tensor(g))\n"
                                  "Tensor.realize(x.grad, w.grad)\n"
                                  f"np.save({str(tmp_path / 'dx.npy')!r}, x.grad.numpy())\n"
                                  f"np.save({str(tmp_path / 'dw.npy')!r}, w.grad.numpy())\n")
    kernel = next(k for k in kernels if k["name"] == f"r_{c}_9_{hw}_{n}_{hw}")
    applied = kernel["actions"]["applied"]
    assert "UPCAST_GLOBAL(8)" in applied and "REGISTER_TILE(9)" in applied, kernel["actions"]
    rng = np.random.default_rng(5)
    px = torch.tensor(rng.standard_normal((n, c, hw, hw)).astype(np.float32), requires_grad=True)
    pw = torch.tensor(rng.standard_normal((c, 1, 3, 3)).astype(np.float32), requires_grad=True)
    ps = torch.tensor(rng.standard_normal((1, c, 1, 1)).astype(np.float32))
    py = F.conv2d(px, pw, padding=1, groups=c) * ps
    py.backward(torch.from_numpy(rng.standard_normal(py.shape).astype(np.float32)))
    np.testing.assert_allclose(np.load(tmp_path / "dx.npy"), px.grad.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.load(tmp_path / "dw.npy"), pw.grad.numpy(), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("n,ci,h,w,co,k,pad,relu", [(4, 16, 32, 32, 16, 3, 1, False), (2, 8, 20, 32, 16, 5, 2, True),
                                                   (2, 16, 32, 32, 8, 3, (0, 2, 1, 1), False),
                                                   (2, 16, 16, 32, 16, 3, (1, 0, 2, 0), True)])
def test_implicit_gemm_convolutions_read_through_the_pad_match_pytorch(n, ci, h, w, co, k, pad, relu):
    # rows of 32 with padding, unit stride (conv_direct's implicit GEMM): the input, and the output gradient of
    # the transposed convolution, read through the pad with masked vector loads (stored_then_padded_windows),
    # padding on one side only, and a ReLU before the convolution (its producer stored once, not run again in
    # every tap's load): forward, input and weight gradients against PyTorch
    from tensorscope import Tensor
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n, ci, h, w)).astype(np.float32)
    wt = rng.standard_normal((co, ci, k, k)).astype(np.float32)
    tx, tw = Tensor(x, device="C", requires_grad=True), Tensor(wt, device="C", requires_grad=True)
    out = (tx.relu() if relu else tx).conv2d(tw, padding=pad)
    g = rng.standard_normal(out.shape).astype(np.float32)
    (out * Tensor(g, device="C")).sum().backward()
    px, pw = torch.tensor(x, requires_grad=True), torch.tensor(wt, requires_grad=True)
    pin = torch.relu(px) if relu else px
    ref = F.conv2d(F.pad(pin, pad), pw) if isinstance(pad, tuple) else F.conv2d(pin, pw, padding=pad)
    (ref * torch.tensor(g)).sum().backward()
    for got, want in [(out, ref), (tx.grad, px.grad), (tw.grad, pw.grad)]:
        want = want.detach().numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))


def test_a_depthwise_weight_gradient_tiles_its_taps_over_widened_rows_read_through_the_pad(tmp_path):
    # 32 x 16 x 28 x 28, 3x3, padding 1 (the bench's depthwise row): nothing is stored padded; the output
    # gradient is stored once (E_32_16_28_28: here the loss's ones), the forward (here summed into the loss in
    # the same kernel), the input gradient (r_32_16_28_28_3_3) and the weight gradient read x and it through
    # pad views, the lanes past a row's edge masked off. The weight gradient keeps the 32 positions of a widened
    # row as vectors with the 9 taps as the register tile's rows, its 18 vector accumulators multiplying one row
    # of the gradient into the input row at each tap: a (masked) vector load per tap (CRenderer's vector
    # accumulators), not lanes assembled from scalars. Its batch is split into 16 chunks of 2 images
    # (r_16_16_9_32_2_28: their planes stay in L1 while the taps run over them), summed by r_16_3_3_16_32.
    out, kernels = script_kernels(tmp_path, "rng = np.random.default_rng(0)\n"
                                  "x = Tensor(rng.standard_normal((32, 16, 28, 28)).astype(np.float32), requires_grad=True)\n"
                                  "w = Tensor(rng.standard_normal((16, 1, 3, 3)).astype(np.float32), requires_grad=True)\n"
                                  "x.conv2d(w, padding=1, groups=16).sum().backward()\n"
                                  "Tensor.realize(x.grad, w.grad)\n")
    names = [k["name"] for k in kernels]
    assert len(names) == 5 and names.count("E_32_16_28_28") == 1 and "r_32_16_28_28_3_3" in names, names
    assert "r_16_16_9_32_2_28" in names and "r_16_3_3_16_32" in names, names
    wgrad = next(k for k in kernels if k["name"] == "r_16_16_9_32_2_28")
    assert "UPCAST_GLOBAL(32)" in wgrad["actions"]["applied"] and "REGISTER_TILE(9)" in wgrad["actions"]["applied"], wgrad["actions"]
    source = (out / wgrad["sources"]["C"]).read_text()
    assert source.count(" = ts_v16_fma(") == 18 and source.count("ts_v16_maskz_load(") >= 18, source
    assert "data1[" not in source and "data2[" not in source and "fmaf(" not in source.split("ts_v16 vacc")[-1], source
    dgrad = next(k for k in kernels if k["name"] == "r_32_16_28_28_3_3")
    source = (out / dgrad["sources"]["C"]).read_text()
    assert "ts_v16_maskz_load(" in source and "fmaf(" not in source.split("ts_v16 vacc")[-1], source
    # rows of 28 padded to 32: the loop of 16-lane blocks split at the padded block (split_padded_tile), its 12
    # real lanes stored without a gate (a store behind a branch per lane had made it 4x slower)
    assert "if (" not in source.split("TS_VECTOR(4)")[-1].split("#endif")[-1], source


def _strided_depthwise_backward(tmp_path, layer_input):
    """(out dir, kernels) of tensorscope-cli running MobileNet's downsampling depthwise layer on AVX2's code: 3x3
    with stride 2 over `layer_input` (an expression of the leaf x, 32 x 24 x 28 x 28), backward, x.grad realized."""
    script = tmp_path / "dw.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n"
                      "x = Tensor(rng.standard_normal((32, 24, 28, 28)).astype(np.float32), requires_grad=True)\n"
                      "w = Tensor(rng.standard_normal((24, 1, 3, 3)).astype(np.float32), requires_grad=True)\n"
                      f"{layer_input}.conv2d(w, stride=2, padding=1, groups=24).backward("
                      "Tensor(rng.standard_normal((32, 24, 14, 14)).astype(np.float32)))\n"
                      "x.grad.realize()\n")
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": "32"})
    return out, json.loads((out / "kernels.json").read_text())["kernels"]


def test_a_strided_depthwise_input_gradient_is_one_unmasked_kernel_of_stride_phases(tmp_path):
    # 32 x 24 x 28 x 28, 3x3, stride 2 (MobileNet's downsampling depthwise layer): each of the 4 stride phases of
    # the input gradient is a sum of 1, 2, 2 or 4 shifted views of g times a tap (9 multiply-adds per 4 positions),
    # placed side by side as (N, C, 14, 2, 14, 2): one elementwise kernel, which split_index_set takes apart at the
    # phases and the views' edges, so no gate is left in it. The transposed convolution over g with zeros inserted
    # was two kernels (the zero-inserted copy, then 9 multiply-adds per position): 0.37 -> 0.12 ms (Zen 3).
    out, kernels = _strided_depthwise_backward(tmp_path, "x")
    # the forward, then the input gradient: no zero-inserted copy of g
    assert [k["name"] for k in kernels] == ["r_32_24_14_14_3_3", "E_32_24_28_28"], [k["name"] for k in kernels]
    ir = (out / kernels[1]["ir"]).read_text()
    assert "CMPLT" not in ir and "WHERE" not in ir, ir[:3000]  # every phase and edge its own loop


def test_a_strided_depthwise_input_gradient_is_stored_by_phases_before_the_layer_below_reads_it(tmp_path):
    # When the gradient flows on into the layer below (here a ReLU's gradient), the phases are stored in their own
    # layout (N, C, 14, 2, 14, 2) first: fused into the ReLU's gradient, which reads them as (N, C, 28, 28), the phase
    # axes merged with the rows into loops whose gates flip at every position (MobileNet's 32 x 32 x 16 x 16: 0.42 ms;
    # stored, 0.05 ms plus the consumer's read).
    out, kernels = _strided_depthwise_backward(tmp_path, "x.relu()")
    names = [k["name"] for k in kernels]
    assert "E_32_24_14_2_14_2" in names and names[-1] == "E_32_24_28_28", names
    phases = (out / kernels[names.index("E_32_24_14_2_14_2")]["ir"]).read_text()
    assert "CMPLT" not in phases and "WHERE" not in phases, phases[:3000]
    rng = np.random.default_rng(1)
    x = rng.standard_normal((4, 8, 11, 10)).astype(np.float32)
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    g = rng.standard_normal((4, 8, 6, 5)).astype(np.float32)
    from tensorscope import Tensor
    tx = Tensor(x, device="C", requires_grad=True)
    tx.relu().conv2d(Tensor(w, device="C"), stride=2, padding=1, groups=8).backward(Tensor(g, device="C"))
    px = torch.tensor(x, requires_grad=True)
    F.conv2d(px.relu(), torch.tensor(w), stride=2, padding=1, groups=8).backward(torch.tensor(g))
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_a_strided_depthwise_input_gradient_on_4x4_planes_keeps_its_loops_of_4_whole(tmp_path):
    # MobileNet's second downsampling layer, 32 x 64 x 8 x 8 (output gradient planes of 4x4): split_index_set splits
    # the phase loops but leaves the loops of 4 along the rows and columns whole (their edge gates masked loads):
    # split at the edges, they were loops of 3 and 1 that gcc neither vectorized nor packed (0.128 -> 0.074 ms in
    # the step). One store per phase, in loops of 4; values against PyTorch on such planes, and a 1-row one.
    script = tmp_path / "dw4.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n"
                      "x = Tensor(rng.standard_normal((32, 64, 8, 8)).astype(np.float32), requires_grad=True)\n"
                      "w = Tensor(rng.standard_normal((64, 1, 3, 3)).astype(np.float32), requires_grad=True)\n"
                      "x.relu().conv2d(w, stride=2, padding=1, groups=64).backward("
                      "Tensor(rng.standard_normal((32, 64, 4, 4)).astype(np.float32)))\n"
                      "x.grad.realize()\n")
    out = run_cli_out(script, tmp_path / "out")
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    (phases,) = [k for k in kernels if k["name"] == "E_32_64_4_2_4_2"]
    ir = (out / phases["ir"]).read_text().split("\n\n")[0]
    consts = {line.split(" = ")[0].strip(): line.split("CONST.int32 ")[1] for line in ir.splitlines() if "CONST.int32 " in line}
    whole = [line for line in ir.splitlines() if "; global" in line and consts.get(line.split("RANGE.int32 ")[1].split()[0]) == "4"]
    assert len([line for line in ir.splitlines() if line.strip().startswith("STORE")]) == 4, ir
    assert len(whole) >= 2, ir
    from tensorscope import Tensor
    rng = np.random.default_rng(2)
    for shape in [(4, 8, 8, 8), (2, 8, 2, 8), (2, 8, 7, 7)]:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
        oh, ow = (shape[2] + 1) // 2, (shape[3] + 1) // 2
        g = rng.standard_normal((shape[0], 8, oh, ow)).astype(np.float32)
        for dev in ("C", "INTERP"):
            tx = Tensor(x, device=dev, requires_grad=True)
            tx.relu().conv2d(Tensor(w, device=dev), stride=2, padding=1, groups=8).backward(Tensor(g, device=dev))
            px = torch.tensor(x, requires_grad=True)
            F.conv2d(px.relu(), torch.tensor(w), stride=2, padding=1, groups=8).backward(torch.tensor(g))
            np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_a_convolution_over_rows_of_16_reads_its_input_as_flat_rows(tmp_path):
    # Flat rows (conv_direct, flat_row_pitch): 4 groups of 16 -> 16 channels 3x3 on 16x16 images (rows of 16,
    # which 32 does not divide) is one register-tiled kernel over the padded input stored with rows 18 floats
    # apart, its 16 x 18 positions one axis that the tile takes 32 at a time, 8 channels of a group a tile; the
    # last two positions of each row are cropped away. No im2col (9 times the input) is stored: the kernels are
    # the padded copy, the convolution and the crop of the realized output.
    out, kernels = script_kernels(tmp_path, "x = Tensor(np.random.default_rng(0).standard_normal((4, 64, 16, 16)).astype(np.float32))\n"
                                            "w = Tensor(np.random.default_rng(1).standard_normal((64, 16, 3, 3)).astype(np.float32))\n"
                                            "x.conv2d(w, padding=1, groups=4).realize()\n")
    names = [k["name"] for k in kernels]
    assert names == ["E_4_64_19_18", "r_4_4_16_288_16_9", "E_4_64_16_16"], names
    header = (out / kernels[1]["ir"]).read_text().splitlines()[0]
    assert "UPCAST_GLOBAL(32)" in header and "REGISTER_TILE(8)" in header, header


def test_a_flat_row_convolution_into_20_channels_takes_the_channel_major_weight_gradient(tmp_path):
    # Caffe's LeNet's first layer, a smaller batch: 1 -> 20 channels 5x5 on 28x28 is a flat-row convolution (rows of
    # 24 read 28 apart: r_8_20_672_25 over the input stored with a row more, E_8_29_28); its weight gradient is the
    # channel-major matmul an im2col forward would have left for 20 channels (16 does not divide them): g copied to
    # (20, N·O) a plane at a time (E_20_8_24_24), dW = g @ the windows in tap panels (E_8_24_24_32, r_20_32_4608).
    # Channels-last, g's transpose to (N·O, 20) took 1.6 ms in Caffe's step. Values: test_flat_row_convolutions_...
    _, kernels = conv_backward_kernels(tmp_path, (1, 20, 5), (8, 1, 28, 28), ".max_pool2d(kernel_size=(2, 2))")
    names = [k["name"] for k in kernels]
    assert "r_8_20_672_25" in names and "E_8_29_28" in names, names
    assert "E_20_8_24_24" in names and "r_20_32_4608" in names and "E_8_24_24_20" not in names, names


@pytest.mark.parametrize("n,ci,h,w,co,k,pad,groups,relu", [(2, 16, 16, 16, 16, 3, 1, 1, False), (2, 16, 16, 16, 32, 3, 1, 4, True),
                                                          (2, 1, 28, 28, 20, 5, 0, 1, False),
                                                          (2, 8, 12, 14, 16, 3, (1, 1, 0, 2), 1, False),
                                                          (2, 8, 12, 20, 16, 5, 0, 2, True)])
def test_flat_row_convolutions_match_pytorch(n, ci, h, w, co, k, pad, groups, relu):
    # Flat rows (conv_direct, flat_row_pitch): rows of 16 (padding 1, 3x3: 16 x 18 positions), rows of 24 into 20
    # channels (the channel-major weight gradient), rows of 14 with padding on one side (pitch 16), a 5x5 without
    # padding (rows of 16 read 20 apart), grouped, a ReLU before the convolution: the forward (its cropped
    # positions), input and weight gradients against PyTorch
    from tensorscope import Tensor
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, ci, h, w)).astype(np.float32)
    wt = rng.standard_normal((co, ci // groups, k, k)).astype(np.float32)
    tx, tw = Tensor(x, device="C", requires_grad=True), Tensor(wt, device="C", requires_grad=True)
    out = (tx.relu() if relu else tx).conv2d(tw, padding=pad, groups=groups)
    g = rng.standard_normal(out.shape).astype(np.float32)
    (out * Tensor(g, device="C")).sum().backward()
    px, pw = torch.tensor(x, requires_grad=True), torch.tensor(wt, requires_grad=True)
    pin = torch.relu(px) if relu else px
    ref = F.conv2d(F.pad(pin, pad), pw, groups=groups) if isinstance(pad, tuple) else F.conv2d(pin, pw, padding=pad, groups=groups)
    (ref * torch.tensor(g)).sum().backward()
    for got, want in [(out, ref), (tx.grad, px.grad), (tw.grad, pw.grad)]:
        want = want.detach().numpy()
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))


def _takes_flat_rows(n, ci, h, w, co, kh, kw, pad, groups):
    """Mirrors conv_direct's choice of flat rows (flat_row_pitch) for a unit-stride 2-d convolution on C; pad is
    (left, right, top, bottom)."""
    oh, ow = h + pad[2] + pad[3] - kh + 1, w + pad[0] + pad[1] - kw + 1
    if oh <= 0 or ow <= 0 or ow % 32 == 0 or co // groups < 8 or (ci // groups) * kh * kw < 8:
        return False
    if 2 * n * co * oh * ow * (ci // groups) * kh * kw < 1 << 18 or (28 <= ow < 32 and groups == 1):
        return False  # too small for the implicit GEMM; rows of 28-31 are widened to 32 instead
    width = w + pad[0] + pad[1]
    pitch = next(p for p in range(width, width + 32) if oh * p % 32 == 0)
    return pitch - ow <= 0.4 * pitch


def test_random_flat_row_convolutions_match_pytorch():
    # Flat rows over shapes no heuristic was written for (seeded): batch, channels, groups, rectangular kernels and
    # one-sided paddings drawn at random, kept when conv_direct takes flat rows for them (_takes_flat_rows); the
    # forward, input and weight gradients against PyTorch, the bias too
    from tensorscope import Tensor
    rng = np.random.default_rng(44)
    cases = 0
    while cases < 10:
        groups = int(rng.choice([1, 1, 2, 4]))
        n, ci, co = int(rng.integers(1, 4)), groups * int(rng.integers(1, 9)), groups * int(rng.integers(8, 17))
        kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        h, w = int(rng.integers(kh, 24)), int(rng.integers(kw, 24))
        pad = tuple(int(v) for v in rng.integers(0, 3, 4))
        if not _takes_flat_rows(n, ci, h, w, co, kh, kw, pad, groups):
            continue
        cases += 1
        x = rng.standard_normal((n, ci, h, w)).astype(np.float32)
        wt = rng.standard_normal((co, ci // groups, kh, kw)).astype(np.float32)
        b = rng.standard_normal(co).astype(np.float32)
        tx, tw, tb = (Tensor(v, device="C", requires_grad=True) for v in (x, wt, b))
        out = tx.conv2d(tw, tb, padding=pad, groups=groups)
        g = rng.standard_normal(out.shape).astype(np.float32)
        (out * Tensor(g, device="C")).sum().backward()
        px, pw, pb = (torch.tensor(v, requires_grad=True) for v in (x, wt, b))
        ref = F.conv2d(F.pad(px, pad), pw, pb, groups=groups)
        (ref * torch.tensor(g)).sum().backward()
        for got, want in [(out, ref), (tx.grad, px.grad), (tw.grad, pw.grad), (tb.grad, pb.grad)]:
            want = want.detach().numpy()
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-5 * float(np.abs(want).max()),
                                       err_msg=str((n, ci, h, w, co, kh, kw, pad, groups)))


@pytest.mark.parametrize("groups", [1, 4])
def test_a_weight_gradient_over_the_windows_is_summed_in_chunks_of_the_batch(tmp_path, groups):
    # weight_grad_over_windows (channels last, read in place) splits the batch into chunks whose g and x fit in half
    # of a core's L2 (kWeightGradL2ChunkBytes, 512 KiB), every register tile of taps x channels running over one chunk
    # before the next; a second kernel sums the chunks. 8 images of 48 (or 64, in 4 groups) channels on 16x16 are
    # 768 (1,024) KiB: 2 chunks of 4. Summed over the whole batch at once, each tile read all of g again from L3
    # (32 x 64 x 16 x 16, 3x3: 7.2-10.5 -> 4.1-5.9 ms). Values and gradients against PyTorch.
    ci, co = (48, 48) if groups == 1 else (64, 64)
    rng = np.random.default_rng(3)
    x_np = rng.standard_normal((8, ci, 16, 16)).astype(np.float32)
    w_np = (rng.standard_normal((co, ci // groups, 3, 3)) * 0.1).astype(np.float32)
    g_np = rng.standard_normal((8, co, 16, 16)).astype(np.float32)
    for name, v in [("x", x_np), ("w", w_np), ("g", g_np)]:
        np.save(tmp_path / f"{name}.npy", v)
    out, kernels = script_kernels(tmp_path, f"x = Tensor(np.load({str(tmp_path / 'x.npy')!r}), requires_grad=True)\n"
                                            f"w = Tensor(np.load({str(tmp_path / 'w.npy')!r}), requires_grad=True)\n"
                                            f"x.conv2d(w, padding=1, groups={groups}).backward(Tensor(np.load({str(tmp_path / 'g.npy')!r})))\n"
                                            f"np.save({str(tmp_path / 'dw.npy')!r}, w.grad.numpy())\n"
                                            f"np.save({str(tmp_path / 'dx.npy')!r}, x.grad.numpy())\n")
    names = [k["name"] for k in kernels]
    chunked, sums = ("r_2_432_48_4_16_16", "r_432_48_2") if groups == 1 else ("r_2_4_144_16_4_16_16", "r_4_144_16_2")
    assert chunked in names and sums in names, names
    px, pw = torch.tensor(x_np, requires_grad=True), torch.tensor(w_np, requires_grad=True)
    F.conv2d(px, pw, padding=1, groups=groups).backward(torch.from_numpy(g_np))
    np.testing.assert_allclose(np.load(tmp_path / "dw.npy"), pw.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(np.load(tmp_path / "dx.npy"), px.grad.numpy(), rtol=1e-4, atol=1e-4)
