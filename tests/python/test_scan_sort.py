# Long axes for the scans and sorting (issue 3): the blocked scan (tinygrad's _split_cumalu) and the bitonic
# sorting network must match PyTorch on axes of thousands to 100 000 elements, keep torch's tie conventions
# (stable sort, last index of the running max), put NaN where torch does, and carry gradients. The short-axis
# cases live in test_ops_reduce.py.
import numpy as np
import pytest
import torch

from ops_helper import DEVICES, check
from tensorscope import GlobalCounters, Tensor

# The long cases run on C only (the interpreter would take minutes); the mid-sized ones on every device.
long_devices = pytest.mark.parametrize("dev", [d for d in DEVICES if d == "C"] or pytest.skip("needs the C device", allow_module_level=True))
devices = pytest.mark.parametrize("dev", DEVICES)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _assert_sort_like_torch(x, descending, dev):
    """1-D sort: values and indices equal to torch's stable sort."""
    v, i = Tensor(x, device=dev).sort(0, descending=descending)
    tv, ti = torch.sort(torch.tensor(x), dim=0, descending=descending, stable=True)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


# ---------------------------------------------------------------------------------------------------------------
# scans
# ---------------------------------------------------------------------------------------------------------------

@long_devices
@pytest.mark.parametrize("n", [5000, 100_000])
def test_cumsum_long(n, dev):
    x = _rng().uniform(-1, 1, n).astype(np.float32)
    got = Tensor(x, device=dev).cumsum(0).numpy()
    expected = np.cumsum(x.astype(np.float64))
    # float32 sums of up to 1e5 terms of size 1: the order of additions differs from a sequential loop
    np.testing.assert_allclose(got, expected, atol=2e-3 if n > 10_000 else 2e-4, rtol=1e-4)


@long_devices
@pytest.mark.parametrize("op", ["cumprod", "logcumsumexp"])
@pytest.mark.parametrize("n", [5000, 100_000])
def test_cumprod_logcumsumexp_long(op, n, dev):
    rng = _rng(1)
    # products near 1 so that the running product stays in range over 1e5 factors
    x = (rng.uniform(0.999, 1.001, n) if op == "cumprod" else rng.uniform(-30, 30, n)).astype(np.float32)
    got = getattr(Tensor(x, device=dev), op)(0).numpy()
    expected = getattr(torch, op)(torch.tensor(x, dtype=torch.float64), 0).numpy()
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=1e-5)


