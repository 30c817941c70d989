# Issue 13: the rows_as_lanes pass (engine/src/opt/rows_as_lanes.cpp). A reduction over short rows with a
# transcendental in its body — a softmax over 12 keys, a cross-entropy over 10 classes — computes 16 rows
# as the lanes of a loop (accumulators in a DEFINE_LOCAL array), which the C compiler vectorizes across
# rows. Checked on the IR tensorscope-cli writes (which kernels get it, which do not) and against PyTorch,
# on C and on INTERP (where the pass runs too), and with the pass turned off.
import json
import os
import subprocess
import sys

import numpy as np
import torch

from tensorscope import Tensor
from test_conv_backward import run_cli_out


def _final_ir(tmp_path, body, env=None):
    """{kernel name: [the IR after the last pass of each kernel of that name]} of `body` run by tensorscope-cli."""
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n" + body)
    out = run_cli_out(script, tmp_path / ("out_off" if env else "out"), env=env)
    found = {}
    for k in json.loads((out / "kernels.json").read_text())["kernels"]:
        found.setdefault(k["name"], []).append((out / k["ir"]).read_text().split("\n\n")[0])
    return found


def _has_lanes(ir):
    return "DEFINE_LOCAL" in ir and "; local" in ir


ATTENTION = ("def attend(seq):\n"
             "    q, k, v = (Tensor(rng.standard_normal((32, 4, seq, 8)).astype(np.float32), requires_grad=True)"
             " for _ in range(3))\n"
             "    q.scaled_dot_product_attention(k, v, is_causal=True).sum().backward()\n"
             "    Tensor.realize(q.grad, k.grad, v.grad)\n"
             "attend(12)\n"
             "attend(24)\n")


def test_the_softmax_of_attention_over_12_keys_computes_its_row_max_where_it_stores_the_exponentials(tmp_path):
    # Attention's P = softmax(S) is read by P @ V through a broadcast (8 output columns), so the value with
    # the EXP2 in it is stored (schedule.h, rule 3); the row max's expand is then row-local (schedule.cpp,
    # is_row_local_expand stops its walk at that stored value) and the max is computed per row in the kernel
    # that stores exp(S - max) (r_32_4_12_12_12), with no kernel of its own; the sum of the exponentials
    # reads them (no transcendental left in it, so no lanes), and the division is fused into P @ V. Before,
    # the row max, the sum (recomputing the EXP2, rows as lanes) and the division were three kernels; the
    # transformer's kernel time per step 1.00 -> 0.94 ms. Rows of 24 keep their max kernel: the max over
    # 24 is stored by the tiled-epilogue rule before the walk matters.
    # The backward's dS = P * (dP - sum(dP * P)) is one kernel too (r_32_4_12_12_12 with no EXP2): the row
    # sum's expand is row-local, since dS, read by the matmuls through broadcasts, is stored anyway.
    ir = _final_ir(tmp_path, ATTENTION)
    fused = [t for t in ir["r_32_4_12_12_12"] if "MAX" in t]
    assert len(fused) == 1 and "EXP2" in fused[0], ir["r_32_4_12_12_12"]
    backward = [t for t in ir["r_32_4_12_12_12"] if "MAX" not in t]
    assert len(backward) == 1 and "EXP2" not in backward[0], backward
    assert len(ir["r_32_4_12_12"]) == 1, ir["r_32_4_12_12"]  # the forward's sum alone: no sum for dS
    assert not any("MAX" in t for t in ir["r_32_4_12_12"]), ir["r_32_4_12_12"]  # no row max of its own
    assert not any("EXP2" in t or _has_lanes(t) for t in ir["r_32_4_12_12"])  # the sums read the stored exponentials
    assert [t for t in ir["r_32_4_24_24"] if "MAX" in t], sorted(ir)  # rows of 24: the max stored as before
    long_rows = [t for t in ir["r_32_4_24_24"] if "EXP2" in t]  # rows of 24 vectorize along the row
    assert long_rows and not any(_has_lanes(t) for t in long_rows), long_rows


