# Neural-network ops (NCHW) against torch.nn.functional: conv2d/conv_transpose2d with 1-3 spatial dims, groups,
# stride, dilation and the padding forms (int, per-dim, flat asymmetric/negative); max/avg pooling with the
# kernel-length rule, ceil_mode, count_include_pad, return_indices, max_unpool2d; interpolate; layernorm;
# scaled_dot_product_attention with masks; dropout.
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ops_helper import check, check_raises, devices, rand
from tensorscope import Tensor

# window sums of up to a few dozen products in another order than torch: forward atol 1e-5
CONV = [
    ("2d", (2, 3, 6, 6), (4, 3, 3, 3), {}),
    ("2d_pad1", (1, 2, 5, 5), (3, 2, 3, 3), {"padding": 1}),
    ("2d_stride2", (1, 2, 7, 7), (3, 2, 3, 3), {"stride": 2, "padding": 1}),
    ("2d_dilation", (1, 2, 7, 7), (2, 2, 3, 3), {"dilation": 2}),
    ("2d_groups", (1, 4, 5, 5), (6, 2, 3, 3), {"groups": 2}),
    ("2d_depthwise", (2, 3, 5, 5), (3, 1, 3, 3), {"groups": 3, "padding": (1, 1)}),
    ("2d_rect", (1, 2, 6, 5), (3, 2, 2, 3), {"stride": (2, 1), "padding": (1, 0)}),
    ("2d_1x1", (2, 3, 4, 4), (5, 3, 1, 1), {}),
    ("1d", (2, 3, 9), (4, 3, 3), {"padding": 1, "stride": 2}),
    ("3d", (1, 2, 4, 4, 4), (2, 2, 2, 2, 2), {"padding": 1}),
]


def _torch_conv(x, w, b, kw):
    nd = w.ndim - 2
    return getattr(F, f"conv{nd}d")(x, w, b, **kw)


@devices
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", CONV, ids=lambda c: c[0])
def test_conv2d(case, bias, dev):
    _, xs, ws, kw = case
    shapes = [xs, ws] + ([(ws[0],)] if bias else [])
    check(shapes, lambda x, w, *b: _torch_conv(x, w, b[0] if b else None, kw),
          lambda x, w, *b: x.conv2d(w, b[0] if b else None, **kw), dev=dev, atol=1e-5)


@devices
@pytest.mark.parametrize("pad", [(1, 2, 0, 1), (0, 0, -1, 1), (2, 0, 1, 1)], ids=str)
def test_conv2d_flat_asymmetric_padding(pad, dev):
    check([(1, 2, 5, 5), (3, 2, 3, 3)], lambda x, w: F.conv2d(F.pad(x, pad), w), lambda x, w: x.conv2d(w, padding=pad), dev=dev, atol=1e-5)


CONVT = [
    ("2d", (1, 2, 4, 4), (2, 3, 3, 3), {}),
    ("2d_stride2", (1, 2, 3, 3), (2, 3, 3, 3), {"stride": 2}),
    ("2d_pad_outpad", (1, 2, 3, 3), (2, 3, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}),
    ("2d_groups", (1, 4, 3, 3), (4, 2, 2, 2), {"groups": 2, "stride": 2}),
    ("2d_dilation", (1, 2, 3, 3), (2, 2, 2, 2), {"dilation": 2}),
    ("1d", (2, 2, 5), (2, 3, 3), {"stride": 2, "padding": 1}),
    ("3d", (1, 2, 2, 2, 2), (2, 2, 2, 2, 2), {"stride": 2}),
]


@devices
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("case", CONVT, ids=lambda c: c[0])
def test_conv_transpose2d(case, bias, dev):
    _, xs, ws, kw = case
    cout = ws[1] * kw.get("groups", 1)
    shapes = [xs, ws] + ([(cout,)] if bias else [])
    nd = len(ws) - 2
    check(shapes, lambda x, w, *b: getattr(F, f"conv_transpose{nd}d")(x, w, b[0] if b else None, **kw),
          lambda x, w, *b: x.conv_transpose2d(w, b[0] if b else None, **kw), dev=dev, atol=1e-5)


