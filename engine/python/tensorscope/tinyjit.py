"""`@tensorscope.jit`: capture a function's kernels once, replay them on every later call.

The semantics are tinygrad's TinyJit (tinygrad/engine/jit.py):

* **Call 1** runs the function normally (eager): kernels compile, caches fill, optimizer state is made.
* **Call 2** runs it again while *capturing*: every kernel launch is recorded with the buffers it read
  and wrote. The returned tensors and every tensor the function ``assign()``-ed to (parameters,
  optimizer state, BatchNorm running statistics) are realized as part of the capture.
* **Calls 3 and later** do not run the python function at all. They *replay* the captured kernels:
  the Tensor arguments of the call are bound where the capture read the capture's arguments, assigned
  tensors are bound to their current buffers and receive their new values, and every buffer a kernel
  writes is a fresh one, so the tensors returned by one call are never overwritten by the next.
  Nothing is rebuilt: no graph, no schedule, no lowering, no compile-cache lookup.

What a call may take and return:

* Inputs are the ``Tensor`` positional and keyword arguments, in order (keywords sorted by name).
  Their shapes, dtypes and devices are fixed by the first call; a call with others raises
  ``JitError`` naming the input. Non-Tensor arguments are *baked in* at capture, as in tinygrad.
* The function returns a Tensor, ``None``, or tuples / lists / dicts of those (nested). Calls 1 and 2
  must return the same structure (same containers, keys, shapes and dtypes), else ``JitError``.
  Python numbers cannot be returned (they would be frozen at capture): return the Tensor and call
  ``.item()`` on the result.

Limits (tinygrad's, plus what this engine makes explicit):

* Python control flow, python numbers and constants inside the function are frozen at capture.
* Tensors the function reads but does not ``assign()`` to are bound *by buffer*: a model's
  parameters are fine (the optimizer assigns them), but replacing such a tensor from outside (say,
  ``load_state_dict`` into a frozen embedding) is not seen by replays; make a new jit then.
* Attributes the function sets are not replayed: a parameter's ``.grad`` keeps the value of the
  capture call.
* An optimizer's ``lr`` is a tensor the update kernels read: set between calls (a learning-rate
  schedule), replays use the new value. Setting it inside the function is a host write, below.
* Reading a tensor on the host inside the function (``.numpy()``, ``.item()``, ``.tolist()``), writing
  host values into one (``opt.lr = ...``) or drawing random numbers (``Tensor.rand``/``randn``/``uniform``,
  ``dropout`` in training mode) makes the capture raise ``JitError``: a replay could not repeat them.
* One jit per shape signature; jitted functions cannot call other jitted functions.

Counters: ``GlobalCounters.replayed_kernels`` counts replayed kernels; a replay adds nothing to
``GlobalCounters.schedule_count`` or ``schedule_cache_hits``. Replayed launches reach the session
(GUI, recorder, ``DEBUG=1``) as kernel events marked ``replayed``.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, List, Optional, Tuple

from tensorscope import _C
from tensorscope.tensor import Tensor


class JitError(RuntimeError):
    """A jitted call that cannot be captured or replayed: changed input shapes, a changed output
    structure, host reads or random draws inside the function."""


def _flatten_inputs(args: tuple, kwargs: dict) -> List[Tensor]:
    return [a for a in args if isinstance(a, Tensor)] + [kwargs[k] for k in sorted(kwargs) if isinstance(kwargs[k], Tensor)]


def _flatten_outputs(ret: Any, leaves: List[Tensor]) -> Any:
    """The structure of `ret` with each Tensor replaced by its index in `leaves` (appended)."""
    if isinstance(ret, Tensor):
        leaves.append(ret)
        return ("T", len(leaves) - 1)
    if ret is None:
        return ("N",)
    if isinstance(ret, (tuple, list)):
        return (type(ret).__name__, tuple(_flatten_outputs(r, leaves) for r in ret))
    if isinstance(ret, dict):
        return ("dict", tuple((k, _flatten_outputs(ret[k], leaves)) for k in ret))
    raise JitError(f"jit: the function returned a {type(ret).__name__}; a jitted function returns Tensors, None, or "
                   "tuples/lists/dicts of them (a python number would be frozen at capture: return the Tensor and "
                   "call .item() outside)")


def _unflatten(structure: Any, leaves: List[Tensor]) -> Any:
    kind = structure[0]
    if kind == "T":
        return leaves[structure[1]]
    if kind == "N":
        return None
    if kind == "dict":
        return {k: _unflatten(v, leaves) for k, v in structure[1]}
    items = [_unflatten(s, leaves) for s in structure[1]]
    return tuple(items) if kind == "tuple" else items


def _describe(t: Tensor) -> Tuple:
    return (t.shape, t.dtype, t.device)


class TinyJit:
    """Wraps `fxn` (see the module docstring). `jit_cache_size` is the number of launches a replay
    makes (0 before capture); `captured` the engine's plan (``_C.CapturedJit``) once captured."""

    def __init__(self, fxn: Callable):
        self.fxn = fxn
        self.cnt = 0
        self.captured: Optional[_C.CapturedJit] = None
        self._inputs: Optional[List[Tuple]] = None  # (shape, dtype, device) of each input, from call 1
        self._structure: Any = None                 # the output structure, from call 1
        self._out_meta: Optional[List[Tuple]] = None
        functools.update_wrapper(self, fxn)

    @property
    def jit_cache_size(self) -> int:
        return 0 if self.captured is None else self.captured.launch_count

    def reset(self) -> None:
        """Forgets the capture: the next call runs eagerly again, the one after captures."""
        self.cnt, self.captured, self._inputs, self._structure, self._out_meta = 0, None, None, None, None

    def _check_inputs(self, inputs: List[Tensor]) -> None:
        now = [_describe(t) for t in inputs]
        if self._inputs is None:
            self._inputs = now
            return
        if len(now) != len(self._inputs):
            raise JitError(f"jit: {self.fxn.__name__} was first called with {len(self._inputs)} Tensor argument(s), now with {len(now)}")
        for i, (a, b) in enumerate(zip(now, self._inputs)):
            if a != b:
                raise JitError(f"jit: Tensor argument {i} of {self.fxn.__name__} has shape {a[0]} {a[1]} on {a[2]}, but the "
                               f"function was captured with shape {b[0]} {b[1]} on {b[2]}; a jitted function replays fixed "
                               "shapes (make another jit for other shapes)")

    def __call__(self, *args, **kwargs):
        inputs = _flatten_inputs(args, kwargs)
        self._check_inputs(inputs)
        if self.cnt == 0:  # warm-up: run eagerly, remember the output structure
            ret = self.fxn(*args, **kwargs)
            leaves: List[Tensor] = []
            self._structure = _flatten_outputs(ret, leaves)
            self._out_meta = [(t.shape, t.dtype) for t in leaves]
            self.cnt = 1
            return ret
        if self.cnt == 1:  # capture
            got: dict = {}

            def run() -> list:
                leaves: List[Tensor] = []
                got["structure"] = _flatten_outputs(self.fxn(*args, **kwargs), leaves)
                got["meta"] = [(t.shape, t.dtype) for t in leaves]
                return [t._t for t in leaves]

            try:
                captured, outs = _C.CapturedJit.capture([t._t for t in inputs], run)
            except RuntimeError as e:
                if str(e).startswith("jit:"):
                    raise JitError(str(e)) from None
                raise
            if got["structure"] != self._structure or got["meta"] != self._out_meta:
                raise JitError(f"jit: {self.fxn.__name__} returned a different structure on its second call "
                               f"({got['meta']} vs {self._out_meta}); a jitted function must return the same "
                               "tensors (shapes, dtypes, containers) every call")
            self.captured = captured
            self.cnt = 2
            return _unflatten(self._structure, [Tensor(t) for t in outs])
        try:  # replay
            outs = self.captured.replay([t._t for t in inputs])
        except ValueError as e:
            raise JitError(str(e)) from None
        self.cnt += 1
        return _unflatten(self._structure, [Tensor(t) for t in outs])

    def __get__(self, obj, objtype=None):
        """As a method decorator: one jit per instance would need per-instance state; bind the instance
        as an argument instead (tinygrad's TinyJit does the same)."""
        return functools.partial(self.__call__, obj) if obj is not None else self


def jit(fxn: Callable) -> TinyJit:
    """Decorator: ``@tensorscope.jit`` captures `fxn`'s kernels on its second call and replays them after.
    See the module docstring for what is captured and its limits."""
    return TinyJit(fxn)


__all__ = ["jit", "TinyJit", "JitError"]
