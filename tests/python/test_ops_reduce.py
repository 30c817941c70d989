# Reductions, scans and sorting against PyTorch: axis as int, negative int, tuple or None, keepdim, 0-d and
# zero-size inputs, tie conventions, stability of logsumexp/softmax/log_softmax for inputs in the hundreds.
import numpy as np
import pytest
import torch

from ops_helper import check, check_raises, devices, rand
from tensorscope import Tensor

CASES = [((), None), ((5,), None), ((5,), 0), ((5,), -1), ((3, 4), 1), ((3, 4), -2), ((3, 4), (0, 1)), ((2, 3, 4), (0, 2)),
         ((2, 3, 4), (-1, 1)), ((2, 3, 4), None), ((0, 3), 1), ((3, 0), 1)]


def _tdim(axis, shape):
    return tuple(range(len(shape))) if axis is None else axis


REDUCE = {
    "sum": (lambda x, a, k: torch.sum(x, _tdim(a, x.shape), keepdim=k), lambda x, a, k: x.sum(a, keepdim=k)),
    "mean": (lambda x, a, k: torch.mean(x, _tdim(a, x.shape), keepdim=k), lambda x, a, k: x.mean(axis=a, keepdim=k)),
    "max": (lambda x, a, k: torch.amax(x, _tdim(a, x.shape), keepdim=k), lambda x, a, k: x.max(a, keepdim=k)),
    "min": (lambda x, a, k: torch.amin(x, _tdim(a, x.shape), keepdim=k), lambda x, a, k: x.min(axis=a, keepdim=k)),
    "var": (lambda x, a, k: torch.var(x, _tdim(a, x.shape), keepdim=k), lambda x, a, k: x.var(a, keepdim=k)),
    "var_c0": (lambda x, a, k: torch.var(x, _tdim(a, x.shape), unbiased=False, keepdim=k), lambda x, a, k: x.var(a, k, correction=0)),
    "std": (lambda x, a, k: torch.std(x, _tdim(a, x.shape), keepdim=k), lambda x, a, k: x.std(a, keepdim=k)),
    "logsumexp": (lambda x, a, k: torch.logsumexp(x, _tdim(a, x.shape), keepdim=k), lambda x, a, k: x.logsumexp(a, keepdim=k)),
}


def _prod_torch(x, a, k):
    if a is None:
        r = torch.prod(x.reshape(-1), 0)
        return r.reshape([1] * x.ndim) if k else r
    dims = sorted([d % max(x.ndim, 1) for d in ((a,) if isinstance(a, int) else a)], reverse=True)
    for d in dims:
        x = torch.prod(x, d, keepdim=True)
    if not k:
        for d in dims:
            x = x.squeeze(d)
    return x


@devices
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("case", CASES, ids=str)
@pytest.mark.parametrize("op", list(REDUCE))
def test_reduce(op, case, keepdim, dev):
    shape, axis = case
    if op in ("max", "min") and 0 in shape:
        pytest.skip("max over a zero-size dim is an error, as in torch")
    if op in ("var", "var_c0", "std") and (0 in shape or shape == ()):
        pytest.skip("variance of no elements")
    if op == "logsumexp" and axis is None and shape == ():
        pytest.skip("torch.logsumexp needs dims")
    torch_fn, ts_fn = REDUCE[op]
    check([shape], lambda x: torch_fn(x, axis, keepdim), lambda x: ts_fn(x, axis, keepdim), dev=dev)


@devices
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("case", [((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 4), (0, 2)), ((2, 3, 4), None), ((0, 3), 1), ((), None)], ids=str)
def test_prod(case, keepdim, dev):
    shape, axis = case
    check([shape], lambda x: _prod_torch(x, axis, keepdim), lambda x: x.prod(axis, keepdim=keepdim), dev=dev, low=0.5, high=1.5)


@devices
def test_prod_gradient_with_zeros(dev):
    vals = [np.array([[1.5, 0.0, 2.0, -1.0], [0.0, 0.0, 3.0, 1.0], [1.0, 2.0, 3.0, 4.0]], dtype=np.float32)]
    check(None, lambda x: torch.prod(x, 1), lambda x: x.prod(1), dev=dev, vals=vals)


@devices
@pytest.mark.parametrize("op", ["max", "min"])
def test_max_min_ties_share_gradient(op, dev):
    vals = [np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]], dtype=np.float32)]
    torch_fn = torch.amax if op == "max" else torch.amin
    check(None, lambda x: torch_fn(x, 1), lambda x: getattr(x, op)(1), dev=dev, vals=vals)


