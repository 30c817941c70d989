"""Random tensor programs for differential testing (scripts/fuzz_ops.py, tests/python/test_fuzz_ops.py).

A program is a dict, small enough to print as a Python literal and so to paste as a reproducer:

    {"dtype": "float32", "seed": 7,                       # dtype of the inputs, seed of their values
     "inputs": [[2, 3], [3]],                             # input shapes; input k is a[k]
     "ops": [["x + a[1]", "x + a[1]"], ["x.sum(axis=(0,))", "x.sum(dim=(0,))"], ...]}

Each op is a pair of Python expressions in `x` (the running value) and `a` (the inputs): the Tensorscope
spelling and the PyTorch spelling of the same operation (`I([...])` on the Tensorscope side is an int32 index
Tensor on the device under test). The running value starts as a[0]; every op replaces it.
`run_program` evaluates the Tensorscope side on a device and the PyTorch side (float32 CPU; float16 programs
are checked against the float32 computation on the exactly widened float16 inputs, with loose tolerances), and
compares output shape, dtype kind and values; for float32 programs it also compares the gradients of every input
of (output * w).sum() with a fixed random w (the test_ops convention).

`generate(seed)` builds a random program: shapes 0-d to 5-d with size-0 and size-1 dims; broadcasting binary ops
against new inputs; movement ops (reshape, permute, expand, pad, shrink, slicing with steps, flip, squeeze/
unsqueeze, transpose, flatten, cat; contiguous() and clone(), which store a copy or, where the value is in memory
already, nothing: the kernelizer's rule 4); reductions (sum/max/min/mean over random axes, keepdim); matmul; integer
indexing (a list index on an axis, gather); elementwise unary/binary ops; casts and comparisons. Every op is
first run on PyTorch: an op that PyTorch rejects for the current shapes is not added, so a generated program is
valid by PyTorch's rules and any Tensorscope exception is a finding.

`minimize(program, devices)` drops ops and shrinks input dims while the failure keeps its kind, and
`reproducer(program, ...)` prints the result as a pytest function.
"""
import math
import re

import numpy as np
import torch
import torch.nn.functional as F

DTYPES = ["float32", "float32", "float32", "int32", "bool", "float16"]
MAX_NUMEL = 256
TOL = {  # forward (atol, rtol), gradient (atol, rtol)
    "float32": ((1e-4, 1e-3), (1e-3, 1e-3)),
    "int32": ((0, 0), None),
    "bool": ((0, 0), None),
    "float16": ((2e-2, 2e-2), None),  # float16 rounds after every op; the reference rounds only the inputs
}


# ---------------------------------------------------------------------------------------------------------
# inputs

def make_inputs(program):
    """The input arrays of a program: values from its seed; float in [-2, 2], int32 in [-4, 4], bool 50/50."""
    rng = np.random.default_rng(program["seed"])
    dt = program["dtype"]
    out = []
    for shape in program["inputs"]:
        shape = tuple(shape)
        if dt == "int32":
            out.append(rng.integers(-4, 5, size=shape).astype(np.int32))
        elif dt == "bool":
            out.append(rng.random(size=shape) < 0.5)
        else:
            out.append(rng.uniform(-2, 2, size=shape).astype(np.float32).astype(np.dtype(dt)))
    return out


def _torch_inputs(program, arrays, requires_grad=False):
    if program["dtype"] == "float16":  # the reference: float32 on the exactly widened float16 values
        return [torch.tensor(v.astype(np.float32)) for v in arrays]
    return [torch.from_numpy(np.array(v)).requires_grad_(requires_grad) for v in arrays]


