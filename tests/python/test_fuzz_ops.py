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