@devices
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("case", [((3, 4), 1), ((2, 3, 4), (0, 2)), ((5,), None)], ids=str)
@pytest.mark.parametrize("op", ["var_mean", "std_mean"])
def test_var_std_mean(op, case, keepdim, dev):
    shape, axis = case
    tfn = getattr(torch, op)
    check([shape], lambda x: tfn(x, _tdim(axis, x.shape), keepdim=keepdim), lambda x: getattr(x, op)(axis, keepdim=keepdim), dev=dev)


SOFT = {
    "softmax": (lambda x, a: torch.softmax(x, a), lambda x, a: x.softmax(a)),
    "log_softmax": (lambda x, a: torch.log_softmax(x, a), lambda x, a: x.log_softmax(a)),
    "softmin": (lambda x, a: torch.nn.functional.softmin(x, a), lambda x, a: x.softmin(a)),
}


@devices
@pytest.mark.parametrize("case", [((5,), -1), ((3, 4), 0), ((3, 4), 1), ((2, 3, 4), -2), ((), 0), ((0, 3), 1)], ids=str)
@pytest.mark.parametrize("op", list(SOFT))
def test_softmax_family(op, case, dev):
    shape, axis = case
    torch_fn, ts_fn = SOFT[op]
    check([shape], lambda x: torch_fn(x, axis), lambda x: ts_fn(x, axis), dev=dev)


@devices
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmin", "logsumexp"])
def test_large_inputs_are_stable(op, dev):
    vals = [np.array([[500.0, 400.0, -300.0], [-500.0, -499.0, -800.0], [100.0, 100.0, 100.0]], dtype=np.float32)]
    if op == "logsumexp":
        check(None, lambda x: torch.logsumexp(x, 1), lambda x: x.logsumexp(1), dev=dev, vals=vals)
    else:
        check(None, lambda x: SOFT[op][0](x, -1), lambda x: SOFT[op][1](x, -1), dev=dev, vals=vals)


@devices
def test_logsumexp_infinities(dev):
    vals = [np.array([[-np.inf, -np.inf], [np.inf, 1.0], [-np.inf, 2.0]], dtype=np.float32)]
    check(None, lambda x: torch.logsumexp(x, 1), lambda x: x.logsumexp(1), dev=dev, vals=vals, forward_only=True)


ARG = [((7,), None, False), ((7,), 0, False), ((3, 4), 1, False), ((3, 4), 0, True), ((2, 3, 4), -1, True), ((2, 3, 4), None, False), ((), None, False)]


@devices
@pytest.mark.parametrize("case", ARG, ids=str)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_argmin(op, case, dev):
    shape, axis, keepdim = case
    tfn = getattr(torch, op)
    check([shape], lambda x: tfn(x, axis, keepdim) if axis is not None else tfn(x), lambda x: getattr(x, op)(axis, keepdim=keepdim), dev=dev)


@devices
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_argmax_first_index_among_ties(op, dev):
    vals = [np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [0.0, -1.0, 0.0, -1.0]], dtype=np.float32)]
    check(None, lambda x: getattr(torch, op)(x, 1), lambda x: getattr(x, op)(1), dev=dev, vals=vals)


@devices
@pytest.mark.parametrize("case", [((3, 4), 1, False), ((3, 4), None, False), ((2, 3, 4), (0, 2), True), ((0, 3), 0, False), ((), None, False)], ids=str)
@pytest.mark.parametrize("op", ["any", "all"])
@pytest.mark.parametrize("kind", ["float", "bool"])
def test_any_all(op, kind, case, dev):
    shape, axis, keepdim = case
    rng = np.random.default_rng(4)
    v = rng.integers(0, 2, size=shape).astype(np.float32) * rng.integers(0, 3, size=shape)
    v = v.astype(bool) if kind == "bool" else v.astype(np.float32)

    def tfn(x):
        r = getattr(torch, op)(x.bool()) if axis is None else x.bool()
        if axis is not None:
            for d in sorted(((axis,) if isinstance(axis, int) else axis), reverse=True):
                r = getattr(torch, op)(r, d, keepdim=keepdim)
        return r
    check(None, tfn, lambda x: getattr(x, op)(axis, keepdim=keepdim), dev=dev, vals=[v])


