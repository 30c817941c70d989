# Losses against torch.nn.functional: reductions "mean"/"sum"/"none" (anything else is a ValueError), integer
# labels as int32 tensors or python lists, class axis conventions (cross_entropy and nll_loss: axis 1;
# sparse_categorical_crossentropy: last), label smoothing, ignore_index, weights, pos_weight, large logits.
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ops_helper import check, check_raises, devices, rand
from tensorscope import Tensor

REDUCTIONS = ["mean", "sum", "none"]


@devices
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 2)], ids=str)
def test_binary_crossentropy(shape, reduction, dev):
    rng = np.random.default_rng(1)
    p, y = rand(rng, shape, 0.05, 0.95), rng.integers(0, 2, size=shape).astype(np.float32)
    check(None, lambda a, b: F.binary_cross_entropy(a, b, reduction=reduction), lambda a, b: a.binary_crossentropy(b, reduction=reduction),
          dev=dev, vals=[p, y], grad_inputs=[0])


@devices
def test_binary_crossentropy_clamps_log(dev):
    p, y = np.array([0.0, 1.0, 0.5, 1.0], dtype=np.float32), np.array([1.0, 0.0, 1.0, 1.0], dtype=np.float32)
    check(None, lambda a, b: F.binary_cross_entropy(a, b), lambda a, b: a.binary_crossentropy(b), dev=dev, vals=[p, y], forward_only=True)


@devices
@pytest.mark.parametrize("pos_weight", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (3, 4)], ids=str)
def test_binary_crossentropy_logits(shape, reduction, pos_weight, dev):
    rng = np.random.default_rng(2)
    vals = [rand(rng, shape, -4, 4), rng.random(shape).astype(np.float32)]
    if pos_weight:
        vals.append(rand(rng, shape[-1:], 0.5, 2))
        check(None, lambda a, b, w: F.binary_cross_entropy_with_logits(a, b, reduction=reduction, pos_weight=w),
              lambda a, b, w: a.binary_crossentropy_logits(b, reduction=reduction, pos_weight=w), dev=dev, vals=vals, grad_inputs=[0])
    else:
        check(None, lambda a, b: F.binary_cross_entropy_with_logits(a, b, reduction=reduction),
              lambda a, b: a.binary_crossentropy_logits(b, reduction=reduction), dev=dev, vals=vals, grad_inputs=[0])


@devices
def test_binary_crossentropy_logits_large(dev):
    x, y = np.array([-300.0, -50.0, 50.0, 300.0], dtype=np.float32), np.array([1.0, 0.0, 1.0, 0.0], dtype=np.float32)
    check(None, lambda a, b: F.binary_cross_entropy_with_logits(a, b), lambda a, b: a.binary_crossentropy_logits(b), dev=dev, vals=[x, y], grad_inputs=[0])


CE_SHAPES = [(5,), (4, 5), (2, 5, 3)]


@devices
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
def test_cross_entropy_indices(shape, reduction, smoothing, dev):
    rng = np.random.default_rng(3)
    C = shape[0] if len(shape) == 1 else shape[1]
    lshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    x, y = rand(rng, shape), rng.integers(0, C, size=lshape).astype(np.int32)
    check(None, lambda a, b: F.cross_entropy(a, b.long(), reduction=reduction, label_smoothing=smoothing),
          lambda a, b: a.cross_entropy(b, reduction=reduction, label_smoothing=smoothing), dev=dev, vals=[x, y])


@devices
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", CE_SHAPES, ids=str)
def test_cross_entropy_probabilities(shape, reduction, smoothing, dev):
    rng = np.random.default_rng(4)
    axis = 0 if len(shape) == 1 else 1
    x, p = rand(rng, shape), rng.random(shape).astype(np.float32)
    p = (p / p.sum(axis=axis, keepdims=True)).astype(np.float32)
    check(None, lambda a, b: F.cross_entropy(a, b, reduction=reduction, label_smoothing=smoothing),
          lambda a, b: a.cross_entropy(b, reduction=reduction, label_smoothing=smoothing), dev=dev, vals=[x, p], grad_inputs=[0])


