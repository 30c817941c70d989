"""Model state: finding a model's Tensors, loading values into them, and the safetensors file format.

Same names and semantics as ``tinygrad.nn.state``:

* ``get_state_dict(obj)`` / ``get_parameters(obj)`` walk an object's attributes, lists, tuples and
  dicts and collect every Tensor by dotted name (``"l1.weight"``, ``"layers.0.bias"``) — the keys
  PyTorch's ``module.state_dict()`` uses for the same model structure.
* ``load_state_dict(model, state_dict)`` assigns values into the model's Tensors, checking names,
  shapes and dtypes.
* ``safe_save(tensors, path)`` / ``safe_load(path)`` write and read safetensors files
  (https://huggingface.co/docs/safetensors), the format PyTorch (``safetensors.torch``) and tinygrad
  use to exchange weights.

The safetensors layout:

    bytes 0..8          N, the header's length: unsigned 64-bit little-endian
    bytes 8..8+N        a JSON object: {name: {"dtype": "F32", "shape": [2, 3],
                                               "data_offsets": [begin, end]}, ...,
                                        "__metadata__": {str: str}}   (optional)
                        padded with spaces so that the data starts 8-byte aligned
    bytes 8+N..         the tensors' bytes, row-major (C order), little-endian; data_offsets are
                        relative to the start of this block
"""
from __future__ import annotations

import json
import os
import struct
import tempfile
import types
import warnings
from typing import Any, Optional

import numpy as np

from tensorscope import Tensor, dtypes

# safetensors dtype <-> engine dtype. Files may hold other types (torch writes I64 for
# BatchNorm's num_batches_tracked, F16/F64 for some checkpoints): safe_load converts those to the
# engine's float32 / int32 (see _LOAD_CONVERT) so that such files still load.
_SAFE_DTYPES = {"F32": dtypes.float32, "I32": dtypes.int32, "BOOL": dtypes.bool}
_INVERSE_SAFE_DTYPES = {v: k for k, v in _SAFE_DTYPES.items()}
_NUMPY_OF = {"F32": "<f4", "I32": "<i4", "BOOL": "|b1", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I16": "<i2",
             "I8": "|i1", "U8": "|u1", "U16": "<u2", "U32": "<u4"}
_LOAD_CONVERT = {"F16": np.float32, "F64": np.float32, "BF16": np.float32,
                 "I64": np.int32, "I16": np.int32, "I8": np.int32, "U8": np.int32, "U16": np.int32, "U32": np.int32}
_HEADER_LIMIT = 100 * 1024 * 1024  # the official reader's cap on the JSON header (100 MB)


# ---- finding the Tensors of a model ---------------------------------------------------------------
def get_state_dict(obj, prefix: str = "", tensor_type=Tensor) -> dict[str, Tensor]:
    """Every Tensor reachable from ``obj`` through attributes, lists, tuples and dicts, keyed by dotted
    path (``"l1.weight"``, ``"layers.0.bias"``), in attribute order (tinygrad's walk).

    Classes, modules and functions are not entered, and an object reached a second time (a cycle, or
    a layer shared by two attributes) is visited once, so the walk always terminates.
    """
    state: dict[str, Tensor] = {}
    _walk(obj, prefix, tensor_type, state, set())
    return state


def _walk(obj, prefix: str, tensor_type, state: dict, seen: set) -> None:
    if isinstance(obj, tensor_type):
        state[prefix.strip(".")] = obj
        return
    if isinstance(obj, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
                        str, bytes, int, float, bool)) or obj is None:
        return
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if hasattr(obj, "_asdict"):  # namedtuple
        obj = obj._asdict()
    if isinstance(obj, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(obj))
    elif isinstance(obj, dict):
        items = ((str(k), v) for k, v in obj.items())
    elif hasattr(obj, "__dict__"):
        items = vars(obj).items()
    else:
        return
    for name, value in items:
        _walk(value, f"{prefix}{name}.", tensor_type, state, seen)


def get_parameters(obj) -> list[Tensor]:
    """The Tensors of ``get_state_dict(obj)`` as a list (what an optimizer takes). It includes
    non-trainable buffers such as BatchNorm's running statistics: an optimizer keeps those apart
    (``requires_grad=False``) and realizes them with each step."""
    return list(get_state_dict(obj).values())