def _attention_grads(device):
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((8, 4, 12, 8)).astype(np.float32) for _ in range(3))
    g = rng.standard_normal((8, 4, 12, 8)).astype(np.float32)
    tq, tk, tv = (Tensor(a, device=device, requires_grad=True) for a in (q, k, v))
    out = tq.scaled_dot_product_attention(tk, tv, is_causal=True)
    (out * Tensor(g, device=device)).sum().backward()
    pq, pk, pv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    s = (pq @ pk.transpose(-2, -1)) / np.sqrt(8)
    s = s.masked_fill(torch.ones(12, 12, dtype=torch.bool).triu(1), float("-inf"))
    pout = s.softmax(-1) @ pv
    (pout * torch.tensor(g)).sum().backward()
    np.testing.assert_allclose(out.numpy(), pout.detach().numpy(), rtol=1e-5, atol=1e-5)
    for t, p in ((tq, pq), (tk, pk), (tv, pv)):
        np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_causal_attention_forward_and_backward_match_pytorch_on_c():
    _attention_grads("C")


def test_causal_attention_forward_and_backward_match_pytorch_on_interp():
    _attention_grads("INTERP")


def test_short_row_reductions_match_pytorch():
    # rows of 2..15 with 8 or 16 lanes, a row count no lane width divides (left alone), the log of a sum
    # (logsumexp), a cross-entropy over 10 classes, and rows with -inf and NaN
    rng = np.random.default_rng(2)
    for shape in [(64, 12), (48, 10), (16, 15), (8, 2), (40, 7), (13, 12), (32, 3, 11)]:
        x = rng.standard_normal(shape).astype(np.float32) * 3
        np.testing.assert_allclose(Tensor(x).softmax(-1).numpy(), torch.tensor(x).softmax(-1).numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(Tensor(x).logsumexp(-1).numpy(), torch.tensor(x).logsumexp(-1).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(Tensor(x).sqrt().sum(-1).numpy(), torch.tensor(x).sqrt().sum(-1).numpy(), rtol=1e-5, atol=1e-5)
    logits = rng.standard_normal((128, 10)).astype(np.float32)
    labels = rng.integers(0, 10, 128).astype(np.int32)
    np.testing.assert_allclose(Tensor(logits).sparse_categorical_crossentropy(Tensor(labels)).numpy(),
                               torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(labels).long()).numpy(),
                               rtol=1e-5)
    x = rng.standard_normal((16, 12)).astype(np.float32)
    x[3, 5:] = -np.inf
    x[7, 2] = np.nan
    np.testing.assert_allclose(Tensor(x).softmax(-1).numpy(), torch.tensor(x).softmax(-1).numpy(), rtol=1e-5, atol=1e-6)


def test_the_pass_changes_no_result(tmp_path):
    # the same softmax gradient with the pass on and off (C): equal up to the order of a 12-term sum
    code = ("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(3)\n"
            "x = Tensor(rng.standard_normal((32, 4, 12, 12)).astype(np.float32), requires_grad=True)\n"
            "(x.softmax(-1) * Tensor(rng.standard_normal((32, 4, 12, 12)).astype(np.float32))).sum().backward()\n"
            "np.save(__import__('sys').argv[1], x.grad.numpy())\n")
    results = []
    for i, env in enumerate([{}, {"TENSORSCOPE_DISABLE_PASSES": "rows_as_lanes"}]):
        path = str(tmp_path / f"grad{i}.npy")
        r = subprocess.run([sys.executable, "-c", code, path], env={**os.environ, **env}, capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        results.append(np.load(path))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)


# A total over short rows (rows_as_lanes.cpp, total_lanes_in_local_memory): a kernel without global loops whose
# loop over the rows is itself a reduce loop: a cross-entropy's mean over the batch, each row selecting its
# target's log-probability out of 10 or 11 classes. One accumulator chained all rows x classes adds.
LOSS = ("def loss(rows, classes):\n"
        "    z = Tensor(rng.standard_normal((rows, classes)).astype(np.float32), requires_grad=True)\n"
        "    y = Tensor(rng.integers(0, classes, rows).astype(np.int32))\n"
        "    l = z.sparse_categorical_crossentropy(y)\n"
        "    l.backward()\n"
        "    Tensor.realize(l, z.grad)\n"
        "loss(256, 11)\n"
        "loss(100, 10)\n"
        # a total whose rows each take the log of a value of their own in front of their reduce loop
        "x, s = Tensor(rng.standard_normal((128, 11)).astype(np.float32)), Tensor(rng.random((128, 1)).astype(np.float32) + 1)\n"
        "(x * s.log()).sum(1).sum().realize()\n")


def _reduce_ranges(ir):
    return [i for i, line in enumerate(ir.splitlines()) if "RANGE" in line and line.rstrip().endswith("; reduce")]


def test_a_cross_entropys_mean_over_its_rows_takes_the_rows_as_lanes(tmp_path):
    ir = _final_ir(tmp_path, LOSS)
    [total] = ir["r_11_256"]  # the loss: mean over 256 rows of (x - logsumexp(x))[target]
    assert _has_lanes(total), total
    # each lane keeps its partial total in local memory, added up in a loop of 16 after the rows' loop
    assert total.count("DEFINE_LOCAL") == 2, total  # the partial totals, the rows' sums
    assert "LOG2" not in total, total  # the rows' logsumexp comes from their own kernel
    [odd] = ir["r_10_100"]  # 100 rows: neither 16 nor 8 lanes divide them
    assert not _has_lanes(odd), odd
    # a row's log in front of its reduce loop: once per row, not once per element of the row
    [logs] = ir["r_11_128"]
    assert _has_lanes(logs) and logs.count("DEFINE_LOCAL") == 3, logs  # partial totals, the rows' sums, their logs
    lines = logs.splitlines()
    [log] = [i for i, line in enumerate(lines) if "LOG2" in line]
    rows, classes = _reduce_ranges(logs)[:2]
    assert rows < log < classes, logs
    off = _final_ir(tmp_path, LOSS, env={"TENSORSCOPE_DISABLE_PASSES": "rows_as_lanes"})
    assert not any(_has_lanes(t) for t in off["r_11_256"]), off["r_11_256"]


def test_a_cross_entropy_without_its_gradient_is_one_kernel_with_three_reductions_per_row_as_lanes(tmp_path):
    # Evaluated alone, the loss reads the rows' logsumexp once: it is fused into the total (r_11_11_11_256: per
    # row the max, the sum of exponentials and the target's pick), and the total takes the three reductions as
    # lanes, the log of the row's sum computed once per row between the second and the third.
    ir = _final_ir(tmp_path, "z = Tensor(rng.standard_normal((256, 11)).astype(np.float32))\n"
                             "z.sparse_categorical_crossentropy(Tensor(rng.integers(0, 11, 256).astype(np.int32))).realize()\n")
    assert sorted(ir) == ["r_11_11_11_256"], sorted(ir)
    [total] = ir["r_11_11_11_256"]
    assert _has_lanes(total) and total.count("DEFINE_LOCAL") == 5, total  # partial totals, 3 accumulators, the log
    lines = total.splitlines()
    reduces = _reduce_ranges(total)  # the rows' loop, the max's, the sum's, the pick's, the lanes' combine
    [log] = [i for i, line in enumerate(lines) if "LOG2" in line]
    assert len(reduces) == 5 and reduces[2] < log < reduces[3], total


def test_a_logsumexp_over_short_rows_takes_its_max_and_its_sum_as_lanes(tmp_path):
    # The cross-entropy's row logsumexp, max + log(sum(exp(x - max))), is one kernel: the row max, read by the
    # sum's loop and again after it, is computed once per row (schedule.cpp, read_once_per_row; lower.cpp,
    # row_invariant_operands), and both reduce loops run 16 rows as lanes, each its own accumulators in local
    # memory, the max loaded from there in the sum's loop; the log once per row after both.
    ir = _final_ir(tmp_path, LOSS)
    [lse] = ir["r_256_11_11"]
    assert _has_lanes(lse) and lse.count("DEFINE_LOCAL") == 2, lse  # the rows' maxima, their sums
    lines = lse.splitlines()
    maxes = [i for i, line in enumerate(lines) if "MAX.float32" in line]
    reduces = _reduce_ranges(lse)
    assert len(maxes) == 1 and len(reduces) == 2 and reduces[0] < maxes[0] < reduces[1], lse  # one max loop
    [log] = [i for i, line in enumerate(lines) if "LOG2" in line]
    assert log > reduces[1], lse
    # 100 rows, which neither 16 nor 8 divides: the logsumexp takes 4 lanes (its exponentials a quarter vector at a
    # time, not one by one); the loss's total over those rows none (4 partial totals were slower than one chain)
    [lse100] = ir["r_100_10_10"]
    assert "LANES(4)" in lse100.splitlines()[0] and lse100.count("DEFINE_LOCAL.float32 [4]") == 2, lse100
    assert not _has_lanes(ir["r_10_100"][0]), ir["r_10_100"]
    # the cross-entropy is three kernels: the rows' logsumexp, the loss, the gradient (no x - max stored)
    assert sorted(n for n in ir if "256" in n) == ["E_256_11", "r_11_256", "r_256_11_11"], sorted(ir)


def _totals_match(device):
    rng = np.random.default_rng(4)
    for rows, classes in [(256, 11), (64, 10), (32, 10), (48, 3), (100, 10)]:
        z = rng.standard_normal((rows, classes)).astype(np.float32) * 3
        y = rng.integers(0, classes, rows).astype(np.int32)
        tz = Tensor(z, device=device, requires_grad=True)
        loss = tz.sparse_categorical_crossentropy(Tensor(y, device=device))
        loss.backward()
        pz = torch.tensor(z, requires_grad=True)
        ploss = torch.nn.functional.cross_entropy(pz, torch.tensor(y).long())
        ploss.backward()
        np.testing.assert_allclose(loss.numpy(), ploss.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(tz.grad.numpy(), pz.grad.numpy(), rtol=1e-4, atol=1e-7)
        # a max over the rows of their sums (the lanes' partial totals combined with MAX), and a total of
        # exponentials (the transcendental inside the rows' loop)
        x = Tensor(z, device=device)
        np.testing.assert_allclose(x.sum(-1).max().numpy(), torch.tensor(z).sum(-1).max().numpy(), rtol=1e-5)
        np.testing.assert_allclose(x.exp().sum(-1).log().sum().numpy(),
                                   torch.tensor(z).logsumexp(-1).sum().numpy(), rtol=1e-5)
        # the loss alone (an evaluation: its logsumexp fused into the total, three reductions per row) and the
        # rows' logsumexp alone (its max and sum one kernel)
        np.testing.assert_allclose(Tensor(z, device=device).sparse_categorical_crossentropy(Tensor(y, device=device)).numpy(),
                                   ploss.detach().numpy(), rtol=1e-5)
        np.testing.assert_allclose(x.logsumexp(-1).numpy(), torch.tensor(z).logsumexp(-1).numpy(), rtol=1e-5, atol=1e-6)


def test_totals_over_short_rows_match_pytorch_on_c():
    _totals_match("C")


def test_totals_over_short_rows_match_pytorch_on_interp():
    _totals_match("INTERP")


def test_rows_of_a_few_per_sequence_take_the_sequences_as_lanes(tmp_path):
    # The loss over the last 6 positions of each of 32 sequences (transformer_tiny.py): the rows' logsumexp loops
    # over 32 sequences and 6 positions, and 6 rows are too few for lanes. The two loops are interchanged and the
    # 32 sequences become the lanes (16 at a time), each lane's row 12 x 11 elements from the next.
    body = ("a = Tensor(rng.standard_normal((32, 12, 11)).astype(np.float32), requires_grad=True)\n"
            "l = a[:, 6:].sparse_categorical_crossentropy(Tensor(rng.integers(0, 11, (32, 6)).astype(np.int32)))\n"
            "l.backward()\n"
            "Tensor.realize(l, a.grad)\n")
    [lse] = _final_ir(tmp_path, body)["r_32_6_11_11"]
    assert _has_lanes(lse) and "LANES(16)" in lse.splitlines()[0], lse
    off = _final_ir(tmp_path, body, env={"TENSORSCOPE_DISABLE_PASSES": "rows_as_lanes"})
    assert not _has_lanes(off["r_32_6_11_11"][0]), off


def _c_sources(tmp_path, body):
    """{kernel name: [the C source of each kernel of that name]} of `body` run by tensorscope-cli."""
    script = tmp_path / "c.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nrng = np.random.default_rng(0)\n" + body)
    out = run_cli_out(script, tmp_path / "c_out")
    found = {}
    for k in json.loads((out / "kernels.json").read_text())["kernels"]:
        found.setdefault(k["name"], []).append((out / k["sources"]["C"]).read_text())
    return found


def test_lane_loops_with_a_max_or_an_exponential_stay_loops_for_gccs_loop_vectorizer(tmp_path):
    # The logsumexp's lane loops (a row max, a sum of exponentials, their log) are kept loops (#pragma GCC unroll
    # 1) in a kernel compiled without unroll-and-jam (c_renderer.cpp, lane_loop_for_the_loop_vectorizer): gcc
    # unrolled the 16 lanes of the max completely and its SLP vectorizer packs no select, and unrolled and jammed
    # the loop around the exponentials. A column sum's lane loop of plain adds is left to gcc. The logits of a
    # classifier head of 10 padded to 16 columns are read in rows of 16: the row stride is a variable whose value
    # gcc does not know (ts_row_stride_16), else it took the loads for an interleaved group with gaps and left the
    # lane loop scalar.
    body = (LOSS +
            "a = Tensor(rng.standard_normal((128, 16)).astype(np.float32), requires_grad=True)\n"
            "b = Tensor(rng.standard_normal(10).astype(np.float32))\n"
            "l = (a[:, :10] + b).sparse_categorical_crossentropy(Tensor(rng.integers(0, 10, 128).astype(np.int32)))\n"
            "l.backward()\n"
            "Tensor.realize(l, a.grad)\n"
            "Tensor(rng.standard_normal((512, 128)).astype(np.float32)).sum(0).realize()\n")
    c = _c_sources(tmp_path, body)
    [lse] = c["r_256_11_11"]
    kernel = lse[lse.index("_kernel(") - 200:]
    assert kernel.count("#pragma GCC unroll 1") == 3, kernel  # the max's, the sum's and the log's lane loops
    assert 'optimize("no-loop-unroll-and-jam")' in kernel, kernel
    assert "ts_row_stride" not in kernel, kernel  # rows of 11
    [padded] = c["r_128_10_10"]
    assert "const int32_t ts_row_stride_16 = ts_opaque_int(16);" in padded and "* ts_row_stride_16)" in padded, padded
    [column_sum] = c["r_128_512"]
    assert "; ridx" in column_sum and "#pragma GCC unroll" not in column_sum and "unroll-and-jam" not in column_sum.split(
        "_kernel(")[0][-300:], column_sum


def test_logsumexp_is_one_kernel_and_matches_pytorch():
    # Tensor.logsumexp's row max (clamped to ±FLT_MAX) is read in the loop of the sum of exponentials and added back
    # to the sum's log after it: one kernel (schedule.cpp, read_once_per_row), where it was two (the max stored)
    from tensorscope import GlobalCounters
    rng = np.random.default_rng(7)
    z = rng.standard_normal((256, 11)).astype(np.float32) * 4
    z[3, :] = -np.inf
    z[5, 2] = np.inf
    x = Tensor(z).realize()
    GlobalCounters.reset()
    got = x.logsumexp(-1).numpy()
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_allclose(got, torch.tensor(z).logsumexp(-1).numpy(), rtol=1e-6, atol=1e-6)


# A row that computes its reductions and then writes a value out per element (a softmax, a log-softmax over 10 to 12
# classes): the reductions take the rows as lanes too. Contiguous rows are coalesced (coalesce_short_rows) and the
# loop over a block's rows is the lanes (local_rows_as_lanes); rows that are not contiguous (a slice of wider rows)
# take the lanes on the rows' loop, each lane writing its own row (rows_as_lanes). Before, the max and the sum of
# exponentials ran one row at a time, scalar (a log_softmax of 256 x 10: 8.5 -> 3.3 us alone).
SOFTMAX_ROWS = ("x = Tensor(rng.standard_normal((256, 10)).astype(np.float32))\n"
                "x.log_softmax(-1).realize()\n"
                "w = Tensor(rng.standard_normal((512, 16)).astype(np.float32))\n"
                "w[:, :11].softmax(-1).realize()\n")


def _lanes_recorded(ir):
    return "LANES(" in ir.split("\n", 1)[0]  # the header's list of applied opts


def test_a_softmax_over_short_rows_takes_its_reductions_as_lanes(tmp_path):
    ir = _final_ir(tmp_path, SOFTMAX_ROWS)
    (log_softmax,) = ir["r_256_10_10_10"]
    assert _lanes_recorded(log_softmax) and "EXP2" in log_softmax and "LOG2" in log_softmax, log_softmax
    (softmax,) = ir["r_512_11_11_11"]  # rows 16 apart: not coalesced, the rows' loop is the lanes
    assert _lanes_recorded(softmax) and "EXP2" in softmax, softmax
    off = _final_ir(tmp_path, SOFTMAX_ROWS, env={"TENSORSCOPE_DISABLE_PASSES": "rows_as_lanes,coalesce_short_rows"})
    assert not any(_lanes_recorded(t) for ts in off.values() for t in ts), off


def _softmax_rows_match(device):
    rng = np.random.default_rng(5)
    for shape in [(256, 10), (512, 11), (1536, 12), (48, 10), (64, 7), (100, 10)]:
        x = rng.standard_normal(shape).astype(np.float32) * 3
        wide = rng.standard_normal((shape[0], 16)).astype(np.float32) * 3
        g = rng.standard_normal(shape).astype(np.float32)
        np.testing.assert_allclose(Tensor(x, device=device).log_softmax(-1).numpy(),
                                   torch.tensor(x).log_softmax(-1).numpy(), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(Tensor(x, device=device).softmax(-1).numpy(),
                                   torch.tensor(x).softmax(-1).numpy(), rtol=1e-5, atol=1e-6)
        n = shape[1]
        np.testing.assert_allclose(Tensor(wide, device=device)[:, :n].softmax(-1).numpy(),
                                   torch.tensor(wide)[:, :n].softmax(-1).numpy(), rtol=1e-5, atol=1e-6)
        t = Tensor(x, device=device, requires_grad=True)
        (t.log_softmax(-1) * Tensor(g, device=device)).sum().backward()
        p = torch.tensor(x, requires_grad=True)
        (p.log_softmax(-1) * torch.tensor(g)).sum().backward()
        np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5)
    x = rng.standard_normal((32, 10)).astype(np.float32)
    x[3, 5:] = -np.inf
    x[7, 2] = np.nan
    np.testing.assert_allclose(Tensor(x, device=device).softmax(-1).numpy(), torch.tensor(x).softmax(-1).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_softmax_over_short_rows_matches_pytorch_on_c():
    _softmax_rows_match("C")


def test_softmax_over_short_rows_matches_pytorch_on_interp():
    _softmax_rows_match("INTERP")
