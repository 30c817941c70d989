# Movement and shape ops against PyTorch: reshape/view (None keeps a dim), permute, transpose/T (tinygrad: swaps
# dims 0 and 1), expand, flatten/unflatten, squeeze/unsqueeze, pad (flat torch order and grouped numpy order,
# negative pads, four modes), shrink, flip, cat/stack as methods, repeat, repeat_interleave, roll, split, chunk,
# tril/triu, diag/diagonal, unfold, meshgrid; zero-size dims; error types.
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ops_helper import check, check_raises, devices, rand
from tensorscope import Tensor

MOVES = {
    "reshape": ((2, 3, 4), lambda x: x.reshape(6, 4), None),
    "reshape_tuple": ((2, 3, 4), lambda x: x.reshape((4, -1)), None),
    "reshape_none": ((2, 3, 4), lambda x: x.reshape(2, 12), lambda x: x.reshape(None, -1)),
    "reshape_0d": ((1,), lambda x: x.reshape(()), None),
    "reshape_zero": ((0, 4), lambda x: x.reshape(2, 0, 2), None),
    "view": ((2, 3, 4), lambda x: x.view(3, 8), None),
    "permute": ((2, 3, 4), lambda x: x.permute(2, 0, 1), None),
    "permute_tuple": ((2, 3, 4), lambda x: x.permute((1, -1, 0)), None),
    "transpose_default": ((2, 3, 4), lambda x: x.transpose(1, 0), lambda x: x.transpose()),
    "transpose_neg": ((2, 3, 4), lambda x: x.transpose(-1, -3), None),
    "T_2d": ((3, 4), lambda x: x.T, None),
    "T_3d_swaps_first_two": ((2, 3, 4), lambda x: x.transpose(0, 1), lambda x: x.T),
    "expand": ((3, 1), lambda x: x.expand(3, 4), None),
    "expand_new_dims": ((3, 1), lambda x: x.expand(2, 3, 5), None),
    "expand_minus1": ((3, 1), lambda x: x.expand(-1, 4), None),
    "expand_none": ((3, 1), lambda x: x.expand(3, 4), lambda x: x.expand(None, 4)),
    "expand_zero": ((1, 3), lambda x: x.expand(0, 3), None),
    "flatten": ((2, 3, 4), lambda x: x.flatten(), None),
    "flatten_range": ((2, 3, 4, 5), lambda x: x.flatten(1, 2), None),
    "flatten_neg": ((2, 3, 4, 5), lambda x: x.flatten(-3, -2), None),
    "flatten_0d": ((), lambda x: x.flatten(), None),
    "unflatten": ((2, 12), lambda x: x.unflatten(1, (3, 4)), None),
    "unflatten_infer": ((2, 12), lambda x: x.unflatten(-1, (3, -1)), None),
    "squeeze": ((1, 3, 1, 4), lambda x: x.squeeze(), None),
    "squeeze_dim": ((1, 3, 1, 4), lambda x: x.squeeze(2), None),
    "squeeze_non1": ((1, 3, 1, 4), lambda x: x.squeeze(1), None),
    "unsqueeze": ((3, 4), lambda x: x.unsqueeze(1), None),
    "unsqueeze_neg": ((3, 4), lambda x: x.unsqueeze(-1), None),
    "unsqueeze_0d": ((), lambda x: x.unsqueeze(0), None),
    "flip": ((2, 3, 4), lambda x: x.flip((0, 2)), lambda x: x.flip(0, 2)),
    "flip_int": ((2, 3, 4), lambda x: x.flip((-1,)), lambda x: x.flip(-1)),
    "flip_empty": ((2, 3), lambda x: x.flip(()), lambda x: x.flip(())),
    "shrink": ((4, 5), lambda x: x[1:3, 0:4], lambda x: x.shrink(((1, 3), (0, 4)))),
    "shrink_none": ((4, 5), lambda x: x[:, 2:5], lambda x: x.shrink((None, (2, 5)))),
    "repeat": ((2, 3), lambda x: x.repeat(2, 3), None),
    "repeat_new_dims": ((2, 3), lambda x: x.repeat(2, 1, 2), lambda x: x.repeat((2, 1, 2))),
    "repeat_interleave": ((2, 3), lambda x: x.repeat_interleave(2, dim=1), None),
    "repeat_interleave_flat": ((2, 3), lambda x: x.repeat_interleave(3), None),
    "roll": ((4, 5), lambda x: x.roll(2, 1), None),
    "roll_neg": ((4, 5), lambda x: x.roll(-3, 0), None),
    "roll_multi": ((4, 5), lambda x: x.roll((1, 7), (0, 1)), None),
    "roll_flat": ((4, 5), lambda x: x.roll(3), None),
    "tril": ((4, 5), lambda x: x.tril(), None),
    "tril_diag": ((4, 5), lambda x: x.tril(1), None),
    "triu": ((4, 5), lambda x: x.triu(), None),
    "triu_neg": ((2, 4, 5), lambda x: x.triu(-1), None),
    "diag_1d": ((4,), lambda x: torch.diag(x), lambda x: x.diag()),
    "diag_2d": ((4, 5), lambda x: torch.diag(x), lambda x: x.diag()),
    "diagonal": ((4, 5), lambda x: x.diagonal(), None),
    "diagonal_offset": ((4, 5), lambda x: x.diagonal(2), None),
    "diagonal_neg_offset": ((4, 5), lambda x: x.diagonal(-1), None),
    "diagonal_dims": ((2, 3, 4), lambda x: x.diagonal(0, 1, 2), None),
    "diagonal_dims_rev": ((3, 2, 4), lambda x: x.diagonal(1, 2, 0), None),
    "unfold": ((8,), lambda x: x.unfold(0, 3, 1), None),
    "unfold_step": ((3, 9), lambda x: x.unfold(1, 3, 2), None),
    "unfold_dim0": ((7, 2), lambda x: x.unfold(0, 2, 3), None),
    "contiguous": ((2, 3), lambda x: x.contiguous(), None),
    "clone": ((2, 3), lambda x: x.clone(), None),
}


