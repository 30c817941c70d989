"""float16 against PyTorch float16 on CPU, on every runnable device (ops_helper.DEVICES).

The rule under test (PyTorch's CPU rule): an op on float16 tensors computes in float32 and rounds its result
to float16 once; sum and matmul accumulate in float32. torch 1.13 (the reference installed here) implements
add/mul/div/sum/mean/max/pow/... for Half on CPU and is called directly; for ops it lacks on CPU (exp, log,
relu, sigmoid, matmul, softmax: "not implemented for 'Half'"), the reference is what later torch versions do
there: the float32 op on the (exactly widened) float16 inputs, rounded to float16. Gradients likewise: torch's
own Half backward where it has one, else the float32 gradient rounded to float16.

Tolerances: rtol 1e-3 is one float16 ulp (2^-10 relative at most): exact-per-op results may differ by one
rounding flip where the engine's float32 exp2/log2 (ts_math.h, 2-3 float32 ulp) and libm's land on either side
of a float16 tie. matmul and softmax are looser (see there) because they also sum in a different order.
"""
import numpy as np
import pytest
import torch

from ops_helper import DEVICES
from tensorscope import Device, Tensor, dtypes

F16_DEVICES = [d for d in DEVICES if Device.properties(d)["float16"]]
NO_F16_DEVICES = [d for d in DEVICES if not Device.properties(d)["float16"]]


def _torch_half(fn, *xs):
    """fn on torch float16 tensors; where torch 1.13 has no CPU Half kernel, fn in float32 rounded to float16."""
    try:
        return fn(*xs)
    except RuntimeError as e:
        if "not implemented for 'Half'" not in str(e):
            raise
        return fn(*[x.float() for x in xs]).half()


def _bits(a):
    return np.asarray(a, dtype=np.float16).view(np.uint16)


def _inputs(rng, shapes, low, high):
    return [rng.uniform(low, high, size=s).astype(np.float16) for s in shapes]


def check_half(dev, shapes, fn, *, torch_fn=None, low=-2.0, high=2.0, rtol=1e-3, atol=1e-5, grad_rtol=1e-3, grad_atol=1e-3,
               seed=0, backward=True):
    """fn on float16 Tensors of `shapes` (uniform in [low, high)) against torch_fn (default fn) on torch float16,
    forward and, with `backward`, the gradients for a random float16 output gradient."""
    torch_fn = torch_fn or fn
    rng = np.random.default_rng(seed)
    vals = _inputs(rng, shapes, low, high)
    t_in = [torch.tensor(v, requires_grad=backward) for v in vals]
    s_in = [Tensor(v, device=dev, requires_grad=backward) for v in vals]
    s_out = fn(*s_in)
    assert s_out.dtype == dtypes.float16
    got = s_out.numpy()
    assert got.dtype == np.float16
    if not backward:
        expected = _torch_half(torch_fn, *t_in)
        np.testing.assert_allclose(got.astype(np.float32), expected.detach().float().numpy(), rtol=rtol, atol=atol)
        return
    # backward: torch's Half backward if it has one, else the float32 graph's gradient rounded to float16
    try:
        t_out = torch_fn(*t_in)
        native = True
    except RuntimeError:
        t_in = [torch.tensor(v.astype(np.float32), requires_grad=True) for v in vals]
        t_out = torch_fn(*t_in)
        native = False
    expected = t_out.detach().half() if not native else t_out.detach()
    np.testing.assert_allclose(got.astype(np.float32), expected.float().numpy(), rtol=rtol, atol=atol, err_msg="forward")
    w = rng.uniform(-1, 1, size=tuple(t_out.shape)).astype(np.float16)
    t_out.backward(torch.tensor(w) if native else torch.tensor(w).float())
    s_out.backward(Tensor(w, device=dev))
    for i, (t, s) in enumerate(zip(t_in, s_in)):
        assert s.grad is not None, f"input {i} got no gradient"
        g = s.grad.numpy()
        assert g.dtype == np.float16, f"gradient of input {i} is {g.dtype}, torch gives float16"
        want = t.grad.half().float().numpy()
        np.testing.assert_allclose(g.astype(np.float32), want, rtol=grad_rtol, atol=grad_atol, err_msg=f"gradient of input {i}")


f16_devices = pytest.mark.parametrize("dev", F16_DEVICES)

