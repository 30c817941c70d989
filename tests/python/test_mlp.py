# End-to-end training: a 64-128-10 MLP on the digits learns to well above chance in a few seconds.
import numpy as np
import pytest

from tensorscope import Tensor, datasets, nn
from tensorscope.nn import optim


@pytest.mark.parametrize("opt_name,kwargs", [("SGD", dict(lr=0.2, momentum=0.9)), ("Adam", dict(lr=0.01))])
def test_mlp_learns_digits(opt_name, kwargs):
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    X, Y = datasets.digits()
    order = np.random.default_rng(42).permutation(len(X))
    X, Y = X[order], Y[order]
    n = int(len(X) * 0.8)

    l1, l2 = nn.Linear(64, 128), nn.Linear(128, 10)
    opt = getattr(optim, opt_name)(nn.get_parameters([l1, l2]), **kwargs)
    losses = []
    for step in range(150):
        idx = rng.integers(0, n, 128)
        loss = l2(l1(Tensor(X[idx])).relu()).sparse_categorical_crossentropy(Tensor(Y[idx]))
        opt.zero_grad()
        loss.backward()
        losses.append(loss.item())
        opt.step()

    assert np.isfinite(losses).all()
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10]), f"loss did not fall: {losses[:3]} ... {losses[-3:]}"
    pred = l2(l1(Tensor(X[n:])).relu()).numpy().argmax(axis=1)
    accuracy = (pred == Y[n:]).mean()
    assert accuracy >= 0.9, f"test accuracy {accuracy:.3f}"
