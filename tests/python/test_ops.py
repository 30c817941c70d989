# Forward values and gradients of every Tensor op, checked against PyTorch (float32, CPU) on every
# device. Inputs are seeded uniform random numbers; gradients are those of a random-weighted sum of
# the outputs, so every output element contributes with its own weight.
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ops_helper import DEVICES
from tensorscope import Tensor, dtypes


def _rand(rng, shape, low, high):
    return np.asarray(rng.uniform(low, high, size=shape), dtype=np.float32)


def helper_test_op(shapes, torch_fn, ts_fn=None, *, device, vals=None, low=-2.0, high=2.0, forward_only=False,
                   atol=1e-6, rtol=1e-3, grad_atol=1e-4, grad_rtol=1e-3, seed=0):
    """Runs torch_fn on torch tensors and ts_fn (default: torch_fn) on tensorscope Tensors built from the
    same float32 values, and compares forward output, shape, dtype, device and the gradient of every input."""
    ts_fn = ts_fn or torch_fn
    rng = np.random.default_rng(seed)
    if vals is None:
        vals = [_rand(rng, s, low, high) for s in shapes]
    vals = [np.asarray(v) for v in vals]
    needs_grad = [not forward_only and v.dtype == np.float32 for v in vals]
    t_in = [torch.tensor(v, requires_grad=g) for v, g in zip(vals, needs_grad)]
    s_in = [Tensor(v, requires_grad=g, device=device) for v, g in zip(vals, needs_grad)]
    for s, v in zip(s_in, vals):
        assert s.device == device
        assert s.shape == v.shape

    t_out = torch_fn(*t_in)
    s_out = ts_fn(*s_in)
    assert isinstance(s_out, Tensor), f"expected a Tensor, got {type(s_out)}"
    assert s_out.device == device
    assert s_out.shape == tuple(t_out.shape)
    expected = t_out.detach().numpy()
    got = s_out.numpy()
    assert got.shape == expected.shape
    assert got.dtype == expected.dtype, f"dtype {got.dtype}, torch gives {expected.dtype}"
    np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, err_msg="forward pass")

    if forward_only or not t_out.requires_grad:
        return
    weights = _rand(rng, expected.shape, -1.0, 1.0)
    (t_out * torch.tensor(weights)).sum().backward()
    (s_out * Tensor(weights, device=device)).sum().backward()
    for i, (t, s) in enumerate(zip(t_in, s_in)):
        if not t.requires_grad:
            continue
        assert s.grad is not None, f"input {i} got no gradient"
        assert isinstance(s.grad, Tensor)
        assert s.grad.device == device
        assert s.grad.shape == tuple(t.shape)
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), atol=grad_atol, rtol=grad_rtol,
                                   err_msg=f"gradient of input {i}")


def _denominator(rng, shape):
    """Values with magnitude in [0.5, 2] and random sign: safe to divide by."""
    return (_rand(rng, shape, 0.5, 2.0) * rng.choice([-1.0, 1.0], size=shape)).astype(np.float32)


devices = pytest.mark.parametrize("dev", DEVICES)

# ---------------------------------------------------------------------------------------------------------------
# Elementwise: unary
# ---------------------------------------------------------------------------------------------------------------

UNARY_SHAPES = [(), (1,), (7,), (45, 65), (3, 4, 5)]

UNARY = {
    "neg": (lambda x: -x, None),
    "neg_method": (lambda x: -x, lambda x: x.neg()),
    "exp": (torch.exp, lambda x: x.exp()),
    "log": (torch.log, lambda x: x.log()),
    "relu": (torch.relu, lambda x: x.relu()),
    "sin": (torch.sin, lambda x: x.sin()),
    "sqrt": (torch.sqrt, lambda x: x.sqrt()),
    "sigmoid": (torch.sigmoid, lambda x: x.sigmoid()),
    "tanh": (torch.tanh, lambda x: x.tanh()),
    "contiguous": (lambda x: x.contiguous(), None),
    "float": (lambda x: x.float(), None),
}
POSITIVE_ONLY = {"log", "sqrt"}


@devices
@pytest.mark.parametrize("shape", UNARY_SHAPES, ids=str)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary(op, shape, dev):
    torch_fn, ts_fn = UNARY[op]
    low = 0.1 if op in POSITIVE_ONLY else -2.0
    helper_test_op([shape], torch_fn, ts_fn, device=dev, low=low)


