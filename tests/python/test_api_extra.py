# Issue 16, "nothing is missing": tinygrad's documented Tensor methods with PyTorch semantics, at their edges.
# copysign (IEEE special values), pad in every mode (pads as large as torch allows, negative pads), unfold with
# overlapping and gapped windows, scatter / scatter_reduce with repeated indices, Tensor.eye(n, m) for every
# n, m order, and torch's errors for invalid arguments. Forward values and gradients against torch (CPU,
# float32) through ops_helper.check, on C and INTERP (the compiled backend and the reference executor).
import numpy as np
import pytest
import torch

from ops_helper import check, check_raises, rand
from tensorscope import Tensor

DEVS = pytest.mark.parametrize("dev", ["C", "INTERP"])


# ---- copysign ------------------------------------------------------------------------------------

@DEVS
def test_copysign_special_values(dev):
    a = np.array([1.0, -2.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, -4.0], dtype=np.float32)
    b = np.array([-0.0, 0.0, -1.0, 1.0, -5.0, 2.0, -1.0, np.nan, -np.inf], dtype=np.float32)
    got = Tensor(a, device=dev).copysign(Tensor(b, device=dev)).numpy()
    want = torch.copysign(torch.tensor(a), torch.tensor(b)).numpy()
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(got)], want[~np.isnan(want)])


@DEVS
@pytest.mark.parametrize("other", ["tensor", "scalar", "broadcast"])
def test_copysign_forward_backward(other, dev):
    if other == "tensor":
        check([(3, 4), (3, 4)], torch.copysign, lambda a, b: a.copysign(b), dev=dev)
    elif other == "scalar":
        check([(3, 4)], lambda a: torch.copysign(a, -1.0), lambda a: a.copysign(-1.0), dev=dev)
    else:
        check([(3, 4), (4,)], torch.copysign, lambda a, b: a.copysign(b), dev=dev)


# ---- pad -----------------------------------------------------------------------------------------

PAD_CASES = {
    "reflect_max": ((2, 5), (4, 4), "reflect"),            # pad = size - 1, the most torch allows
    "reflect_2d": ((2, 3, 4), (3, 1, 2, 0), "reflect"),
    "reflect_crop": ((3, 6), (-2, 3), "reflect"),          # a negative side crops
    "replicate_wide": ((2, 3), (7, 5), "replicate"),        # replicate has no limit
    "replicate_2d": ((1, 2, 3, 2), (2, 3, 4, 1), "replicate"),
    # torch 1.13 pads circularly only after (N, C) dims
    "circular_full": ((1, 2, 4), (4, 4), "circular"),       # pad = size, the most torch allows
    "circular_2d": ((1, 1, 3, 4), (1, 3, 2, 2), "circular"),
    "circular_crop": ((1, 2, 5), (3, -1), "circular"),    # crops, then wraps what is left (torch)
    "circular_crop_before": ((1, 2, 5), (-1, 3), "circular"),
    "circular_crop_both": ((1, 1, 4, 5), (2, -2, -1, -1), "circular"),
    "reflect_crop_after": ((2, 5), (3, -1), "reflect"),
    "replicate_crop": ((2, 5), (-2, 3), "replicate"),
    "constant_value": ((2, 3), (1, 2, 0, 3), "constant"),
    "constant_crop": ((4, 5), (-1, 2, 1, -2), "constant"),
}


@DEVS
@pytest.mark.parametrize("case", PAD_CASES)
def test_pad_modes_forward_backward(case, dev):
    shape, pads, mode = PAD_CASES[case]
    kw = {"value": 1.5} if mode == "constant" else {}
    check([shape], lambda x: torch.nn.functional.pad(x, pads, mode=mode, **kw),
          lambda x: x.pad(pads, mode=mode, **kw), dev=dev)


def test_pad_errors():
    x = Tensor(np.zeros((2, 4), dtype=np.float32))
    check_raises(ValueError, lambda: x.pad((4, 0), mode="reflect"), "reflect", "4")
    check_raises(ValueError, lambda: x.pad((5, 0), mode="circular"), "circular")
    check_raises(ValueError, lambda: x.pad((1, 1), mode="wrap"), "wrap")
    check_raises(ValueError, lambda: x.pad((1, 1, 1)), "even")
    check_raises(ValueError, lambda: x.pad(((1, 1),)), "pairs")


# ---- unfold --------------------------------------------------------------------------------------

UNFOLD_CASES = {
    "overlap": ((10,), 0, 4, 1),
    "gaps": ((11,), 0, 2, 3),
    "exact": ((2, 9), 1, 3, 3),
    "middle_dim": ((2, 7, 3), 1, 3, 2),
    "negative_dim": ((3, 8), -1, 5, 2),
    "whole_dim": ((4, 3), 0, 4, 1),
    "empty_window": ((3, 4), 1, 0, 1),
}


