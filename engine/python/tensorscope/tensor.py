"""The user-facing Tensor (tinygrad spelling; see shared/API.md). A thin layer over the C++ engine
(`tensorscope._C`): it turns Python's argument forms (varargs shapes, python scalars, keyword names)
into the engine's, and adds Python protocol methods. All semantics live in the engine.

Errors: ValueError for bad shapes / arguments, IndexError for out-of-range axes, RuntimeError for
invalid permutations, matmul shape mismatches and device / compile failures.
"""
from __future__ import annotations

import ctypes
import functools
import math
from typing import Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from tensorscope import _C


class dtypes:
    """Element types (as tinygrad's dtypes). Values are the engine's dtype names. float16 (alias half) is
    IEEE binary16 storage with PyTorch's CPU numerics: each op computes in float32 and rounds its result
    to float16; devices without it (`Device.properties(name)["float16"]` is False) raise RuntimeError."""
    float32 = "float32"
    float = "float32"
    float16 = "float16"
    half = "float16"
    int32 = "int32"
    int = "int32"
    bool = "bool"


class _DeviceMeta(type):
    @property
    def DEFAULT(cls) -> str:
        return _C.default_device()

    @DEFAULT.setter
    def DEFAULT(cls, name: str) -> None:
        _C.set_default_device(name)


class Device(metaclass=_DeviceMeta):
    """`Device.DEFAULT` is the device new tensors go to ("C" unless TENSORSCOPE_DEVICE says otherwise);
    assign to it to change it. `Device.names()` lists the registered devices."""

    @staticmethod
    def names() -> list:
        return list(_C.device_names())

    @staticmethod
    def properties(name: str) -> dict:
        """What the driver reports: name, backend, description, vendor, driver, memory_bytes, can_run,
        float16 (whether float16 tensors work there), note, ..."""
        return dict(_C.device_properties(str(name)))


class _CountersMeta(type):
    @property
    def kernel_count(cls) -> int:
        return _C.kernel_count()

    @property
    def time_ms(cls) -> float:
        return _C.counters()["time_ms"]

    @property
    def schedule_count(cls) -> int:
        return _C.counters()["schedule_count"]

    @property
    def schedule_cache_hits(cls) -> int:
        return _C.counters()["schedule_cache_hits"]

    @property
    def replayed_kernels(cls) -> int:
        return _C.counters()["replayed_kernels"]

    @property
    def in_place_outputs(cls) -> int:
        return _C.counters()["in_place_outputs"]


class GlobalCounters(metaclass=_CountersMeta):
    """Counters in the spirit of tinygrad's, all since `GlobalCounters.reset()`:
    `kernel_count` kernels launched (device copies not counted), `time_ms` their device time in ms,
    `schedule_count` schedules the kernelizer made (realizes of a graph structure not seen before),
    `schedule_cache_hits` realizes that reused an earlier schedule (same graph structure: no
    kernelizer, lowering, passes or rendering), `replayed_kernels` kernels launched by jit replays
    (`tensorscope.jit`; they are in `kernel_count` too), `in_place_outputs` outputs of those replays written
    into the buffer of the state value they replace (an optimizer's update, see `_C.CapturedJit`)."""

    @staticmethod
    def reset() -> None:
        _C.reset_kernel_count()

    @staticmethod
    def live_graph_nodes() -> int:
        return _C.live_graph_nodes()


Scalar = Union[int, float, bool]


def _shape_args(shape) -> Tuple[int, ...]:
    """Accept f(2, 3), f((2, 3)) and f([2, 3])."""
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def _axes(axis) -> Optional[list]:
    if axis is None:
        return None
    if isinstance(axis, (tuple, list)):
        return [int(a) for a in axis]
    return [int(axis)]


def _device(device) -> str:
    return "" if device is None else str(device)