POOL = [
    ("k2", (1, 2, 6, 6), {"kernel_size": (2, 2)}),
    ("k3s2", (2, 2, 7, 7), {"kernel_size": (3, 3), "stride": 2}),
    ("k3s1p1", (1, 2, 5, 5), {"kernel_size": (3, 3), "stride": 1, "padding": 1}),
    ("rect", (1, 1, 6, 7), {"kernel_size": (2, 3), "stride": (2, 1)}),
    ("dilation", (1, 1, 7, 7), {"kernel_size": (2, 2), "stride": 1, "dilation": 2}),
    ("ceil", (1, 2, 7, 7), {"kernel_size": (2, 2), "ceil_mode": True}),
    ("ceil_pad", (1, 1, 6, 6), {"kernel_size": (3, 3), "stride": 2, "padding": 1, "ceil_mode": True}),
    ("1d", (2, 3, 9), {"kernel_size": (3,), "stride": 2}),
    ("3d", (1, 1, 4, 4, 4), {"kernel_size": (2, 2, 2)}),
]


def _tpool(kind, x, kw):
    nd = len(kw["kernel_size"])
    return getattr(F, f"{kind}_pool{nd}d")(x, **kw)


@devices
@pytest.mark.parametrize("case", POOL, ids=lambda c: c[0])
def test_max_pool2d(case, dev):
    _, xs, kw = case
    check([xs], lambda x: _tpool("max", x, kw), lambda x: x.max_pool2d(**kw), dev=dev)


@devices
@pytest.mark.parametrize("count_include_pad", [True, False])
@pytest.mark.parametrize("case", POOL, ids=lambda c: c[0])
def test_avg_pool2d(case, count_include_pad, dev):
    _, xs, kw = case
    if "dilation" in kw:
        pytest.skip("torch's avg_pool has no dilation")
    kw = dict(kw, count_include_pad=count_include_pad)
    check([xs], lambda x: _tpool("avg", x, kw), lambda x: x.avg_pool2d(**kw), dev=dev)


@devices
def test_pool_default_kernel_and_int_kernel(dev):
    check([(1, 2, 6, 6)], lambda x: F.max_pool2d(x, 2), lambda x: x.max_pool2d(), dev=dev)
    check([(1, 2, 6, 6)], lambda x: F.avg_pool2d(x, 3), lambda x: x.avg_pool2d(3), dev=dev)


@devices
@pytest.mark.parametrize("case", [c for c in POOL if c[0] in ("k2", "k3s2", "k3s1p1", "rect", "1d", "ceil")], ids=lambda c: c[0])
def test_max_pool2d_return_indices(case, dev):
    _, xs, kw = case
    check([xs], lambda x: _tpool("max", x, dict(kw, return_indices=True)), lambda x: x.max_pool2d(**kw, return_indices=True), dev=dev)


@devices
@pytest.mark.parametrize("case", [((1, 2, 4, 4), (2, 2), None), ((1, 1, 6, 6), (3, 3), 2), ((2, 1, 5, 5), (2, 2), None)], ids=str)
def test_max_unpool2d(case, dev):
    xs, k, s = case
    x = torch.tensor(rand(np.random.default_rng(6), xs))
    v, i = F.max_pool2d(x, k, s, return_indices=True)
    out = (xs[-2], xs[-1])

    def tfn(t):
        return F.max_unpool2d(t, i, k, s, output_size=out)

    def sfn(t):
        return Tensor.max_unpool2d(t, Tensor(i.numpy().astype(np.int32), device=dev), kernel_size=k, stride=s, output_size=out)
    check(None, tfn, sfn, dev=dev, vals=[v.numpy()])


INTERP = [((1, 2, 4), (7,), "linear", False), ((1, 2, 4), (3,), "linear", True), ((1, 1, 3, 4), (5, 6), "linear", False),
          ((1, 1, 3, 4), (5, 6), "linear", True), ((1, 1, 4, 4), (2, 3), "linear", False), ((1, 2, 3, 4), (6, 8), "nearest", False),
          ((1, 2, 5, 4), (3, 7), "nearest", False), ((1, 2, 5, 4), (3, 7), "nearest-exact", False), ((1, 1, 2, 2, 2), (3, 3, 3), "linear", False)]


