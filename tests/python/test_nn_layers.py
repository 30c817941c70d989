# tensorscope.nn layers against torch.nn: forward values, gradients of the input and of every
# parameter, and the train/eval behaviour (BatchNorm running statistics, Dropout). Weights go from
# the tensorscope layer to the torch layer through the state dict, so the names are checked too.
import numpy as np
import pytest
import torch

from tensorscope import Tensor, nn

RTOL, ATOL = 1e-3, 1e-5


@pytest.fixture(autouse=True)
def _eval_mode_after():
    yield
    Tensor.training = False


def _to_torch(layer, ref):
    """Loads the tensorscope layer's state dict into the torch layer (strict: every name must match)."""
    ref.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in nn.get_state_dict(layer).items()})


def _check(layer, ref, x_np, seed=1, check_grads=True):
    """Forward of both, then backward of a random-weighted sum; compares outputs and all gradients."""
    x = Tensor(x_np, requires_grad=True)
    tx = torch.tensor(x_np, requires_grad=True)
    out, ref_out = layer(x), ref(tx)
    np.testing.assert_allclose(out.numpy(), ref_out.detach().numpy(), rtol=RTOL, atol=ATOL)
    assert out.shape == tuple(ref_out.shape)
    if not check_grads:
        return
    w = np.random.default_rng(seed).uniform(-1, 1, size=ref_out.shape).astype(np.float32)
    (out * Tensor(w)).sum().backward()
    (ref_out * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=RTOL, atol=1e-4)
    torch_params = dict(ref.named_parameters())
    for name, p in nn.get_state_dict(layer).items():
        if name in torch_params:
            np.testing.assert_allclose(p.grad.numpy(), torch_params[name].grad.numpy(), rtol=RTOL, atol=1e-4,
                                       err_msg=f"gradient of {name}")


def _rand(*shape, seed=0, low=-2.0, high=2.0):
    return np.random.default_rng(seed).uniform(low, high, size=shape).astype(np.float32)


# ---- Conv2d ------------------------------------------------------------------------------------
CONV_CASES = [  # in, out, kernel, stride, padding, dilation, groups, bias, input HxW
    (3, 4, 3, 1, 1, 1, 1, True, (7, 7)),
    (4, 6, 3, 2, 0, 1, 2, True, (9, 8)),
    (4, 4, (3, 2), (2, 1), (1, 2), 1, 4, False, (8, 6)),  # depthwise, asymmetric kernel/stride/pad
    (2, 3, 3, 1, 2, 2, 1, True, (8, 8)),                  # dilation
    (2, 4, 3, 1, "same", 1, 1, True, (5, 6)),
    (6, 2, 1, 1, 0, 1, 2, True, (4, 4)),                  # 1x1 grouped
]


@pytest.mark.parametrize("cin,cout,k,stride,padding,dilation,groups,bias,hw", CONV_CASES, ids=str)
def test_conv2d(cin, cout, k, stride, padding, dilation, groups, bias, hw):
    Tensor.manual_seed(0)
    layer = nn.Conv2d(cin, cout, k, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)
    ref = torch.nn.Conv2d(cin, cout, k, stride=stride, padding=padding, dilation=dilation, groups=groups, bias=bias)
    assert layer.weight.shape == tuple(ref.weight.shape)
    _to_torch(layer, ref)
    _check(layer, ref, _rand(2, cin, *hw))


