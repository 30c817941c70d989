# Autograd semantics, checked against PyTorch: the quickstart's gradients, accumulation over
# several backward() calls, detach, explicit output gradients, and laziness of the gradient graph.
import numpy as np
import pytest
import torch

from tensorscope import GlobalCounters, Tensor

DEVICES = ["C", "INTERP"]
devices = pytest.mark.parametrize("dev", DEVICES)


@devices
def test_quickstart_gradients(dev):
    x = Tensor.eye(3, requires_grad=True, device=dev)
    y = Tensor([[2.0, 0, -2.0]], requires_grad=True, device=dev)
    z = y.matmul(x).sum()
    z.backward()

    tx = torch.eye(3, requires_grad=True)
    ty = torch.tensor([[2.0, 0, -2.0]], requires_grad=True)
    tz = ty.matmul(tx).sum()
    tz.backward()

    np.testing.assert_allclose(z.numpy(), tz.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(y.grad.numpy(), ty.grad.numpy(), rtol=1e-6)
    assert x.grad.shape == (3, 3) and y.grad.shape == (1, 3)
    assert x.grad.device == dev and y.grad.device == dev


@devices
def test_grad_accumulates_over_backward_calls(dev):
    rng = np.random.default_rng(0)
    v = rng.uniform(-2, 2, size=(3, 4)).astype(np.float32)
    x = Tensor(v, requires_grad=True, device=dev)
    tx = torch.tensor(v, requires_grad=True)

    (x * x).sum().backward()
    (tx * tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)

    # A second, different graph: its gradient adds to the first one.
    (x.sin() * 3.0).mean().backward()
    (tx.sin() * 3.0).mean().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@devices
def test_setting_grad_to_none_restarts_accumulation(dev):
    x = Tensor(np.array([1.0, -2.0, 3.0], dtype=np.float32), requires_grad=True, device=dev)
    (x * 2.0).sum().backward()
    x.grad = None
    (x * x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), 2.0 * x.numpy(), rtol=1e-6)


@devices
def test_detach_cuts_the_graph(dev):
    rng = np.random.default_rng(1)
    v = rng.uniform(-2, 2, size=(5,)).astype(np.float32)
    x = Tensor(v, requires_grad=True, device=dev)
    tx = torch.tensor(v, requires_grad=True)

    d = x.detach()
    assert not d.requires_grad
    np.testing.assert_array_equal(d.numpy(), v)

    (x * x.detach()).sum().backward()      # d/dx of x * c is c, not 2x
    (tx * tx.detach()).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    assert not np.allclose(x.grad.numpy(), 2 * v)  # guards against detach being a no-op


@devices
def test_backward_with_explicit_gradient(dev):
    rng = np.random.default_rng(2)
    v = rng.uniform(-2, 2, size=(2, 3)).astype(np.float32)
    g = rng.uniform(-1, 1, size=(2, 3)).astype(np.float32)
    x = Tensor(v, requires_grad=True, device=dev)
    tx = torch.tensor(v, requires_grad=True)
    x.exp().backward(Tensor(g, device=dev))
    tx.exp().backward(torch.tensor(g))
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5)


@devices
def test_tensor_used_twice_sums_gradients(dev):
    rng = np.random.default_rng(3)
    v = rng.uniform(-2, 2, size=(4, 4)).astype(np.float32)
    x = Tensor(v, requires_grad=True, device=dev)
    tx = torch.tensor(v, requires_grad=True)
    (x @ x + x.relu() * x).sum().backward()
    (tx @ tx + tx.relu() * tx).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)


@devices
def test_inputs_without_requires_grad_get_no_gradient(dev):
    x = Tensor([1.0, 2.0], requires_grad=True, device=dev)
    c = Tensor([3.0, 4.0], device=dev)
    (x * c).sum().backward()
    assert c.grad is None
    np.testing.assert_allclose(x.grad.numpy(), np.array([3.0, 4.0], dtype=np.float32))


@devices
def test_requires_grad_propagates(dev):
    x = Tensor([1.0, 2.0], requires_grad=True, device=dev)
    c = Tensor([3.0, 4.0], requires_grad=False, device=dev)
    assert (x * c).requires_grad
    assert not (c * 2.0).requires_grad


@devices
def test_gradient_graph_is_lazy(dev):
    # backward() only builds the gradient graph; the kernels that compute x.grad run when it is read.
    rng = np.random.default_rng(4)
    x = Tensor(rng.uniform(-2, 2, size=(8, 8)).astype(np.float32), requires_grad=True, device=dev).realize()
    loss = (x.exp() * x).sum()
    loss.backward()
    assert isinstance(x.grad, Tensor)
    GlobalCounters.reset()
    g = x.grad.numpy()
    assert GlobalCounters.kernel_count >= 1, "x.grad was already computed when backward() returned"
    GlobalCounters.reset()
    np.testing.assert_array_equal(x.grad.numpy(), g)
    assert GlobalCounters.kernel_count == 0, "reading a realized gradient again must not launch kernels"
    v = x.numpy()
    np.testing.assert_allclose(g, np.exp(v) * (v + 1), rtol=1e-5)


def test_relu_backward_reads_the_output_as_torch():
    # PyTorch's threshold_backward: grad where relu(x) > 0 or is NaN; 0 at x <= 0 (relu'(0) = 0)
    v = np.array([np.nan, -1.0, 0.0, -0.0, 2.0, 1e-30], dtype=np.float32)
    g = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], dtype=np.float32)
    x = Tensor(v, requires_grad=True)
    x.relu().backward(Tensor(g))
    tx = torch.tensor(v, requires_grad=True)
    torch.relu(tx).backward(torch.tensor(g))
    np.testing.assert_array_equal(x.grad.numpy(), tx.grad.numpy())
    # second order through relu(relu(x)) and the relu inside abs
    x = Tensor(v, requires_grad=True)
    (x.relu().relu() * 3 + x.abs()).sum().backward()
    tx = torch.tensor(v, requires_grad=True)
    (torch.relu(torch.relu(tx)) * 3 + tx.abs()).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy()[1:], tx.grad.numpy()[1:])


@devices
def test_a_second_backward_through_a_freed_graph_raises_as_in_pytorch(dev):
    # PyTorch frees the values its graph saved after backward() and raises on a second backward() through
    # it; retain_graph=True keeps them, and the second call then accumulates.
    v = np.array([0.5, -1.0, 2.0], dtype=np.float32)
    x = Tensor(v, requires_grad=True, device=dev)
    y = (x.exp() * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time.*retain_graph=True"):
        y.backward()
    tx = torch.tensor(v, requires_grad=True)
    ty = (tx.exp() * tx).sum()
    ty.backward()
    with pytest.raises(RuntimeError, match="second time"):
        ty.backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-6)  # the value itself is not freed

    x2 = Tensor(v, requires_grad=True, device=dev)
    y2 = (x2.exp() * x2).sum()
    y2.backward(retain_graph=True)
    y2.backward()
    tx2 = torch.tensor(v, requires_grad=True)
    ty2 = (tx2.exp() * tx2).sum()
    ty2.backward(retain_graph=True)
    ty2.backward()
    np.testing.assert_allclose(x2.grad.numpy(), tx2.grad.numpy(), rtol=1e-6)