@long_devices
@pytest.mark.parametrize("op", ["cummax", "cummin"])
@pytest.mark.parametrize("n", [5000, 100_000])
def test_cummax_cummin_long_with_ties_and_nan(op, n, dev):
    rng = _rng(2)
    x = rng.integers(-50, 50, n).astype(np.float32)  # many ties: the index is the last one holding the max
    x[: n // 2] = np.sort(x[: n // 2]) if op == "cummax" else -np.sort(x[: n // 2])  # long runs of new maxima
    x[n * 3 // 4] = np.nan
    x[n * 3 // 4 + 7] = np.nan
    v, i = getattr(Tensor(x, device=dev), op)(0)
    tv, ti = getattr(torch, op)(torch.tensor(x), 0)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@long_devices
def test_scans_long_axis_not_last_and_int(dev):
    rng = _rng(3)
    x = rng.integers(-1000, 1000, (3, 4000, 2)).astype(np.int32)
    got = Tensor(x, device=dev).cumsum(1).numpy()
    np.testing.assert_array_equal(got, np.cumsum(x, 1))
    v, i = Tensor(x, device=dev).cummin(1)
    tv, ti = torch.cummin(torch.tensor(x), 1)
    np.testing.assert_array_equal(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())


@devices
@pytest.mark.parametrize("op", ["cumsum", "cumprod", "logcumsumexp", "cummax", "cummin"])
def test_scan_gradient_blocked(op, dev):
    # 3000 elements along the axis: two levels of blocks; gradients against torch's
    n = 3000 if dev == "C" else 300
    low = 0.9 if op == "cumprod" else -2.0
    high = 1.1 if op == "cumprod" else 2.0
    tfn = (lambda x: tuple(getattr(torch, op)(x, 1))) if op in ("cummax", "cummin") else (lambda x: getattr(torch, op)(x, 1))
    check([(2, n)], tfn, lambda x: getattr(x, op)(1), dev=dev, low=low, high=high, atol=1e-4, rtol=1e-3, grad_atol=1e-3)


@devices
def test_cummax_gradient_goes_to_the_index(dev):
    # ties across block boundaries: torch gives the whole gradient to the last position holding the max
    x = np.repeat(np.array([1.0, 3.0, 2.0, 3.0, 5.0], dtype=np.float32), 40)
    check(None, lambda t: tuple(torch.cummax(t, 0)), lambda t: t.cummax(0), dev=dev, vals=[x])


@devices
def test_logcumsumexp_blocked_extremes(dev):
    # -inf prefixes and a range of ±500 across blocks: no overflow, -inf stays -inf
    x = np.full(200, -np.inf, dtype=np.float32)
    x[90:] = _rng(4).uniform(-500, 500, 110).astype(np.float32)
    got = Tensor(x, device=dev).logcumsumexp(0).numpy()
    expected = torch.logcumsumexp(torch.tensor(x, dtype=torch.float64), 0).numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5)


@devices
def test_scan_blocked_zero_size_batch(dev):
    assert Tensor(np.zeros((0, 100), np.float32), device=dev).cumsum(1).shape == (0, 100)
    v, i = Tensor(np.zeros((0, 100), np.float32), device=dev).cummax(1)
    assert v.shape == (0, 100) and i.shape == (0, 100)


# ---------------------------------------------------------------------------------------------------------------
# sorting
# ---------------------------------------------------------------------------------------------------------------

@long_devices
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("n", [5000, 100_000])
def test_sort_long(n, descending, dev):
    x = _rng(5).standard_normal(n).astype(np.float32)
    _assert_sort_like_torch(x, descending, dev)


@long_devices
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable_with_many_ties_nan_inf(descending, dev):
    rng = _rng(6)
    x = rng.integers(0, 8, 20_000).astype(np.float32)  # ~2500 copies of each value
    x[rng.choice(20_000, 300, replace=False)] = np.nan
    x[rng.choice(20_000, 300, replace=False)] = np.inf
    x[rng.choice(20_000, 300, replace=False)] = -np.inf
    _assert_sort_like_torch(x, descending, dev)


@devices
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("case", [((2, 600), 1), ((513, 2), 0), ((2, 700, 3), 1)], ids=str)
def test_sort_network_sizes_and_gradient(case, descending, dev):
    # lengths just above the counting-sort cut-off (512), not powers of two, along inner and outer axes
    shape, dim = case
    check([shape], lambda x: tuple(torch.sort(x, dim=dim, descending=descending, stable=True)), lambda x: x.sort(dim, descending=descending),
          dev=dev)


@devices
@pytest.mark.parametrize("dtype", [np.int32, np.bool_])
def test_sort_network_int_and_bool(dtype, dev):
    x = _rng(7).integers(-3, 3, (2, 600)).astype(dtype)
    for descending in (False, True):
        v, i = Tensor(x, device=dev).sort(1, descending=descending)
        tv, ti = torch.sort(torch.tensor(x), dim=1, descending=descending, stable=True)
        assert v.numpy().dtype == x.dtype
        np.testing.assert_array_equal(v.numpy(), tv.numpy())
        np.testing.assert_array_equal(i.numpy(), ti.numpy())


@long_devices
def test_sort_gradient_thousands(dev):
    check([(4000,)], lambda x: tuple(torch.sort(x, dim=0, stable=True)), lambda x: x.sort(0), dev=dev)


@long_devices
@pytest.mark.parametrize("largest", [True, False])
def test_topk_long(largest, dev):
    x = _rng(8).integers(0, 1000, (2, 50_000)).astype(np.float32)  # ties: the lowest index first, as torch's stable topk
    v, i = Tensor(x, device=dev).topk(100, 1, largest=largest)
    tv, ti = torch.sort(torch.tensor(x), dim=1, descending=largest, stable=True)
    np.testing.assert_array_equal(v.numpy(), tv[:, :100].numpy())
    np.testing.assert_array_equal(i.numpy(), ti[:, :100].numpy())


@devices
def test_topk_network_gradient_and_errors(dev):
    check([(3, 600)], lambda x: tuple(torch.topk(x, 7, 1)), lambda x: x.topk(7, 1), dev=dev)
    with pytest.raises((ValueError, RuntimeError)):
        Tensor(np.zeros((2, 600), np.float32), device=dev).topk(601, 1)


@long_devices
def test_sort_100k_kernel_launches(dev):
    # one kernel per stage of the network: log2(N)(log2(N)+1)/2 = 153 launches for N = 2^17, plus the set-up
    # (stages with the same pairing share one program: 35 distinct kernels to compile, measured)
    x = _rng(9).standard_normal(100_000).astype(np.float32)
    t = Tensor(x, device=dev)
    t.numpy()
    GlobalCounters.reset()
    t.sort(0)[0].numpy()
    assert GlobalCounters.kernel_count < 200