@devices
@pytest.mark.parametrize("op", list(MOVES))
def test_movement(op, dev):
    shape, torch_fn, ts_fn = MOVES[op]
    check([shape], torch_fn, ts_fn, dev=dev)


@devices
def test_contiguous_of_a_realized_buffer_is_that_buffer_and_clone_copies(dev):
    """As PyTorch: x.contiguous() of a contiguous tensor is x itself (no kernel, an assign through it is seen by x);
    x.clone() is always a new buffer. A view's contiguous() copies; a lazy value's is a kernel boundary."""
    from tensorscope import GlobalCounters
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = Tensor(a, device=dev)
    tx = torch.from_numpy(a.copy())
    GlobalCounters.reset()
    y, c = x.contiguous(), x.clone()
    y.realize()
    assert GlobalCounters.kernel_count == 0, "contiguous() of a realized buffer copied it"
    c.realize()
    assert GlobalCounters.kernel_count == 1, "clone() must copy"
    y.assign(Tensor(np.full((3, 4), 7, np.float32), device=dev)).realize()
    ty, tc = tx.contiguous(), tx.clone()
    ty.copy_(torch.full((3, 4), 7.0))
    np.testing.assert_array_equal(x.numpy(), tx.numpy())  # 7s: y is x
    np.testing.assert_array_equal(c.numpy(), tc.numpy())  # the old values: c is a copy
    GlobalCounters.reset()
    t = x.T.contiguous().realize()
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_array_equal(t.numpy(), tx.T.contiguous().numpy())


PADS = [
    ((3, 4), (1, 2)), ((3, 4), (1, 2, 0, 1)), ((2, 3, 4), (1, 1, 2, 0)), ((3, 4), (-1, 1)), ((3, 4), (0, 0, -1, -1)),
    ((2, 3, 4), (2, 1, 1, 2, 1, 0)), ((0, 3), (1, 1)),
]


@devices
@pytest.mark.parametrize("value", [0.0, 2.5, float("-inf")])
@pytest.mark.parametrize("case", PADS, ids=str)
def test_pad_constant(case, value, dev):
    shape, pad = case
    check([shape], lambda x: F.pad(x, pad, value=value), lambda x: x.pad(pad, value=value), dev=dev)


@devices
@pytest.mark.parametrize("case", [((3, 4), ((1, 2), (0, 1))), ((2, 3, 4), (None, (1, 0), (2, 2))), ((3, 4), ((-1, 2), None))], ids=str)
def test_pad_grouped_numpy_order(case, dev):
    shape, grouped = case
    flat = []
    for p in reversed(grouped):
        flat += [0, 0] if p is None else list(p)
    check([shape], lambda x: F.pad(x, flat), lambda x: x.pad(grouped), dev=dev)


