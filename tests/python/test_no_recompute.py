# The scheduler never recomputes a reduction that several ops read (issue 13): an optimizer's step()
# realizes every update in one schedule, and a weight gradient read by Adam's first- and second-moment
# updates (through the reshapes and permutes of a matmul's backward) is stored once, not computed in
# both kernels. Checked on the schedules themselves: one step is recorded (tensorscope's own recording,
# docs/recording.md), and no reduce node may be fused into more than one kernel of a schedule.
import json
import sqlite3
import sys

import numpy as np
import pytest
import torch

import tensorscope
from tensorscope import Device, GlobalCounters, Tensor, nn
from tensorscope.nn import optim

_C = tensorscope._C


def schedule_payloads(path):
    """Every schedule event of a recording as its payload (nodes, kernels), a repeated structure's resolved to its
    nodes and kernels (node uids are then positions in the structure)."""
    db = sqlite3.connect(path)
    blobs = dict(db.execute("SELECT hash, data FROM blobs"))
    out = []
    for (payload,) in db.execute("SELECT payload FROM events WHERE kind = 'schedule' ORDER BY seq"):
        s = json.loads(payload)
        if "structure" in s:
            s = json.loads(bytes(blobs[s["structure"]]))
        out.append(s)
    db.close()
    return out


def _schedules(path):
    """Every schedule of a recording as (kernels, op of each node position)."""
    return [(s["kernels"], {n["uid"]: n["op"] for n in s["nodes"]}) for s in schedule_payloads(path)]


def record(fn, tmp_path):
    """Runs fn() once while recording; returns the recording's path."""
    path = str(tmp_path / "run.tsrec")
    _C.start_recording(path, "run", "", [], sys.version)
    try:
        fn()
    finally:
        _C.finish_recording("finished", 0, "")
    return path


def recorded_schedules(fn, tmp_path):
    """Runs fn() once while recording; returns the recording's schedules as _schedules does."""
    return _schedules(record(fn, tmp_path))


def recomputed_reduces(step, tmp_path):
    """Runs step() once while recording; returns 'SUM in r_a, r_b' for each reduce in more than one kernel."""
    step()  # warm-up: the second step is the steady state
    found = []
    for kernels, ops in recorded_schedules(step, tmp_path):
        where = {}
        for k in kernels:
            for uid in k["nodes"]:
                if ops.get(uid) in ("SUM", "REDUCE_MAX"):
                    where.setdefault(uid, []).append(k["name"])
        found += [f"{ops[u]} in {', '.join(names)}" for u, names in where.items() if len(names) > 1]
    return found


def _train(model_fn, params, opt, x, y):
    def step():
        opt.zero_grad()
        loss = model_fn(x).sparse_categorical_crossentropy(y)
        loss.backward()
        opt.step()
        loss.numpy()
    return step


rng = np.random.default_rng(0)


def _data(n, features, classes=10):
    return (Tensor(rng.standard_normal((n, features), dtype=np.float32)),
            Tensor(rng.integers(0, classes, n).astype(np.int32)))


@pytest.mark.parametrize("make_opt", [
    lambda p: optim.Adam(p, lr=1e-3),
    lambda p: optim.AdamW(p, lr=1e-3, weight_decay=0.01),
    lambda p: optim.SGD(p, lr=0.01, momentum=0.9),
    lambda p: optim.SGD(p, lr=0.01),
], ids=["Adam", "AdamW", "SGD-momentum", "SGD"])
def test_linear_layers_step_recomputes_no_reduce(make_opt, tmp_path):
    Tensor.manual_seed(0)
    l1, l2, l3 = nn.Linear(96, 64), nn.Linear(64, 32), nn.Linear(32, 10)
    opt = make_opt(nn.get_parameters([l1, l2, l3]))
    x, y = _data(48, 96)
    step = _train(lambda t: l3(l2(l1(t).relu()).relu()), None, opt, x, y)
    assert recomputed_reduces(step, tmp_path) == []


def test_conv2d_step_recomputes_no_reduce(tmp_path):
    Tensor.manual_seed(0)
    c1, c2, fc = nn.Conv2d(1, 8, 3), nn.Conv2d(8, 16, 3), nn.Linear(16 * 4 * 4, 10)
    opt = optim.Adam(nn.get_parameters([c1, c2, fc]), lr=1e-3)
    x = Tensor(rng.standard_normal((8, 1, 12, 12), dtype=np.float32))
    y = Tensor(rng.integers(0, 10, 8).astype(np.int32))
    step = _train(lambda t: fc(c2(c1(t).relu()).relu().max_pool2d().flatten(1)), None, opt, x, y)
    assert recomputed_reduces(step, tmp_path) == []


