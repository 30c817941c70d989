"""The user-facing Tensor (tinygrad spelling; see shared/API.md). A thin layer over the C++ engine
(`tensorscope._C`): it turns Python's argument forms (varargs shapes, python scalars, keyword names)
into the engine's, and adds Python protocol methods. All semantics live in the engine.

Errors: ValueError for bad shapes / arguments, IndexError for out-of-range axes, RuntimeError for
invalid permutations, matmul shape mismatches and device / compile failures.
"""
from __future__ import annotations

import math
from typing import Iterable, Optional, Sequence, Tuple, Union

import numpy as np

from tensorscope import _C


class dtypes:
    """Element types (as tinygrad's dtypes). Values are the engine's dtype names."""
    float32 = "float32"
    float = "float32"
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


class _CountersMeta(type):
    @property
    def kernel_count(cls) -> int:
        return _C.kernel_count()


class GlobalCounters(metaclass=_CountersMeta):
    """Counters in the spirit of tinygrad's: `GlobalCounters.kernel_count` kernels launched since
    `GlobalCounters.reset()`."""

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
    becomes float32, integer data int32, booleans bool."""

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
                dtype = dtypes.float32
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
        """n×m identity, built from movement ops (ones → pad → flatten → shrink → reshape) as in tinygrad."""
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
        return int(np.prod(self.shape, dtype=np.int64))

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
    def backward(self, gradient: Optional["Tensor"] = None) -> "Tensor":
        """Realizes self, builds the gradient graph to every leaf with requires_grad, accumulates into
        their `.grad` and realizes those. Needs a 1-element tensor unless `gradient` is given."""
        self._t.backward(None if gradient is None else _wrap(gradient, self)._t)
        return self

    def detach(self) -> "Tensor":
        return Tensor(self._t.detach())

    def assign(self, x) -> "Tensor":
        """In-place update (the optimizers' way): self now holds x's value. Shapes and dtypes must match."""
        self._t.assign(_wrap(x, self)._t)
        return self

    def contiguous(self) -> "Tensor":
        return Tensor(self._t.contiguous())

    def clone(self) -> "Tensor":
        return Tensor(self._t.contiguous())

    def cast(self, dtype: str) -> "Tensor":
        return Tensor(self._t.cast(str(dtype)))

    def float(self) -> "Tensor":
        return self.cast(dtypes.float32)

    def int(self) -> "Tensor":
        return self.cast(dtypes.int32)

    def bool(self) -> "Tensor":
        return self.cast(dtypes.bool)

    # ---- elementwise ---------------------------------------------------------------------------
    def add(self, x) -> "Tensor": return Tensor(self._t.add(_wrap(x, self)._t))
    def sub(self, x) -> "Tensor": return Tensor(self._t.sub(_wrap(x, self)._t))
    def mul(self, x) -> "Tensor": return Tensor(self._t.mul(_wrap(x, self)._t))
    def div(self, x) -> "Tensor": return Tensor(self._t.div(_wrap(x, self)._t))
    def pow(self, x) -> "Tensor": return Tensor(self._t.pow(_wrap(x, self)._t))
    def maximum(self, x) -> "Tensor": return Tensor(self._t.maximum(_wrap(x, self)._t))
    def minimum(self, x) -> "Tensor": return Tensor(self._t.minimum(_wrap(x, self)._t))
    def neg(self) -> "Tensor": return Tensor(self._t.neg())
    def exp(self) -> "Tensor": return Tensor(self._t.exp())
    def exp2(self) -> "Tensor": return Tensor(self._t.exp2())
    def log(self) -> "Tensor": return Tensor(self._t.log())
    def log2(self) -> "Tensor": return Tensor(self._t.log2())
    def sin(self) -> "Tensor": return Tensor(self._t.sin())
    def cos(self) -> "Tensor": return Tensor(self._t.cos())
    def sqrt(self) -> "Tensor": return Tensor(self._t.sqrt())
    def rsqrt(self) -> "Tensor": return self.sqrt().reciprocal()
    def reciprocal(self) -> "Tensor": return Tensor(self._t.reciprocal())
    def relu(self) -> "Tensor": return Tensor(self._t.relu())
    def sigmoid(self) -> "Tensor": return Tensor(self._t.sigmoid())
    def tanh(self) -> "Tensor": return Tensor(self._t.tanh())
    def abs(self) -> "Tensor": return Tensor(self._t.abs())
    def square(self) -> "Tensor": return Tensor(self._t.square())
    def logical_not(self) -> "Tensor": return Tensor(self._t.logical_not())

    def where(self, x, y) -> "Tensor":
        """Called on a bool condition: `cond.where(a, b)` (tinygrad spelling)."""
        ref = x if isinstance(x, Tensor) else y if isinstance(y, Tensor) else self.float()
        return Tensor(self._t.where(_wrap(x, ref)._t, _wrap(y, ref)._t))

    def __add__(self, x): return self.add(x)
    def __radd__(self, x): return _wrap(x, self).add(self)
    def __sub__(self, x): return self.sub(x)
    def __rsub__(self, x): return _wrap(x, self).sub(self)
    def __mul__(self, x): return self.mul(x)
    def __rmul__(self, x): return _wrap(x, self).mul(self)
    def __truediv__(self, x): return self.div(x)
    def __rtruediv__(self, x): return _wrap(x, self).div(self)
    def __pow__(self, x): return self.pow(x)
    def __rpow__(self, x): return _wrap(x, self).pow(self)
    def __neg__(self): return self.neg()
    def __matmul__(self, x): return self.matmul(x)
    def __rmatmul__(self, x): return _wrap(x, self).matmul(self)
    def __lt__(self, x): return Tensor(self._t.lt(_wrap(x, self)._t))
    def __gt__(self, x): return Tensor(self._t.gt(_wrap(x, self)._t))
    def __le__(self, x): return Tensor(self._t.le(_wrap(x, self)._t))
    def __ge__(self, x): return Tensor(self._t.ge(_wrap(x, self)._t))
    def __eq__(self, x): return Tensor(self._t.eq(_wrap(x, self)._t))  # type: ignore[override]
    def __ne__(self, x): return Tensor(self._t.ne(_wrap(x, self)._t))  # type: ignore[override]

    # ---- reductions ----------------------------------------------------------------------------
    def sum(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.sum(_axes(axis), keepdim))
    def max(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.max(_axes(axis), keepdim))
    def min(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.min(_axes(axis), keepdim))
    def mean(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.mean(_axes(axis), keepdim))
    def softmax(self, axis=-1) -> "Tensor": return Tensor(self._t.softmax(int(axis)))
    def log_softmax(self, axis=-1) -> "Tensor": return Tensor(self._t.log_softmax(int(axis)))
    def logsumexp(self, axis=None, keepdim=False) -> "Tensor": return Tensor(self._t.logsumexp(_axes(axis), keepdim))

    # ---- movement ------------------------------------------------------------------------------
    def reshape(self, *shape) -> "Tensor":
        """`reshape(2, 3)` or `reshape((2, 3))`; `-1` infers one dim; `None` keeps the existing size (tinygrad)."""
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

    def pad(self, padding, value: float = 0.0) -> "Tensor":
        """`padding` per dim `((before, after) | None, ...)` (numpy order) or flat torch order
        `(left, right, top, bottom, ...)` starting from the last dim."""
        if all(isinstance(p, (tuple, list)) or p is None for p in padding):
            pairs = [(0, 0) if p is None else (int(p[0]), int(p[1])) for p in padding]
        else:
            if len(padding) % 2:
                raise ValueError(f"pad: flat padding needs an even number of values, got {len(padding)}")
            pairs = [(0, 0)] * self.ndim
            for i in range(len(padding) // 2):
                pairs[self.ndim - 1 - i] = (int(padding[2 * i]), int(padding[2 * i + 1]))
        return Tensor(self._t.pad(pairs, float(value)))

    def shrink(self, arg) -> "Tensor":
        return Tensor(self._t.shrink([(0, s) if a is None else (int(a[0]), int(a[1])) for a, s in zip(arg, self.shape)]))

    def flip(self, axis, *args) -> "Tensor":
        axes = list(axis) if isinstance(axis, (tuple, list)) else [axis, *args]
        return Tensor(self._t.flip([int(a) for a in axes]))

    def flatten(self, start_dim=0, end_dim=-1) -> "Tensor": return Tensor(self._t.flatten(int(start_dim), int(end_dim)))
    def unsqueeze(self, dim) -> "Tensor": return Tensor(self._t.unsqueeze(int(dim)))
    def squeeze(self, dim=None) -> "Tensor": return Tensor(self._t.squeeze(None if dim is None else int(dim)))

    # ---- linear algebra and nn -----------------------------------------------------------------
    def matmul(self, x) -> "Tensor":
        """Batched matmul with NumPy semantics, as reshape + expand + mul + sum (never a materialized expand)."""
        return Tensor(self._t.matmul(_wrap(x, self)._t))

    dot = matmul

    def linear(self, weight: "Tensor", bias: Optional["Tensor"] = None) -> "Tensor":
        """`self @ weight + bias` with weight laid out (in_features, out_features) (tinygrad)."""
        y = self.matmul(weight)
        return y if bias is None else y + bias

    def one_hot(self, num_classes: int) -> "Tensor":
        return Tensor(self._t.one_hot(int(num_classes)))

    def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean") -> "Tensor":
        """Cross-entropy of logits (class axis last) against integer labels `Y` (tinygrad semantics).
        `reduction`: "mean" (over non-ignored labels), "sum" or "none"; anything else raises ValueError."""
        if label_smoothing != 0.0:
            raise NotImplementedError("label_smoothing arrives with the full loss family")
        return Tensor(self._t.sparse_categorical_crossentropy(_wrap(Y, self, integer=True)._t, str(reduction), int(ignore_index)))


def Device_canonical(device) -> str:
    d = str(device).upper()
    return d[:-2] if d in ("C:0", "INTERP:0") else d


def _wrap(x, like: Tensor, integer: bool = False) -> Tensor:
    """Python scalars become 0-d constants of `like`'s dtype on its device; arrays become tensors."""
    if isinstance(x, Tensor):
        return x
    if isinstance(x, float) and like.dtype != dtypes.float32:
        return Tensor(_C.Tensor.scalar(x, _C.DType.float32, like.device))
    if isinstance(x, (bool, int, float)) and not integer:
        return Tensor(like._t.scalar_like(float(x)))
    return Tensor(x, device=like.device)
