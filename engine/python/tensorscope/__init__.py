"""Tensorscope: a lazy tensor engine you can watch think.

`Tensor` follows tinygrad's API (which mostly mirrors PyTorch's); operations build a lazy graph that is
cut into fused kernels and computed on `realize()`, `numpy()`, `item()` or `backward()`.
`@tensorscope.jit` captures a function's kernels once and replays them on later calls (tinygrad's
TinyJit; see tensorscope/tinyjit.py).
"""
from tensorscope.tensor import Tensor, dtypes, Device, GlobalCounters
from tensorscope.tinyjit import jit, TinyJit, JitError

__all__ = ["Tensor", "dtypes", "Device", "GlobalCounters", "jit", "TinyJit", "JitError", "NonFiniteError"]

import os as _os

from tensorscope import _C

NonFiniteError = _C.NonFiniteError  # a FloatingPointError: raised by break on NaN/Inf
_C.set_package_dir(_os.path.dirname(_os.path.abspath(__file__)))  # script lines exclude our own frames
if _os.environ.get("TENSORSCOPE_BREAK_ON_NAN", "") not in ("", "0"):
    _C.set_break_on_nan(True)  # the first kernel that makes a NaN or an infinity raises NonFiniteError
if _os.environ.get("TENSORSCOPE_RECORD"):  # the program records itself (tensorscope/_recording.py)
    from tensorscope import _recording

    _recording.start(_os.environ["TENSORSCOPE_RECORD"])
