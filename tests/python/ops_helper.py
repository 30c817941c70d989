"""Shared helper of the test_ops_<family>.py suites: runs an op on PyTorch (float32, CPU) and on Tensorscope
with the same seeded inputs, and compares forward values, shapes, dtypes and the gradients of a random-weighted
sum of the outputs (tinygrad's test_ops style).

Devices come from TENSORSCOPE_TEST_DEVICES (comma-separated), default every device here that can run kernels
(C, INTERP, OPENCL:0, VULKAN:0, ...), so the suites grow with the backends. Tolerances: forward atol=1e-6,
rtol=1e-3; gradients atol=1e-4, rtol=1e-3 (callers loosen atol only where float32 accumulation order differs,
and say why).
"""
import os

import numpy as np
import pytest
import torch

from tensorscope import Device, Tensor


def _runnable_devices():
    """Every registered device that can run kernels: a compile-only one (CUDA without a GPU) refuses its
    first allocation."""
    names = []
    for name in Device.names():
        try:
            Tensor([0.0], device=name).numpy()
            names.append(name)
        except RuntimeError:
            pass
    return names


_env_devices = os.environ.get("TENSORSCOPE_TEST_DEVICES")
DEVICES = [d for d in _env_devices.split(",") if d] if _env_devices else _runnable_devices()
devices = pytest.mark.parametrize("dev", DEVICES)


def rand(rng, shape, low=-2.0, high=2.0):
    return np.asarray(rng.uniform(low, high, size=shape), dtype=np.float32)


def away_from_zero(rng, shape, low=0.5, high=2.0):
    """Magnitudes in [low, high] with random signs: safe divisors."""
    return (rand(rng, shape, low, high) * rng.choice([-1.0, 1.0], size=shape)).astype(np.float32)


def _outputs(x):
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _check_dtype(got, expected):
    if expected.dtype in (np.int64, np.int32):
        assert got.dtype.kind == "i", f"dtype {got.dtype}, torch gives {expected.dtype}"
    else:
        assert got.dtype == expected.dtype, f"dtype {got.dtype}, torch gives {expected.dtype}"


def check(shapes, torch_fn, ts_fn=None, *, dev, vals=None, low=-2.0, high=2.0, forward_only=False, atol=1e-6, rtol=1e-3,
          grad_atol=1e-4, grad_rtol=1e-3, seed=0, grad_inputs=None):
    """torch_fn on torch tensors and ts_fn (default torch_fn) on Tensors built from the same values. Outputs may be
    a tensor or a tuple of tensors (e.g. (values, indices)). Float inputs get gradients unless forward_only;
    `grad_inputs` (indices) restricts which ones."""
    ts_fn = ts_fn or torch_fn
    rng = np.random.default_rng(seed)
    if vals is None:
        vals = [rand(rng, s, low, high) for s in shapes]
    vals = [np.asarray(v) for v in vals]
    needs = [not forward_only and v.dtype == np.float32 and (grad_inputs is None or i in grad_inputs) for i, v in enumerate(vals)]
    t_in = [torch.tensor(v, requires_grad=g) for v, g in zip(vals, needs)]
    s_in = [Tensor(v, requires_grad=g, device=dev) for v, g in zip(vals, needs)]
    t_out, s_out = _outputs(torch_fn(*t_in)), _outputs(ts_fn(*s_in))
    assert len(t_out) == len(s_out), f"{len(s_out)} outputs, torch gives {len(t_out)}"
    for i, (t, s) in enumerate(zip(t_out, s_out)):
        assert isinstance(s, Tensor), f"output {i}: expected a Tensor, got {type(s)}"
        assert s.device == dev
        assert s.shape == tuple(t.shape), f"output {i}: shape {s.shape}, torch gives {tuple(t.shape)}"
        expected, got = t.detach().numpy(), s.numpy()
        assert got.shape == expected.shape
        _check_dtype(got, expected)
        np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, err_msg=f"forward pass, output {i}")
    if forward_only:
        return
    float_outs = [(t, s) for t, s in zip(t_out, s_out) if t.requires_grad and t.dtype == torch.float32]
    if not float_outs or not any(needs):
        return
    t_loss, s_loss = 0, None
    for t, s in float_outs:
        w = rand(rng, tuple(t.shape), -1.0, 1.0)
        t_loss = t_loss + (t * torch.tensor(w)).sum()
        term = (s * Tensor(w, device=dev)).sum()
        s_loss = term if s_loss is None else s_loss + term
    t_loss.backward()
    s_loss.backward()
    for i, (t, s) in enumerate(zip(t_in, s_in)):
        if not t.requires_grad:
            continue
        tg = t.grad if t.grad is not None else torch.zeros_like(t)
        if s.grad is None and not tg.any():
            continue  # no path to this input: a zero gradient, as torch's
        assert s.grad is not None, f"input {i} got no gradient"
        assert s.grad.shape == tuple(t.shape)
        np.testing.assert_allclose(s.grad.numpy(), tg.numpy(), atol=grad_atol, rtol=grad_rtol, err_msg=f"gradient of input {i}")


def check_raises(exc, fn, *match):
    """fn() raises `exc` (a type or tuple of types) and the message contains every string in `match`."""
    with pytest.raises(exc) as info:
        fn()
    msg = str(info.value)
    for m in match:
        assert m in msg, f"message {msg!r} does not mention {m!r}"