def torch_eval(program, arrays=None, requires_grad=False):
    """Runs the PyTorch side; returns (inputs, output). Raises whatever PyTorch raises."""
    arrays = make_inputs(program) if arrays is None else arrays
    a = _torch_inputs(program, arrays, requires_grad)
    x = a[0]
    env = {"a": a, "torch": torch, "F": F}
    for _, tcode in program["ops"]:
        env["x"] = x
        # torch 1.13 multiplies bool matrices only when empty (and an empty int32 @ bool gives bool): either
        # operand bool is outside what PyTorch (and the API) define
        if " @ " in tcode and (x.dtype == torch.bool or any(a[int(i)].dtype == torch.bool for i in re.findall(r"a\[(\d+)\]", tcode))):
            raise TypeError("bool matmul is outside what PyTorch (and the API) define")
        x = eval(tcode, env)  # noqa: S307 (programs are generated here)
    return a, x


def ts_eval(program, dev, arrays=None, requires_grad=False):
    from tensorscope import Tensor, dtypes
    arrays = make_inputs(program) if arrays is None else arrays
    a = [Tensor(v, device=dev, requires_grad=requires_grad) for v in arrays]
    x = a[0]
    env = {"a": a, "Tensor": Tensor, "dtypes": dtypes,  # I(list): an int32 index tensor on the device
           "I": lambda v: Tensor(np.array(v, dtype=np.int32), device=dev)}
    for scode, _ in program["ops"]:
        env["x"] = x
        x = eval(scode, env)  # noqa: S307
    return a, x


class Mismatch(AssertionError):
    def __init__(self, kind, msg):
        super().__init__(f"{kind}: {msg}")
        self.kind = kind


class TorchRejects(Exception):
    """PyTorch itself raises on the program (forward or backward): not a valid program."""


def torch_reference(program, arrays=None):
    """PyTorch's output and, for float32 programs with a float output, the input gradients of (out * w).sum()
    (None for inputs without a path). Raises TorchRejects."""
    arrays = make_inputs(program) if arrays is None else arrays
    want_grad = program["dtype"] == "float32"
    try:
        t_in, t_out = torch_eval(program, arrays, requires_grad=want_grad)
        grads, w = None, None
        if want_grad and t_out.dtype == torch.float32 and t_out.requires_grad:
            w = np.random.default_rng(program["seed"] + 1).uniform(-1, 1, size=tuple(t_out.shape)).astype(np.float32)
            (t_out * torch.tensor(w)).sum().backward()
            grads = [t.grad for t in t_in]
    except Exception as e:  # noqa: BLE001
        raise TorchRejects(f"{type(e).__name__}: {e}") from None
    return t_out.detach(), grads, w


def run_program(program, dev):
    """Runs `program` on Tensorscope device `dev` and on PyTorch and compares. Raises Mismatch (kind "shape",
    "dtype", "forward", "grad") or whatever exception Tensorscope raises; returns normally when they agree."""
    arrays = make_inputs(program)
    dt = program["dtype"]
    t_out, t_grads, w = torch_reference(program, arrays)
    s_in, s_out = ts_eval(program, dev, arrays, requires_grad=dt == "float32")
    if tuple(s_out.shape) != tuple(t_out.shape):
        raise Mismatch("shape", f"shape {tuple(s_out.shape)}, torch gives {tuple(t_out.shape)}")
    got = s_out.numpy()
    expected = t_out.detach().numpy()
    if got.shape != expected.shape:
        raise Mismatch("shape", f".numpy() shape {got.shape}, torch gives {expected.shape}")
    if dt == "float16" and expected.dtype == np.float32:
        expected_kind, expected_dtype = "f", np.float16
    else:
        expected_kind, expected_dtype = expected.dtype.kind, expected.dtype
    if got.dtype.kind != expected_kind or (expected_kind in "fb" and got.dtype != expected_dtype):
        raise Mismatch("dtype", f"dtype {got.dtype}, torch gives {expected_dtype}")
    (atol, rtol), gtol = TOL[dt]
    if dt in ("int32", "bool") and expected_kind == "f":  # an int/bool program with a float result (x / y, .float())
        atol, rtol = TOL["float32"][0]
    if expected_kind == "b" or expected_kind in "iu":
        ok = np.array_equal(got.astype(np.int64), expected.astype(np.int64))
        if not ok:
            raise Mismatch("forward", f"values differ\n got {got!r}\n torch {expected!r}")
    else:
        try:
            np.testing.assert_allclose(got.astype(np.float32), expected.astype(np.float32), atol=atol, rtol=rtol)
        except AssertionError as e:
            raise Mismatch("forward", str(e)) from None
    if t_grads is None:
        return
    from tensorscope import Tensor
    (s_out * Tensor(w, device=dev)).sum().backward()
    for i, (t, s, a) in enumerate(zip(t_grads, s_in, arrays)):
        tg = t if t is not None else torch.zeros(a.shape)
        if s.grad is None:
            if tg.any():
                raise Mismatch("grad", f"input {i} got no gradient")
            continue
        if tuple(s.grad.shape) != a.shape:
            raise Mismatch("grad", f"gradient of input {i} has shape {s.grad.shape}, want {a.shape}")
        try:
            np.testing.assert_allclose(s.grad.numpy(), tg.numpy(), atol=gtol[0], rtol=gtol[1])
        except AssertionError as e:
            raise Mismatch("grad", f"gradient of input {i}: {e}") from None