@devices
def test_relu_gradient_at_zero(dev):
    # PyTorch convention: relu'(0) = 0.
    vals = [np.array([-1.0, 0.0, 0.0, 2.0, -0.5, 0.0], dtype=np.float32)]
    helper_test_op(None, torch.relu, lambda x: x.relu(), device=dev, vals=vals)


@devices
def test_sigmoid_tanh_large_inputs(dev):
    vals = [np.array([-300.0, -90.0, -20.0, 0.0, 20.0, 90.0, 300.0], dtype=np.float32)]
    helper_test_op(None, torch.sigmoid, lambda x: x.sigmoid(), device=dev, vals=vals)
    helper_test_op(None, torch.tanh, lambda x: x.tanh(), device=dev, vals=vals)


# ---------------------------------------------------------------------------------------------------------------
# Elementwise: binary, with broadcasting across ranks
# ---------------------------------------------------------------------------------------------------------------

BINARY_SHAPES = [
    ((45, 65), (45, 65)),
    ((3, 4), (4,)),         # row vector against a matrix
    ((3, 1), (1, 4)),       # both sides broadcast
    ((4, 1, 3), (5, 3)),    # rank 3 against rank 2
    ((2, 3, 4), (1,)),
    ((), (3, 2)),           # 0-d against a matrix
    ((2, 3), ()),
    ((), ()),
]

BINARY = {
    "add": (lambda a, b: a + b, None),
    "sub": (lambda a, b: a - b, None),
    "mul": (lambda a, b: a * b, None),
    "div": (lambda a, b: a / b, None),
    "add_method": (torch.add, lambda a, b: a.add(b)),
    "sub_method": (torch.sub, lambda a, b: a.sub(b)),
    "mul_method": (torch.mul, lambda a, b: a.mul(b)),
    "div_method": (torch.div, lambda a, b: a.div(b)),
    "maximum": (torch.maximum, lambda a, b: a.maximum(b)),
}


@devices
@pytest.mark.parametrize("shapes", BINARY_SHAPES, ids=str)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary(op, shapes, dev):
    torch_fn, ts_fn = BINARY[op]
    rng = np.random.default_rng(1)
    a = _rand(rng, shapes[0], -2.0, 2.0)
    b = _denominator(rng, shapes[1]) if op.startswith("div") else _rand(rng, shapes[1], -2.0, 2.0)
    helper_test_op(None, torch_fn, ts_fn, device=dev, vals=[a, b])


SCALAR_OPS = {
    "x+s": lambda x: x + 1.5,
    "s+x": lambda x: 1.5 + x,
    "x-s": lambda x: x - 1.5,
    "s-x": lambda x: 1.5 - x,
    "x*s": lambda x: x * -3.0,
    "s*x": lambda x: -3.0 * x,
    "x/s": lambda x: x / 4.0,
    "s/x": lambda x: 2.0 / x,
    "x+int": lambda x: x + 2,
    "int*x": lambda x: 2 * x,
    "maximum_scalar": lambda x: x.maximum(0.5) if isinstance(x, Tensor) else torch.clamp(x, min=0.5),
}


@devices
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)], ids=str)
@pytest.mark.parametrize("op", list(SCALAR_OPS))
def test_scalar_operand(op, shape, dev):
    rng = np.random.default_rng(2)
    vals = [_denominator(rng, shape)]
    helper_test_op(None, SCALAR_OPS[op], device=dev, vals=vals)


@devices
def test_maximum_ties_share_gradient(dev):
    # PyTorch convention: where a == b, each side gets half of the gradient.
    a = np.array([1.0, 2.0, -1.0, 0.5], dtype=np.float32)
    b = np.array([1.0, 3.0, -1.0, 0.0], dtype=np.float32)
    helper_test_op(None, torch.maximum, lambda x, y: x.maximum(y), device=dev, vals=[a, b])


COMPARISONS = {
    "lt": lambda a, b: a < b,
    "gt": lambda a, b: a > b,
    "le": lambda a, b: a <= b,
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne": lambda a, b: a != b,
}


@devices
@pytest.mark.parametrize("shapes", [((4, 5), (4, 5)), ((3, 1), (4,)), ((), (2, 3))], ids=str)
@pytest.mark.parametrize("op", list(COMPARISONS))
def test_comparison(op, shapes, dev):
    # Small integers stored as float32, so that equality actually happens.
    rng = np.random.default_rng(3)
    vals = [rng.integers(-2, 3, size=s).astype(np.float32) for s in shapes]
    helper_test_op(None, COMPARISONS[op], device=dev, vals=vals, forward_only=True)


