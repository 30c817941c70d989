# Activations against torch.nn.functional: values and gradients over several shapes, stability for inputs in the
# hundreds, gradient conventions at kinks, tinygrad's defaults (gelu's tanh approximation, leaky_relu's neg_slope).
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from ops_helper import check, check_raises, devices
from tensorscope import Tensor

SHAPES = [(), (0,), (9,), (3, 5), (2, 3, 4)]

ACT = {
    "relu": (F.relu, lambda x: x.relu()),
    "relu6": (F.relu6, lambda x: x.relu6()),
    "sigmoid": (torch.sigmoid, lambda x: x.sigmoid()),
    "logsigmoid": (F.logsigmoid, lambda x: x.logsigmoid()),
    "hardsigmoid": (F.hardsigmoid, lambda x: x.hardsigmoid()),
    "hardswish": (F.hardswish, lambda x: x.hardswish()),
    "silu": (F.silu, lambda x: x.silu()),
    "swish": (F.silu, lambda x: x.swish()),
    "mish": (F.mish, lambda x: x.mish()),
    "softsign": (F.softsign, lambda x: x.softsign()),
    "quick_gelu": (lambda x: x * torch.sigmoid(1.702 * x), lambda x: x.quick_gelu()),
    "tanh": (torch.tanh, lambda x: x.tanh()),
    "leaky_relu": (F.leaky_relu, lambda x: x.leaky_relu()),
    "leaky_relu_0.2": (lambda x: F.leaky_relu(x, 0.2), lambda x: x.leaky_relu(neg_slope=0.2)),
    "elu": (F.elu, lambda x: x.elu()),
    "elu_0.5": (lambda x: F.elu(x, 0.5), lambda x: x.elu(alpha=0.5)),
    "celu": (F.celu, lambda x: x.celu()),
    "celu_2": (lambda x: F.celu(x, 2.0), lambda x: x.celu(alpha=2.0)),
    "selu": (F.selu, lambda x: x.selu()),
    "gelu_default_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda x: x.gelu()),
    "gelu_none": (F.gelu, lambda x: x.gelu(approximate="none")),
    "softplus": (F.softplus, lambda x: x.softplus()),
    "softplus_beta2": (lambda x: F.softplus(x, beta=2.0), lambda x: x.softplus(beta=2.0)),
    "hardtanh": (F.hardtanh, lambda x: x.hardtanh()),
    "hardtanh_wide": (lambda x: F.hardtanh(x, -0.5, 1.5), lambda x: x.hardtanh(-0.5, 1.5)),
}


@devices
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("op", list(ACT))
def test_activation(op, shape, dev):
    torch_fn, ts_fn = ACT[op]
    check([shape], torch_fn, ts_fn, dev=dev, low=-4.0, high=4.0)


LARGE = np.array([-500.0, -300.0, -100.0, -30.0, -1.0, 0.5, 30.0, 100.0, 300.0, 500.0], dtype=np.float32)


@devices
@pytest.mark.parametrize("op", ["sigmoid", "logsigmoid", "softplus", "softplus_beta2", "gelu_default_tanh", "gelu_none", "silu",
                                "mish", "tanh", "elu", "selu", "celu", "quick_gelu", "softsign"])
def test_activation_large_inputs_are_stable(op, dev):
    torch_fn, ts_fn = ACT[op]
    check(None, torch_fn, ts_fn, dev=dev, vals=[LARGE])


KINKS = np.array([-6.0, -3.0, -1.0, -0.0, 0.0, 1.0, 3.0, 6.0], dtype=np.float32)


@devices
@pytest.mark.parametrize("op", ["relu", "relu6", "leaky_relu", "elu", "celu", "selu", "hardtanh", "hardsigmoid", "softplus"])
def test_gradient_at_kinks(op, dev):
    # relu'(0) = 0, relu6/hardtanh/hardsigmoid: 0 at the bounds, leaky_relu'(0) = slope, elu'(0) = alpha (torch)
    torch_fn, ts_fn = ACT[op]
    check(None, torch_fn, ts_fn, dev=dev, vals=[KINKS])


@devices
@pytest.mark.parametrize("op", ["relu", "sigmoid", "tanh", "softplus", "elu", "leaky_relu", "gelu_none", "silu", "hardtanh"])
def test_activation_ieee_specials(op, dev):
    torch_fn, ts_fn = ACT[op]
    vals = [np.array([np.inf, -np.inf, np.nan, -0.0, 0.0], dtype=np.float32)]
    check(None, torch_fn, ts_fn, dev=dev, vals=vals, forward_only=True)


@devices
def test_gelu_bad_approximate(dev):
    check_raises(ValueError, lambda: Tensor.ones(3, device=dev).gelu(approximate="erf"), "approximate", "erf")