def failure_kind(program, devices):
    """None if the program agrees with PyTorch on every device; else a short signature of the first failure
    ("C:forward", "INTERP:exception:IndexError", ...). A program PyTorch itself rejects is "invalid"."""
    try:
        torch_reference(program)
    except TorchRejects:
        return "invalid"
    for dev in devices:
        try:
            run_program(program, dev)
        except Mismatch as e:
            return f"{dev}:{e.kind}"
        except Exception as e:  # noqa: BLE001
            return f"{dev}:exception:{type(e).__name__}"
    return None


def failure_message(program, devices):
    for dev in devices:
        try:
            run_program(program, dev)
        except Exception as e:  # noqa: BLE001
            return f"{dev}: {type(e).__name__}: {str(e)[:600]}"
    return ""


# ---------------------------------------------------------------------------------------------------------
# generation

def _t(v):
    return repr(tuple(v))


def _rand_shape(rng, nd):
    sizes = [0, 1, 1, 2, 2, 3, 3, 4, 5]
    shape = [int(rng.choice(sizes)) for _ in range(nd)]
    while math.prod(shape) > MAX_NUMEL:
        shape[int(rng.integers(nd))] //= 2
    # size-0 programs are a minority: most programs should carry values through their ops
    if 0 in shape and rng.random() < 0.7:
        shape = [s if s else 2 for s in shape]
    return shape


def _broadcast_partner(rng, shape):
    """A shape that broadcasts with `shape`: a suffix of it with some dims set to 1, sometimes with new leading
    dims, sometimes `shape` itself with its 1-dims grown (two-sided broadcasting)."""
    nd = len(shape)
    keep = int(rng.integers(0, nd + 1))
    partner = list(shape[nd - keep:])
    partner = [1 if rng.random() < 0.3 else s for s in partner]
    if rng.random() < 0.3:
        partner = [s if s != 1 or rng.random() < 0.5 else int(rng.integers(2, 4)) for s in partner]
        if keep < nd:
            partner = list(shape[:nd - keep]) + partner
    if rng.random() < 0.2 and len(partner) < 5:
        partner = [int(rng.integers(1, 3))] + partner
    return partner


def _axes(rng, nd):
    if nd == 0 or rng.random() < 0.2:
        return None
    k = int(rng.integers(1, nd + 1))
    axes = sorted(int(v) for v in rng.choice(nd, size=k, replace=False))
    return tuple(a - nd if rng.random() < 0.3 else a for a in axes)


