# Training agrees with PyTorch: the digits MLP of samples/mlp_digits.py (64-128-10) and the same
# model in torch start from the same weights and see the same minibatches; the losses of the first
# 20 optimizer steps agree within 1e-4 relative, and so do the weights after them.
import numpy as np
import pytest
import torch

from tensorscope import Tensor, datasets, nn
from tensorscope.nn import optim

STEPS, BATCH = 20, 64


class MLP:
    def __init__(self):
        self.l1 = nn.Linear(64, 128)
        self.l2 = nn.Linear(128, 10)

    def __call__(self, x):
        return self.l2(self.l1(x).relu())


@pytest.fixture(scope="module")
def digits():
    return datasets.digits()


def _torch_mlp(model):
    ref = torch.nn.Sequential()
    ref.l1, ref.relu, ref.l2 = torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    ref.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in nn.get_state_dict(model).items()})
    return ref


CASES = [  # (tensorscope optimizer, its kwargs, torch optimizer, its kwargs)
    ("SGD", dict(lr=0.1), "SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3),
     "SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("Adam", dict(lr=0.003), "Adam", dict(lr=0.003)),
    ("AdamW", dict(lr=0.003, b1=0.8, b2=0.99, weight_decay=0.1),
     "AdamW", dict(lr=0.003, betas=(0.8, 0.99), weight_decay=0.1)),
]


@pytest.mark.parametrize("name,kwargs,torch_name,torch_kwargs", CASES, ids=lambda v: str(v) if isinstance(v, dict) else v)
def test_first_steps_match_torch(digits, name, kwargs, torch_name, torch_kwargs):
    X, Y = digits
    Tensor.manual_seed(0)
    model = MLP()
    ref = _torch_mlp(model)
    opt = getattr(optim, name)(nn.get_parameters(model), **kwargs)
    topt = getattr(torch.optim, torch_name)(ref.parameters(), **torch_kwargs)
    rng = np.random.default_rng(0)
    losses, ref_losses = [], []
    for _ in range(STEPS):
        idx = rng.integers(0, len(X), BATCH)
        loss = model(Tensor(X[idx])).sparse_categorical_crossentropy(Tensor(Y[idx]))
        opt.zero_grad()
        loss.backward()
        losses.append(loss.item())
        opt.step()

        ref_loss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(X[idx])), torch.from_numpy(Y[idx]).long())
        topt.zero_grad()
        ref_loss.backward()
        ref_losses.append(ref_loss.item())
        topt.step()
    np.testing.assert_allclose(losses, ref_losses, rtol=1e-4)
    assert ref_losses[-1] < ref_losses[0]  # the run is a real training run, not a flat line
    # the weights after 20 steps: float32 sums in a different order (PyTorch's BLAS kernels differ by
    # CPU: OPENBLAS_CORETYPE=Haswell vs the native ones) drift apart by up to ~6e-5 with nesterov momentum
    for k, v in nn.get_state_dict(model).items():
        np.testing.assert_allclose(v.numpy(), ref.state_dict()[k].numpy(), rtol=1e-3, atol=1e-4, err_msg=k)


def test_batchnorm_training_matches_torch(digits):
    """A conv + BatchNorm model: the running statistics go through the optimizer's step (as buffers)."""
    X, Y = digits
    Tensor.manual_seed(0)

    class Net:
        def __init__(self):
            self.conv = nn.Conv2d(1, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.fc = nn.Linear(64, 10)

        def __call__(self, x):
            return self.fc(self.bn(self.conv(x)).relu().max_pool2d().flatten(1))

    model = Net()
    ref = torch.nn.Module()
    ref.conv, ref.bn, ref.fc = torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.Linear(64, 10)
    ref.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in nn.get_state_dict(model).items()})
    opt = optim.SGD(nn.get_parameters(model), lr=0.1, momentum=0.9)
    topt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    Tensor.training = True
    try:
        for _ in range(10):
            idx = rng.integers(0, len(X), 32)
            x = X[idx].reshape(-1, 1, 8, 8)
            loss = model(Tensor(x)).sparse_categorical_crossentropy(Tensor(Y[idx]))
            opt.zero_grad()
            loss.backward()
            value = loss.item()
            opt.step()
            tx = torch.nn.functional.max_pool2d(torch.relu(ref.bn(ref.conv(torch.from_numpy(x)))), 2)
            ref_loss = torch.nn.functional.cross_entropy(ref.fc(tx.flatten(1)), torch.from_numpy(Y[idx]).long())
            topt.zero_grad()
            ref_loss.backward()
            topt.step()
            np.testing.assert_allclose(value, ref_loss.item(), rtol=1e-4)
    finally:
        Tensor.training = False
    np.testing.assert_allclose(model.bn.running_mean.numpy(), ref.bn.running_mean.numpy(), rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(model.bn.running_var.numpy(), ref.bn.running_var.numpy(), rtol=1e-3, atol=1e-5)
    assert model.bn.num_batches_tracked.item() == 10


def test_pointwise_conv_batchnorm_gradients_match_torch():
    """MobileNet's pointwise block (1x1 conv, BatchNorm, ReLU) on 32 x 64 x 8 x 8: the BatchNorm's backward is stored
    before the channels-last copy the conv's weight gradient reads (schedule.cpp, kTransposedCopyMinElements), and
    every gradient agrees with PyTorch's."""
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((32, 64, 8, 8), dtype=np.float32)
    conv, bn = nn.Conv2d(64, 64, 1, bias=False), nn.BatchNorm2d(64)
    tconv, tbn = torch.nn.Conv2d(64, 64, 1, bias=False), torch.nn.BatchNorm2d(64)
    tconv.weight.data = torch.from_numpy(conv.weight.numpy().copy())
    x, tx = Tensor(xv, requires_grad=True), torch.from_numpy(xv.copy()).requires_grad_()
    Tensor.training = True
    try:
        y = bn(conv(x)).relu()
        (y * y).sum().backward()
    finally:
        Tensor.training = False
    ty = torch.relu(tbn(tconv(tx)))
    (ty * ty).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-4)
    for got, want in ((x.grad, tx.grad), (conv.weight.grad, tconv.weight.grad), (bn.weight.grad, tbn.weight.grad),
                      (bn.bias.grad, tbn.bias.grad)):
        scale = np.abs(want.numpy()).max()
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-3, atol=1e-4 * scale)