class Tensor:
    """A lazy tensor. Construction: `Tensor(data, requires_grad=None, device=None, dtype=None)` where
    `data` is a numpy array (any rank, 0-d included), nested python lists or a python scalar. Float data
    becomes float32 (a float16 ndarray stays float16), integer data int32, booleans bool."""

    __slots__ = ("_t", "__weakref__")
    training = False

    def __init__(self, data, requires_grad: Optional[bool] = None, device: Optional[str] = None, dtype: Optional[str] = None):
        if isinstance(data, _C.Tensor):
            t = data
        elif isinstance(data, Tensor):
            t = data._t
        else:
            if isinstance(data, (bool, int, float)) and dtype is None:
                dtype = dtypes.bool if isinstance(data, bool) else dtypes.int32 if isinstance(data, int) else dtypes.float32
            arr = np.asarray(data)
            if arr.dtype == object:
                raise ValueError(f"Tensor: cannot build a tensor from {type(data).__name__} (ragged or non-numeric data)")
            if dtype is None and arr.dtype.kind == "f":
                dtype = dtypes.float16 if arr.dtype == np.float16 else dtypes.float32
            if dtype is None and arr.size == 0 and arr.dtype.kind not in "biu":
                dtype = dtypes.float32
            t = _C.Tensor.from_numpy(arr, _device(device), dtype)
        if device is not None and isinstance(data, (_C.Tensor, Tensor)) and t.device != Device_canonical(device):
            t = t.to(str(device))
        self._t = t
        if requires_grad:
            self._t.requires_grad = True

    # ---- construction --------------------------------------------------------------------------
    @staticmethod
    def full(shape, fill_value: Scalar, device=None, dtype=None, requires_grad=None) -> "Tensor":
        dt = dtype or (dtypes.bool if isinstance(fill_value, bool) else dtypes.float32)
        t = Tensor(_C.Tensor.full(list(_shape_args((shape,))), float(fill_value), _C.DType.__members__[dt], _device(device)))
        return t.requires_grad_(requires_grad)

    @staticmethod
    def zeros(*shape, device=None, dtype=None, requires_grad=None) -> "Tensor":
        return Tensor.full(_shape_args(shape), 0.0, device=device, dtype=dtype, requires_grad=requires_grad)

    @staticmethod
    def ones(*shape, device=None, dtype=None, requires_grad=None) -> "Tensor":
        return Tensor.full(_shape_args(shape), 1.0, device=device, dtype=dtype, requires_grad=requires_grad)

    @staticmethod
    def eye(n: int, m: Optional[int] = None, device=None, requires_grad=None) -> "Tensor":
        """n×m float32 identity (torch.eye), built from movement ops (ones → pad → flatten → shrink → reshape)
        as in tinygrad. ValueError for a negative n or m."""
        if m is not None and int(m) < 0:
            raise ValueError(f"eye: m must be >= 0, got {m}")
        return Tensor(_C.Tensor.eye(int(n), -1 if m is None else int(m), _device(device))).requires_grad_(requires_grad)

    @staticmethod
    def arange(start, stop=None, step=1, device=None, requires_grad=None) -> "Tensor":
        """Like numpy.arange: int32 when start, stop and step are all ints, else float32."""
        if stop is None:
            start, stop = 0, start
        if step == 0:
            raise ValueError("arange: step must not be 0")
        integer = all(isinstance(v, int) and not isinstance(v, bool) for v in (start, stop, step))
        values = np.arange(start, stop, step, dtype=np.int64 if integer else np.float64)
        dtype = dtypes.int32 if integer else dtypes.float32
        return Tensor(values, device=device, dtype=dtype).requires_grad_(requires_grad)

    @staticmethod
    def manual_seed(seed: int = 0) -> None:
        _C.Tensor.manual_seed(int(seed))

    @staticmethod
    def rand(*shape, device=None, requires_grad=None) -> "Tensor":
        return Tensor(_C.Tensor.rand(list(_shape_args(shape)), _device(device))).requires_grad_(requires_grad)

    @staticmethod
    def randn(*shape, device=None, requires_grad=None) -> "Tensor":
        return Tensor(_C.Tensor.randn(list(_shape_args(shape)), _device(device))).requires_grad_(requires_grad)

    @staticmethod
    def uniform(*shape, low=0.0, high=1.0, device=None, requires_grad=None) -> "Tensor":
        return Tensor(_C.Tensor.uniform(list(_shape_args(shape)), float(low), float(high), _device(device))).requires_grad_(requires_grad)

    @staticmethod
    def linspace(start, stop, steps: int, device=None, requires_grad=None) -> "Tensor":
        """`steps` evenly spaced float32 values from start to stop inclusive (torch.linspace)."""
        if steps < 0:
            raise ValueError(f"linspace: number of steps must be non-negative, got {steps}")
        values = np.linspace(float(start), float(stop), int(steps), dtype=np.float64).astype(np.float32)
        return Tensor(values, device=device).requires_grad_(requires_grad)

    @staticmethod
    def randint(*shape, low=0, high=10, device=None) -> "Tensor":
        """int32 samples uniform in [low, high) from the seeded generator."""
        u = Tensor.rand(*shape, device=device)
        return (u * (high - low)).floor().int() + int(low)

    # ---- random initializers (tinygrad's names; the formulas of torch.nn.init) ----------------------
    @staticmethod
    def normal(*shape, mean=0.0, std=1.0, device=None, requires_grad=None) -> "Tensor":
        """float32 samples of N(mean, std²) (torch.normal)."""
        return (Tensor.randn(*shape, device=device) * float(std) + float(mean)).requires_grad_(requires_grad)

    @staticmethod
    def scaled_uniform(*shape, device=None, requires_grad=None) -> "Tensor":
        """U(-1, 1) / sqrt(numel) (tinygrad)."""
        n = math.prod(_shape_args(shape))
        return (Tensor.uniform(*shape, low=-1.0, high=1.0, device=device) * (max(n, 1) ** -0.5)).requires_grad_(requires_grad)

    @staticmethod
    def _fans(shape) -> Tuple[int, int]:
        # torch.nn.init._calculate_fan_in_and_fan_out: fan_in = shape[1]·receptive field, fan_out = shape[0]·receptive field
        shape = _shape_args(shape)
        if len(shape) < 2:
            raise ValueError(f"fan in and fan out need a shape with at least 2 dims, got {shape}")
        receptive = math.prod(shape[2:])
        return shape[1] * receptive, shape[0] * receptive

    @staticmethod
    def glorot_uniform(*shape, device=None, requires_grad=None) -> "Tensor":
        """U(-a, a) with a = sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010; torch.nn.init.xavier_uniform_)."""
        fan_in, fan_out = Tensor._fans(shape)
        bound = math.sqrt(6.0 / (fan_in + fan_out))
        return Tensor.uniform(*shape, low=-bound, high=bound, device=device).requires_grad_(requires_grad)

    @staticmethod
    def xavier_uniform(*shape, gain=1.0, device=None, requires_grad=None) -> "Tensor":
        """torch.nn.init.xavier_uniform_: U(-a, a), a = gain · sqrt(6 / (fan_in + fan_out))."""
        fan_in, fan_out = Tensor._fans(shape)
        bound = float(gain) * math.sqrt(6.0 / (fan_in + fan_out))
        return Tensor.uniform(*shape, low=-bound, high=bound, device=device).requires_grad_(requires_grad)

    @staticmethod
    def kaiming_uniform(*shape, a=0.01, device=None, requires_grad=None) -> "Tensor":
        """torch.nn.init.kaiming_uniform_ (He et al. 2015) with leaky-ReLU slope `a`:
        U(-b, b), b = sqrt(3) · sqrt(2 / (1 + a²)) / sqrt(fan_in)."""
        fan_in, _ = Tensor._fans(shape)
        bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a * a)) / math.sqrt(fan_in)
        return Tensor.uniform(*shape, low=-bound, high=bound, device=device).requires_grad_(requires_grad)

    @staticmethod
    def kaiming_normal(*shape, a=0.01, device=None, requires_grad=None) -> "Tensor":
        """torch.nn.init.kaiming_normal_ with leaky-ReLU slope `a`: N(0, std²), std = sqrt(2 / (1 + a²)) / sqrt(fan_in)."""
        fan_in, _ = Tensor._fans(shape)
        std = math.sqrt(2.0 / (1 + a * a)) / math.sqrt(fan_in)
        return Tensor.normal(*shape, mean=0.0, std=std, device=device, requires_grad=requires_grad)

    @staticmethod
    def from_blob(ptr: int, shape, dtype=None, device=None) -> "Tensor":
        """A tensor holding a copy of the memory at address `ptr` (an int, e.g. ctypes.addressof or
        numpy's .ctypes.data): prod(shape) elements of `dtype` (float32 by default). The memory must stay
        valid for the call; raises ValueError for a null pointer."""
        if not ptr:
            raise ValueError("from_blob: ptr is a null pointer")
        shape = _shape_args(shape)
        np_dtype = {"float32": np.float32, "float16": np.float16, "int32": np.int32, "bool": np.bool_}[dtype or dtypes.float32]
        count = math.prod(shape)
        buf = (ctypes.c_char * (count * np.dtype(np_dtype).itemsize)).from_address(int(ptr))
        return Tensor(np.frombuffer(buf, dtype=np_dtype, count=count).reshape(shape).copy(), device=device)

    @staticmethod
    def from_url(url: str, device=None, timeout: float = 60.0) -> "Tensor":
        """The bytes at `url` (http(s)://, file://) as a 1-d tensor, one element per byte (tinygrad's from_url).
        tinygrad's elements are uint8; Tensorscope has no uint8 dtype, so they are int32 in 0..255. Raises
        ValueError naming the URL when it cannot be read."""
        import urllib.error
        import urllib.request
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                data = response.read()
        except (urllib.error.URLError, ValueError, OSError) as e:
            raise ValueError(f"from_url: cannot read {url!r}: {e}") from None
        return Tensor(np.frombuffer(data, dtype=np.uint8).astype(np.int32), device=device)

    @staticmethod
    def empty(*shape, device=None, dtype=None) -> "Tensor":
        return Tensor.zeros(*shape, device=device, dtype=dtype)

    def zeros_like(self, **kw) -> "Tensor":
        return Tensor.zeros(self.shape, device=kw.get("device", self.device), dtype=kw.get("dtype", self.dtype))

    def ones_like(self, **kw) -> "Tensor":
        return Tensor.ones(self.shape, device=kw.get("device", self.device), dtype=kw.get("dtype", self.dtype))

    def full_like(self, fill_value, **kw) -> "Tensor":
        return Tensor.full(self.shape, fill_value, device=kw.get("device", self.device), dtype=kw.get("dtype", self.dtype))

    def requires_grad_(self, requires_grad=True) -> "Tensor":
        if requires_grad:
            self._t.requires_grad = True
        return self

    # ---- properties ----------------------------------------------------------------------------
    @property
    def shape(self) -> Tuple[int, ...]:
        return tuple(self._t.shape)

    @property
    def ndim(self) -> int:
        return len(self._t.shape)

    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def dtype(self) -> str:
        return self._t.dtype

    @property
    def device(self) -> str:
        return self._t.device

    @property
    def requires_grad(self) -> bool:
        return self._t.requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self._t.requires_grad = bool(value)

    @property
    def grad(self) -> Optional["Tensor"]:
        g = self._t.grad
        return None if g is None else Tensor(g)

    @grad.setter
    def grad(self, value: Optional["Tensor"]) -> None:
        self._t.grad = None if value is None else value._t

    def __repr__(self) -> str:
        return f"<Tensor shape={self.shape} dtype={self.dtype} device={self.device!r} requires_grad={self.requires_grad}>"

    def __hash__(self) -> int:
        return id(self)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    # ---- realization ---------------------------------------------------------------------------
    def realize(self, *others: "Tensor") -> "Tensor":
        """Computes the tensor now (one schedule for self and `others`) and returns it."""
        _C.Tensor.realize_all([self._t] + [o._t for o in others])
        return self

    def numpy(self) -> np.ndarray:
        return self._t.numpy()

    def item(self):
        v = self._t.item()
        return bool(v) if self.dtype == dtypes.bool else int(v) if self.dtype == dtypes.int32 else float(v)

    def tolist(self):
        return self.numpy().tolist()

    def to(self, device: str) -> "Tensor":
        return Tensor(self._t.to(str(device)))

    # ---- autograd ------------------------------------------------------------------------------
    def backward(self, gradient: Optional["Tensor"] = None, retain_graph: bool = False) -> "Tensor":
        """Builds the gradient graph to every leaf with requires_grad and accumulates into their `.grad`.
        The gradients stay lazy (tinygrad's rule): they are computed when read or realized, or by an
        optimizer's step(), all in one schedule, and self is realized in that same schedule (the forward and
        the backward share what both read). Needs a 1-element tensor unless `gradient` is given
        (RuntimeError otherwise, as PyTorch).

        Unless `retain_graph`, the autograd history is freed as PyTorch frees its graph: the values the
        backward rules saved are dropped, so the forward's intermediates go back to the buffer pool after
        the schedule's last kernel that reads them, and a second backward() through the same history raises
        RuntimeError."""
        self._t.backward(None if gradient is None else _wrap(gradient, self)._t, retain_graph)
        return self

    def detach(self) -> "Tensor":
        return Tensor(self._t.detach())

    def assign(self, x) -> "Tensor":
        """In-place update (the optimizers' way): self now holds x's value. Shapes and dtypes must match."""
        self._t.assign(_wrap(x, self)._t)
        return self

    def contiguous(self) -> "Tensor":
        """The value in a contiguous buffer: self when it already is a realized buffer (torch.Tensor.contiguous
        returns self then), else a new buffer its producers are computed into once (a kernel boundary). The
        same view of a realized buffer (``W.T``) made contiguous again before the next realize, without autograd
        history, is the same copy (one kernel); `clone()` always copies."""
        return Tensor(self._t.contiguous())

    def clone(self) -> "Tensor":
        """A new buffer holding the value, always a copy (torch.Tensor.clone)."""
        return Tensor(self._t.clone())

    def cast(self, dtype: str) -> "Tensor":
        return Tensor(self._t.cast(str(dtype)))

    def float(self) -> "Tensor":
        return self.cast(dtypes.float32)

    def half(self) -> "Tensor":
        return self.cast(dtypes.float16)

    def int(self) -> "Tensor":
        return self.cast(dtypes.int32)

    def bool(self) -> "Tensor":
        return self.cast(dtypes.bool)

    # ---- elementwise ---------------------------------------------------------------------------
    # Binary ops broadcast (NumPy rules) and accept a Tensor or a python scalar on either side; they are
    # also callable as `Tensor.add(a, b)`. ValueError when the shapes do not broadcast.
    # (a Tensor operand, and a python int or float one, take shortcuts into the engine: `x + y` and `x + 1.0`
    # are the hot path of small-tensor code, where this layer's own cost shows; the results are _wrap's)
    def add(self, x) -> "Tensor":
        tx = type(x)
        if tx is Tensor:
            return Tensor(self._t.add(x._t))
        if tx is float or tx is int:
            return Tensor(self._t.add_scalar(x, tx is float))
        return Tensor(self._t.add(_wrap(x, self)._t))

    def sub(self, x) -> "Tensor":
        tx = type(x)
        if tx is Tensor:
            return Tensor(self._t.sub(x._t))
        if tx is float or tx is int:
            return Tensor(self._t.sub_scalar(x, tx is float))
        return Tensor(self._t.sub(_wrap(x, self)._t))

    def mul(self, x) -> "Tensor":
        tx = type(x)
        if tx is Tensor:
            return Tensor(self._t.mul(x._t))
        if tx is float or tx is int:
            return Tensor(self._t.mul_scalar(x, tx is float))
        return Tensor(self._t.mul(_wrap(x, self)._t))

    def div(self, x, rounding_mode: Optional[str] = None) -> "Tensor":
        """True division (float result); rounding_mode "trunc" or "floor" rounds the quotient (torch.div)."""
        if rounding_mode is None:
            tx = type(x)
            if tx is Tensor:
                return Tensor(self._t.div(x._t))
            if tx is float or tx is int:
                return Tensor(self._t.div_scalar(x, tx is float))
            return Tensor(self._t.div(_wrap(x, self)._t))
        return Tensor(self._t.div_mode(_wrap(x, self)._t, str(rounding_mode)))

    def pow(self, x) -> "Tensor":
        """torch.pow: negative bases with integral exponents keep their sign; 0**0 = 1."""
        return _scalar_keeps_float16(Tensor(self._t.pow(_wrap(x, self, exponent=True)._t)), self, x)

    def mod(self, x) -> "Tensor": return Tensor(self._t.mod(_wrap(x, self)._t))
    def fmod(self, x) -> "Tensor": return Tensor(self._t.fmod(_wrap(x, self)._t))
    def maximum(self, x) -> "Tensor": return Tensor(self._t.maximum(_wrap(x, self)._t))
    def minimum(self, x) -> "Tensor": return Tensor(self._t.minimum(_wrap(x, self)._t))
    def copysign(self, x) -> "Tensor":
        """torch.copysign: |self| with the sign bit of x (a Tensor, broadcast, or a python scalar); -0.0 counts as
        negative. Float32 result; the gradient flows to self only (torch)."""
        return _scalar_keeps_float16(Tensor(self._t.copysign(_wrap(x, self, exponent=True)._t)), self, x)
    def logaddexp(self, x) -> "Tensor":
        return _scalar_keeps_float16(Tensor(self._t.logaddexp(_wrap(x, self, exponent=True)._t)), self, x)

    def lerp(self, end, weight) -> "Tensor":
        """self + weight * (end - self); weight a Tensor or a scalar."""
        out = Tensor(self._t.lerp(_wrap(end, self, exponent=True)._t, _wrap(weight, self, exponent=True)._t))
        return _scalar_keeps_float16(out, self, end, weight)

    def where(self, x, y) -> "Tensor":
        """Called on a bool condition: `cond.where(a, b)` (tinygrad spelling); branches Tensor or scalar."""
        ref = x if isinstance(x, Tensor) else y if isinstance(y, Tensor) else None
        if ref is None:
            fdt = dtypes.float32 if isinstance(x, float) or isinstance(y, float) else dtypes.int32
            ref = Tensor(_C.Tensor.scalar(0.0, _C.DType.__members__[fdt], self.device))
        return Tensor(self._t.where(_wrap(x, ref)._t, _wrap(y, ref)._t))

    def masked_fill(self, mask, value) -> "Tensor":
        """`value` where the boolean `mask` is true, else self (mask broadcasts)."""
        return Tensor(self._t.masked_fill(_wrap(mask, self, integer=True)._t, _wrap(value, self)._t))

    def clip(self, min_=None, max_=None) -> "Tensor":
        """torch.clamp: min(max(x, min_), max_); the gradient passes at the boundaries; min_ > max_ gives max_."""
        if min_ is None and max_ is None:
            raise ValueError("clip: at least one of min_ and max_ must be given")
        return Tensor(self._t.clip(None if min_ is None else _wrap(min_, self)._t, None if max_ is None else _wrap(max_, self)._t))

    clamp = clip

    def neg(self) -> "Tensor": return Tensor(self._t.neg())
    def exp(self) -> "Tensor": return Tensor(self._t.exp())
    def exp2(self) -> "Tensor": return Tensor(self._t.exp2())
    def log(self) -> "Tensor": return Tensor(self._t.log())
    def log2(self) -> "Tensor": return Tensor(self._t.log2())
    def log10(self) -> "Tensor": return Tensor(self._t.log10())
    def sin(self) -> "Tensor": return Tensor(self._t.sin())
    def cos(self) -> "Tensor": return Tensor(self._t.cos())
    def tan(self) -> "Tensor": return Tensor(self._t.tan())
    def asin(self) -> "Tensor": return Tensor(self._t.asin())
    def acos(self) -> "Tensor": return Tensor(self._t.acos())
    def atan(self) -> "Tensor": return Tensor(self._t.atan())
    def sinh(self) -> "Tensor": return Tensor(self._t.sinh())
    def cosh(self) -> "Tensor": return Tensor(self._t.cosh())
    def asinh(self) -> "Tensor": return Tensor(self._t.asinh())
    def acosh(self) -> "Tensor": return Tensor(self._t.acosh())
    def atanh(self) -> "Tensor": return Tensor(self._t.atanh())
    def sqrt(self) -> "Tensor": return Tensor(self._t.sqrt())
    def rsqrt(self) -> "Tensor": return Tensor(self._t.rsqrt())
    def reciprocal(self) -> "Tensor": return Tensor(self._t.reciprocal())
    def sign(self) -> "Tensor": return Tensor(self._t.sign())
    def abs(self) -> "Tensor": return Tensor(self._t.abs())
    def square(self) -> "Tensor": return Tensor(self._t.square())
    def erf(self) -> "Tensor": return Tensor(self._t.erf())
    def trunc(self) -> "Tensor": return Tensor(self._t.trunc())
    def floor(self) -> "Tensor": return Tensor(self._t.floor())
    def ceil(self) -> "Tensor": return Tensor(self._t.ceil())
    def round(self) -> "Tensor": return Tensor(self._t.round())  # half to even
    def logical_not(self) -> "Tensor": return Tensor(self._t.logical_not())
    def logical_and(self, x) -> "Tensor": return Tensor(self._t.logical_and(_wrap(x, self)._t))
    def logical_or(self, x) -> "Tensor": return Tensor(self._t.logical_or(_wrap(x, self)._t))
    def logical_xor(self, x) -> "Tensor": return Tensor(self._t.logical_xor(_wrap(x, self)._t))
    def isnan(self) -> "Tensor": return Tensor(self._t.isnan())
    def isfinite(self) -> "Tensor": return Tensor(self._t.isfinite())

    def isinf(self, detect_positive=True, detect_negative=True) -> "Tensor":
        return Tensor(self._t.isinf(bool(detect_positive), bool(detect_negative)))

    def isclose(self, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> "Tensor":
        return Tensor(self._t.isclose(_wrap(other, self, exponent=True)._t, float(rtol), float(atol), bool(equal_nan)))

    # ---- activations (torch.nn.functional definitions; tinygrad names and defaults) ---------------
    def relu(self) -> "Tensor": return Tensor(self._t.relu())
    def relu6(self) -> "Tensor": return Tensor(self._t.relu6())
    def sigmoid(self) -> "Tensor": return Tensor(self._t.sigmoid())
    def logsigmoid(self) -> "Tensor": return Tensor(self._t.logsigmoid())
    def hardsigmoid(self) -> "Tensor": return Tensor(self._t.hardsigmoid())
    def hardswish(self) -> "Tensor": return Tensor(self._t.hardswish())
    def silu(self) -> "Tensor": return Tensor(self._t.silu())
    swish = silu
    def mish(self) -> "Tensor": return Tensor(self._t.mish())
    def softsign(self) -> "Tensor": return Tensor(self._t.softsign())
    def quick_gelu(self) -> "Tensor": return Tensor(self._t.quick_gelu())
    def tanh(self) -> "Tensor": return Tensor(self._t.tanh())
    def selu(self) -> "Tensor": return Tensor(self._t.selu())
    def leaky_relu(self, neg_slope=0.01) -> "Tensor": return Tensor(self._t.leaky_relu(float(neg_slope)))
    leakyrelu = leaky_relu  # tinygrad's name
    def elu(self, alpha=1.0) -> "Tensor": return Tensor(self._t.elu(float(alpha)))
    def celu(self, alpha=1.0) -> "Tensor": return Tensor(self._t.celu(float(alpha)))
    def softplus(self, beta=1.0) -> "Tensor": return Tensor(self._t.softplus(float(beta)))
    def hardtanh(self, min_val=-1, max_val=1) -> "Tensor": return Tensor(self._t.hardtanh(float(min_val), float(max_val)))

    def gelu(self, approximate: str = "tanh") -> "Tensor":
        """Default is the tanh approximation (tinygrad); approximate="none" is the exact erf form (torch's default)."""
        return Tensor(self._t.gelu(str(approximate)))

    # ---- operators -------------------------------------------------------------------------------
    __add__ = add
    __sub__ = sub
    __mul__ = mul

    def __radd__(self, x):
        if type(x) is float or type(x) is int:  # x + self, with x a python scalar: the shortcut of add
            return Tensor(self._t.add_scalar(x, type(x) is float))
        return _wrap(x, self).add(self)

    def __rsub__(self, x):
        if type(x) is float or type(x) is int:
            return Tensor(self._t.rsub_scalar(x, type(x) is float))
        return _wrap(x, self).sub(self)

    def __rmul__(self, x):
        if type(x) is float or type(x) is int:
            return Tensor(self._t.mul_scalar(x, type(x) is float))
        return _wrap(x, self).mul(self)

    __truediv__ = div

    def __rtruediv__(self, x):
        if type(x) is float or type(x) is int:
            return Tensor(self._t.rdiv_scalar(x, type(x) is float))
        return _wrap(x, self).div(self)
    def __floordiv__(self, x): return self.div(x, rounding_mode="floor")
    def __rfloordiv__(self, x): return _wrap(x, self).div(self, rounding_mode="floor")
    def __mod__(self, x): return self.mod(x)
    def __rmod__(self, x): return _wrap(x, self).mod(self)
    def __pow__(self, x): return self.pow(x)
    def __rpow__(self, x): return _scalar_keeps_float16(_wrap(x, self, exponent=True).pow(self), self, x)
    def __neg__(self): return self.neg()
    def __abs__(self): return self.abs()
    def __matmul__(self, x): return self.matmul(x)
    def __rmatmul__(self, x): return _wrap(x, self).matmul(self)
    def __and__(self, x): return self.logical_and(x)
    def __or__(self, x): return self.logical_or(x)
    def __xor__(self, x): return self.logical_xor(x)
    def __invert__(self): return self.logical_not()

    # tinygrad's xor / lshift / rshift: on bool tensors xor is logical; shifts are integer multiply and floor
    # division by 2**bits (torch's << and >> on int32, wrapping like them).
    def xor(self, x) -> "Tensor":
        """Bitwise xor (torch.bitwise_xor) of bool or int32 tensors. The IR has no bitwise ops, so int32 xor is
        built from arithmetic, one bit at a time: bit i of a is (a >> i) mod 2 (floor semantics, so negative
        numbers give their two's-complement bits), and the result is the sum of ((a_i + b_i) mod 2) << i, all of
        it fused into one elementwise kernel."""
        x = _wrap(x, self, integer=True)
        if self.dtype == dtypes.bool and x.dtype == dtypes.bool:
            return self.logical_xor(x)
        if self.dtype != dtypes.int32 or x.dtype != dtypes.int32:
            raise TypeError(f"xor: expected two bool or two int32 tensors, got {self.dtype} and {x.dtype}")
        out = None
        for bit in range(32):
            b = ((self >> bit) % 2 + (x >> bit) % 2) % 2
            term = b << bit
            out = term if out is None else out + term
        return out

    def lshift(self, bits: int) -> "Tensor":
        """self << bits for int32 tensors: self · 2**bits, wrapping around on overflow as torch does."""
        if self.dtype != dtypes.int32 or not isinstance(bits, int) or not 0 <= bits < 32:
            raise TypeError(f"lshift: expected an int32 tensor and 0 <= bits < 32, got {self.dtype} and {bits!r}")
        return self * Tensor(np.array(np.uint32(1 << bits)).view(np.int32), device=self.device)

    def rshift(self, bits: int) -> "Tensor":
        """self >> bits for int32 tensors: arithmetic shift, floor(self / 2**bits) as torch does."""
        if self.dtype != dtypes.int32 or not isinstance(bits, int) or not 0 <= bits < 32:
            raise TypeError(f"rshift: expected an int32 tensor and 0 <= bits < 32, got {self.dtype} and {bits!r}")
        if bits == 31:  # 2**31 is not an int32: the result is the sign, 0 or -1
            return (self < 0).where(-1, 0)
        return self.div(1 << bits, rounding_mode="floor")

    def __lshift__(self, bits): return self.lshift(bits)
    def __rshift__(self, bits): return self.rshift(bits)

    def bitcast(self, dtype: str) -> "Tensor":
        """The same bits read as another dtype of the same size (torch.Tensor.view(dtype)): float32 ↔ int32,
        float16 → float16. Realizes the tensor (the bits are reinterpreted on the host); no gradient."""
        np_of = {"float32": np.float32, "float16": np.float16, "int32": np.int32}
        if self.dtype not in np_of or dtype not in np_of or np.dtype(np_of[self.dtype]).itemsize != np.dtype(np_of[dtype]).itemsize:
            raise TypeError(f"bitcast: cannot reinterpret {self.dtype} as {dtype} (both must be one of float32, int32, "
                            "float16, of the same size)")
        return Tensor(np.ascontiguousarray(self.numpy()).view(np_of[dtype]), device=self.device)

    def sequential(self, layers) -> "Tensor":
        """Applies each callable of `layers` in turn: layers[-1](...layers[0](self))."""
        return functools.reduce(lambda x, f: f(x), layers, self)

    def pad2d(self, padding, value: float = 0.0) -> "Tensor":
        """tinygrad's older name for pad with (left, right, top, bottom, ...) from the last dim back."""
        return self.pad(padding, value=value)

    def batchnorm(self, weight, bias, mean, invstd, axis=1) -> "Tensor":
        """(self - mean) · invstd · weight + bias, the 1-d parameters broadcast along `axis` (an int or a
        tuple of ints); weight and bias may be None (tinygrad's Tensor.batchnorm)."""
        axes = (axis,) if isinstance(axis, int) else tuple(axis)
        axes = tuple(a % self.ndim for a in axes)
        shape = tuple(s if i in axes else 1 for i, s in enumerate(self.shape))
        x = self - mean.reshape(shape)
        if weight is not None:
            x = x * weight.reshape(shape)
        x = x * (invstd.reshape(shape) if len(invstd.shape) == len(axes) else invstd)
        return x + bias.reshape(shape) if bias is not None else x
    def __lt__(self, x): return Tensor(self._t.lt(_wrap(x, self)._t))
    def __gt__(self, x): return Tensor(self._t.gt(_wrap(x, self)._t))
    def __le__(self, x): return Tensor(self._t.le(_wrap(x, self)._t))
    def __ge__(self, x): return Tensor(self._t.ge(_wrap(x, self)._t))
    def __eq__(self, x): return Tensor(self._t.eq(_wrap(x, self)._t))  # type: ignore[override]
    def __ne__(self, x): return Tensor(self._t.ne(_wrap(x, self)._t))  # type: ignore[override]

    # ---- reductions (keyword `axis=`; int, negative int, or tuple; full reductions give 0-d) -------
    def sum(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.sum(_axes(axis), keepdim))
    def prod(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.prod(_axes(axis), keepdim))
    def max(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.max(_axes(axis), keepdim))
    def min(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.min(_axes(axis), keepdim))
    def mean(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.mean(_axes(axis), keepdim))
    def var(self, axis=None, keepdim=False, correction=1) -> "Tensor": return Tensor(self._t.var(_axes(axis), keepdim, float(correction)))
    def std(self, axis=None, keepdim=False, correction=1) -> "Tensor": return Tensor(self._t.std(_axes(axis), keepdim, float(correction)))

    def var_mean(self, axis=None, keepdim=False, correction=1):
        v, m = self._t.var_mean(_axes(axis), keepdim, float(correction))
        return Tensor(v), Tensor(m)

    def std_mean(self, axis=None, keepdim=False, correction=1):
        s, m = self._t.std_mean(_axes(axis), keepdim, float(correction))
        return Tensor(s), Tensor(m)

    def softmax(self, axis=-1) -> "Tensor": return Tensor(self._t.softmax(int(axis)))
    def log_softmax(self, axis=-1) -> "Tensor": return Tensor(self._t.log_softmax(int(axis)))
    def softmin(self, axis=-1) -> "Tensor": return Tensor(self._t.softmin(int(axis)))
    def logsumexp(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.logsumexp(_axes(axis), keepdim))

    def argmax(self, axis=None, keepdim=False) -> "Tensor":
        """int32 index of the first maximum; axis=None: over the flattened tensor."""
        return Tensor(self._t.argmax(None if axis is None else int(axis), bool(keepdim)))

    def argmin(self, axis=None, keepdim=False) -> "Tensor":
        return Tensor(self._t.argmin(None if axis is None else int(axis), bool(keepdim)))

    def any(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.any(_axes(axis), keepdim))
    def all(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.all(_axes(axis), keepdim))

    def normalize(self, p=2.0, dim=1, eps=1e-12) -> "Tensor":
        """x / max(||x||_p over dim, eps) (torch.nn.functional.normalize)."""
        return Tensor(self._t.normalize(float(p), int(dim), float(eps)))

    # ---- scans and sorting -------------------------------------------------------------------------
    def cumsum(self, axis=0) -> "Tensor": return Tensor(self._t.cumsum(int(axis)))
    def cumprod(self, axis) -> "Tensor": return Tensor(self._t.cumprod(int(axis)))
    def logcumsumexp(self, axis=0) -> "Tensor": return Tensor(self._t.logcumsumexp(int(axis)))

    def cummax(self, axis=0):
        """(values, int32 indices) of the running maximum (torch.cummax)."""
        v, i = self._t.cummax(int(axis))
        return Tensor(v), Tensor(i)

    def cummin(self, axis=0):
        v, i = self._t.cummin(int(axis))
        return Tensor(v), Tensor(i)

    def sort(self, dim=-1, descending=False):
        """(values, int32 indices), stable for ties; NaN sorts as the largest value."""
        v, i = self._t.sort(int(dim), bool(descending))
        return Tensor(v), Tensor(i)

    def argsort(self, dim=-1, descending=False) -> "Tensor": return Tensor(self._t.argsort(int(dim), bool(descending)))

    def topk(self, k, dim=-1, largest=True, sorted_=True):
        """(values, int32 indices) of the k largest (smallest) along dim; ValueError when k > size of dim."""
        v, i = self._t.topk(int(k), int(dim), bool(largest), bool(sorted_))
        return Tensor(v), Tensor(i)

    # ---- movement ------------------------------------------------------------------------------
    def reshape(self, *shape) -> "Tensor":
        """`reshape(2, 3)` or `reshape((2, 3))`; `-1` infers one dim; `None` keeps the existing size (tinygrad).
        RuntimeError/ValueError when the sizes do not match."""
        new = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        new = [self.shape[i] if s is None else int(s) for i, s in enumerate(new)]
        return Tensor(self._t.reshape(new))

    view = reshape

    def permute(self, order, *args) -> "Tensor":
        order = tuple(order) if isinstance(order, (tuple, list)) else (order,) + args
        return Tensor(self._t.permute([int(o) for o in order]))

    def transpose(self, dim0=1, dim1=0) -> "Tensor": return Tensor(self._t.transpose(int(dim0), int(dim1)))

    @property
    def T(self) -> "Tensor": return self.transpose()

    def expand(self, shape, *args) -> "Tensor":
        new = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,) + args
        return Tensor(self._t.expand([-1 if s is None else int(s) for s in new]))

    def pad(self, padding, mode: str = "constant", value: float = 0.0) -> "Tensor":
        """`padding` per dim `((before, after) | None, ...)` (numpy order) or flat torch order
        `(left, right, top, bottom, ...)` starting from the last dim. Negative amounts crop.
        mode: "constant", "reflect", "replicate", "circular" (torch.nn.functional.pad's results: reflect pads
        less than the dim's size, circular at most its size, after cropping the negative sides first).
        ValueError for malformed padding, an unknown mode or pads beyond those limits."""
        padding = tuple(padding)
        if all(isinstance(p, (tuple, list)) or p is None for p in padding):
            if len(padding) != self.ndim:
                raise ValueError(f"pad: {len(padding)} (before, after) pairs for the {self.ndim} dims of {self.shape}")
            pairs = [(0, 0) if p is None else (int(p[0]), int(p[1])) for p in padding]
        else:
            if len(padding) % 2 or len(padding) // 2 > self.ndim:
                raise ValueError(f"pad: flat padding needs an even number of values, at most 2 per dim, got {len(padding)} for {self.shape}")
            pairs = [(0, 0)] * self.ndim
            for i in range(len(padding) // 2):
                pairs[self.ndim - 1 - i] = (int(padding[2 * i]), int(padding[2 * i + 1]))
        return Tensor(self._t.pad(pairs, str(mode), float(value)))

    def shrink(self, arg) -> "Tensor":
        return Tensor(self._t.shrink([(0, s) if a is None else (int(a[0]), int(a[1])) for a, s in zip(arg, self.shape)]))

    def flip(self, axis, *args) -> "Tensor":
        axes = list(axis) if isinstance(axis, (tuple, list)) else [axis, *args]
        return Tensor(self._t.flip([int(a) for a in axes]))

    def flatten(self, start_dim=0, end_dim=-1) -> "Tensor": return Tensor(self._t.flatten(int(start_dim), int(end_dim)))
    def unflatten(self, dim, sizes) -> "Tensor": return Tensor(self._t.unflatten(int(dim), [int(s) for s in sizes]))
    def unsqueeze(self, dim) -> "Tensor": return Tensor(self._t.unsqueeze(int(dim)))
    def squeeze(self, dim=None) -> "Tensor": return Tensor(self._t.squeeze(None if dim is None else int(dim)))

    def cat(self, *others, dim=0) -> "Tensor":
        """`a.cat(b, c, dim=1)` (method on the first tensor, tinygrad)."""
        return Tensor(_C.Tensor.cat([self._t] + [_wrap(o, self)._t for o in others], int(dim)))

    def stack(self, *others, dim=0) -> "Tensor":
        """`Tensor.stack(a, b, c, dim=1)` or `a.stack(b, c, dim=1)`; a list as the first argument works too."""
        ts = list(self) if isinstance(self, (list, tuple)) else [self]
        ts += list(others)
        return Tensor(_C.Tensor.stack([t._t for t in ts], int(dim)))

    def repeat(self, repeats, *args) -> "Tensor":
        reps = tuple(repeats) if isinstance(repeats, (tuple, list)) else (repeats,) + args
        return Tensor(self._t.repeat([int(r) for r in reps]))

    def repeat_interleave(self, repeats: int, dim=None) -> "Tensor":
        return Tensor(self._t.repeat_interleave(int(repeats), None if dim is None else int(dim)))

    def roll(self, shifts, dims=None) -> "Tensor":
        """torch.roll; with dims=None the tensor is rolled as if flattened. RuntimeError for mismatched shifts/dims."""
        shifts = [int(s) for s in shifts] if isinstance(shifts, (tuple, list)) else [int(shifts)]
        dims = [] if dims is None else [int(d) for d in dims] if isinstance(dims, (tuple, list)) else [int(dims)]
        if dims == [] and len(shifts) != 1:
            raise RuntimeError(f"roll: with dims=None, shifts must be a single value, got {shifts}")
        return Tensor(self._t.roll(shifts, dims))

    def split(self, sizes, dim=0):
        """A tuple of views: chunks of `sizes` (int) or one piece per entry of `sizes` (list)."""
        d = int(self._t.normalize_axis(int(dim)))
        if isinstance(sizes, int):
            if sizes <= 0:
                raise ValueError(f"split: split_size must be positive, got {sizes}")
            n = self.shape[d]
            sizes = [min(sizes, n - o) for o in range(0, n, sizes)] or [0]
        return tuple(Tensor(t) for t in self._t.split([int(s) for s in sizes], d))

    def chunk(self, chunks: int, dim=0):
        return tuple(Tensor(t) for t in self._t.chunk(int(chunks), int(dim)))

    def tril(self, diagonal=0) -> "Tensor": return Tensor(self._t.tril(int(diagonal)))
    def triu(self, diagonal=0) -> "Tensor": return Tensor(self._t.triu(int(diagonal)))
    def diag(self) -> "Tensor": return Tensor(self._t.diag())
    def diagonal(self, offset=0, dim1=0, dim2=1) -> "Tensor": return Tensor(self._t.diagonal(int(offset), int(dim1), int(dim2)))
    def unfold(self, dim, size, step) -> "Tensor":
        """torch.Tensor.unfold: windows of `size` every `step` along dim; dim's size becomes the window count
        (n - size) // step + 1 and a last dim of `size` is added. A view (no copy). ValueError for size larger than
        the dim or step <= 0, IndexError for an out-of-range dim."""
        return Tensor(self._t.unfold(int(dim), int(size), int(step)))

    def meshgrid(self, *others, indexing="ij"):
        """`x.meshgrid(y, indexing="xy")` (method on the first tensor); returns a tuple."""
        return tuple(Tensor(t) for t in _C.Tensor.meshgrid([self._t] + [o._t for o in others], str(indexing)))

    # ---- indexing ------------------------------------------------------------------------------
    def __getitem__(self, key) -> "Tensor":
        """ints, slices (any step, clamped like Python), None, ..., lists of ints and integer Tensors
        (advanced indexing with NumPy placement). IndexError for out-of-range ints and too many indices."""
        t = self._t.getitem_basic(key)  # ints, slices of ints, None and ...: converted in C++
        if t is not None:
            return Tensor(t)
        items = key if isinstance(key, tuple) else (key,)
        conv = []
        for k in items:
            if k is None or k is Ellipsis or type(k) is int:
                conv.append(k)
            elif type(k) is slice:
                start, stop, step = k.start, k.stop, k.step
                conv.append(k if (start is None or type(start) is int) and (stop is None or type(stop) is int)
                            and (step is None or type(step) is int)
                            else slice(*(None if v is None else _index_int(v) for v in (start, stop, step))))
            elif isinstance(k, Tensor):
                conv.append(k.to(self.device)._t if k.device != self.device else k._t)
            elif isinstance(k, (list, np.ndarray)):
                arr = np.asarray(k)
                if arr.dtype == np.bool_:
                    raise IndexError("indexing with a boolean mask is not supported (its result shape depends on the data)")
                if arr.size and arr.dtype.kind not in "iu":
                    raise IndexError(f"tensors used as indices must be integers, got {arr.dtype}")
                conv.append(Tensor(arr.astype(np.int32), device=self.device)._t)
            else:
                conv.append(_index_int(k))
        return Tensor(self._t.getitem(conv))

    def gather(self, dim, index) -> "Tensor":
        """torch.gather: out[i][j] = self[i][index[i][j]] (dim=1); index an integer Tensor of the same rank."""
        return Tensor(self._t.gather(int(dim), _wrap(index, self, integer=True)._t))

    def scatter(self, dim, index, src) -> "Tensor":
        """torch.scatter (out of place): self[i][index[i][j]] = src[i][j] (dim=1); src a Tensor or a scalar.
        index: an integer Tensor of self's rank, no larger than self (other dims) or src (IndexError for a float
        index, RuntimeError for a rank or size mismatch). Index values are not range-checked (that would need
        the data): out-of-range positions write nothing, as in tinygrad."""
        return Tensor(self._t.scatter(int(dim), _wrap(index, self, integer=True)._t, _wrap(src, self)._t))

    def scatter_reduce(self, dim, index, src, reduce, include_self=True) -> "Tensor":
        """torch.scatter_reduce with reduce "sum", "prod", "mean", "amax" or "amin" (ValueError otherwise); with
        include_self=False the values of self at scattered positions are left out. Index rules as in scatter.
        Differentiable for every reduce, with torch's gradients."""
        return Tensor(self._t.scatter_reduce(int(dim), _wrap(index, self, integer=True)._t, _wrap(src, self)._t, str(reduce), bool(include_self)))

    def one_hot(self, num_classes: int = -1) -> "Tensor":
        """(..., num_classes) int32 one-hot of an integer tensor (num_classes=-1: max + 1)."""
        return Tensor(self._t.one_hot(int(num_classes)))

    # ---- linear algebra ------------------------------------------------------------------------
    def matmul(self, x) -> "Tensor":
        """Batched matmul with NumPy semantics, as reshape + expand + mul + sum (never a materialized expand).
        RuntimeError for mismatched inner dims or 0-d operands."""
        return Tensor(self._t.matmul(_wrap(x, self)._t))

    def dot(self, w) -> "Tensor": return self.matmul(w)

    def linear(self, weight: "Tensor", bias: Optional["Tensor"] = None) -> "Tensor":
        """`self @ weight + bias` with weight laid out (in_features, out_features) (tinygrad)."""
        y = self.matmul(weight)
        return y if bias is None else y + bias

    @staticmethod
    def einsum(formula: str, *operands) -> "Tensor":
        """torch.einsum semantics (implicit output, '...', repeated indices); operands as varargs or one list."""
        if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
            operands = tuple(operands[0])
        return Tensor(_C.Tensor.einsum(str(formula), [o._t for o in operands]))

    # ---- neural-network ops (NCHW) -----------------------------------------------------------------
    def conv2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0) -> "Tensor":
        """Convolution with 1-3 spatial dims (the weight's rank selects). padding: int, one per spatial dim, or
        flat torch order (left, right, top, bottom, ...). RuntimeError when the channels do not match."""
        return Tensor(self._t.conv2d(weight._t, None if bias is None else bias._t, int(groups), _ints(stride), _ints(dilation), _ints(padding)))

    def conv_transpose2d(self, weight, bias=None, groups=1, stride=1, dilation=1, padding=0, output_padding=0) -> "Tensor":
        """Weight (in, out/groups, *kernel) as torch; 1-3 spatial dims."""
        return Tensor(self._t.conv_transpose2d(weight._t, None if bias is None else bias._t, int(groups), _ints(stride),
                                               _ints(dilation), _ints(padding), _ints(output_padding)))

    def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, return_indices=False):
        """The kernel tuple's length selects 1-3 spatial dims; stride=None means stride = kernel.
        return_indices=True gives (values, int32 flat spatial indices), as torch."""
        k = _kernel(kernel_size)
        args = (k, [] if stride is None else _ints(stride), _ints(dilation), _ints(padding), bool(ceil_mode))
        if return_indices:
            v, i = self._t.max_pool2d_with_indices(*args)
            return Tensor(v), Tensor(i)
        return Tensor(self._t.max_pool2d(*args))

    def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, count_include_pad=True) -> "Tensor":
        k = _kernel(kernel_size)
        return Tensor(self._t.avg_pool2d(k, [] if stride is None else _ints(stride), _ints(dilation), _ints(padding),
                                         bool(ceil_mode), bool(count_include_pad)))

    def max_unpool2d(self, indices, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None) -> "Tensor":
        """`Tensor.max_unpool2d(values, indices, ...)`: scatters values to their max_pool2d indices."""
        k = _kernel(kernel_size)
        return Tensor(self._t.max_unpool2d(indices._t, k, [] if stride is None else _ints(stride), _ints(dilation), _ints(padding),
                                           [] if output_size is None else [int(s) for s in output_size]))

    def interpolate(self, size, mode="linear", align_corners=False) -> "Tensor":
        """Resizes the last len(size) dims; "linear" is (bi/tri)linear; also "nearest", "nearest-exact"."""
        return Tensor(self._t.interpolate([int(s) for s in size], str(mode), bool(align_corners)))

    def layernorm(self, axis=-1, eps=1e-5) -> "Tensor": return Tensor(self._t.layernorm(int(axis), float(eps)))

    def dropout(self, p=0.5) -> "Tensor":
        """Inverted dropout while `Tensor.training` is true; the identity otherwise."""
        if not Tensor.training or p == 0:
            return self
        return Tensor(self._t.dropout(float(p)))

    def scaled_dot_product_attention(self, key, value, attn_mask=None, dropout_p=0.0, is_causal=False) -> "Tensor":
        """softmax(q k^T / sqrt(d) + mask) v; float masks are added, boolean masks select."""
        mask = None if attn_mask is None else _wrap(attn_mask, self)._t
        return Tensor(self._t.scaled_dot_product_attention(key._t, value._t, mask, float(dropout_p) if Tensor.training else 0.0,
                                                           bool(is_causal)))

    # ---- losses (reduction: "mean" | "sum" | "none"; anything else raises ValueError) ---------------
    def binary_crossentropy(self, Y, reduction: str = "mean") -> "Tensor":
        """Input is probabilities; each log is clamped at -100 as torch."""
        return Tensor(self._t.binary_crossentropy(_wrap(Y, self)._t, str(reduction)))

    def binary_crossentropy_logits(self, Y, reduction: str = "mean", pos_weight=None) -> "Tensor":
        return Tensor(self._t.binary_crossentropy_logits(_wrap(Y, self)._t, str(reduction),
                                                         None if pos_weight is None else _wrap(pos_weight, self)._t))

    def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0) -> "Tensor":
        """Class axis 1 (0 for 1-D input); Y class probabilities (input's shape) or integer class indices."""
        return Tensor(self._t.cross_entropy(_wrap(Y, self, integer=True)._t, str(reduction), float(label_smoothing)))

    def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean") -> "Tensor":
        """Cross-entropy of logits (class axis last) against integer labels `Y` (tinygrad semantics).
        `reduction`: "mean" (over non-ignored labels), "sum" or "none"; anything else raises ValueError."""
        return Tensor(self._t.sparse_categorical_crossentropy(_wrap(Y, self, integer=True)._t, str(reduction), int(ignore_index),
                                                              float(label_smoothing)))

    def nll_loss(self, Y, weight=None, ignore_index=None, reduction: str = "mean") -> "Tensor":
        """Input is log-probabilities, class axis 1; weighted "mean" divides by the summed weights (torch)."""
        return Tensor(self._t.nll_loss(_wrap(Y, self, integer=True)._t, None if weight is None else weight._t,
                                       None if ignore_index is None else int(ignore_index), str(reduction)))