UNARY_FLOAT = [("x.neg()", "x.neg()"), ("x.abs()", "x.abs()"), ("x.sin()", "x.sin()"), ("x.cos()", "x.cos()"),
               ("x.tanh()", "x.tanh()"), ("x.sigmoid()", "x.sigmoid()"), ("x.relu()", "x.relu()"),
               ("x.square()", "x.square()"), ("x.tanh().exp()", "x.tanh().exp()"),
               ("(x.abs() + 0.25).sqrt()", "(x.abs() + 0.25).sqrt()"), ("(x.abs() + 1).log()", "(x.abs() + 1).log()"),
               ("x.floor()", "x.floor()"), ("x.ceil()", "x.ceil()"), ("x.trunc()", "x.trunc()"),
               ("x.round()", "x.round()"), ("x.clip(-1, 0.5)", "x.clip(-1, 0.5)"), ("x * 1.5 - 0.5", "x * 1.5 - 0.5"),
               ("2 - x", "2 - x"), ("x ** 2", "x ** 2"), ("x.sign()", "x.sign()"),
               ("x.softmax(-1)", "x.softmax(-1)"), ("x.erf()", "x.erf()"), ("x.gelu()", "F.gelu(x, approximate='tanh')")]
UNARY_INT = [("x.neg()", "x.neg()"), ("x.abs()", "x.abs()"), ("x * 3 - 1", "x * 3 - 1"), ("x.relu()", "x.relu()"),
             ("x.maximum(1)", "x.clamp(min=1)")]
UNARY_BOOL = [("x.logical_not()", "x.logical_not()")]
BINARY_FLOAT = [("x + {y}", "x + {y}"), ("x - {y}", "x - {y}"), ("x * {y}", "x * {y}"),
                ("x / ({y}.abs() + 0.5)", "x / ({y}.abs() + 0.5)"), ("x.maximum({y})", "x.maximum({y})"),
                ("x.minimum({y})", "x.minimum({y})"), ("(x > {y}).where(x, {y})", "torch.where(x > {y}, x, {y})"),
                ("x < {y}", "x < {y}"), ("x == {y}", "x == {y}")]
BINARY_INT = [("x + {y}", "x + {y}"), ("x - {y}", "x - {y}"), ("x * {y}", "x * {y}"),
              ("x.maximum({y})", "x.maximum({y})"), ("x.minimum({y})", "x.minimum({y})"), ("x <= {y}", "x <= {y}"),
              ("x != {y}", "x != {y}")]
BINARY_BOOL = [("x == {y}", "x == {y}"), ("x != {y}", "x != {y}")]


def _elementwise(rng, kind, shape, n_inputs):
    if rng.random() < 0.5:
        table = {"f": UNARY_FLOAT, "i": UNARY_INT, "b": UNARY_BOOL}[kind]
        return list(table[int(rng.integers(len(table)))]), None
    table = {"f": BINARY_FLOAT, "i": BINARY_INT, "b": BINARY_BOOL}[kind]
    s, t = table[int(rng.integers(len(table)))]
    partner = _broadcast_partner(rng, shape)
    y = f"a[{n_inputs}]"
    return [s.format(y=y), t.format(y=y)], partner