@devices
@pytest.mark.parametrize("op", list(COMPARISONS))
@pytest.mark.parametrize("scalar_left", [False, True])
def test_comparison_with_scalar(op, scalar_left, dev):
    rng = np.random.default_rng(4)
    vals = [rng.integers(-2, 3, size=(3, 5)).astype(np.float32)]
    fn = (lambda x: COMPARISONS[op](1.0, x)) if scalar_left else (lambda x: COMPARISONS[op](x, 1.0))
    helper_test_op(None, fn, device=dev, vals=vals, forward_only=True)


# ---------------------------------------------------------------------------------------------------------------
# Reductions
# ---------------------------------------------------------------------------------------------------------------


def _axes(ndim, axis):
    if axis is None:
        return tuple(range(ndim))
    return axis


REDUCE_CASES = [
    ((3, 4, 5), None), ((3, 4, 5), 0), ((3, 4, 5), 1), ((3, 4, 5), 2), ((3, 4, 5), -1), ((3, 4, 5), -3),
    ((3, 4, 5), (0, 2)), ((3, 4, 5), (-1, -2)), ((45, 65), 1), ((1,), 0), ((7,), None), ((), None),
]

REDUCE = {
    "sum": (lambda x, axis, kd: torch.sum(x, dim=_axes(x.ndim, axis), keepdim=kd),
            lambda x, axis, kd: x.sum(axis=axis, keepdim=kd)),
    "max": (lambda x, axis, kd: torch.amax(x, dim=_axes(x.ndim, axis), keepdim=kd),
            lambda x, axis, kd: x.max(axis=axis, keepdim=kd)),
    "mean": (lambda x, axis, kd: torch.mean(x, dim=_axes(x.ndim, axis), keepdim=kd),
             lambda x, axis, kd: x.mean(axis=axis, keepdim=kd)),
}


@devices
@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("shape,axis", REDUCE_CASES, ids=str)
@pytest.mark.parametrize("op", list(REDUCE))
def test_reduce(op, shape, axis, keepdim, dev):
    torch_fn, ts_fn = REDUCE[op]
    helper_test_op([shape], lambda x: torch_fn(x, axis, keepdim), lambda x: ts_fn(x, axis, keepdim), device=dev)


@devices
@pytest.mark.parametrize("op", list(REDUCE))
def test_reduce_default_axis_is_full(op, dev):
    # x.sum() / x.max() / x.mean() reduce everything to a 0-d tensor.
    torch_fn, ts_fn = REDUCE[op]
    helper_test_op([(4, 6)], lambda x: torch_fn(x, None, False), lambda x: getattr(x, op)(), device=dev)


@devices
def test_max_ties_share_gradient(dev):
    vals = [np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, -1.0, 5.0]], dtype=np.float32)]
    helper_test_op(None, lambda x: torch.amax(x, dim=1), lambda x: x.max(axis=1), device=dev, vals=vals)
    helper_test_op(None, lambda x: torch.amax(x), lambda x: x.max(), device=dev,
                   vals=[np.array([[1.0, 3.0], [3.0, 0.0]], dtype=np.float32)])


# ---------------------------------------------------------------------------------------------------------------
# Movement
# ---------------------------------------------------------------------------------------------------------------


@devices
@pytest.mark.parametrize("shape,new_shape", [
    ((3, 4), (12,)), ((3, 4), (2, 6)), ((2, 3, 4), (4, 6)), ((2, 3, 4), (6, -1)), ((12,), (2, 1, 6)),
    ((1,), ()), ((), (1, 1)), ((4, 1, 3), (3, 4)),
], ids=str)
def test_reshape(shape, new_shape, dev):
    helper_test_op([shape], lambda x: x.reshape(new_shape), lambda x: x.reshape(*new_shape), device=dev)


@devices
def test_reshape_tuple_argument(dev):
    helper_test_op([(2, 6)], lambda x: x.reshape(3, 4), lambda x: x.reshape((3, 4)), device=dev)


@devices
@pytest.mark.parametrize("shape,order", [
    ((3, 4), (1, 0)), ((2, 3, 4), (2, 0, 1)), ((2, 3, 4), (0, 2, 1)), ((2, 3, 4, 5), (3, 1, 0, 2)), ((5,), (0,)),
], ids=str)
def test_permute(shape, order, dev):
    helper_test_op([shape], lambda x: x.permute(*order), device=dev)


