"""Regression tests: each bug found in the engine keeps a test that reproduces it (NumPy is the reference)."""
import numpy as np
import pytest

from tensorscope import Tensor

DEVICES = ["C", "INTERP"]


@pytest.mark.parametrize("dev", DEVICES)
def test_value_from_inside_a_reduce_loop_is_not_reused_after_it(dev):
    # lowering once reused a load made inside the max's loop after the loop ended ("v12 undeclared" in C)
    xv = np.arange(5, dtype=np.float32)
    x = Tensor(xv, device=dev)
    m = x.max(0, keepdim=True).detach()
    got = (x - m).exp().sum(0, keepdim=True).log().add(m).numpy()
    np.testing.assert_allclose(got, np.log(np.exp(xv - xv.max()).sum(keepdims=True)) + xv.max(), rtol=1e-6)


@pytest.mark.parametrize("dev", DEVICES)
def test_nan_constant_survives_common_subexpression_elimination(dev):
    t = Tensor(np.array([np.nan, 0.5], dtype=np.float32), device=dev)
    got = (t.abs() <= 1).where(t, float("nan")).numpy()
    assert np.isnan(got[0]) and got[1] == 0.5


@pytest.mark.parametrize("dev", DEVICES)
def test_negative_constant_is_negated_in_c(dev):
    xv = np.array([0.5, 2.0, -4.0], dtype=np.float32)
    x = Tensor(xv, device=dev)
    np.testing.assert_allclose((x * -1.0).neg().numpy(), xv, rtol=0)
    np.testing.assert_allclose(x.neg().mul(-2.0).numpy(), xv * 2, rtol=0)


@pytest.mark.parametrize("dev", DEVICES)
def test_pad_of_a_zero_size_tensor(dev):
    x = Tensor(np.zeros((0, 3), dtype=np.float32), device=dev)
    np.testing.assert_array_equal(x.pad(((1, 1), (0, 0))).numpy(), np.zeros((2, 3), dtype=np.float32))


@pytest.mark.parametrize("dev", DEVICES)
def test_bool_select_feeding_a_float_select(dev):
    # gcc 12 -O3 vectorizes `c ? 1 : b` on bools wrongly; the C renderer avoids that pattern
    rng = np.random.default_rng(0)
    xv = rng.uniform(-2, 2, (3, 4, 5)).astype(np.float32)
    wv = rng.uniform(-2, 2, (3, 4, 5)).astype(np.float32)
    x, w = Tensor(xv, device=dev), Tensor(wv, device=dev)
    got = ((x < 0) | (x == 0)).where(0.0, w).numpy()
    np.testing.assert_array_equal(got, np.where(xv <= 0, 0, wv))


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("shape", [(2, 6), (16, 6), (7, 7), (3, 14)])
def test_masked_load_of_an_unrolled_nest(dev, shape):
    # relu's backward, (relu(x) <= 0).where(0, g), written into a padded output: a nest of rows x columns in C. gcc 12.2
    # sank the load of g into the branch that selects it, vectorized it as a masked load, and gave every vector
    # of an unrolled group the first vector's mask (2 x 6: three vectors of 4; g's 6th, 9th, 12th came out 0).
    # The C renderer now writes such a WHERE as a bit mask, which loads g in every lane (found by
    # scripts/fuzz_ops.py, seed 42201: x.relu() then x.gather(2, ...), the gradient of x). The old renderer failed
    # the 2 x 6 and 16 x 6 cases; 7 x 7 and 3 x 14 are other nests the standalone C reproduction miscompiled.
    n = int(np.prod(shape))
    xv = np.where(np.arange(n).reshape(shape) % 3 == 2, 0.5, -0.5).astype(np.float32)
    gv = (np.arange(n).reshape(shape) + 1).astype(np.float32)
    x, g = Tensor(xv, device=dev), Tensor(gv, device=dev)
    got = (x.relu() <= 0).where(0.0, g).pad(((0, 3), (0, 0))).numpy()
    np.testing.assert_array_equal(got, np.pad(np.where(xv > 0, gv, 0), ((0, 3), (0, 0))))


@pytest.mark.parametrize("dev", DEVICES)
def test_max_pool_and_max_keep_nan(dev):
    # ts_fmaxf became branch-free (a maxss-style select, then a select on a's NaN): a NaN anywhere in a window
    # still wins, as in torch.max_pool2d and torch.amax (fmaxf would drop it). Windows of random values, NaNs,
    # -inf and zeros of both signs (which compare equal: which zero a window gives is the order of its
    # comparisons', the last of equal values here, the first in PyTorch; not checked).
    import torch
    rng = np.random.default_rng(34)
    xv = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    xv[0, 0, 0, 1] = np.nan
    xv[1, 2, 5, 4] = np.nan
    xv[0, 1, 2:4, 2:4] = [[0.0, -0.0], [-0.0, 0.0]]
    xv[1, 0, 6:8, 6:8] = -np.inf
    got = Tensor(xv, device=dev).max_pool2d(2).numpy()
    want = torch.nn.functional.max_pool2d(torch.from_numpy(xv), 2).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.nan_to_num(got), np.nan_to_num(want))
    got_max = Tensor(xv, device=dev).max(3).numpy()
    np.testing.assert_array_equal(np.isnan(got_max), np.isnan(xv).any(3))
    np.testing.assert_array_equal(np.nan_to_num(got_max), np.nan_to_num(torch.from_numpy(xv).amax(3).numpy()))