# ---- loading values into a model -----------------------------------------------------------------
def _as_tensor(key: str, value, device: str) -> Tensor:
    """A Tensor for a state-dict value: a Tensor, a NumPy array or anything with ``.numpy()`` (a torch
    tensor). Other element types are converted to the engine's: floats to float32, integers to int32."""
    if isinstance(value, Tensor):
        return value if value.device == device else value.to(device)
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # torch.Tensor, without importing torch
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.dtype.kind == "f":
        arr = arr.astype(np.float32)
    elif arr.dtype.kind in "iu":
        arr = _to_int32(key, arr)
    elif arr.dtype.kind != "b":
        raise TypeError(f"state dict entry '{key}': cannot load values of type {arr.dtype}")
    return Tensor(arr, device=device)


def _to_int32(key: str, arr: np.ndarray) -> np.ndarray:
    if arr.size and (arr.min() < np.iinfo(np.int32).min or arr.max() > np.iinfo(np.int32).max):
        raise ValueError(f"state dict entry '{key}': integer values do not fit in int32")
    return arr.astype(np.int32)


def load_state_dict(model, state_dict: dict, strict: bool = True, verbose: bool = False, consume: bool = False,
                    realize: bool = True) -> list[Tensor]:
    """Assigns ``state_dict[name]`` to each Tensor of ``get_state_dict(model)`` (tinygrad's signature).

    Values may be Tensors, NumPy arrays or torch tensors (so ``load_state_dict(model,
    torch_model.state_dict())`` works when the attribute names match). Shapes ``()`` and ``(1,)``
    are interchangeable (torch and tinygrad disagree on ``num_batches_tracked``).

    Args:
        strict: a model Tensor missing from ``state_dict`` is an error; with ``strict=False`` it
            keeps its value. Entries of ``state_dict`` the model does not have are ignored either
            way (with a warning), as in tinygrad.
        verbose: print each loaded name.
        consume: delete the loaded entries from ``state_dict``.
        realize: realize each loaded Tensor now (else it is realized when first used).

    Returns: the model Tensors that were loaded.

    Raises:
        KeyError: strict and some model Tensors are missing (all of their names are listed).
        ValueError: a shape or dtype differs (the message names the key and both shapes/dtypes).
    """
    model_state = get_state_dict(model)
    missing = [k for k in model_state if k not in state_dict]
    if strict and missing:
        raise KeyError(f"load_state_dict: missing from the state dict: {', '.join(missing)}")
    unused = [k for k in state_dict if k not in model_state]
    if unused:
        warnings.warn(f"load_state_dict: unused entries in the state dict: {', '.join(sorted(unused))}", stacklevel=2)
    # Check everything before assigning anything, so a bad state dict leaves the model untouched.
    updates = []
    for k, v in model_state.items():
        if k not in state_dict:
            continue
        new = _as_tensor(k, state_dict[k], v.device)
        if new.shape != v.shape:
            if {new.shape, v.shape} == {(), (1,)}:
                new = new.reshape(v.shape)
            else:
                raise ValueError(f"load_state_dict: shape mismatch for '{k}': the model has {v.shape}, "
                                 f"the state dict has {new.shape}")
        if new.dtype != v.dtype:
            raise ValueError(f"load_state_dict: dtype mismatch for '{k}': the model has {v.dtype}, "
                             f"the state dict has {new.dtype}")
        updates.append((k, v, new))
    for k, v, new in updates:
        if verbose:
            print(f"load_state_dict: {k} {v.shape} {v.dtype}")
        # contiguous(): the parameter gets a buffer of its own, never a view of the state dict's.
        v.assign(new.detach().contiguous())
        if consume:
            del state_dict[k]
    loaded = [v for _, v, _ in updates]
    if realize and loaded:
        loaded[0].realize(*loaded[1:])
    return loaded


