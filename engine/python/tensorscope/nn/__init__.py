"""Neural-network layers in tinygrad's spelling (``tinygrad.nn``).

Layers are plain Python objects holding Tensors; there is no Module base class. ``get_parameters``
finds the Tensors by walking an object's attributes, lists and dicts, as tinygrad does, and the
dotted attribute paths are the names PyTorch uses (``"conv1.weight"``, ``"bn.running_mean"``), so
weights load from and save to PyTorch state dicts and safetensors files (``nn.state``).

Every layer is a composition of Tensor ops: the graph view shows, say, ``BatchNorm`` as the mean,
subtract, square, mean, rsqrt, multiply and add it is. Trainable Tensors are created with
``requires_grad=True``; buffers (running statistics) with ``requires_grad=False``. Train/eval
behaviour (BatchNorm, Dropout) follows the class flag ``Tensor.training``.

Parameter layouts and initializations are PyTorch's (and tinygrad's): weights load unchanged
from ``torch.nn`` layers of the same shapes.
"""
from __future__ import annotations

import math
from typing import Optional, Union

from tensorscope import Tensor, dtypes
from tensorscope.nn import optim, state  # noqa: F401  (tinygrad: nn.optim, nn.state as attributes)
from tensorscope.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save


def _tuple(x, n: int) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,) * n


class Linear:
    """y = x @ weight.T + bias, as ``tinygrad.nn.Linear`` and ``torch.nn.Linear``.

    Args:
        in_features: size of the last axis of the input.
        out_features: size of the last axis of the output.
        bias: whether to add a learned bias.

    Parameters (float32, ``requires_grad=True``, on ``Device.DEFAULT``):
        weight: shape (out_features, in_features) — torch's layout; ``Tensor.linear`` takes
            (in, out), so the forward pass transposes it (a movement op: no copy).
        bias: shape (out_features,), or None.

    Both are drawn from uniform(-1/sqrt(in_features), 1/sqrt(in_features)), the initialization of
    tinygrad and PyTorch (Kaiming-uniform with a=sqrt(5)); ``Tensor.manual_seed`` makes it
    reproducible.

    Input (..., in_features) → output (..., out_features).
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        bound = 1.0 / math.sqrt(in_features)
        self.weight = Tensor.uniform(out_features, in_features, low=-bound, high=bound, requires_grad=True)
        self.bias = Tensor.uniform(out_features, low=-bound, high=bound, requires_grad=True) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.linear(self.weight.transpose(), self.bias)


class Conv2d:
    """2-D convolution (cross-correlation) over NCHW input, as ``tinygrad.nn.Conv2d`` / ``torch.nn.Conv2d``.

    Args:
        in_channels, out_channels: C of the input and of the output.
        kernel_size: int or (kH, kW).
        stride, dilation: int or (sH, sW) / (dH, dW).
        padding: int, (pH, pW), a flat torch-order tuple (left, right, top, bottom), or ``"same"``
            (stride 1 only: output H, W equal the input's).
        groups: in_channels and out_channels must both divide by it; each group of
            in_channels/groups input channels feeds out_channels/groups outputs.
        bias: whether to add a learned per-channel bias.

    Parameters: weight (out_channels, in_channels/groups, kH, kW); bias (out_channels,). Both
    uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in_channels/groups * kH * kW (PyTorch's
    default init).

    Input (N, in_channels, H, W) → output (N, out_channels, H', W') with
    H' = floor((H + pad_top + pad_bottom - dH*(kH-1) - 1) / sH) + 1 (and W' alike).

    Raises: ValueError for channels not divisible by groups or an invalid padding string; the conv
    op raises for an input whose channel count is not in_channels.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding: Union[int, tuple, str] = 0,
                 dilation=1, groups: int = 1, bias: bool = True):
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"Conv2d: in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible "
                             f"by groups ({groups})")
        self.kernel_size = _tuple(kernel_size, 2)
        if isinstance(padding, str):
            if padding.lower() != "same":
                raise ValueError(f"Conv2d: invalid padding string {padding!r}; only 'same' is supported")
            if _tuple(stride, len(self.kernel_size)) != (1,) * len(self.kernel_size):
                raise ValueError("Conv2d: padding='same' is not supported for strided convolutions")
            # flat torch order, last spatial dim first; the extra pixel of an even kernel goes after
            pads = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                    for d, k in zip(_tuple(dilation, len(self.kernel_size))[::-1], self.kernel_size[::-1])]
            padding = tuple(p for pair in pads for p in pair)
        self.stride, self.dilation, self.groups, self.padding = stride, dilation, groups, padding
        bound = 1.0 / math.sqrt(in_channels // groups * math.prod(self.kernel_size))
        self.weight = Tensor.uniform(out_channels, in_channels // groups, *self.kernel_size, low=-bound, high=bound,
                                     requires_grad=True)
        self.bias = Tensor.uniform(out_channels, low=-bound, high=bound, requires_grad=True) if bias else None

    def __call__(self, x: Tensor) -> Tensor:
        return x.conv2d(self.weight, self.bias, self.groups, self.stride, self.dilation, self.padding)


def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride=1, padding=0, dilation=1, groups=1,
           bias=True) -> Conv2d:
    """1-D convolution over (N, C, L): a Conv2d whose kernel has one spatial dim (tinygrad's way)."""
    return Conv2d(in_channels, out_channels, (kernel_size,), stride, padding, dilation, groups, bias)


