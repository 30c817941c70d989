# nn.Linear, get_parameters and the optimizers, checked against torch.nn / torch.optim with the same
# initial weights and the same data.
import math

import numpy as np
import pytest
import torch

from tensorscope import Tensor, nn
from tensorscope.nn import optim

DEVICES = ["C", "INTERP"]


def test_linear_shapes_and_init_bounds():
    Tensor.manual_seed(0)
    layer = nn.Linear(64, 32)
    assert layer.weight.shape == (32, 64) and layer.bias.shape == (32,)
    assert layer.weight.requires_grad and layer.bias.requires_grad
    bound = 1 / math.sqrt(64)
    w, b = layer.weight.numpy(), layer.bias.numpy()
    assert w.dtype == np.float32
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    assert w.std() > bound / 3  # actually spread over the interval (uniform: bound / sqrt(3))
    assert nn.Linear(4, 3, bias=False).bias is None


def test_linear_init_is_seeded():
    Tensor.manual_seed(5)
    a = nn.Linear(8, 4).weight.numpy()
    Tensor.manual_seed(5)
    b = nn.Linear(8, 4).weight.numpy()
    c = nn.Linear(8, 4).weight.numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(bias):
    layer = nn.Linear(5, 3, bias=bias)
    ref = torch.nn.Linear(5, 3, bias=bias)
    with torch.no_grad():
        ref.weight.copy_(torch.tensor(layer.weight.numpy()))
        if bias:
            ref.bias.copy_(torch.tensor(layer.bias.numpy()))
    x = np.random.default_rng(0).uniform(-2, 2, size=(4, 2, 5)).astype(np.float32)
    out, ref_out = layer(Tensor(x)), ref(torch.tensor(x))
    np.testing.assert_allclose(out.numpy(), ref_out.detach().numpy(), rtol=1e-5, atol=1e-6)
    w = np.random.default_rng(1).uniform(-1, 1, size=(4, 2, 3)).astype(np.float32)
    (out * Tensor(w)).sum().backward()
    (ref_out * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=1e-4, atol=1e-5)
    if bias:
        np.testing.assert_allclose(layer.bias.grad.numpy(), ref.bias.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_get_parameters_walks_attributes_lists_and_dicts():
    class Block:
        def __init__(self):
            self.layers = [nn.Linear(2, 3), nn.Linear(3, 4, bias=False)]
            self.extra = {"scale": Tensor([1.0], requires_grad=True)}
            self.name = "block"  # not a tensor: ignored

    class Model:
        def __init__(self):
            self.block = Block()
            self.head = nn.Linear(4, 1)

    m = Model()
    params = nn.get_parameters(m)
    expected = [m.block.layers[0].weight, m.block.layers[0].bias, m.block.layers[1].weight,
                m.block.extra["scale"], m.head.weight, m.head.bias]
    assert len(params) == len(expected)
    assert all(p is e for p, e in zip(params, expected))
    assert list(nn.get_state_dict(m)) == ["block.layers.0.weight", "block.layers.0.bias", "block.layers.1.weight",
                                          "block.extra.scale", "head.weight", "head.bias"]


def _optimizer_pair(kind, kwargs, torch_kwargs, dev, steps=4):
    """Trains the same tiny model with tensorscope and torch for a few steps; returns both weight sets."""
    rng = np.random.default_rng(0)
    w0 = rng.uniform(-1, 1, size=(4, 3)).astype(np.float32)
    b0 = rng.uniform(-1, 1, size=(3,)).astype(np.float32)
    w, b = Tensor(w0, requires_grad=True, device=dev), Tensor(b0, requires_grad=True, device=dev)
    tw, tb = torch.tensor(w0, requires_grad=True), torch.tensor(b0, requires_grad=True)
    opt = getattr(optim, kind)([w, b], **kwargs)
    topt = getattr(torch.optim, kind)([tw, tb], **torch_kwargs)
    for _ in range(steps):
        x = rng.uniform(-1, 1, size=(5, 4)).astype(np.float32)
        opt.zero_grad()
        assert w.grad is None
        Tensor(x, device=dev).linear(w, b).tanh().sum().backward()
        opt.step()
        topt.zero_grad()
        (torch.tensor(x) @ tw + tb).tanh().sum().backward()
        topt.step()
        assert w.device == dev and b.device == dev
    return (w.numpy(), b.numpy()), (tw.detach().numpy(), tb.detach().numpy())


SGD_CASES = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, nesterov=True),
    dict(lr=0.1, momentum=0.5, weight_decay=0.01),
    dict(lr=0.1, weight_decay=0.1),
]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("kwargs", SGD_CASES, ids=str)
def test_sgd_matches_torch(kwargs, dev):
    (w, b), (tw, tb) = _optimizer_pair("SGD", kwargs, kwargs, dev)
    np.testing.assert_allclose(w, tw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, tb, rtol=1e-5, atol=1e-6)


ADAM_CASES = [(dict(), dict()), (dict(lr=0.01, b1=0.8, b2=0.99, eps=1e-6), dict(lr=0.01, betas=(0.8, 0.99), eps=1e-6))]


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("kwargs,torch_kwargs", ADAM_CASES, ids=str)
def test_adam_matches_torch(kwargs, torch_kwargs, dev):
    (w, b), (tw, tb) = _optimizer_pair("Adam", kwargs, torch_kwargs, dev, steps=5)
    np.testing.assert_allclose(w, tw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b, tb, rtol=1e-5, atol=1e-6)


def test_step_without_backward_raises():
    w = Tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)
    with pytest.raises(RuntimeError, match="backward"):
        opt.step()


def test_step_does_not_grow_the_graph():
    # After step() the parameters are realized buffers: reading them launches nothing.
    from tensorscope import GlobalCounters
    w = Tensor(np.ones((3, 3), dtype=np.float32), requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
    GlobalCounters.reset()
    w.numpy()
    assert GlobalCounters.kernel_count == 0