# exact per op: one float32 computation, one rounding
ELEMENTWISE = {
    "add": ([(4, 33), (4, 33)], lambda a, b: a + b, {}),
    "add_broadcast": ([(4, 33), (33,)], lambda a, b: a + b, {}),
    "mul": ([(4, 33), (4, 33)], lambda a, b: a * b, {}),
    "div": ([(4, 33), (4, 33)], lambda a, b: a / (b.abs() + 0.5), {}),
    "exp": ([(4, 33)], lambda a: a.exp(), dict(low=-6, high=6)),
    "log": ([(4, 33)], lambda a: a.log(), dict(low=0.01, high=100)),
    "relu": ([(4, 33)], lambda a: a.relu(), {}),
    "sigmoid": ([(4, 33)], lambda a: a.sigmoid(), dict(low=-8, high=8)),
    "scalar_ops": ([(4, 33)], lambda a: (a * 0.1 + 3) / 7, {}),
    "neg_abs_max": ([(4, 33), (4, 33)], lambda a, b: (-a).abs().maximum(b), {}),
}


@f16_devices
@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise(dev, name):
    shapes, fn, kw = ELEMENTWISE[name]
    check_half(dev, shapes, fn, **kw)


@f16_devices
def test_sum_accumulates_in_float32(dev):
    # 4096 ones: a float16 accumulator would stop at 2048 (2048 + 1 rounds back to 2048); torch gives 4096
    x = Tensor(np.ones(4096, dtype=np.float16), device=dev)
    assert x.sum().numpy() == np.float16(4096)
    check_half(dev, [(8, 300)], lambda a: a.sum(1), low=0, high=1)
    check_half(dev, [(8, 300)], lambda a: a.sum(), low=0, high=1, rtol=2e-3)


@f16_devices
def test_mean_max(dev):
    check_half(dev, [(6, 50)], lambda a: a.mean(1))
    check_half(dev, [(6, 50)], lambda a: a.max(1), torch_fn=lambda a: a.amax(1))
    check_half(dev, [(6, 50)], lambda a: a.max())


@f16_devices
def test_matmul(dev):
    # float32 accumulation in a different order than torch's: outputs that nearly cancel (|result| much smaller
    # than the sum of |products|, ~16 here) may round to a neighbouring float16, so atol is a few ulps of 16
    check_half(dev, [(8, 16), (16, 12)], lambda a, b: a @ b, rtol=2e-3, atol=2e-2, grad_atol=2e-2)


@f16_devices
def test_softmax(dev):
    # exp and the row sum in float32 (exp via ts_math.h's exp2, the sum in another order), one rounding at
    # the end; values are at most 1, so atol is one ulp of float16 at 0.5
    check_half(dev, [(5, 40)], lambda a: a.softmax(-1), low=-8, high=8, rtol=2e-3, atol=5e-4, grad_atol=2e-3)


CAST_VALUES = np.array([0.0, -0.0, 1.0, 65504.0, 65519.0, 65520.0, 1e5, -1e5, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -25,
                        2.0 ** -14, 1e-8, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 2049.0, 2051.0, 0.1, -3.14159,
                        np.inf, -np.inf, np.nan], dtype=np.float32)


@f16_devices
def test_cast_round_trips_and_special_values(dev):
    # overflow to inf, subnormals, -0.0, NaN and ties (round half to even), bit for bit with torch
    expected = torch.tensor(CAST_VALUES).half().numpy()
    for via in (lambda t: t.half(), lambda t: t.cast(dtypes.float16), lambda t: t.cast(dtypes.half)):
        h = via(Tensor(CAST_VALUES, device=dev))
        assert h.dtype == dtypes.float16
        got = h.numpy()
        nan = np.isnan(expected)
        assert np.isnan(got[nan]).all()
        np.testing.assert_array_equal(_bits(got[~nan]), _bits(expected[~nan]))
    back = Tensor(CAST_VALUES, device=dev).half().float().numpy()
    assert back.dtype == np.float32
    want = expected.astype(np.float32)
    np.testing.assert_array_equal(back[~np.isnan(want)], want[~np.isnan(want)])
    assert np.signbit(back[1]) and np.isnan(back[-1])
    # to int32 / bool and back
    h = Tensor(np.array([-2.5, -0.0, 0.0, 1.5, 300.75], dtype=np.float16), device=dev)
    np.testing.assert_array_equal(h.int().numpy(), torch.tensor([-2.5, -0.0, 0.0, 1.5, 300.75]).half().int().numpy())
    np.testing.assert_array_equal(h.bool().numpy(), [True, False, False, True, True])
    i = Tensor(np.array([0, 1, 2049, 70000, -3], dtype=np.int32), device=dev).half().numpy()
    np.testing.assert_array_equal(_bits(i), _bits(torch.tensor([0, 1, 2049, 70000, -3]).half().numpy()))
    b = Tensor(np.array([True, False]), device=dev).half().numpy()
    assert b.dtype == np.float16 and b.tolist() == [1.0, 0.0]