def test_layernorm_and_attention_step_recomputes_no_reduce(tmp_path):
    Tensor.manual_seed(0)
    d = 32
    q, k, v, o = (nn.Linear(d, d) for _ in range(4))
    ln, head = nn.LayerNorm(d), nn.Linear(d, 10)
    params = nn.get_parameters([q, k, v, o, ln, head])
    opt = optim.AdamW(params, lr=1e-3)
    x = Tensor(rng.standard_normal((4, 8, d), dtype=np.float32))
    y = Tensor(rng.integers(0, 10, 4).astype(np.int32))

    def model(t):
        h = ln(t)
        a = q(h).scaled_dot_product_attention(k(h), v(h), is_causal=True)
        return head((t + o(a)).mean(axis=1))

    step = _train(model, params, opt, x, y)
    assert recomputed_reduces(step, tmp_path) == []


def _recorded_kernels(step, tmp_path):
    """The kernels of one recorded call of `step` (after one that compiles), as the recording lists them."""
    step()
    path = str(tmp_path / "reasons.tsrec")
    _C.start_recording(path, "step", "", [], sys.version)
    step()
    _C.finish_recording("finished", 0, "")
    return [k for kernels, _ in _schedules(path) for k in kernels]


def test_the_reason_says_why_a_gradient_is_stored(tmp_path):
    # the stored weight gradient's kernel says it is read by two ops and what recomputing would cost
    Tensor.manual_seed(0)
    lin = nn.Linear(64, 32)
    opt = optim.Adam([lin.weight, lin.bias], lr=1e-3)
    x, y = _data(16, 64, classes=32)
    reasons = [r for k in _recorded_kernels(_train(lin, None, opt, x, y), tmp_path) for r in k["boundary_reasons"]]
    assert any("a reduction read by 2 ops" in r and "MFLOP each" in r or "kFLOP each" in r for r in reasons), reasons


def test_the_reasons_tell_a_matmul_output_from_a_row_reduction_read_apart(tmp_path):
    # A softmax over logits = x @ Wᵀ + b: the logits hold a reduction per element (the matmul) that the row max,
    # the sum of exponentials and the division would recompute in three loops of one kernel: stored, with that
    # reason. A cross-entropy over the same logits reads them in three kernels (the row logsumexp, the loss, the
    # gradient): stored because its readers do not meet in one kernel; and so is the row logsumexp (one value
    # per row), read by the loss and the gradient. Each kernel's reason names its own case.
    # (8 classes: a head of 9 to 15 is a matmul over a padded copy of Wᵀ, stored by an explicit contiguous())
    Tensor.manual_seed(0)
    lin = nn.Linear(64, 8)
    x, y = _data(32, 64, classes=8)
    ends = [(k["name"], k["boundary_reasons"][0]) for k in _recorded_kernels(lambda: lin(x).softmax().realize(), tmp_path)]
    per_element = [name for name, r in ends if "holds a reduction per element (a matmul)" in r]
    assert per_element == ["r_32_8_64"], ends  # the logits

    opt = optim.SGD([lin.weight, lin.bias], lr=1e-2)
    ends = [(k["name"], k["boundary_reasons"][0]) for k in _recorded_kernels(_train(lin, None, opt, x, y), tmp_path)]
    apart = [name for name, r in ends if "do not meet in one kernel" in r]
    assert not any("holds a reduction per element" in r for _, r in ends), ends
    assert apart == ["r_32_8_64", "r_32_8_8"], ends  # the logits, then their logsumexp per row (max and sum)


def test_the_cross_entropy_gradient_is_one_elementwise_kernel(tmp_path):
    # d loss / d logits = (softmax - one-hot) / N, written out as PyTorch's log_softmax_backward and
    # nll_loss_backward compute it: an elementwise kernel over the logits' shape that reads the logits and the
    # row logsumexp the forward stored (softmax = exp(x - logsumexp)). Through the log-softmax's chain rule it was a reduce
    # kernel (r_32_10_10) with a row sum of the one-hot's gradient in front of the exponentials. Label
    # smoothing changes the target, not the kernels.
    for smoothing in (0.0, 0.1):
        logits = Tensor(rng.standard_normal((32, 10), dtype=np.float32), requires_grad=True)
        y = Tensor(rng.integers(0, 10, 32).astype(np.int32))

        def step():
            logits.grad = None
            logits.sparse_categorical_crossentropy(y, label_smoothing=smoothing).backward()
            logits.grad.realize()
        names = [k["name"] for k in _recorded_kernels(step, tmp_path)]
        assert names.count("E_32_10") == 1 and "r_32_10_10" in names, names  # the gradient; the row logsumexp
        assert names.count("r_32_10_10") == 1, names  # only the forward's logsumexp reduces rows of the logits' shape
        (tmp_path / "reasons.tsrec").unlink()


def test_forward_backward_and_update_are_one_schedule(tmp_path):
    # backward() realizes the loss with the next realize (the optimizer's step), so that the whole training
    # step is one schedule and what both passes read is computed once; loss.numpy() then reads a buffer
    Tensor.manual_seed(0)
    ln, lin = nn.LayerNorm(32), nn.Linear(32, 10)
    opt = optim.Adam(nn.get_parameters([ln, lin]), lr=1e-3)
    x, y = _data(16, 32)
    step = _train(lambda t: lin(ln(t)), None, opt, x, y)
    step()
    schedules = recorded_schedules(step, tmp_path)
    assert len(schedules) == 1, [[k["name"] for k in kernels] for kernels, _ in schedules]
    (tmp_path / "again").mkdir()
    assert recomputed_reduces(step, tmp_path / "again") == []


