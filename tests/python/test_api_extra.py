# Issue 16, "nothing is missing": tinygrad's documented Tensor methods with PyTorch semantics, at their edges.
# copysign (IEEE special values), pad in every mode (pads as large as torch allows, negative pads), unfold with
# overlapping and gapped windows, scatter / scatter_reduce with repeated indices, Tensor.eye(n, m) for every
# n, m order, the rest of tinygrad's documented list (leakyrelu, xor, shifts, bitcast, sequential, pad2d, batchnorm,
# the initializers, from_blob), and torch's errors for invalid arguments. Forward values and gradients against torch (CPU,
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


# ---- the rest of tinygrad's documented list: aliases, shifts, bitcast, batchnorm, initializers, from_blob ----

@DEVS
def test_shifts_match_torch_on_int32_including_negative_and_overflow(dev):
    a = np.array([0, 1, -1, 7, -7, 123456, -123456, 2**30, -(2**31), 2**31 - 1], dtype=np.int32)
    t = torch.tensor(a)
    for bits in (0, 1, 3, 17, 31):
        np.testing.assert_array_equal((Tensor(a, device=dev) << bits).numpy(), (t << bits).numpy())
        np.testing.assert_array_equal((Tensor(a, device=dev) >> bits).numpy(), (t >> bits).numpy())
    check_raises(TypeError, lambda: Tensor(a, device=dev).lshift(32), "lshift", "32")
    check_raises(TypeError, lambda: Tensor(a.astype(np.float32), device=dev).rshift(1), "rshift", "float32")


@DEVS
def test_xor_on_bool_and_int32_matches_torch_bitwise_xor(dev):
    a, b = np.array([True, True, False, False]), np.array([True, False, True, False])
    np.testing.assert_array_equal(Tensor(a, device=dev).xor(Tensor(b, device=dev)).numpy(),
                                  torch.logical_xor(torch.tensor(a), torch.tensor(b)).numpy())
    i = np.array([0, 1, -1, 5, -6, 123456789, -(2**31), 2**31 - 1, 0x55555555, -0x55555556], dtype=np.int32)
    j = np.array([3, -1, -1, 12, 7, -987654321, -1, -(2**31), 0x2AAAAAAA, 17], dtype=np.int32)
    np.testing.assert_array_equal(Tensor(i, device=dev).xor(Tensor(j, device=dev)).numpy(),
                                  torch.bitwise_xor(torch.tensor(i), torch.tensor(j)).numpy())
    np.testing.assert_array_equal(Tensor(i, device=dev).xor(6).numpy(), np.bitwise_xor(i, 6))
    check_raises(TypeError, lambda: Tensor([1.5], device=dev).xor(Tensor([2.5], device=dev)), "xor", "float32")


@DEVS
def test_bitcast_float_int_round_trip_like_torch_view(dev):
    a = np.array([1.0, -2.5, 0.0, -0.0, np.inf, 3.25e-39], dtype=np.float32)
    as_int = Tensor(a, device=dev).bitcast("int32")
    np.testing.assert_array_equal(as_int.numpy(), torch.tensor(a).view(torch.int32).numpy())
    np.testing.assert_array_equal(as_int.bitcast("float32").numpy().view(np.int32), a.view(np.int32))
    check_raises(TypeError, lambda: Tensor(a, device=dev).bitcast("float16"), "bitcast", "float16")


@DEVS
def test_batchnorm_matches_torch_functional_batch_norm(dev):
    def tb(x, w, b, m, v):
        return torch.nn.functional.batch_norm(x, m, v, w, b, training=False, eps=1e-5)

    def sb(x, w, b, m, v):
        return x.batchnorm(w, b, m, (v + 1e-5).rsqrt())

    rng = np.random.default_rng(3)
    vals = [rand(rng, (2, 3, 4, 5), -2, 2), rand(rng, (3,), 0.5, 1.5), rand(rng, (3,), -1, 1), rand(rng, (3,), -1, 1),
            rand(rng, (3,), 0.5, 2.0)]
    check(None, tb, sb, dev=dev, vals=vals, grad_inputs=[0, 1, 2])


@DEVS
def test_leakyrelu_sequential_pad2d(dev):
    check([(3, 5)], lambda a: torch.nn.functional.leaky_relu(a, 0.2), lambda a: a.leakyrelu(0.2), dev=dev)
    check([(3, 5)], lambda a: torch.tanh(torch.relu(a) * 2), lambda a: a.sequential([Tensor.relu, lambda t: t * 2, Tensor.tanh]),
          dev=dev)
    check([(2, 3, 4)], lambda a: torch.nn.functional.pad(a, (1, 2, 0, 1), value=0.5),
          lambda a: a.pad2d((1, 2, 0, 1), value=0.5), dev=dev)


def test_initializers_have_torch_nn_init_bounds_and_moments():
    Tensor.manual_seed(7)
    shape = (64, 32, 3, 3)  # fan_in = 288, fan_out = 576
    fan_in, fan_out = 32 * 9, 64 * 9
    glorot = np.sqrt(6 / (fan_in + fan_out))
    for t, bound in [(Tensor.glorot_uniform(*shape), glorot), (Tensor.xavier_uniform(*shape, gain=2.0), 2 * glorot),
                     (Tensor.kaiming_uniform(*shape, a=0.0), np.sqrt(6 / fan_in)),
                     (Tensor.scaled_uniform(*shape), np.prod(shape) ** -0.5)]:
        v = t.numpy()
        assert v.shape == shape and v.dtype == np.float32
        assert np.abs(v).max() <= bound and np.abs(v).max() > 0.95 * bound
        np.testing.assert_allclose(v.std(), bound / np.sqrt(3), rtol=0.05)  # the std of U(-b, b)
    v = Tensor.kaiming_normal(*shape, a=0.0).numpy()
    np.testing.assert_allclose(v.std(), np.sqrt(2 / fan_in), rtol=0.05)
    n = Tensor.normal(20000, mean=3.0, std=0.5).numpy()
    np.testing.assert_allclose([n.mean(), n.std()], [3.0, 0.5], rtol=0.03)
    check_raises(ValueError, lambda: Tensor.glorot_uniform(10), "fan", "2 dims")


def test_from_blob_copies_the_memory():
    a = np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5
    t = Tensor.from_blob(a.ctypes.data, (3, 4))
    a[0, 0] = 100.0  # a copy: later writes do not show
    np.testing.assert_array_equal(t.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) * 1.5)
    i = np.array([5, -6, 7], dtype=np.int32)
    np.testing.assert_array_equal(Tensor.from_blob(i.ctypes.data, (3,), dtype="int32").numpy(), i)
    check_raises(ValueError, lambda: Tensor.from_blob(0, (3,)), "null")


def test_from_url_reads_bytes_as_int32(tmp_path):
    payload = bytes([0, 1, 127, 128, 255]) + b"tensorscope"
    f = tmp_path / "blob.bin"
    f.write_bytes(payload)
    np.testing.assert_array_equal(Tensor.from_url(f.as_uri()).numpy(), np.frombuffer(payload, np.uint8).astype(np.int32))
    check_raises(ValueError, lambda: Tensor.from_url((tmp_path / "missing.bin").as_uri()), "from_url", "missing.bin")