@f16_devices
def test_numpy_in_and_out_keeps_every_bit(dev):
    bits = np.arange(0, 65536, 7, dtype=np.uint16)
    x = bits.view(np.float16)
    t = Tensor(x, device=dev)
    assert t.dtype == dtypes.float16
    out = t.numpy()
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out.view(np.uint16), bits)
    assert Tensor(np.float16(1.5), device=dev).item() == 1.5


@f16_devices
def test_promotion_as_torch(dev):
    h = Tensor(np.array([1.0, 2.0], dtype=np.float16), device=dev)
    f = Tensor(np.array([0.5, 0.25], dtype=np.float32), device=dev)
    i = Tensor(np.array([1, 2], dtype=np.int32), device=dev)
    assert (h + f).dtype == dtypes.float32 and (f * h).dtype == dtypes.float32
    assert (h + 1.5).dtype == dtypes.float16 and (2 * h).dtype == dtypes.float16
    assert (h + Tensor(np.float32(0.5), device=dev)).dtype == dtypes.float16  # 0-d does not promote (torch)
    h0 = Tensor(np.float16(1.5), device=dev)  # a python scalar does not promote a 0-d float16 tensor either
    t0 = torch.tensor(1.5, dtype=torch.half)
    for got, want in ((h0 ** 2, t0 ** 2), (h0 ** 2.5, t0 ** 2.5), (2 ** h0, 2 ** t0),
                      (h0.copysign(-2.0), torch.copysign(t0, -2.0))):
        assert got.dtype == dtypes.float16 and got.numpy() == want.numpy(), (got.dtype, got.numpy(), want)
    assert (i + h).dtype == dtypes.float16
    assert (h < f).dtype == dtypes.bool and h.argmax().dtype == dtypes.int32
    # torch 1.13 rounds a python scalar to float16 first: 3 * half(0.1) = 0.2998..., not 0.3000...
    th = torch.tensor([1.0, 3.0, 1000.0], dtype=torch.half)
    sh = Tensor(th.numpy(), device=dev)
    np.testing.assert_array_equal(_bits((sh * 0.1).numpy()), _bits((th * 0.1).numpy()))
    np.testing.assert_array_equal((h + f).numpy(), np.array([1.5, 2.25], dtype=np.float32))


@f16_devices
def test_fused_chain_rounds_after_every_op(dev):
    # (a + b) * c in one kernel must round a + b to float16 before the multiply, as torch's two ops do
    a = np.array([2048.0, 1.0, 0.1], dtype=np.float16)
    b = np.array([1.0, 2.0 ** -11, 0.2], dtype=np.float16)
    c = np.array([3.0, 4096.0, 7.0], dtype=np.float16)
    ta, tb, tc = (torch.tensor(v) for v in (a, b, c))
    got = ((Tensor(a, device=dev) + Tensor(b, device=dev)) * Tensor(c, device=dev)).numpy()
    np.testing.assert_array_equal(_bits(got), _bits(((ta + tb) * tc).numpy()))


@f16_devices
def test_training_step_stays_float16(dev):
    rng = np.random.default_rng(1)
    w = Tensor(rng.uniform(-1, 1, (8, 4)).astype(np.float16), device=dev, requires_grad=True)
    x = Tensor(rng.uniform(-1, 1, (16, 8)).astype(np.float16), device=dev)
    loss = (x @ w).relu().mean()
    assert loss.dtype == dtypes.float16
    loss.backward()
    assert w.grad.dtype == dtypes.float16 and w.grad.shape == (8, 4)
    tw = torch.tensor(w.numpy().astype(np.float32), requires_grad=True)
    torch.relu(torch.tensor(x.numpy().astype(np.float32)) @ tw).mean().backward()
    np.testing.assert_allclose(w.grad.numpy().astype(np.float32), tw.grad.half().float().numpy(), rtol=2e-3, atol=1e-4)


@pytest.mark.skipif(not NO_F16_DEVICES, reason="every device here supports float16")
@pytest.mark.parametrize("dev", NO_F16_DEVICES or ["none"])
def test_unsupported_device_raises_clear_error(dev):
    with pytest.raises(RuntimeError, match=f"float16 is not supported on device {dev}"):
        Tensor(np.ones(3, dtype=np.float16), device=dev).numpy()
    with pytest.raises(RuntimeError, match="float16"):
        Tensor(np.ones(3, dtype=np.float32), device=dev).half()


def test_dtype_names():
    assert dtypes.float16 == dtypes.half == "float16"
    t = Tensor.zeros(2, 3, dtype=dtypes.float16)
    assert t.dtype == dtypes.float16 and t.numpy().dtype == np.float16
    with pytest.raises(ValueError, match="float16"):
        Tensor([1.0]).cast("float8")