def _movement(rng, shape):
    nd, numel = len(shape), math.prod(shape)
    choice = rng.choice(["reshape", "permute", "expand", "pad", "shrink", "slice", "flip", "squeeze", "unsqueeze",
                         "transpose", "flatten", "contiguous", "clone"])
    if choice in ("contiguous", "clone"):  # a copy, or none where the value is in memory already (rule 4)
        return [f"x.{choice}()", f"x.{choice}()"]
    if choice == "reshape":
        if numel == 0:
            new = _rand_shape(rng, int(rng.integers(1, 4)))
            new[int(rng.integers(len(new)))] = 0
        else:
            new, rest = [], numel
            for _ in range(int(rng.integers(0, 4))):
                divs = [d for d in range(1, rest + 1) if rest % d == 0]
                d = int(rng.choice(divs))
                new.append(d)
                rest //= d
            new.append(rest)
            rng.shuffle(new)
            if rng.random() < 0.5:
                new[int(rng.integers(len(new)))] = -1
        return [f"x.reshape({_t(new)})", f"x.reshape({_t(new)})"]
    if choice == "permute" and nd:
        order = [int(v) for v in rng.permutation(nd)]
        return [f"x.permute({_t(order)})", f"x.permute({_t(order)})"]
    if choice == "expand":
        new = [int(rng.integers(2, 4)) if s == 1 and rng.random() < 0.7 else s for s in shape]
        if nd < 5 and rng.random() < 0.4:
            new = [int(rng.integers(1, 3))] + new
        if math.prod(new) > MAX_NUMEL * 2:
            return None
        return [f"x.expand({_t(new)})", f"x.expand({_t(new)})"]
    if choice == "pad" and nd:
        pads = []
        for s in shape:
            lo, hi = int(rng.integers(-1, 3)), int(rng.integers(-1, 3))
            if lo + hi + s < 0 or s == 0:
                lo, hi = max(lo, 0), max(hi, 0)
            pads.append((lo, hi))
        flat = tuple(v for p in reversed(pads) for v in p)
        value = float(rng.choice([0.0, 1.5]))
        if rng.random() < 0.5:
            return [f"x.pad({_t(pads)}, value={value})", f"F.pad(x, {flat}, value={value})"]
        return [f"x.pad({flat}, value={value})", f"F.pad(x, {flat}, value={value})"]
    if choice == "shrink" and nd:
        arg, idx = [], []
        for s in shape:
            lo = int(rng.integers(0, s + 1))
            hi = int(rng.integers(lo, s + 1))
            arg.append((lo, hi))
            idx.append(f"{lo}:{hi}")
        return [f"x.shrink({_t(arg)})", f"x[{', '.join(idx)}]"]
    if choice == "slice" and nd:
        parts = []
        for s in shape[: int(rng.integers(1, nd + 1))]:
            r = rng.random()
            if r < 0.25:
                parts.append(":")
            elif r < 0.45 and s > 0:
                parts.append(str(int(rng.integers(-s, s))))
            else:
                lo, hi = int(rng.integers(-s - 1, s + 2)), int(rng.integers(-s - 1, s + 2))
                step = int(rng.choice([1, 1, 2, 3]))
                parts.append(f"{lo}:{hi}" + (f":{step}" if step > 1 else ""))
        if rng.random() < 0.2:
            parts.insert(int(rng.integers(0, len(parts) + 1)), "None")
        idx = ", ".join(parts)
        return [f"x[{idx}]", f"x[{idx}]"]
    if choice == "flip" and nd:
        axes = _axes(rng, nd) or (0,)
        return [f"x.flip({axes})", f"x.flip({axes})"]
    if choice == "squeeze":
        if nd and rng.random() < 0.7:
            d = int(rng.integers(-nd, nd))
            return [f"x.squeeze({d})", f"x.squeeze({d})"]
        return ["x.squeeze()", "x.squeeze()"]
    if choice == "unsqueeze" and nd < 5:
        d = int(rng.integers(-nd - 1, nd + 1))
        return [f"x.unsqueeze({d})", f"x.unsqueeze({d})"]
    if choice == "transpose" and nd >= 2:
        d0, d1 = (int(v) for v in rng.choice(nd, 2, replace=False))
        return [f"x.transpose({d0}, {d1})", f"x.transpose({d0}, {d1})"]
    if choice == "flatten" and nd:
        s = int(rng.integers(0, nd))
        e = int(rng.integers(s, nd))
        return [f"x.flatten({s}, {e})", f"x.flatten({s}, {e})"]
    return None