class BatchNorm:
    """Batch normalization (Ioffe & Szegedy, 2015, https://arxiv.org/abs/1502.03167) over axis 1 of
    (N, C, ...) input, as ``tinygrad.nn.BatchNorm`` and ``torch.nn.BatchNorm{1,2,3}d``.

    While ``Tensor.training`` is true, each channel is normalized with the batch's mean and biased
    variance (over every axis but 1), and the running statistics move towards the batch's:

        running_mean = (1 - momentum) * running_mean + momentum * mean
        running_var  = (1 - momentum) * running_var  + momentum * var * n / (n - 1)   (unbiased)

    with n = numel / C values per channel (PyTorch's rule). In eval mode the running statistics
    normalize. Output: (x - mean) / sqrt(var + eps) * weight + bias.

    The running statistics are updated with ``assign``: lazy, like everything else, and realized with
    whatever is realized next (the optimizer's ``step()``, ``loss.numpy()``), in its schedule. So an
    optimizer given only the parameters that require gradients (PyTorch's idiom: running statistics are
    buffers there, not parameters) leaves no chain of lazy updates behind that would hold every step's
    activations; given ``get_parameters(model)`` (tinygrad's idiom) it realizes them in ``step()``, the same
    schedule.

    Args:
        sz: the number of channels C.
        eps: added to the variance.
        affine: learn weight (ones) and bias (zeros) of shape (C,).
        track_running_stats: keep running_mean (zeros), running_var (ones) and
            num_batches_tracked (int32, shape () as torch's; tinygrad's (1,) loads too); without them
            eval mode uses batch statistics.
        momentum: the running statistics' update factor.
    """

    def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True,
                 momentum: float = 0.1):
        self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
        self.weight: Optional[Tensor] = Tensor.ones(sz, requires_grad=True) if affine else None
        self.bias: Optional[Tensor] = Tensor.zeros(sz, requires_grad=True) if affine else None
        if track_running_stats:
            self.running_mean = Tensor.zeros(sz, requires_grad=False)
            self.running_var = Tensor.ones(sz, requires_grad=False)
            self.num_batches_tracked = Tensor.zeros((), dtype=dtypes.int32, requires_grad=False)

    def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """(mean, biased variance) per channel, each of shape (C,): the batch's in training (or when
        there are no running statistics), the running ones in eval mode."""
        if self.track_running_stats and not Tensor.training:
            return self.running_mean, self.running_var
        axes = tuple(a for a in range(x.ndim) if a != 1)
        mean = x.mean(axis=axes)
        # detach: d var / d mean is zero (the deviations sum to zero), so the gradient is unchanged
        # and the backward graph is smaller (tinygrad's trick).
        y = x - mean.detach().reshape(self._channel_shape(x))
        return mean, (y * y).mean(axis=axes)

    @staticmethod
    def _channel_shape(x: Tensor) -> tuple[int, ...]:
        return (1, -1) + (1,) * (x.ndim - 2)

    def __call__(self, x: Tensor) -> Tensor:
        if x.ndim < 2:
            raise ValueError(f"BatchNorm: expected input of shape (N, C, ...), got {x.shape}")
        mean, var = self.calc_stats(x)
        if self.track_running_stats and Tensor.training:
            n = x.numel() // x.shape[1]
            if n < 2:
                raise ValueError(f"BatchNorm: need more than one value per channel in training, got input {x.shape}")
            m = self.momentum
            self.running_mean.assign((1 - m) * self.running_mean + m * mean.detach())
            self.running_var.assign((1 - m) * self.running_var + (m * n / (n - 1)) * var.detach())
            self.num_batches_tracked.assign(self.num_batches_tracked + 1)
            # realized with the next realize (Tensor::realize_with_next): unrealized, each step's update would
            # read the previous one's, and the chain would keep every step's batch statistics and activations
            for t in (self.running_mean, self.running_var, self.num_batches_tracked):
                t._t.realize_with_next()
        shape = self._channel_shape(x)
        scale = (var + self.eps).rsqrt()
        if self.weight is not None:
            scale = scale * self.weight
        y = (x - mean.reshape(shape)) * scale.reshape(shape)
        return y if self.bias is None else y + self.bias.reshape(shape)


