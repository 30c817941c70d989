"""Neural-network layers in tinygrad's spelling (``tinygrad.nn``): ``Linear`` and parameter helpers.

Layers are plain Python objects holding Tensors; there is no Module base class. ``get_parameters``
finds the trainable Tensors by walking an object's attributes, lists and dicts, as tinygrad does.
"""
from __future__ import annotations

import math

from tensorscope import Tensor


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


def get_state_dict(obj, prefix: str = "") -> dict[str, Tensor]:
    """Every Tensor reachable from ``obj`` through attributes, lists, tuples and dicts, by dotted name
    (``"l1.weight"``, ``"layers.0.bias"``), in attribute order. Same walk as tinygrad's."""
    if isinstance(obj, Tensor):
        return {prefix.strip("."): obj}
    if isinstance(obj, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(obj))
    elif isinstance(obj, dict):
        items = ((str(k), v) for k, v in obj.items())
    elif hasattr(obj, "__dict__"):
        items = vars(obj).items()
    else:
        return {}
    state: dict[str, Tensor] = {}
    for name, value in items:
        state.update(get_state_dict(value, f"{prefix}{name}."))
    return state


def get_parameters(obj) -> list[Tensor]:
    """The Tensors of ``get_state_dict(obj)`` as a list (what an optimizer takes)."""
    return list(get_state_dict(obj).values())


__all__ = ["Linear", "get_state_dict", "get_parameters"]