def _reduction(rng, kind, shape):
    nd = len(shape)
    axes = _axes(rng, nd)
    keep = bool(rng.random() < 0.4)
    op = str(rng.choice(["sum", "max", "min", "mean"] if kind == "f" else ["sum", "max", "min"]))
    if kind == "b":
        op = str(rng.choice(["any", "all"]))
    t_op = {"max": "amax", "min": "amin"}.get(op, op)
    if axes is None:
        if op in ("any", "all"):
            return [f"x.{op}()", f"x.{op}()"]
        return [f"x.{op}()", f"x.{t_op}()"] if not keep else [f"x.{op}(keepdim=True)", f"x.{t_op}(dim={_t(range(nd))}, keepdim=True)"]
    if op in ("any", "all"):  # torch 1.13's any/all take one dim
        d = axes[0]
        return [f"x.{op}(axis={d}, keepdim={keep})", f"x.{op}(dim={d}, keepdim={keep})"]
    return [f"x.{op}(axis={axes}, keepdim={keep})", f"x.{t_op}(dim={axes}, keepdim={keep})"]


def _matmul(rng, shape, n_inputs):
    nd = len(shape)
    if nd == 0:
        return None, None
    k = shape[-1]
    n = int(rng.choice([0, 1, 2, 3, 4]))
    if nd == 1 or rng.random() < 0.5:
        partner = [k, n] if rng.random() < 0.8 else [k]
    else:
        partner = list(shape[:-2])[-int(rng.integers(0, nd - 1)):] if nd > 2 and rng.random() < 0.5 else []
        partner = partner + [k, n]
    y = f"a[{n_inputs}]"
    return [f"x @ {y}", f"x @ {y}"], partner


def _indexing(rng, shape):
    nd = len(shape)
    if nd == 0 or 0 in shape:
        return None
    if rng.random() < 0.5:
        d = int(rng.integers(0, nd))
        idx = [int(rng.integers(-shape[d], shape[d])) for _ in range(int(rng.integers(1, 5)))]
        pre = ", ".join([":"] * d + ["IDX"])
        s_idx = pre.replace("IDX", f"I({idx})" if rng.random() < 0.5 else str(idx))
        t_idx = pre.replace("IDX", f"torch.tensor({idx})")
        return [f"x[{s_idx}]", f"x[{t_idx}]"]
    d = int(rng.integers(-nd, nd))
    ishape = [int(rng.integers(1, s + 1)) for s in shape]
    ishape[d] = int(rng.integers(1, 4))
    vals = np.random.default_rng(int(rng.integers(1 << 30))).integers(0, shape[d], size=ishape).tolist()
    return [f"x.gather({d}, I({vals}))",
            f"x.gather({d}, torch.tensor({vals}))"]


def _cat(rng, shape, n_inputs):
    nd = len(shape)
    if nd == 0:
        return None, None
    d = int(rng.integers(-nd, nd))
    partner = list(shape)
    partner[d] = int(rng.integers(0, 3))
    y = f"a[{n_inputs}]"
    return [f"x.cat({y}, dim={d})", f"torch.cat([x, {y}], {d})"], partner


def _cast(rng, kind):
    if kind == "f":
        return ["(x * 2).int()", "(x * 2).int()"] if rng.random() < 0.5 else ["x > 0", "x > 0"]
    if kind == "i":
        return ["x.float()", "x.float()"]
    return ["x.int()", "x.int()"]


def _kind(t):
    if t.dtype == torch.bool:
        return "b"
    return "f" if t.is_floating_point() else "i"


