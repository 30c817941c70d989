# Indexing against PyTorch: ints (negative), slices with any step (negative included) and clamped bounds, None,
# Ellipsis, lists and integer tensors (advanced indexing with broadcasting and NumPy placement), gradients that
# accumulate over repeated indices; gather, scatter, scatter_reduce, one_hot with int32 indices; error types.
import numpy as np
import pytest
import torch

from ops_helper import check, check_raises, devices, rand
from tensorscope import Tensor

I = lambda *v: np.array(v, dtype=np.int64)

GETITEM = {
    "int": ((5, 4), lambda x: x[2]),
    "neg_int": ((5, 4), lambda x: x[-1]),
    "two_ints": ((5, 4), lambda x: x[1, -2]),
    "slice": ((5, 4), lambda x: x[1:4]),
    "slice_step": ((9, 4), lambda x: x[1:8:3]),
    "slice_clamped": ((5, 4), lambda x: x[-10:10, 2:100]),
    "slice_empty": ((5, 4), lambda x: x[3:1]),
    "none": ((5, 4), lambda x: x[None, :, None]),
    "ellipsis": ((2, 3, 4), lambda x: x[..., 1]),
    "ellipsis_mid": ((2, 3, 4, 5), lambda x: x[1, ..., ::2]),
    "int_and_slices": ((2, 3, 4), lambda x: x[:, 1, 1:3]),
    "0d_ellipsis": ((), lambda x: x[...]),
    "0d_none": ((), lambda x: x[None]),
    "list": ((5, 4), lambda x: x[[0, 2, 2, 4]]),
    "list_neg": ((5, 4), lambda x: x[[-1, 0, -2]]),
    "list_second_dim": ((5, 4), lambda x: x[:, [3, 0, 3]]),
    "two_lists": ((5, 4), lambda x: x[[0, 1, 4], [3, 3, 0]]),
    "list_int_adjacent": ((3, 4, 5), lambda x: x[:, [0, 2], 1]),
    "list_int_split": ((3, 4, 5), lambda x: x[[0, 2], :, 1]),
    "lists_split_by_slice": ((3, 4, 5), lambda x: x[[0, 2], :, [1, 4]]),
    "list_broadcast": ((3, 4, 5), lambda x: x[[[0], [2]], :, [1, 4, 3]]),
    "list_with_none": ((3, 4), lambda x: x[None, [0, 2], 1:3]),
}


@devices
@pytest.mark.parametrize("op", list(GETITEM))
def test_getitem(op, dev):
    shape, fn = GETITEM[op]
    check([shape], fn, dev=dev)


# torch has no negative slice steps: the reference flips instead
NEG_STEPS = {
    "rev": ((9, 4), lambda x: x.flip(0), lambda x: x[::-1]),
    "rev_step": ((9, 4), lambda x: x.flip(0)[1:7:2].flip(1)[:, ::3], lambda x: x[7:1:-2, ::-3]),
    "rev_bounds": ((9, 4), lambda x: x.flip(0)[1:4], lambda x: x[-2:-5:-1]),
    "rev_clamped": ((6,), lambda x: x.flip(0)[::2], lambda x: x[100::-2]),
}


@devices
@pytest.mark.parametrize("op", list(NEG_STEPS))
def test_getitem_negative_steps(op, dev):
    shape, torch_fn, ts_fn = NEG_STEPS[op]
    check([shape], torch_fn, ts_fn, dev=dev)


@devices
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_getitem_with_int_tensor(dtype, dev):
    idx = np.array([[0, 3], [3, 1]], dtype=dtype)
    check(None, lambda x: x[torch.tensor(idx.astype(np.int64))], lambda x: x[Tensor(idx.astype(np.int32), device=dev)], dev=dev,
          vals=[rand(np.random.default_rng(0), (4, 3))])
    check(None, lambda x: x[:, torch.tensor(idx.astype(np.int64))], lambda x: x[:, Tensor(idx, device=dev)], dev=dev,
          vals=[rand(np.random.default_rng(0), (4, 5))])


@devices
def test_getitem_int_and_bool_tensors(dev):
    check(None, lambda x: x[1:3], dev=dev, vals=[np.arange(6, dtype=np.int32)])
    check(None, lambda x: x[1::2], dev=dev, vals=[np.array([True, False, True, True])])


@devices
def test_getitem_errors(dev):
    x = Tensor.ones(3, 4, device=dev)
    check_raises(IndexError, lambda: x[3], "3", "size 3")
    check_raises(IndexError, lambda: x[:, -5], "-5")
    check_raises(IndexError, lambda: x[0, 0, 0], "too many")
    check_raises(IndexError, lambda: x[..., ...])
    check_raises(ValueError, lambda: x[::0], "zero")