@devices
@pytest.mark.parametrize("case", INTERP, ids=str)
def test_interpolate(case, dev):
    xs, size, mode, ac = case
    tmode = {1: "linear", 2: "bilinear", 3: "trilinear"}[len(size)] if mode == "linear" else mode
    check([xs], lambda x: F.interpolate(x, size=size, mode=tmode, align_corners=ac if mode == "linear" else None),
          lambda x: x.interpolate(size, mode=mode, align_corners=ac), dev=dev)


@devices
@pytest.mark.parametrize("case", [((3, 5), -1), ((2, 3, 4), -1), ((2, 3, 4), 1)], ids=str)
def test_layernorm(case, dev):
    shape, axis = case
    def tfn(x):
        m = x.mean(axis, keepdim=True)
        return (x - m) / torch.sqrt(x.var(axis, unbiased=False, keepdim=True) + 1e-5)
    check([shape], tfn, lambda x: x.layernorm(axis), dev=dev)
    if axis == -1:
        check([shape], lambda x: F.layer_norm(x, x.shape[-1:]), lambda x: x.layernorm(), dev=dev)


def _sdpa(q, k, v, mask=None, causal=False):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf) if mask.dtype == torch.bool else s + mask
    return torch.softmax(s, -1) @ v


@devices
@pytest.mark.parametrize("mask", ["none", "causal", "bool", "float"])
@pytest.mark.parametrize("shapes", [((2, 3, 4), (2, 5, 4), (2, 5, 3)), ((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8))], ids=str)
def test_scaled_dot_product_attention(shapes, mask, dev):
    rng = np.random.default_rng(7)
    q, k, v = (rand(rng, s) for s in shapes)
    L, S = shapes[0][-2], shapes[1][-2]
    if mask == "bool":
        m = rng.random((L, S)) > 0.3
        m[:, 0] = True
        check(None, lambda a, b, c, mm: _sdpa(a, b, c, mm), lambda a, b, c, mm: a.scaled_dot_product_attention(b, c, attn_mask=mm),
              dev=dev, vals=[q, k, v, m], atol=1e-5)
    elif mask == "float":
        m = rand(rng, (L, S))
        check(None, lambda a, b, c, mm: _sdpa(a, b, c, mm), lambda a, b, c, mm: a.scaled_dot_product_attention(b, c, attn_mask=mm),
              dev=dev, vals=[q, k, v, m], atol=1e-5)
    else:
        causal = mask == "causal"
        check(None, lambda a, b, c: _sdpa(a, b, c, causal=causal), lambda a, b, c: a.scaled_dot_product_attention(b, c, is_causal=causal),
              dev=dev, vals=[q, k, v], atol=1e-5)


@devices
def test_dropout_honours_training(dev):
    x = Tensor.ones(64, 64, device=dev)
    assert np.array_equal(x.dropout(0.5).numpy(), x.numpy())
    Tensor.training = True
    try:
        Tensor.manual_seed(1)
        y = x.dropout(0.25).numpy()
    finally:
        Tensor.training = False
    assert set(np.unique(y)).issubset({0.0, np.float32(1 / 0.75)})
    assert 0.15 < (y == 0).mean() < 0.35


@devices
def test_nn_errors(dev):
    x = Tensor.ones(1, 3, 5, 5, device=dev)
    check_raises((RuntimeError, AssertionError, ValueError), lambda: x.conv2d(Tensor.ones(2, 2, 3, 3, device=dev)), "(1, 3, 5, 5)", "(2, 2, 3, 3)")
    check_raises(ValueError, lambda: x.interpolate((4, 4), mode="cubic"), "cubic")
    check_raises(ValueError, lambda: x.max_pool2d(kernel_size=(2, 2), padding=(1, 1, 1)), "padding")
