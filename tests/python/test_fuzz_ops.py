"""Differential fuzzing against PyTorch (issue 16): a fixed-seed batch of random tensor programs, and the
minimized reproducers of everything scripts/fuzz_ops.py has found.

The programs (tests/python/fuzz_programs.py) chain up to 6 random ops on inputs of 0 to 5 dims with size-0 and
size-1 dims: broadcasting binary ops, movement ops, reductions, matmul, integer indexing, unary ops, casts; dtypes
float32 (with the gradients of every input), int32, bool and float16. PyTorch (float32 CPU) is the reference;
every program is valid by PyTorch's rules, so a Tensorscope exception is a failure too. Fixed seeds: the batch is
the same on every run, so a failure here is reproducible with
`scripts/fuzz_ops.py --programs 1 --seed SEED --devices DEV`.

The batch size (BATCH) keeps this file near 60 s on the project's 2-core machine with a cold kernel cache (the C
device compiles each new kernel with the system compiler; INTERP needs no compile); longer runs are the script's
job (`--seconds N`).
"""
import numpy as np  # noqa: F401  (reproducers may use it)
import pytest

from fuzz_programs import failure_message, generate, run_program
from ops_helper import DEVICES

FUZZ_DEVICES = [d for d in DEVICES if d in ("C", "INTERP")]
BATCH = 30
SEED0 = 20260000

devices = pytest.mark.parametrize("dev", FUZZ_DEVICES)


@devices
@pytest.mark.parametrize("seed", range(SEED0, SEED0 + BATCH))
def test_fuzz_batch(seed, dev):
    program = generate(seed)
    try:
        run_program(program, dev)
    except Exception as e:
        raise AssertionError(f"program {program} fails: {failure_message(program, [dev])}") from e


# ---- reproducers found by scripts/fuzz_ops.py, minimized ----------------------------------------------------


@devices
def test_fuzz_seed_100027(dev):
    """Found by scripts/fuzz_ops.py: softmax over a zero-size axis raised "max(): cannot reduce over a zero-size
    dimension of (1, 1, 0)"; torch returns the empty tensor (fixed: softmax/log_softmax of a zero-size axis)."""
    program = {"dtype": 'float32', "seed": 0, "inputs": [[]], "ops": [
        ['x.expand((1, 4, 1))', 'x.expand((1, 4, 1))'],
        ['x[-1, -2:3:2, None, -2:0:2]', 'x[-1, -2:3:2, None, -2:0:2]'],
        ['x.softmax(-1)', 'x.softmax(-1)'],
    ]}
    run_program(program, dev)


@devices
@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
def test_softmax_of_zero_size_axis(op, dev):
    """The minimized finding above, spelled out for both ops and with a gradient."""
    program = {"dtype": "float32", "seed": 0, "inputs": [[2, 0]], "ops": [[f"x.{op}(-1)", f"x.{op}(-1)"]]}
    run_program(program, dev)


@devices
def test_fuzz_seed_100120(dev):
    """Found by scripts/fuzz_ops.py: int32.minimum(bool) computed −max(−a, logical_not(b)) and gave −1 for
    min(1, False) (fixed: minimum widens its operands to their common dtype before negating)."""
    program = {"dtype": 'bool', "seed": 100120, "inputs": [[], []], "ops": [
        ['x.int()', 'x.int()'],
        ['x.minimum(a[1])', 'x.minimum(a[1])'],
    ]}
    run_program(program, dev)


@devices
def test_minimum_int_bool_all_pairs(dev):
    """The finding above over every (int, bool) pair, both operand orders."""
    program = {"dtype": "int32", "seed": 0, "inputs": [[2, 2]], "ops": [
        ["I([[0, 1], [0, 1]]).minimum(I([[0, 0], [1, 1]]) > 0) + (I([[0, 0], [1, 1]]) > 0).minimum(I([[0, 1], [0, 1]]))",
         "torch.tensor([[0, 1], [0, 1]], dtype=torch.int32).minimum(torch.tensor([[0, 0], [1, 1]]) > 0)"
         " + (torch.tensor([[0, 0], [1, 1]]) > 0).minimum(torch.tensor([[0, 1], [0, 1]], dtype=torch.int32))"],
    ]}
    run_program(program, dev)