@devices
@pytest.mark.parametrize("shape,dims", [
    ((3, 4), None), ((2, 3, 4), None), ((2, 3, 4), (0, 2)), ((2, 3, 4), (-1, -2)), ((2, 3, 4), (1, 1)),
], ids=str)
def test_transpose(shape, dims, dev):
    # tinygrad: transpose() with no argument swaps dims 0 and 1 (like torch's t() on matrices).
    torch_fn = (lambda x: x.transpose(0, 1)) if dims is None else (lambda x: x.transpose(*dims))
    ts_fn = (lambda x: x.transpose()) if dims is None else (lambda x: x.transpose(*dims))
    helper_test_op([shape], torch_fn, ts_fn, device=dev)


@devices
@pytest.mark.parametrize("shape,new_shape", [
    ((3, 1), (3, 4)), ((1,), (5,)), ((4,), (3, 4)), ((1, 3, 1), (2, 3, 4)), ((), (2, 3)), ((2, 1), (5, 2, 6)),
], ids=str)
def test_expand(shape, new_shape, dev):
    helper_test_op([shape], lambda x: x.expand(*new_shape), device=dev)


@devices
def test_movement_chain(dev):
    # Views compose: the kernel indexes through reshape, permute and expand without copies.
    helper_test_op([(2, 3, 4)],
                   lambda x: x.permute(2, 0, 1).reshape(4, 6).transpose(0, 1).reshape(6, 1, 4).expand(6, 3, 4) * 2.0,
                   lambda x: x.permute(2, 0, 1).reshape(4, 6).transpose().reshape(6, 1, 4).expand(6, 3, 4) * 2.0,
                   device=dev)


# ---------------------------------------------------------------------------------------------------------------
# Linear algebra
# ---------------------------------------------------------------------------------------------------------------

MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((1, 3), (3, 3)),
    ((5,), (5, 3)),         # vector @ matrix
    ((3, 5), (5,)),         # matrix @ vector
    ((7,), (7,)),           # dot of vectors: 0-d result
    ((2, 3, 4), (4, 5)),    # batched @ matrix
    ((2, 3, 4), (2, 4, 5)),
    ((1, 3, 4), (2, 4, 2)),  # broadcast batch dims
    ((65, 45), (45, 33)),
]


@devices
@pytest.mark.parametrize("shapes", MATMUL_SHAPES, ids=str)
def test_matmul(shapes, dev):
    helper_test_op(list(shapes), torch.matmul, lambda a, b: a.matmul(b), device=dev, atol=1e-5)


@devices
@pytest.mark.parametrize("shapes", MATMUL_SHAPES[:6], ids=str)
def test_matmul_operator(shapes, dev):
    helper_test_op(list(shapes), lambda a, b: a @ b, device=dev, atol=1e-5)


@devices
@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((5,), (5,)), ((2, 3), (3,))], ids=str)
def test_dot(shapes, dev):
    helper_test_op(list(shapes), torch.matmul, lambda a, b: a.dot(b), device=dev, atol=1e-5)