BatchNorm1d = BatchNorm2d = BatchNorm3d = BatchNorm


class LayerNorm:
    """Layer normalization (Ba et al., 2016, https://arxiv.org/abs/1607.06450) over the trailing
    ``normalized_shape`` axes, as ``tinygrad.nn.LayerNorm`` / ``torch.nn.LayerNorm``:

        y = (x - mean) / sqrt(var + eps) * weight + bias     (biased variance)

    Args:
        normalized_shape: int or tuple, the trailing dims of the input.
        eps: added to the variance.
        elementwise_affine: learn weight (ones) and bias (zeros) of shape normalized_shape.

    Raises: ValueError when the input's trailing dims are not normalized_shape.
    """

    def __init__(self, normalized_shape: Union[int, tuple], eps: float = 1e-5, elementwise_affine: bool = True):
        self.normalized_shape = _tuple(normalized_shape, 1)
        self.axis = tuple(-1 - i for i in range(len(self.normalized_shape)))
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = Tensor.ones(*self.normalized_shape, requires_grad=True) if elementwise_affine else None
        self.bias = Tensor.zeros(*self.normalized_shape, requires_grad=True) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        if x.shape[x.ndim - len(self.normalized_shape):] != self.normalized_shape:
            raise ValueError(f"LayerNorm: the last dimensions of {x.shape} must be {self.normalized_shape}")
        if len(self.axis) == 1:
            x = x.layernorm(axis=-1, eps=self.eps)
        else:
            y = x - x.mean(axis=self.axis, keepdim=True)
            x = y * ((y * y).mean(axis=self.axis, keepdim=True) + self.eps).rsqrt()
        return x if not self.elementwise_affine else x * self.weight + self.bias


class RMSNorm:
    """Root-mean-square normalization over the last axis (Zhang & Sennrich, 2019), as tinygrad's:
    y = x / sqrt(mean(x^2) + eps) * weight, weight of shape (dim,) starting at ones."""

    def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
        self.eps = eps
        self.weight = Tensor.ones(dim, requires_grad=True) if elementwise_affine else None

    def __call__(self, x: Tensor) -> Tensor:
        x = x * ((x * x).mean(axis=-1, keepdim=True) + self.eps).rsqrt()
        return x if self.weight is None else x * self.weight


class Embedding:
    """A lookup table: row ``idx`` of ``weight`` for every integer in the input, as
    ``tinygrad.nn.Embedding`` / ``torch.nn.Embedding``.

    Parameters: weight (vocab_size, embed_size), Glorot-uniform as tinygrad
    (uniform(-a, a), a = sqrt(6 / (vocab_size + embed_size))); torch draws N(0, 1), load its weights
    to match it exactly.

    Input: an int32 tensor of any shape → output shape + (embed_size,). The lookup is an indexing
    op, differentiable with respect to weight (rows used twice get both gradients).

    Raises: TypeError for a non-integer index tensor.
    """

    def __init__(self, vocab_size: int, embed_size: int):
        self.vocab_sz, self.embed_sz = vocab_size, embed_size
        bound = math.sqrt(6.0 / (vocab_size + embed_size))
        self.weight = Tensor.uniform(vocab_size, embed_size, low=-bound, high=bound, requires_grad=True)

    def __call__(self, idx: Tensor) -> Tensor:
        if not isinstance(idx, Tensor):
            idx = Tensor(idx)
        if idx.dtype != dtypes.int32:
            raise TypeError(f"Embedding: expected an integer index tensor, got dtype {idx.dtype}")
        return self.weight[idx]


class Dropout:
    """Inverted dropout (Srivastava et al., 2014) as ``torch.nn.Dropout``: while ``Tensor.training``
    is true, each element is zeroed with probability p and the rest are scaled by 1/(1-p), so the
    expected value is unchanged; in eval mode (or with p=0) it is the identity. (tinygrad has no
    class for it, only ``Tensor.dropout``, which this calls.)

    Raises: ValueError unless 0 <= p <= 1.
    """

    def __init__(self, p: float = 0.5):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"Dropout: probability must be in [0, 1], got {p}")
        self.p = p

    def __call__(self, x: Tensor) -> Tensor:
        if self.p == 1.0 and Tensor.training:
            return x * 0.0
        return x.dropout(self.p)


__all__ = ["Linear", "Conv2d", "Conv1d", "BatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm",
           "RMSNorm", "Embedding", "Dropout", "get_state_dict", "get_parameters", "load_state_dict", "safe_save",
           "safe_load"]
