# The kernelizer's cost model, as a user sees it in kernels.json (`tensorscope-cli run SCRIPT --out DIR`):
# every value that would be computed more than once if fused is listed under the kernel that stores or
# recomputes it, with the numbers the decision was made on (issue 13: "the cost model's decisions listed
# with reasons in kernels.json"). Rule 3 of engine/src/schedule/schedule.h: a value read r times is stored
# when (r - 1) x its FLOPs exceed 4/3 FLOP per byte of storing it (one write, r reads).
import json
import os
import subprocess
import textwrap

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("TS_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "bin", "tensorscope-cli")

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"{CLI} is not built")


def kernels_of(tmp_path, body):
    script = tmp_path / "script.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\n"
                      "x = Tensor(np.linspace(0, 1, 64 * 32, dtype=np.float32).reshape(64, 32))\n" + textwrap.dedent(body))
    out = tmp_path / "out"
    env = dict(os.environ)
    env.pop("DEBUG", None)
    r = subprocess.run([CLI, "run", str(script), "--out", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads((out / "kernels.json").read_text())["kernels"]


def chain(ops_pairs):
    """A value of 2 * ops_pairs ALU ops per element (MUL and ADD per pair)."""
    return f"a = x\nfor _ in range({ops_pairs}): a = a * 1.5 + 0.25\n"


@pytest.mark.parametrize("pairs, stored", [(4, False), (8, False), (9, True), (12, True)])
def test_a_value_read_twice_is_stored_when_recomputing_costs_more_than_storing(tmp_path, pairs, stored):
    kernels = kernels_of(tmp_path, chain(pairs) + "Tensor.realize(a.sum(axis=1), a * 3)\n")
    # stored: one kernel computes `a`, the sum and the product read it; recomputed: two kernels
    assert len(kernels) == (3 if stored else 2), [k["name"] for k in kernels]
    decisions = [d for k in kernels for d in k["fusion_decisions"] if d["op"] == "ADD" and d["evaluations"] == 2]
    numel, ops = 64 * 32, 2 * pairs
    # one decision when stored (the storing kernel), one per recomputing kernel otherwise
    assert len(decisions) == (1 if stored else 2), decisions
    for d in decisions:
        assert d["decision"] == ("stored" if stored else "recomputed")
        assert d["flops"] == numel * ops
        assert d["recompute_flops"] == numel * ops  # read twice: computed once more
        assert d["store_bytes"] == numel * 4 * 3  # one write, two reads of float32
        assert (d["recompute_flops"] > 4 / 3 * d["store_bytes"]) == stored
    text = decisions[0]["reason"]
    if stored:
        assert f"read 2 times and has {ops} ALU ops" in text and "kFLOP more" in text and "kB" in text, text
        assert kernels[0]["fusion_decisions"] == decisions, "the decision is listed under the kernel that stores it"
    else:
        assert text.startswith("recomputed by each reader"), text


def test_a_reduction_read_by_two_kernels_is_stored_with_its_cost(tmp_path):
    kernels = kernels_of(tmp_path, "s = x.sum(axis=0)\nTensor.realize(s * x, s.exp())\n")
    stored = [d for k in kernels for d in k["fusion_decisions"] if d["op"] == "SUM"]
    assert len(stored) == 1 and stored[0]["decision"] == "stored", stored
    assert stored[0]["flops"] == 64 * 32  # one add per input element
    assert "reduce output is expanded" in stored[0]["reason"], stored[0]["reason"]


def test_softmax_lists_its_recomputed_values_in_its_one_kernel(tmp_path):
    kernels = kernels_of(tmp_path, "x.softmax(-1).realize()\n")
    assert len(kernels) == 1
    decisions = kernels[0]["fusion_decisions"]
    assert decisions and all(d["decision"] == "recomputed" for d in decisions), decisions
    assert any("readers meet in one kernel" in d["reason"] for d in decisions), decisions


def test_a_plain_elementwise_kernel_has_no_decisions(tmp_path):
    kernels = kernels_of(tmp_path, "(x * 2 + 1).realize()\n")
    assert len(kernels) == 1 and kernels[0]["fusion_decisions"] == []
