# Issue 13: the split_index_set pass (engine/src/opt/split_index_set.cpp). A concatenation — forward, or
# the gradient of a chunk / split, as in a transformer's qkv projection — reads each output element from
# one input chosen by comparing the loop index with constants. On C the innermost loop runs as one loop
# per range, and the simplify pass folds every comparison: the generated code has no masked loads left.
# Checked on the IR tensorscope-cli writes and against NumPy / PyTorch; TENSORSCOPE_DISABLE_PASSES turns
# the pass off to show the masked form it replaces.
import json
import os
import subprocess
import sys

import numpy as np
import torch

from tensorscope import Tensor
from test_conv_backward import run_cli_out


def _final_ir(tmp_path, body, env=None):
    """{kernel name: the IR after the last pass} of `body` run by tensorscope-cli."""
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n" + body)
    out = run_cli_out(script, tmp_path / ("out_masked" if env else "out"), env=env)
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    return {k["name"]: (out / k["ir"]).read_text().split("\n\n")[0] for k in kernels}


def _loops(ir, kind):
    return [line for line in ir.splitlines() if "RANGE.int32" in line and f"; {kind}" in line and "END" not in line]


def _gated_loads(ir):
    """LOADs with a third operand (the gate: a masked load that reads 0 where the gate is false)."""
    return [line for line in ir.splitlines() if "= LOAD." in line and line.count(",") == 2]


CAT = ("a = Tensor(rng.standard_normal((4, 6, 32)).astype(np.float32)).realize()\n"
       "b = Tensor(rng.standard_normal((4, 6, 16)).astype(np.float32)).realize()\n"
       "c = Tensor(rng.standard_normal((4, 6, 48)).astype(np.float32)).realize()\n"
       "a.cat(b, c, dim=-1).realize()\n")


def test_a_concatenation_runs_one_loop_per_input_without_masks(tmp_path):
    ir = _final_ir(tmp_path, CAT)["E_4_6_96"]
    # the 24 rows, and in each row three loops one after another: 32 + 16 + 48 columns
    assert len(_loops(ir, "global")) == 1 and len(_loops(ir, "reduce")) == 3, ir
    assert not _gated_loads(ir), ir
    assert "CMPLT" not in ir and "MAX" not in ir, ir  # the comparisons and the address clamps folded away
    masked = _final_ir(tmp_path, CAT, env={"TENSORSCOPE_DISABLE_PASSES": "split_index_set"})["E_4_6_96"]
    assert len(_loops(masked, "global")) == 2 and len(_gated_loads(masked)) == 3, masked


def test_concatenations_match_numpy():
    rng = np.random.default_rng(1)
    for shapes, dim in [([(4, 6, 32), (4, 6, 16), (4, 6, 48)], -1), ([(3, 5, 7), (3, 5, 1), (3, 5, 2)], 2),
                        ([(2, 3, 4), (2, 5, 4)], 1), ([(17, 9), (17, 1)], 1), ([(7,), (9,)], 0)]:
        arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
        got = Tensor(arrays[0]).cat(*[Tensor(a) for a in arrays[1:]], dim=dim).numpy()
        np.testing.assert_array_equal(got, np.concatenate(arrays, axis=dim))


def test_padding_on_the_inner_axis_matches_numpy():
    # a pad on the last axis compares the loop index with constants on both sides: three ranges
    x = np.random.default_rng(2).standard_normal((5, 3, 10)).astype(np.float32)
    got = Tensor(x).pad((3, 4)).numpy()
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (3, 4))))
    got = (Tensor(x).pad((2, 1)) * 2 + 1).numpy()
    np.testing.assert_array_equal(got, np.pad(x, ((0, 0), (0, 0), (2, 1))) * 2 + 1)


def test_the_gradient_of_a_chunk_matches_pytorch():
    # the transformer's qkv split: q, k, v of (B, S, 32) each, reshaped to heads; their gradients are
    # concatenated back into the (B, S, 96) gradient
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 12, 96)).astype(np.float32)
    g = [rng.standard_normal((8, 4, 12, 8)).astype(np.float32) for _ in range(3)]
    tx = Tensor(x, requires_grad=True)
    parts = [t.reshape(8, 12, 4, 8).transpose(1, 2) for t in tx.chunk(3, dim=-1)]
    sum((p * Tensor(gi)).sum() for p, gi in zip(parts, g)).backward()
    px = torch.tensor(x, requires_grad=True)
    pparts = [t.reshape(8, 12, 4, 8).transpose(1, 2) for t in px.chunk(3, dim=-1)]
    sum((p * torch.tensor(gi)).sum() for p, gi in zip(pparts, g)).backward()
    np.testing.assert_allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-6, atol=1e-6)


def test_the_interpreter_agrees_with_and_without_the_pass():
    # the same concatenation on INTERP, where the pass also runs (no workgroups), and on C without it
    code = ("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(4)\n"
            "a, b = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((6, 11)).astype(np.float32)\n"
            "dev = __import__('sys').argv[1]\n"
            "out = Tensor(a, device=dev).cat(Tensor(b, device=dev), dim=1).relu().numpy()\n"
            "assert np.array_equal(out, np.maximum(np.concatenate([a, b], 1), 0)), out\n")
    for dev, env in [("INTERP", {}), ("C", {"TENSORSCOPE_DISABLE_PASSES": "split_index_set"})]:
        r = subprocess.run([sys.executable, "-c", code, dev], env={**os.environ, **env}, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