def _index_int(v) -> int:
    if isinstance(v, Tensor):
        return int(v.item())
    try:
        return int(v.__index__())
    except AttributeError:
        raise IndexError(f"only integers, slices, None, ..., lists and integer tensors are valid indices (got {type(v).__name__})")


def _ints(v) -> list:
    return [int(x) for x in v] if isinstance(v, (tuple, list)) else [int(v)]


def _kernel(k) -> list:
    return [int(x) for x in k] if isinstance(k, (tuple, list)) else [int(k), int(k)]


def Device_canonical(device) -> str:
    d = str(device).upper()
    return d[:-2] if d in ("C:0", "INTERP:0") else d


def _scalar_keeps_float16(out: Tensor, like: Tensor, *others) -> Tensor:
    """`out` of an op of float16 `like` and `others`, cast back to float16 when some of them are python scalars and
    the rest float16 tensors: torch.result_type does not promote for a python scalar, but _wrap(exponent=True) makes
    it a float32 0-d tensor, which promotes a 0-d float16 operand (torch.tensor(1.5, dtype=torch.half) ** 2 is
    float16). One rounding, after the float32 op."""
    scalars = [isinstance(x, (bool, int, float)) for x in others]
    halves = all(s or (isinstance(x, Tensor) and x.dtype == dtypes.float16) for s, x in zip(scalars, others))
    if like.dtype == dtypes.float16 and any(scalars) and halves and out.dtype != dtypes.float16:
        return out.cast(dtypes.float16)
    return out


def _wrap(x, like: Tensor, integer: bool = False, exponent: bool = False) -> Tensor:
    """Python scalars become 0-d constants of `like`'s dtype on its device (float32 with `exponent`,
    or when `like` is not float and x is a float); arrays become tensors. A float16 `like` gives a float16
    constant: torch 1.13 rounds the scalar to float16 too (half * 0.1 multiplies by 0.0999755859375)."""
    if isinstance(x, Tensor):
        return x
    if exponent and isinstance(x, (bool, int, float)):
        return Tensor(_C.Tensor.scalar(float(x), _C.DType.float32, like.device))
    if isinstance(x, float) and like.dtype not in (dtypes.float32, dtypes.float16):
        return Tensor(_C.Tensor.scalar(x, _C.DType.float32, like.device))
    if isinstance(x, (bool, int, float)) and not integer:
        return Tensor(like._t.scalar_like(float(x)))
    return Tensor(x, device=like.device)