def test_getitem_basic_keys_against_numpy():
    """Keys of ints, slices and None take the C++ path (getitem_basic); NumPy ints, slice bounds past int64 and
    0-d Tensors as bounds take tensor.py's conversion: every one must select what NumPy selects."""
    a = np.arange(5 * 6 * 7, dtype=np.float32).reshape(5, 6, 7)
    x = Tensor(a)
    big = 10 ** 30
    keys = [(slice(None), 3), (1, slice(2, 5)), (slice(-3, None), None, slice(None, -2)), (Ellipsis, slice(1, 3)),
            (slice(-big, big), 0), (slice(big, -big, -1), slice(None, None, 2)), (slice(None, None, -1), -1),
            (np.int64(2), slice(np.int32(1), np.int64(4))), (slice(4, 1), 0, slice(0, 0)), (-5, None, None, 5),
            4, slice(1, None), None, Ellipsis]
    for key in keys:
        np.testing.assert_array_equal(x[key].numpy(), a[key], err_msg=repr(key))
    np.testing.assert_array_equal(x[Tensor(np.int32(1)):Tensor(np.int32(3))].numpy(), a[1:3])
    for bad in [(slice(None), 6), (0, 0, -8), (0, 0, 0, 0)]:
        with pytest.raises(IndexError):
            x[bad]

GATHER = [((3, 4), 1, (3, 2)), ((3, 4), 0, (2, 4)), ((3, 4), -1, (2, 3)), ((2, 3, 4), 1, (2, 5, 4)), ((5,), 0, (7,))]


@devices
@pytest.mark.parametrize("case", GATHER, ids=str)
def test_gather(case, dev):
    shape, dim, ishape = case
    rng = np.random.default_rng(1)
    idx = rng.integers(0, shape[dim], size=ishape)
    x = rand(rng, shape)
    check(None, lambda t, i: torch.gather(t, dim, i.long()), lambda t, i: t.gather(dim, i), dev=dev, vals=[x, idx.astype(np.int32)])


@devices
@pytest.mark.parametrize("case", [((4, 5), 0, (2, 5)), ((4, 5), 1, (4, 2)), ((3, 4, 5), 2, (3, 4, 3)), ((3, 4, 5), -2, (2, 2, 5))], ids=str)
@pytest.mark.parametrize("src_kind", ["tensor", "scalar"])
def test_scatter(case, src_kind, dev):
    shape, dim, ishape = case
    rng = np.random.default_rng(2)
    # unique indices along dim (torch leaves the winner of duplicates unspecified)
    n = shape[dim]
    idx = np.argsort(rng.random(tuple(s if d != dim % len(shape) else n for d, s in enumerate(shape))), axis=dim)
    idx = np.take(idx, range(ishape[dim]), axis=dim)[tuple(slice(0, s) for s in ishape)].astype(np.int32)
    x, src = rand(rng, shape), rand(rng, ishape)
    if src_kind == "scalar":
        check(None, lambda t, i: torch.scatter(t, dim, i.long(), 3.5), lambda t, i: t.scatter(dim, i, 3.5), dev=dev, vals=[x, idx])
    else:
        check(None, lambda t, i, s: torch.scatter(t, dim, i.long(), s), lambda t, i, s: t.scatter(dim, i, s), dev=dev, vals=[x, idx, src])


@devices
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("case", [((4, 3), 0, (6, 3)), ((3, 5), 1, (3, 4))], ids=str)
def test_scatter_reduce(case, reduce, include_self, dev):
    shape, dim, ishape = case
    rng = np.random.default_rng(3)
    idx = rng.integers(0, shape[dim], size=ishape).astype(np.int32)  # duplicates on purpose: they reduce
    x, src = rand(rng, shape, 0.5, 2.0), rand(rng, ishape, 0.5, 2.0)
    check(None, lambda t, i, s: t.scatter_reduce(dim, i.long(), s, reduce, include_self=include_self),
          lambda t, i, s: t.scatter_reduce(dim, i, s, reduce, include_self=include_self), dev=dev, vals=[x, idx, src])


@devices
@pytest.mark.parametrize("case", [((5,), 4), ((2, 3), 5), ((), 3)], ids=str)
def test_one_hot(case, dev):
    shape, n = case
    idx = np.random.default_rng(4).integers(0, n, size=shape).astype(np.int32)
    check(None, lambda i: torch.nn.functional.one_hot(i.long(), n), lambda i: i.one_hot(n), dev=dev, vals=[idx])


@devices
def test_indexing_gradients_accumulate(dev):
    x = rand(np.random.default_rng(5), (4, 3))
    check(None, lambda t: t[[0, 0, 3, 0]] * 2 + t[1:, [2, 2]].sum(), lambda t: t[[0, 0, 3, 0]] * 2 + t[1:, [2, 2]].sum(), dev=dev, vals=[x])
    check(None, lambda t: torch.gather(t, 1, torch.tensor([[0, 0, 0], [1, 1, 2], [2, 2, 2], [0, 1, 0]])),
          lambda t: t.gather(1, Tensor(np.array([[0, 0, 0], [1, 1, 2], [2, 2, 2], [0, 1, 0]], dtype=np.int32), device=dev)), dev=dev, vals=[x])


@devices
def test_gather_scatter_errors(dev):
    x = Tensor.ones(3, 4, device=dev)
    i = Tensor(np.zeros((3,), dtype=np.int32), device=dev)
    check_raises(RuntimeError, lambda: x.gather(1, i), "(3,)", "(3, 4)")
    check_raises(IndexError, lambda: x.gather(2, Tensor(np.zeros((3, 4), dtype=np.int32), device=dev)))
    check_raises(ValueError, lambda: x.scatter_reduce(0, Tensor(np.zeros((3, 4), dtype=np.int32), device=dev), x, "median"), "median")
    check_raises(ValueError, lambda: x.one_hot(3), "integer")