@DEVS
@pytest.mark.parametrize("case", UNFOLD_CASES)
def test_unfold_forward_backward(case, dev):
    shape, dim, size, step = UNFOLD_CASES[case]
    check([shape], lambda x: x.unfold(dim, size, step), dev=dev)


def test_unfold_errors():
    x = Tensor(np.zeros((3, 4), dtype=np.float32))
    check_raises(ValueError, lambda: x.unfold(1, 5, 1), "size 5")
    check_raises(ValueError, lambda: x.unfold(1, 2, 0), "step")
    check_raises(IndexError, lambda: x.unfold(2, 2, 1))


# ---- scatter, scatter_reduce ---------------------------------------------------------------------

def _index(rng, shape, n):
    return rng.integers(0, n, size=shape).astype(np.int32)


@DEVS
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_scatter_repeated_indices_forward_backward(dim, dev):
    # a permutation along dim keeps the result defined (torch leaves repeated scatter targets unspecified)
    rng = np.random.default_rng(1)
    x, src = rand(rng, (4, 5)), rand(rng, (3, 5))
    d = dim % 2
    idx = np.stack([rng.permutation(4)[:3] for _ in range(5)], axis=1) if d == 0 else \
        np.stack([rng.permutation(5)[:5] for _ in range(3)], axis=0)
    src = src if d == 0 else rand(rng, (3, 5))
    x = x if d == 0 else rand(rng, (3, 6))
    check(None, lambda t, i, s: torch.scatter(t, dim, i.long(), s), lambda t, i, s: t.scatter(dim, i, s), dev=dev,
          vals=[x, idx.astype(np.int32), src])


@DEVS
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce_repeated_indices_3d(reduce, include_self, dev):
    rng = np.random.default_rng(2)
    x = rand(rng, (2, 4, 3), 0.5, 2.0) * rng.choice([-1.0, 1.0], size=(2, 4, 3)).astype(np.float32)
    src = rand(rng, (2, 6, 3), 0.5, 2.0)
    idx = _index(rng, (2, 6, 3), 3)  # every target row of dim 1 but the last gets several values, row 3 none
    check(None, lambda t, i, s: t.scatter_reduce(1, i.long(), s, reduce, include_self=include_self),
          lambda t, i, s: t.scatter_reduce(1, i, s, reduce, include_self=include_self), dev=dev,
          vals=[x, idx, src.astype(np.float32)])


def test_scatter_errors():
    x = Tensor(np.zeros((3, 4), dtype=np.float32))
    check_raises(IndexError, lambda: x.scatter(1, Tensor([[1.0]]), 1.0), "integer")
    check_raises(RuntimeError, lambda: x.scatter(1, Tensor(np.array([1], dtype=np.int32)), 1.0), "dims")
    check_raises(ValueError, lambda: x.scatter_reduce(1, Tensor(np.zeros((3, 1), dtype=np.int32)), x, "median"), "median")


# ---- eye -----------------------------------------------------------------------------------------

@DEVS
@pytest.mark.parametrize("n,m", [(1, None), (4, None), (2, 5), (5, 2), (3, 1), (1, 3), (0, 3), (3, 0)])
def test_eye(n, m, dev):
    got = Tensor.eye(n, m, device=dev)
    want = torch.eye(n) if m is None else torch.eye(n, m)
    assert got.shape == tuple(want.shape) and got.numpy().dtype == np.float32
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_eye_as_leaf_gets_torch_gradient():
    x, tx = Tensor.eye(5, 3, requires_grad=True), torch.eye(5, 3, requires_grad=True)
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    (x @ Tensor(w)).square().sum().backward()
    (tx @ torch.tensor(w)).square().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_eye_errors():
    check_raises(ValueError, lambda: Tensor.eye(-1), "n")
    check_raises(ValueError, lambda: Tensor.eye(3, -2), "m")


# ---- invalid shapes: torch's errors --------------------------------------------------------------

def test_reshape_and_unflatten_errors_match_torch():
    x, t = Tensor(np.zeros((3, 4), dtype=np.float32)), torch.zeros(3, 4)
    for bad in [(-1, -1), (2, -1, -1)]:
        with pytest.raises(RuntimeError, match="only one dimension can be inferred"):
            t.reshape(*bad)
        check_raises(RuntimeError, lambda: x.reshape(*bad), "only one dimension can be inferred")
    check_raises(RuntimeError, lambda: x.reshape(-2, 6), "-2")
    check_raises(ValueError, lambda: x.reshape(5, 3), "(5, 3)")
    check_raises(RuntimeError, lambda: x.unflatten(1, (-1, -1)), "only one dimension can be inferred")
    np.testing.assert_array_equal(x.reshape(-1, 2).shape, (6, 2))