@devices
def test_cross_entropy_large_logits(dev):
    x = np.array([[500.0, -500.0, 0.0], [-300.0, 300.0, 299.0]], dtype=np.float32)
    check(None, lambda a, b: F.cross_entropy(a, b.long()), lambda a, b: a.cross_entropy(b), dev=dev, vals=[x, np.array([1, 2], dtype=np.int32)])


def _torch_scce(x, y, ignore_index, smoothing, reduction):
    C = x.shape[-1]
    loss = F.cross_entropy(x.reshape(-1, C), y.reshape(-1).long(), ignore_index=ignore_index if ignore_index != -1 else -100,
                           label_smoothing=smoothing, reduction=reduction)
    return loss.reshape(y.shape) if reduction == "none" else loss


@devices
@pytest.mark.parametrize("smoothing", [0.0, 0.15])
@pytest.mark.parametrize("ignore_index", [-1, 1])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 5)], ids=str)
def test_sparse_categorical_crossentropy(shape, reduction, ignore_index, smoothing, dev):
    rng = np.random.default_rng(5)
    x, y = rand(rng, shape), rng.integers(0, shape[-1], size=shape[:-1]).astype(np.int32)
    y.reshape(-1)[0] = 0  # at least one label is not ignored
    check(None, lambda a, b: _torch_scce(a, b, ignore_index, smoothing, reduction),
          lambda a, b: a.sparse_categorical_crossentropy(b, ignore_index=ignore_index, label_smoothing=smoothing, reduction=reduction),
          dev=dev, vals=[x, y])


@devices
def test_labels_as_python_list(dev):
    x = rand(np.random.default_rng(6), (3, 4))
    check(None, lambda a: F.cross_entropy(a, torch.tensor([0, 3, 1])), lambda a: a.sparse_categorical_crossentropy([0, 3, 1]), dev=dev, vals=[x])
    check(None, lambda a: F.cross_entropy(a, torch.tensor([0, 3, 1])), lambda a: a.cross_entropy([0, 3, 1]), dev=dev, vals=[x])


@devices
@pytest.mark.parametrize("ignore_index", [None, 2])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (4, 5), (2, 5, 3)], ids=str)
def test_nll_loss(shape, reduction, weighted, ignore_index, dev):
    rng = np.random.default_rng(7)
    C = shape[0] if len(shape) == 1 else shape[1]
    lshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    x = torch.log_softmax(torch.tensor(rand(rng, shape)), 0 if len(shape) == 1 else 1).numpy()
    y = rng.integers(0, C, size=lshape).astype(np.int32)
    if y.ndim:
        y.reshape(-1)[0] = 0
    vals = [x, y] + ([rand(rng, (C,), 0.5, 2.0)] if weighted else [])
    ii = -100 if ignore_index is None else ignore_index
    check(None, lambda a, b, *w: F.nll_loss(a, b.long(), weight=w[0] if w else None, ignore_index=ii, reduction=reduction),
          lambda a, b, *w: a.nll_loss(b, weight=w[0] if w else None, ignore_index=ignore_index, reduction=reduction),
          dev=dev, vals=vals, grad_inputs=[0])


@devices
@pytest.mark.parametrize("loss", ["binary_crossentropy", "binary_crossentropy_logits", "cross_entropy", "sparse_categorical_crossentropy", "nll_loss"])
def test_bad_reduction(loss, dev):
    x = Tensor.full((2, 3), 0.5, device=dev)
    y = Tensor(np.array([0, 1], dtype=np.int32), device=dev) if loss in ("cross_entropy", "sparse_categorical_crossentropy", "nll_loss") else x
    check_raises(ValueError, lambda: getattr(x, loss)(y, reduction="avg"), "avg")


@devices
def test_label_shape_mismatch(dev):
    x = Tensor.ones(3, 4, device=dev)
    check_raises(ValueError, lambda: x.sparse_categorical_crossentropy(Tensor(np.zeros(4, dtype=np.int32), device=dev)), "(4,)", "(3, 4)")