def test_backward_then_reading_the_loss_or_a_gradient_matches_pytorch():
    # the deferred loss is realized by whichever read comes first: the loss itself, or a gradient
    import torch
    x = rng.standard_normal((6, 5), dtype=np.float32)
    for read_loss_first in (True, False):
        t = Tensor(x, requires_grad=True)
        loss = (t * t).sum().log()
        loss.backward()
        p = torch.tensor(x, requires_grad=True)
        ploss = (p * p).sum().log()
        ploss.backward()
        if read_loss_first:
            np.testing.assert_allclose(loss.numpy(), ploss.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(t.grad.numpy(), p.grad.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(loss.numpy(), ploss.detach().numpy(), rtol=1e-6)


@pytest.mark.parametrize("dev", ["C", "INTERP"])
def test_contiguous_of_a_value_stored_anyway_is_no_copy(dev, tmp_path):
    # The kernelizer's rule 4: contiguous() of a value that is in memory already (stored by this schedule for
    # another rule, or a realized buffer) stores nothing; its readers read that buffer. A depthwise convolution
    # stores its input with x.contiguous(); after BatchNorm + ReLU (MobileNet's blocks) that value is stored
    # anyway, for the backward, and a kernel copied it right after it was written (eleven copies in MobileNet's
    # step). Here also an explicit contiguous() in front (on C the convolution's own reads that one: a contiguous()
    # of a contiguous() of a stored value). The step's kernels: none is a copy, the decision is listed with its
    # reason; values against PyTorch.
    rng = np.random.default_rng(7)
    xv = rng.standard_normal((8, 16, 12, 12)).astype(np.float32)
    wv = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)
    x, w = Tensor(xv, requires_grad=True, device=dev), Tensor(wv, requires_grad=True, device=dev)
    default_device, Device.DEFAULT = Device.DEFAULT, dev  # the BatchNorm's parameters on `dev` too
    try:
        bn = nn.BatchNorm2d(16)
    finally:
        Device.DEFAULT = default_device
    tx, tw = torch.tensor(xv, requires_grad=True), torch.tensor(wv, requires_grad=True)
    tbn = torch.nn.BatchNorm2d(16)

    def step():
        x.grad = w.grad = None
        bn(x).relu().contiguous().conv2d(w, padding=1, groups=16).square().mean().backward()
        Tensor.realize(x.grad, w.grad)

    training, Tensor.training = Tensor.training, True
    try:
        kernels = _recorded_kernels(step, tmp_path)
    finally:
        Tensor.training = training
    ops = {n["uid"]: n["op"] for s in schedule_payloads(str(tmp_path / "reasons.tsrec")) for n in s["nodes"]}
    copies = [k["name"] for k in kernels if [ops[u] for u in k["nodes"]] == ["CONTIGUOUS"]]
    assert copies == [], copies
    reasons = [d["reason"] for k in kernels for d in k.get("decisions", k.get("fusion_decisions", []))]
    assert any(r.startswith("not stored: contiguous() of WHERE") and "stored by this schedule" in r for r in reasons), reasons
    torch.nn.functional.conv2d(tbn(tx).relu(), tw, padding=1, groups=16).square().mean().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_a_contiguous_fused_as_its_source_keeps_the_views_above_it_one_index(tmp_path):
    # The contiguous() that rule 4 does not store is fused into its readers as its source. Lowered as a value of
    # its own, the views above it (the convolution's padded windows) were taken apart into its dimensions by div
    # and mod and put back together: MobileNet's first depthwise weight gradient read its input that way, 1.6 ms
    # against 0.05. The chain of views goes through it: no kernel of the step divides an index.
    from test_conv_backward import run_cli_out
    script = tmp_path / "block.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor, nn\nTensor.training = True\n"
                      "rng = np.random.default_rng(7)\n"
                      "x = Tensor(rng.standard_normal((8, 16, 12, 12)).astype(np.float32), requires_grad=True)\n"
                      "w = Tensor(rng.standard_normal((16, 1, 3, 3)).astype(np.float32), requires_grad=True)\n"
                      "nn.BatchNorm2d(16)(x).relu().conv2d(w, padding=1, groups=16).square().mean().backward()\n"
                      "Tensor.realize(x.grad, w.grad)\n")
    out = run_cli_out(script, tmp_path / "out")
    listings = {p.name: p.read_text() for p in out.glob("k*.ir.txt") if p.name.count(".") == 2}
    assert len(listings) >= 8, sorted(listings)
    assert [name for name, ir in listings.items() if " = MOD." in ir or " = IDIV." in ir] == [], sorted(listings)
