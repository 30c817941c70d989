"""Tensorscope: a lazy tensor engine you can watch think.

`Tensor` follows tinygrad's API (which mostly mirrors PyTorch's); operations build a lazy graph that is
cut into fused kernels and computed on `realize()`, `numpy()`, `item()` or `backward()`.
"""
from tensorscope.tensor import Tensor, dtypes, Device, GlobalCounters

__all__ = ["Tensor", "dtypes", "Device", "GlobalCounters"]