def test_conv2d_init_bounds_follow_fan_in():
    Tensor.manual_seed(0)
    layer = nn.Conv2d(8, 4, 3, groups=2)
    bound = 1 / np.sqrt(8 // 2 * 9)
    w = layer.weight.numpy()
    assert np.abs(w).max() <= bound and w.std() > bound / 3
    assert layer.weight.requires_grad and layer.bias.requires_grad


def test_conv1d():
    Tensor.manual_seed(0)
    layer = nn.Conv1d(3, 5, 3, stride=2, padding=1)
    ref = torch.nn.Conv1d(3, 5, 3, stride=2, padding=1)
    _to_torch(layer, ref)
    _check(layer, ref, _rand(2, 3, 11))


def test_conv2d_bad_arguments():
    with pytest.raises(ValueError, match="groups"):
        nn.Conv2d(3, 4, 3, groups=2)
    with pytest.raises(ValueError, match="padding"):
        nn.Conv2d(3, 4, 3, padding="valid")
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(3, 4, 3, stride=2, padding="same")


# ---- BatchNorm ---------------------------------------------------------------------------------
@pytest.mark.parametrize("affine", [True, False])
def test_batchnorm2d_train_eval_and_running_stats(affine):
    layer, ref = nn.BatchNorm2d(3, affine=affine), torch.nn.BatchNorm2d(3, affine=affine)
    if affine:  # non-trivial affine parameters
        layer.weight.assign(Tensor(_rand(3, seed=7, low=0.5, high=1.5))).realize()
        layer.bias.assign(Tensor(_rand(3, seed=8))).realize()
    _to_torch(layer, ref)
    Tensor.training = True
    ref.train()
    for step in range(3):  # three training batches move the running statistics
        x = _rand(4, 3, 5, 5, seed=step, low=-1, high=3)
        _check(layer, ref, x, seed=step)
        Tensor.realize(layer.running_mean, layer.running_var, layer.num_batches_tracked)
    np.testing.assert_allclose(layer.running_mean.numpy(), ref.running_mean.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(layer.running_var.numpy(), ref.running_var.numpy(), rtol=RTOL, atol=ATOL)
    assert layer.num_batches_tracked.numpy() == 3 == ref.num_batches_tracked.item()
    # eval: the running statistics normalize, nothing moves
    Tensor.training = False
    ref.eval()
    before = layer.running_mean.numpy()
    _check(layer, ref, _rand(2, 3, 5, 5, seed=9), seed=9)
    np.testing.assert_array_equal(layer.running_mean.numpy(), before)


def test_batchnorm1d_on_features_and_momentum():
    layer, ref = nn.BatchNorm1d(6, momentum=0.3, eps=1e-3), torch.nn.BatchNorm1d(6, momentum=0.3, eps=1e-3)
    _to_torch(layer, ref)
    Tensor.training = True
    _check(layer, ref, _rand(8, 6, seed=3, low=0, high=5))
    np.testing.assert_allclose(layer.running_var.numpy(), ref.running_var.numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(layer.running_mean.numpy(), ref.running_mean.numpy(), rtol=RTOL, atol=ATOL)


def test_batchnorm_without_running_stats_uses_batch_stats_in_eval():
    layer = nn.BatchNorm2d(2, track_running_stats=False)
    ref = torch.nn.BatchNorm2d(2, track_running_stats=False).eval()
    assert set(nn.get_state_dict(layer)) == {"weight", "bias"}
    _to_torch(layer, ref)
    _check(layer, ref, _rand(3, 2, 4, 4, seed=4))


def test_batchnorm_buffers_are_not_trainable():
    bn = nn.BatchNorm2d(4)
    assert bn.weight.requires_grad and bn.bias.requires_grad
    assert not bn.running_mean.requires_grad and not bn.running_var.requires_grad
    assert bn.num_batches_tracked.dtype == "int32"
    assert list(nn.get_state_dict(bn)) == ["weight", "bias", "running_mean", "running_var", "num_batches_tracked"]


def test_batchnorm_needs_two_values_per_channel_in_training():
    Tensor.training = True
    with pytest.raises(ValueError, match="more than one value"):
        nn.BatchNorm1d(3)(Tensor(_rand(1, 3)))


# ---- LayerNorm ---------------------------------------------------------------------------------
@pytest.mark.parametrize("shape,normalized", [((4, 10), 10), ((2, 3, 8), (8,)), ((2, 3, 4, 5), (4, 5))], ids=str)
@pytest.mark.parametrize("affine", [True, False])
def test_layernorm(shape, normalized, affine):
    layer = nn.LayerNorm(normalized, elementwise_affine=affine)
    ref = torch.nn.LayerNorm(normalized, elementwise_affine=affine)
    if affine:
        layer.weight.assign(Tensor(_rand(*layer.normalized_shape, seed=5))).realize()
        layer.bias.assign(Tensor(_rand(*layer.normalized_shape, seed=6))).realize()
    _to_torch(layer, ref)
    _check(layer, ref, _rand(*shape, seed=2, low=-3, high=5))


def test_layernorm_shape_error():
    with pytest.raises(ValueError, match="last dimensions"):
        nn.LayerNorm(5)(Tensor(_rand(2, 4)))


def test_rmsnorm():
    layer = nn.RMSNorm(6)
    x = _rand(3, 6, seed=1)
    expected = x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(layer(Tensor(x)).numpy(), expected, rtol=RTOL, atol=ATOL)


# ---- Embedding ---------------------------------------------------------------------------------
@pytest.mark.parametrize("idx_shape", [(5,), (2, 7)], ids=str)
def test_embedding(idx_shape):
    Tensor.manual_seed(0)
    layer, ref = nn.Embedding(11, 4), torch.nn.Embedding(11, 4)
    bound = np.sqrt(6 / (11 + 4))
    assert np.abs(layer.weight.numpy()).max() <= bound
    _to_torch(layer, ref)
    idx = np.random.default_rng(0).integers(0, 11, size=idx_shape).astype(np.int32)
    idx.flat[0] = idx.flat[-1]  # a repeated row: its gradient is the sum of both uses
    out, ref_out = layer(Tensor(idx)), ref(torch.tensor(idx, dtype=torch.long))
    np.testing.assert_allclose(out.numpy(), ref_out.detach().numpy(), rtol=RTOL, atol=ATOL)
    w = _rand(*ref_out.shape, seed=3)
    (out * Tensor(w)).sum().backward()
    (ref_out * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), ref.weight.grad.numpy(), rtol=RTOL, atol=1e-5)


def test_embedding_rejects_float_indices():
    with pytest.raises(TypeError, match="integer"):
        nn.Embedding(4, 2)(Tensor([0.0, 1.0]))


# ---- Dropout -----------------------------------------------------------------------------------
def test_dropout_identity_in_eval_and_with_p0():
    x = _rand(4, 5)
    Tensor.training = False
    np.testing.assert_array_equal(nn.Dropout(0.5)(Tensor(x)).numpy(), x)
    Tensor.training = True
    t = Tensor(x, requires_grad=True)
    out = nn.Dropout(0.0)(t)
    np.testing.assert_array_equal(out.numpy(), x)
    out.sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), np.ones_like(x))


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_dropout_train_mode_statistics(p):
    Tensor.training = True
    Tensor.manual_seed(1)
    n = 200_000
    x = Tensor.ones(n, requires_grad=True)
    out = nn.Dropout(p)(x)
    y = out.numpy()
    kept = y != 0
    # every kept element is scaled by 1/(1-p), so the mean stays 1
    np.testing.assert_allclose(y[kept], 1 / (1 - p), rtol=1e-6)
    sd = np.sqrt(p * (1 - p) / n)  # binomial standard deviation of the dropped fraction
    assert abs((~kept).mean() - p) < 6 * sd
    assert abs(y.mean() - 1.0) < 6 * sd / (1 - p)
    # the gradient flows through the same mask with the same scale
    out.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, 1 / (1 - p), 0), rtol=1e-6)


def test_dropout_masks_differ_between_calls():
    Tensor.training = True
    d = nn.Dropout(0.5)
    a, b = d(Tensor.ones(256)).numpy(), d(Tensor.ones(256)).numpy()
    assert not np.array_equal(a, b)


def test_dropout_bad_probability():
    with pytest.raises(ValueError):
        nn.Dropout(1.5)
