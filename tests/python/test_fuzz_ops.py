"""Differential fuzzing against PyTorch (issue 16): a fixed-seed batch of random tensor programs, and the
minimized reproducers of everything scripts/fuzz_ops.py has found.

The programs (tests/python/fuzz_programs.py) chain up to 6 random ops on inputs of 0 to 5 dims with size-0 and
size-1 dims: broadcasting binary ops, movement ops, reductions, matmul, integer indexing, unary ops, casts; dtypes
float32 (with the gradients of every input), int32, bool and float16. PyTorch (float32 CPU) is the reference;
every program is valid by PyTorch's rules, so a Tensorscope exception is a failure too. Fixed seeds: the batch is
the same on every run, so a failure here is reproducible with
`scripts/fuzz_ops.py --programs 1 --seed SEED --devices DEV`.

The batch size (BATCH = 30 programs, each on C and INTERP) keeps this file near 60 s on the project's 2-core
machine with a cold kernel cache (measured: 54 s for the batch, next to another test run; the C device compiles
each new kernel with the system compiler, INTERP needs no compile; with a warm cache it is a few seconds).
Longer runs are the script's job (`--seconds N`).
"""
import numpy as np  # noqa: F401  (reproducers may use it)
import pytest

from fuzz_programs import failure_kind, failure_message, generate, run_program
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


@devices
def test_fuzz_seed_200283(dev):
    """Found by scripts/fuzz_ops.py: the gradient flowed back through a float -> int32 cast (input 0 got a
    gradient where torch gives none, since .int() is not differentiable). Fixed: casts to int32/bool detach."""
    program = {"dtype": 'float32', "seed": 0, "inputs": [[], [], [1, 2]], "ops": [
        ['(x * 2).int()', '(x * 2).int()'],
        ['x * a[1]', 'x * a[1]'],
        ['x.reshape((1, 1, 1))', 'x.reshape((1, 1, 1))'],
        ['x @ a[2]', 'x @ a[2]'],
    ]}
    run_program(program, dev)


@devices
@pytest.mark.parametrize("cast", ["x.int()", "(x > 0)", "x.cast(dtypes.int32)"])
def test_int_and_bool_casts_carry_no_gradient(cast, dev):
    """The finding above, directly: the cast's output does not require grad, and a float computed from it gives
    the float input no gradient (torch: None)."""
    from tensorscope import Tensor, dtypes
    x = Tensor(np.array([0.7, -1.2], dtype=np.float32), requires_grad=True, device=dev)
    y = Tensor(np.array([1.5, 2.0], dtype=np.float32), requires_grad=True, device=dev)
    c = eval(cast, {"x": x, "dtypes": dtypes})
    assert not c.requires_grad
    (c.float() * y).sum().backward()
    assert x.grad is None or not x.grad.numpy().any()
    np.testing.assert_array_equal(y.grad.numpy(), c.float().numpy())


@devices
def test_fuzz_seed_200536(dev):
    """Found by scripts/fuzz_ops.py: the same gradient-through-.int() bug as seed 200283, through cat."""
    program = {"dtype": 'float32', "seed": 200536, "inputs": [[1], [0], [1, 4]], "ops": [
        ['(x * 2).int()', '(x * 2).int()'],
        ['x.cat(a[1], dim=-1)', 'torch.cat([x, a[1]], -1)'],
        ['x @ a[2]', 'x @ a[2]'],
    ]}
    run_program(program, dev)


@devices
def test_fuzz_seed_200609(dev):
    """Found by scripts/fuzz_ops.py, a fuzzer bug, not an engine one: an int32 program with a float result was
    compared exactly (1 float32 ulp apart); float results now get float32 tolerances whatever the input dtype."""
    program = {"dtype": 'int32', "seed": 200609, "inputs": [[2], []], "ops": [
        ['x * 3 - 1', 'x * 3 - 1'],
        ['x / (a[1].abs() + 0.5)', 'x / (a[1].abs() + 0.5)'],
    ]}
    run_program(program, dev)


@devices
def test_fuzz_seed_200530(dev):
    """Found by scripts/fuzz_ops.py: an empty bool @ bool gave int32 where torch gives bool. Not an engine fix:
    torch 1.13 has no bool matmul ("addmm_impl_cpu_" not implemented for 'Bool') except for empty operands, and
    the API defines matmul on numbers, so the fuzzer no longer generates bool matmuls (the program is rejected
    as invalid, which this checks)."""
    program = {"dtype": 'bool', "seed": 0, "inputs": [[0, 0, 0, 1], [4]], "ops": [
        ['x[:, :, :, [0, 0, 0, -1]]', 'x[:, :, :, torch.tensor([0, 0, 0, -1])]'],
        ['x @ a[1]', 'x @ a[1]'],
    ]}
    assert failure_kind(program, [dev]) == "invalid"


@devices
def test_fuzz_seed_42201(dev):
    """Found by scripts/fuzz_ops.py: C gave a wrong gradient of x (3 of 30 elements 0): gcc 12.2 vectorized relu's
    backward, loaded through a mask, with one vector's mask for three (see test_regressions.py::
    test_masked_load_of_an_unrolled_nest); the C renderer now writes that WHERE as a bit mask."""
    program = {"dtype": 'float32', "seed": 0, "inputs": [[5, 2, 3, 1]], "ops": [
        ['x.relu()', 'x.relu()'],
        ['x.gather(2, I([[[[2], [0], [2]], [[2], [2], [2]]], [[[2], [0], [0]], [[2], [1], [2]]]]))',
         'x.gather(2, torch.tensor([[[[2], [0], [2]], [[2], [2], [2]]], [[[2], [0], [0]], [[2], [1], [2]]]]))'],
    ]}
    run_program(program, dev)