@devices
@pytest.mark.parametrize("p", [2.0, 1.0, 3.0, float("inf")])
@pytest.mark.parametrize("case", [((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1)], ids=str)
def test_normalize(case, p, dev):
    shape, dim = case
    check([shape], lambda x: torch.nn.functional.normalize(x, p=p, dim=dim), lambda x: x.normalize(p=p, dim=dim), dev=dev)


# ---------------------------------------------------------------------------------------------------------------
# scans
# ---------------------------------------------------------------------------------------------------------------

SCAN_CASES = [((6,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((2, 3, 4), 1), ((), 0), ((0, 3), 1), ((3, 0), 1)]


@devices
@pytest.mark.parametrize("case", SCAN_CASES, ids=str)
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp"])
def test_scan(op, case, dev):
    shape, axis = case
    check([shape], lambda x: getattr(torch, op)(x, axis), lambda x: getattr(x, op)(axis), dev=dev, low=0.5 if op == "cumprod" else -2.0)


@devices
def test_cumsum_default_axis(dev):
    check([(4, 3)], lambda x: torch.cumsum(x, 0), lambda x: x.cumsum(), dev=dev)


@devices
def test_cumprod_gradient_with_zero(dev):
    check(None, lambda x: torch.cumprod(x, 0), lambda x: x.cumprod(0), dev=dev, vals=[np.array([1.5, 0.0, 2.0, -1.0, 0.5], dtype=np.float32)])


@devices
def test_logcumsumexp_large_inputs(dev):
    vals = [np.array([[500.0, -500.0, 10.0, 499.0], [-800.0, -700.0, -900.0, 0.0]], dtype=np.float32)]
    check(None, lambda x: torch.logcumsumexp(x, 1), lambda x: x.logcumsumexp(1), dev=dev, vals=vals)


@devices
@pytest.mark.parametrize("case", [((6,), 0), ((3, 4), 1), ((3, 4), 0), ((2, 3, 4), -1), ((), 0)], ids=str)
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_cummin(op, case, dev):
    shape, axis = case
    check([shape], lambda x: tuple(getattr(torch, op)(x, axis)), lambda x: getattr(x, op)(axis), dev=dev)


@devices
@pytest.mark.parametrize("op", ["cummax", "cummin"])
def test_cummax_ties_take_last_index(op, dev):
    vals = [np.array([1.0, 3.0, 3.0, 2.0, 3.0, -1.0, -1.0], dtype=np.float32)]
    check(None, lambda x: tuple(getattr(torch, op)(x, 0)), lambda x: getattr(x, op)(0), dev=dev, vals=vals)


# ---------------------------------------------------------------------------------------------------------------
# sorting
# ---------------------------------------------------------------------------------------------------------------

SORT_CASES = [((6,), -1), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), 1), ((), 0), ((0, 3), 1)]


@devices
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("case", SORT_CASES, ids=str)
def test_sort(case, descending, dev):
    shape, dim = case
    check([shape], lambda x: tuple(torch.sort(x, dim, descending=descending)), lambda x: x.sort(dim, descending=descending), dev=dev)


@devices
@pytest.mark.parametrize("descending", [False, True])
def test_sort_is_stable_and_puts_nan_last(descending, dev):
    vals = [np.array([[3.0, 1.0, 3.0, np.nan, 1.0, -np.inf, 2.0, np.inf, 1.0]], dtype=np.float32)]
    check(None, lambda x: tuple(torch.sort(x, dim=-1, descending=descending, stable=True)), lambda x: x.sort(-1, descending=descending),
          dev=dev, vals=vals, forward_only=True)


@devices
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("case", [((6,), -1), ((3, 5), 0), ((2, 3, 4), 2)], ids=str)
def test_argsort(case, descending, dev):
    shape, dim = case
    check([shape], lambda x: torch.argsort(x, dim, descending=descending), lambda x: x.argsort(dim, descending=descending), dev=dev)


@devices
@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("case", [((6,), 3, -1), ((3, 5), 2, 1), ((3, 5), 1, 0), ((2, 3, 4), 4, -1), ((4,), 0, 0), ((4,), 4, 0)], ids=str)
def test_topk(case, largest, dev):
    shape, k, dim = case
    check([shape], lambda x: tuple(torch.topk(x, k, dim, largest=largest)), lambda x: x.topk(k, dim, largest=largest, sorted_=True), dev=dev)


@devices
def test_topk_k_too_large(dev):
    check_raises((ValueError, RuntimeError), lambda: Tensor.ones(2, 3, device=dev).topk(4), "k", "3")


@devices
def test_reduce_axis_out_of_range(dev):
    x = Tensor.ones(2, 3, device=dev)
    check_raises(IndexError, lambda: x.sum(2), "2")
    check_raises(IndexError, lambda: x.max(axis=-3), "-3")
    check_raises(IndexError, lambda: x.cumsum(5), "5")
    check_raises(IndexError, lambda: x.argmax(3))
    check_raises(IndexError, lambda: x.sort(2))