@devices
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
@pytest.mark.parametrize("case", [((2, 3, 5), (2, 1)), ((1, 2, 4, 5), (1, 2, 2, 1)), ((1, 2, 4, 5), (0, 3, 1, 0))], ids=str)
def test_pad_modes(mode, case, dev):
    shape, pad = case
    check([shape], lambda x: F.pad(x, pad, mode=mode), lambda x: x.pad(pad, mode=mode), dev=dev)


CAT = [(((2, 3), (4, 3)), 0), (((2, 3), (2, 1), (2, 2)), 1), (((2, 3, 4), (2, 3, 4)), -1), (((0, 3), (2, 3)), 0), (((3,), (0,), (2,)), 0)]


@devices
@pytest.mark.parametrize("case", CAT, ids=str)
def test_cat(case, dev):
    shapes, dim = case
    check(list(shapes), lambda *xs: torch.cat(xs, dim), lambda *xs: xs[0].cat(*xs[1:], dim=dim), dev=dev)


@devices
@pytest.mark.parametrize("case", [(((2, 3),) * 3, 0), (((2, 3),) * 2, 1), (((2, 3),) * 2, -1), (((),) * 3, 0), (((4,),) * 2, 1)], ids=str)
@pytest.mark.parametrize("form", ["static", "method"])
def test_stack(case, form, dev):
    shapes, dim = case
    ts_fn = (lambda *xs: Tensor.stack(*xs, dim=dim)) if form == "static" else (lambda *xs: xs[0].stack(*xs[1:], dim=dim))
    check(list(shapes), lambda *xs: torch.stack(xs, dim), ts_fn, dev=dev)


@devices
@pytest.mark.parametrize("case", [((7, 3), 3, 0), ((7, 3), [2, 4, 1], 0), ((2, 6), 4, 1), ((2, 6), [6], -1), ((0, 2), 2, 0)], ids=str)
def test_split(case, dev):
    shape, sizes, dim = case
    check([shape], lambda x: tuple(torch.split(x, sizes, dim)), lambda x: x.split(sizes, dim), dev=dev)


@devices
@pytest.mark.parametrize("case", [((7, 3), 3, 0), ((6, 2), 3, 0), ((2, 5), 2, 1), ((2, 5), 7, 1)], ids=str)
def test_chunk(case, dev):
    shape, chunks, dim = case
    check([shape], lambda x: tuple(torch.chunk(x, chunks, dim)), lambda x: x.chunk(chunks, dim), dev=dev)


@devices
@pytest.mark.parametrize("indexing", ["ij", "xy"])
@pytest.mark.parametrize("shapes", [((3,), (4,)), ((2,), (3,), (4,)), ((3,), ())], ids=str)
def test_meshgrid(shapes, indexing, dev):
    check(list(shapes), lambda *xs: tuple(torch.meshgrid(*xs, indexing=indexing)), lambda *xs: xs[0].meshgrid(*xs[1:], indexing=indexing), dev=dev)


# ---------------------------------------------------------------------------------------------------------------
# errors
# ---------------------------------------------------------------------------------------------------------------

@devices
def test_movement_errors(dev):
    x = Tensor.ones(2, 3, device=dev)
    check_raises((ValueError, RuntimeError), lambda: x.reshape(4, 2), "(2, 3)", "(4, 2)")
    check_raises(RuntimeError, lambda: x.permute(0, 0), "permutation")
    check_raises(RuntimeError, lambda: x.permute(0, 1, 2), "(0, 1, 2)")
    check_raises(ValueError, lambda: x.expand(4, 3), "(2, 3)", "(4, 3)")
    check_raises(RuntimeError, lambda: x.flip(0, 0), "flip")
    check_raises(IndexError, lambda: x.flip(2))
    check_raises(IndexError, lambda: x.transpose(0, 2))
    check_raises(IndexError, lambda: x.unsqueeze(3))
    check_raises(ValueError, lambda: x.pad((1, 2, 3)), "even")
    check_raises(ValueError, lambda: x.pad(((1, 1),)), "(2, 3)")
    check_raises(ValueError, lambda: x.pad((3, 3), mode="reflect"), "reflect")
    check_raises(ValueError, lambda: x.pad((1, 1), mode="wrap"), "wrap")
    check_raises(RuntimeError, lambda: x.roll((1, 2), (0,)), "shifts")
    check_raises(ValueError, lambda: x.cat(Tensor.ones(2, 4, device=dev), dim=0), "(2, 3)", "(2, 4)")
    check_raises(IndexError, lambda: x.cat(x, dim=2))
    check_raises(ValueError, lambda: x.split([1, 1], 1), "sum")