def generate(seed, max_ops=6):
    """A random program that PyTorch accepts (see the module docstring)."""
    rng = np.random.default_rng(seed)
    dtype = str(rng.choice(DTYPES))
    program = {"dtype": dtype, "seed": int(seed), "inputs": [_rand_shape(rng, int(rng.integers(0, 6)))], "ops": []}
    n_ops = int(rng.integers(1, max_ops + 1))
    tries = 0
    while len(program["ops"]) < n_ops and tries < 60:
        tries += 1
        _, x = torch_eval(program)
        shape, kind = list(x.shape), _kind(x)
        r = rng.random()
        partner = None
        if r < 0.3:
            op, partner = _elementwise(rng, kind, shape, len(program["inputs"]))
        elif r < 0.6:
            op = _movement(rng, shape)
        elif r < 0.75:
            op = _reduction(rng, kind, shape)
        elif r < 0.82 and kind != "b":
            op, partner = _matmul(rng, shape, len(program["inputs"]))
        elif r < 0.9:
            op = _indexing(rng, shape)
        elif r < 0.95:
            op, partner = _cat(rng, shape, len(program["inputs"]))
        else:
            op = _cast(rng, kind) if dtype != "float16" else None
        if op is None:
            continue
        candidate = {**program, "inputs": program["inputs"] + ([partner] if partner is not None else []),
                     "ops": program["ops"] + [op]}
        try:
            y, _, _ = torch_reference(candidate)
            if y.numel() > MAX_NUMEL * 4:
                continue
            if dtype == "float16" and _kind(y) == "i":
                continue
        except TorchRejects:  # not a valid program
            continue
        program = candidate
    return program


# ---------------------------------------------------------------------------------------------------------
# minimization and reproducers

def _renumber(program):
    """Drops inputs no op refers to (input 0 always stays) and renumbers the rest."""
    used = {0}
    for s, t in program["ops"]:
        used |= {int(m) for m in re.findall(r"a\[(\d+)\]", s + t)}
    order = sorted(used)
    remap = {old: new for new, old in enumerate(order)}
    ops = [[re.sub(r"a\[(\d+)\]", lambda m: f"a[{remap[int(m.group(1))]}]", c) for c in op] for op in program["ops"]]
    return {**program, "inputs": [program["inputs"][i] for i in order], "ops": ops}


def minimize(program, devices, kind=None, budget=300):
    """Greedy: drop ops, then shrink input dims (to 1, halve, minus 1), then drop dims, while failure_kind stays
    `kind`. At most `budget` candidate runs."""
    kind = kind or failure_kind(program, devices)
    runs = 0

    def still_fails(p):
        nonlocal runs
        runs += 1
        return failure_kind(p, devices) == kind

    changed = True
    while changed and runs < budget:
        changed = False
        for i in range(len(program["ops"])):
            if i >= len(program["ops"]):
                break
            cand = _renumber({**program, "ops": program["ops"][:i] + program["ops"][i + 1:]})
            if cand["ops"] and still_fails(cand):
                program, changed = cand, True
        for k in range(len(program["inputs"])):
            for d in range(len(program["inputs"][k])):
                size = program["inputs"][k][d]
                for new in sorted({1, size // 2, size - 1}):
                    if not 0 <= new < size or runs >= budget:
                        continue
                    inputs = [list(s) for s in program["inputs"]]
                    inputs[k][d] = new
                    cand = {**program, "inputs": inputs}
                    if still_fails(cand):
                        program, changed = cand, True
                        break
        for k in range(len(program["inputs"])):
            for d in range(len(program["inputs"][k])):
                if d >= len(program["inputs"][k]) or runs >= budget:
                    continue
                inputs = [list(s) for s in program["inputs"]]
                del inputs[k][d]
                cand = {**program, "inputs": inputs}
                if still_fails(cand):
                    program, changed = cand, True
        if program["seed"] != 0 and runs < budget:
            cand = {**program, "seed": 0}
            if still_fails(cand):
                program, changed = cand, True
    return program


def reproducer(program, name, message=""):
    """A pytest function (source text) that runs `program` on every fuzzed device."""
    lines = [f"def test_{name}(dev):"]
    lines.append('    """Found by scripts/fuzz_ops.py' + (f": {' '.join(message.split())[:150]}" if message else "") + '."""')
    lines.append(f"    program = {{\"dtype\": {program['dtype']!r}, \"seed\": {program['seed']}, "
                 f"\"inputs\": {program['inputs']!r}, \"ops\": [")
    for s, t in program["ops"]:
        lines.append(f"        [{s!r}, {t!r}],")
    lines.append("    ]}")
    lines.append("    run_program(program, dev)")
    return "\n".join(lines)