# ---- safetensors -----------------------------------------------------------------------------------
def safe_save(tensors: dict[str, Tensor], path: str, metadata: Optional[dict[str, Any]] = None) -> None:
    """Writes ``tensors`` (name → float32, int32 or bool Tensor) to ``path`` as a safetensors file.

    ``metadata`` (str → str) goes into the header's ``__metadata__``. The file is written next to
    ``path`` under a temporary name, flushed to disk and renamed over ``path``: an interrupted save
    leaves any existing file intact.

    Raises: TypeError for a non-Tensor value or a dtype safetensors cannot name; ValueError for a
    name that is not a string or is ``"__metadata__"``.
    """
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    arrays, offset = [], 0
    for name, t in tensors.items():
        if not isinstance(name, str) or name == "__metadata__":
            raise ValueError(f"safe_save: invalid tensor name {name!r}")
        if not isinstance(t, Tensor):
            raise TypeError(f"safe_save: '{name}' is a {type(t).__name__}, not a Tensor")
        if t.dtype not in _INVERSE_SAFE_DTYPES:
            raise TypeError(f"safe_save: '{name}' has dtype {t.dtype}, which safetensors cannot store")
        code = _INVERSE_SAFE_DTYPES[t.dtype]
        arr = np.array(t.numpy(), dtype=_NUMPY_OF[code], order="C")  # (ascontiguousarray would make 0-d 1-d)
        header[name] = {"dtype": code, "shape": list(t.shape), "data_offsets": [offset, offset + arr.nbytes]}
        arrays.append(arr)
        offset += arr.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(blob)))
            f.write(blob)
            for arr in arrays:
                f.write(arr.tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _read_header(data: bytes, path: str) -> tuple[dict, int]:
    if len(data) < 8:
        raise ValueError(f"safe_load: {path} is not a safetensors file (shorter than 8 bytes)")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _HEADER_LIMIT or 8 + n > len(data):
        raise ValueError(f"safe_load: {path}: header length {n} does not fit in the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"safe_load: {path}: the header is not valid JSON ({e})") from None
    if not isinstance(header, dict):
        raise ValueError(f"safe_load: {path}: the header is not a JSON object")
    return header, 8 + n


def safe_load_metadata(path: str) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors file's header ({} when it has none)."""
    with open(path, "rb") as f:
        head = f.read(8)
        (n,) = struct.unpack("<Q", head) if len(head) == 8 else (0,)
        header, _ = _read_header(head + f.read(min(n, _HEADER_LIMIT)), path)
    return header.get("__metadata__", {}) or {}


def safe_load(path: str, device: Optional[str] = None) -> dict[str, Tensor]:
    """Reads a safetensors file into ``{name: Tensor}`` (realized, on ``device`` or the default one).

    F32, I32 and BOOL load as float32, int32 and bool. Other types are converted: F16, BF16 and F64
    to float32; I64, I16, I8, U8, U16 and U32 to int32 (ValueError if a value does not fit).

    Raises: ValueError for a malformed file (bad header length or JSON, unknown dtype, data offsets
    outside the data or not matching the shape), naming the file and the tensor.
    """
    with open(path, "rb") as f:
        data = f.read()
    header, start = _read_header(data, path)
    body = memoryview(data)[start:]
    out: dict[str, Tensor] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            code, shape, (begin, end) = info["dtype"], [int(s) for s in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"safe_load: {path}: entry '{name}' lacks dtype, shape or data_offsets") from None
        if code not in _NUMPY_OF and code != "BF16":
            raise ValueError(f"safe_load: {path}: entry '{name}' has unsupported dtype {code}")
        itemsize = 2 if code == "BF16" else np.dtype(_NUMPY_OF[code]).itemsize
        count = int(np.prod(shape, dtype=np.int64))
        if not (0 <= begin <= end <= len(body)) or end - begin != count * itemsize:
            raise ValueError(f"safe_load: {path}: entry '{name}' has data_offsets [{begin}, {end}] that do not match "
                             f"shape {shape} x {itemsize} bytes within {len(body)} bytes of data")
        raw = body[begin:end]
        if code == "BF16":  # bfloat16 is the top half of a float32
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=_NUMPY_OF[code])
        arr = arr.reshape(shape)
        if code in _LOAD_CONVERT:
            arr = _to_int32(name, arr) if _LOAD_CONVERT[code] is np.int32 else arr.astype(np.float32)
        # a writable C-ordered copy (frombuffer's array is read-only); keeps 0-d arrays 0-d
        out[name] = Tensor(np.array(arr, order="C"), device=device,
                           dtype=_SAFE_DTYPES.get(code, dtypes.float32 if arr.dtype.kind == "f" else dtypes.int32))
    return out


__all__ = ["get_state_dict", "get_parameters", "load_state_dict", "safe_save", "safe_load", "safe_load_metadata"]