@devices
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("x_shape", [(4, 3), (2, 4, 3), (3,)], ids=str)
def test_linear(x_shape, with_bias, dev):
    # tinygrad layout: weight is (in_features, out_features), y = x @ weight + bias.
    shapes = [x_shape, (3, 5)] + ([(5,)] if with_bias else [])
    torch_fn = (lambda x, w, b: x @ w + b) if with_bias else (lambda x, w: x @ w)
    ts_fn = (lambda x, w, b: x.linear(w, b)) if with_bias else (lambda x, w: x.linear(w))
    helper_test_op(shapes, torch_fn, ts_fn, device=dev, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------------
# Softmax and the loss
# ---------------------------------------------------------------------------------------------------------------


@devices
@pytest.mark.parametrize("shape,axis", [((4, 10), -1), ((4, 10), 0), ((4, 10), 1), ((2, 3, 5), 1), ((7,), 0)],
                         ids=str)
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax(op, shape, axis, dev):
    helper_test_op([shape], lambda x: getattr(torch, op)(x, dim=axis), lambda x: getattr(x, op)(axis), device=dev)


@devices
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_default_axis_is_last(op, dev):
    helper_test_op([(3, 4, 6)], lambda x: getattr(torch, op)(x, dim=-1), lambda x: getattr(x, op)(), device=dev)


@devices
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_large_inputs_are_stable(op, dev):
    rng = np.random.default_rng(5)
    vals = [(_rand(rng, (4, 8), -2.0, 2.0) * 200.0).astype(np.float32)]
    helper_test_op(None, lambda x: getattr(torch, op)(x, dim=-1), lambda x: getattr(x, op)(), device=dev, vals=vals,
                   atol=1e-5)


@devices
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("logits_shape", [(8, 10), (2, 5, 7), (3,)], ids=str)
def test_sparse_categorical_crossentropy(logits_shape, reduction, dev):
    rng = np.random.default_rng(6)
    labels = rng.integers(0, logits_shape[-1], size=logits_shape[:-1]).astype(np.int32)
    y_torch = torch.tensor(labels).long()

    def torch_fn(x):
        # torch wants the class axis at 1; tensorscope (tinygrad) has it last.
        if x.ndim > 2:
            x = x.movedim(-1, 1)
        return F.cross_entropy(x, y_torch, reduction=reduction)

    def ts_fn(x):
        return x.sparse_categorical_crossentropy(Tensor(labels, device=dev), reduction=reduction)

    helper_test_op([logits_shape], torch_fn, ts_fn, device=dev, atol=1e-5)


@devices
def test_sparse_categorical_crossentropy_default_is_mean(dev):
    labels = np.array([0, 3, 1, 2], dtype=np.int32)
    helper_test_op([(4, 4)], lambda x: F.cross_entropy(x, torch.tensor(labels).long()),
                   lambda x: x.sparse_categorical_crossentropy(Tensor(labels, device=dev)), device=dev)


# ---------------------------------------------------------------------------------------------------------------
# Casts and dtypes
# ---------------------------------------------------------------------------------------------------------------


@devices
def test_cast_float_to_int_truncates(dev):
    vals = [np.array([-2.7, -1.5, -0.2, 0.0, 0.9, 1.5, 3.99], dtype=np.float32)]
    helper_test_op(None, lambda x: x.int(), device=dev, vals=vals)
    helper_test_op(None, lambda x: x.to(torch.int32), lambda x: x.cast(dtypes.int32), device=dev, vals=vals)


@devices
def test_cast_int_to_float(dev):
    vals = [np.array([[-3, 0, 7], [2, 1, -1]], dtype=np.int32)]
    helper_test_op(None, lambda x: x.float() * 0.5, device=dev, vals=vals)
    helper_test_op(None, lambda x: x.to(torch.float32), lambda x: x.cast(dtypes.float32), device=dev, vals=vals)


@devices
def test_bool_to_float_is_differentiable_around(dev):
    # A comparison gives a bool tensor; cast to float it masks the gradient of x.
    helper_test_op([(4, 5)], lambda x: (x > 0).float() * x, device=dev)


@devices
def test_int_arithmetic_stays_int(dev):
    vals = [np.array([[1, -2, 3]], dtype=np.int32), np.array([[4], [5]], dtype=np.int32)]
    helper_test_op(None, lambda a, b: a * b + a - b, device=dev, vals=vals)


@devices
@pytest.mark.parametrize("data", [[[1.0, 2.0], [3.0, 4.5]], 3.5, [[1, 2, 3]], [True, False]], ids=str)
def test_constructor_from_python_data(data, dev):
    # Python floats -> float32, python ints -> int32 (tinygrad's default int; torch: int64), bools -> bool.
    t = Tensor(data, device=dev)
    expected = np.array(data)
    expected = expected.astype({np.dtype(np.float64): np.float32, np.dtype(np.int64): np.int32}.get(expected.dtype,
                                                                                                       expected.dtype))
    got = t.numpy()
    assert t.device == dev
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------------------------------------------------------
# Constructors and random numbers
# ---------------------------------------------------------------------------------------------------------------


CONSTRUCTORS = {
    "eye": (lambda d: Tensor.eye(4, device=d), lambda: torch.eye(4)),
    "zeros": (lambda d: Tensor.zeros(2, 3, device=d), lambda: torch.zeros(2, 3)),
    "zeros_tuple": (lambda d: Tensor.zeros((2, 3), device=d), lambda: torch.zeros(2, 3)),
    "zeros_0d": (lambda d: Tensor.zeros((), device=d), lambda: torch.zeros(())),
    "ones": (lambda d: Tensor.ones(3, device=d), lambda: torch.ones(3)),
    "full": (lambda d: Tensor.full((2, 2), 7.5, device=d), lambda: torch.full((2, 2), 7.5)),
    "arange": (lambda d: Tensor.arange(6, device=d), lambda: torch.arange(6, dtype=torch.int32)),  # tinygrad: int32
}


@devices
@pytest.mark.parametrize("name", list(CONSTRUCTORS))
def test_constructors(name, dev):
    ts_fn, torch_fn = CONSTRUCTORS[name]
    t = ts_fn(dev)
    expected = torch_fn().numpy()
    assert t.device == dev
    assert t.shape == expected.shape
    got = t.numpy()
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@devices
def test_constructors_are_differentiable_leaves(dev):
    # eye as a leaf with requires_grad (the quickstart's x) gets a gradient like torch's.
    helper_test_op(None, lambda y: y @ torch.eye(3), lambda y: y @ Tensor.eye(3, device=dev), device=dev,
                   vals=[np.array([[2.0, 0.0, -2.0]], dtype=np.float32)])


@devices
def test_rand_distribution_and_seed(dev):
    Tensor.manual_seed(1234)
    a = Tensor.rand(200, 500, device=dev)
    assert a.device == dev
    a = a.numpy()
    Tensor.manual_seed(1234)
    b = Tensor.rand(200, 500, device=dev).numpy()
    c = Tensor.rand(200, 500, device=dev).numpy()
    assert a.shape == (200, 500) and a.dtype == np.float32
    assert a.min() >= 0.0 and a.max() < 1.0
    # Uniform(0, 1): mean 1/2, variance 1/12; 1e5 samples put the standard error near 1e-3.
    assert abs(a.mean() - 0.5) < 0.01
    assert abs(a.var() - 1.0 / 12.0) < 0.005
    np.testing.assert_array_equal(a, b)      # same seed, same numbers
    assert not np.array_equal(b, c)          # the stream moves on


@devices
def test_randn_distribution(dev):
    Tensor.manual_seed(7)
    x = Tensor.randn(100000, device=dev)
    assert x.device == dev
    x = x.numpy()
    assert x.shape == (100000,) and x.dtype == np.float32
    assert abs(x.mean()) < 0.02
    assert abs(x.std() - 1.0) < 0.02
    assert abs((np.abs(x) < 1.0).mean() - 0.6827) < 0.01  # the 68% rule: it is a normal, not just unit variance


@devices
def test_uniform_bounds(dev):
    Tensor.manual_seed(3)
    x = Tensor.uniform(300, 300, low=-0.25, high=0.75, device=dev)
    assert x.device == dev
    x = x.numpy()
    assert x.dtype == np.float32
    assert x.min() >= -0.25 and x.max() < 0.75
    assert abs(x.mean() - 0.25) < 0.01


# ---------------------------------------------------------------------------------------------------------------
# Conversions and tensor properties
# ---------------------------------------------------------------------------------------------------------------


@devices
def test_conversions(dev):
    rng = np.random.default_rng(8)
    v = _rand(rng, (2, 3, 4), -2.0, 2.0)
    t = Tensor(v, device=dev)
    assert t.shape == (2, 3, 4) and t.ndim == 3 and t.numel() == 24
    assert t.dtype == dtypes.float32
    np.testing.assert_array_equal(t.numpy(), v)
    assert t.tolist() == v.tolist()
    s = Tensor(v, device=dev).sum()
    assert isinstance(s.item(), float)
    np.testing.assert_allclose(s.item(), v.sum(dtype=np.float64), rtol=1e-5)
    assert Tensor(np.array(2.5, dtype=np.float32), device=dev).shape == ()
    assert Tensor(v.astype(np.int32), device=dev).dtype == dtypes.int32
    assert (Tensor(v, device=dev) > 0).dtype == dtypes.bool


def test_tensor_is_hashable():
    a, b = Tensor([1.0]), Tensor([1.0])
    assert len({a, b}) == 2
    assert {a: 1}[a] == 1


def test_default_device_is_used():
    from tensorscope import Device
    old = Device.DEFAULT
    try:
        for dev in DEVICES:
            Device.DEFAULT = dev
            t = Tensor([1.0, 2.0]) * 2
            assert t.device == dev
            np.testing.assert_array_equal(t.numpy(), np.array([2.0, 4.0], dtype=np.float32))
    finally:
        Device.DEFAULT = old
