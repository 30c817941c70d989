# A weight read by several matmuls (a recurrent network's weights, once per time step; a layer applied to two
# inputs) gets its gradient as one matmul over the rows of all its uses concatenated (autograd.cpp,
# sum_gradients), not as one small matmul per use added up: fused, those were one kernel of T reduce blocks that
# the register tile does not take (a GRU's recurrent weight over 20 steps: 2.4 ms at 16 GFLOP/s). Checked here:
# the values against PyTorch (which adds T separate GEMMs) on C and INTERP, and in the recorded schedule, one
# reduction for the weight's gradient instead of one a use. And the forward's uses of W.T share one copy of it
# into the matmul's layout (Tensor::contiguous).
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tensorscope import Tensor, nn
from test_no_recompute import record, schedule_payloads

DEVICES = ["C", "INTERP"]


def _gru_params(rng, n_in, hidden):
    return {"wx": rng.standard_normal((3 * hidden, n_in)).astype(np.float32) * 0.3,
            "bx": rng.standard_normal(3 * hidden).astype(np.float32) * 0.1,
            "wh": rng.standard_normal((3 * hidden, hidden)).astype(np.float32) * 0.3,
            "u": rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.3}


def _gru_loss(T, p, x, linear, matmul, hidden):
    """A GRU unrolled over T steps (torch.nn.GRUCell's gates), its recurrent weight `wh` read through a Linear
    (W.T) and a plain weight `u` (h @ u) read directly, both once a step; the loss sums the last state."""
    h = None
    for t in range(T):
        gx = linear(x[:, t], p["wx"], p["bx"])
        if h is None:
            h = gx[:, :hidden] * 0  # zeros of the right shape, without a matmul by zeros
        gh = linear(h, p["wh"], None)
        r = (gx[:, :hidden] + gh[:, :hidden]).sigmoid()
        z = (gx[:, hidden:2 * hidden] + gh[:, hidden:2 * hidden]).sigmoid()
        n = (gx[:, 2 * hidden:] + r * gh[:, 2 * hidden:]).tanh()
        h = (1 - z) * n + z * matmul(h, p["u"]).tanh()
    return (h * h).sum()


def _ts_linear(x, w, b):
    return x.linear(w.T, b)


def _torch_linear(x, w, b):
    return F.linear(x, w, b)


@pytest.mark.parametrize("device,T", [("C", 6), ("INTERP", 6), ("C", 40)])
def test_gru_gradients_match_torch(device, T):
    """40 steps: more uses than one gathered matmul takes (32): two matmuls, and the input projection's gradient
    (40 slices) summed in stored groups."""
    batch, n_in, hidden = 8, 5, 16
    rng = np.random.default_rng(0)
    params = _gru_params(rng, n_in, hidden)
    x = rng.standard_normal((batch, T, n_in)).astype(np.float32)
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    _gru_loss(T, tp, torch.tensor(x), _torch_linear, lambda a, b: a @ b, hidden).backward()
    sp = {k: Tensor(v, device=device, requires_grad=True) for k, v in params.items()}
    loss = _gru_loss(T, sp, Tensor(x, device=device), _ts_linear, lambda a, b: a @ b, hidden)
    loss.backward()
    for k in params:
        np.testing.assert_allclose(sp[k].grad.numpy(), tp[k].grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)


def _reductions_of(shape, fn, tmp_path):
    """Runs fn() while recording; the SUM nodes of its schedules whose shape, without its 1s, is `shape` or its
    transpose, as (the SUM's input shape) each."""
    found = []
    for s in schedule_payloads(record(fn, tmp_path)):
        nodes = {n["uid"]: n for n in s["nodes"]}
        for n in s["nodes"]:
            dims = tuple(d for d in n["shape"] if d != 1)
            if n["op"] == "SUM" and sorted(dims) == sorted(shape):
                found.append(tuple(nodes[n["srcs"][0]]["shape"]))
    return found


@pytest.mark.parametrize("T", [6, 40])
def test_recurrent_weight_gradient_is_one_matmul(T, tmp_path):
    """One reduction over the rows of all uses; past 32 uses one per 32 (each gathered copy a loop a use)."""
    batch, n_in, hidden = 8, 5, 16
    rng = np.random.default_rng(1)
    params = _gru_params(rng, n_in, hidden)
    sp = {k: Tensor(v, requires_grad=True) for k, v in params.items()}
    x = Tensor(rng.standard_normal((batch, T, n_in)).astype(np.float32))

    def step():
        _gru_loss(T, sp, x, _ts_linear, lambda a, b: a @ b, hidden).backward()
        sp["wh"].grad.realize(sp["u"].grad)

    # wh (48, 16) and u (16, 16): each one reduction over the T·batch rows of its uses (T - 1 of them read a
    # state; the first step's zeros are folded away or not, so T - 1 or T uses)
    for name, shape in (("wh", (3 * hidden, hidden)), ("u", (hidden, hidden))):
        for p in sp.values():
            p.grad = None
        sums = _reductions_of(shape, step, tmp_path)
        assert len(sums) == (T + 31) // 32, f"{name}: {len(sums)} reductions for its gradient (one a use?): {sums}"
        assert sum(max(s) for s in sums) >= (T - 1) * batch, f"{name}: the reductions sum {sums}, not all uses' rows"


@pytest.mark.parametrize("device", DEVICES)
def test_uses_with_other_rows_and_other_gradients(device):
    """Uses of different row counts (concatenated, not side by side), batch dims folded into the rows, and a
    gradient that is not a matmul (a penalty on the weight) added to the matmuls' sum."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((7, 12)).astype(np.float32)
    xs = [rng.standard_normal(s).astype(np.float32) for s in ((4, 12), (6, 12), (2, 3, 12))]

    def loss(W, X, lin, tanh):
        out = sum((tanh(lin(x, W)) ** 2).sum() for x in X)
        return out + (W * W).sum() * 0.01

    tw = torch.tensor(w, requires_grad=True)
    loss(tw, [torch.tensor(x) for x in xs], lambda x, W: F.linear(x, W), torch.tanh).backward()
    sw = Tensor(w, device=device, requires_grad=True)
    loss(sw, [Tensor(x, device=device) for x in xs], lambda x, W: x.linear(W.T), lambda v: v.tanh()).backward()
    np.testing.assert_allclose(sw.grad.numpy(), tw.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_a_layer_applied_twice_in_training_matches_torch():
    """nn.Linear applied to two inputs (a siamese pair) inside a training step: the weight's gradient is one
    matmul, and SGD's update after it matches torch's."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal((16, 20)).astype(np.float32) for _ in range(2))
    layer = nn.Linear(20, 8)
    tl = torch.nn.Linear(20, 8)
    with torch.no_grad():
        tl.weight.copy_(torch.tensor(layer.weight.numpy()))
        tl.bias.copy_(torch.tensor(layer.bias.numpy()))
    ((layer(Tensor(a)) - layer(Tensor(b))) ** 2).mean().backward()
    ((tl(torch.tensor(a)) - tl(torch.tensor(b))) ** 2).mean().backward()
    np.testing.assert_allclose(layer.weight.grad.numpy(), tl.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.bias.grad.numpy(), tl.bias.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_a_weight_read_transposed_by_several_matmuls_is_copied_once():
    """x @ W.T copies W into the register tile's layout (Tensor::matmul); five matmuls of one graph reading
    the same W.T share one copy (contiguous() shares copies of a view of a realized buffer until the next
    realize), and after an update of W the next graph copies the new values."""
    from tensorscope import GlobalCounters
    rng = np.random.default_rng(4)
    w_np = rng.standard_normal((48, 40)).astype(np.float32)
    xs_np = [rng.standard_normal((32, 40)).astype(np.float32) for _ in range(5)]
    W = Tensor(w_np)
    xs = [Tensor(x) for x in xs_np]
    for x in xs:
        x.realize()

    def products():
        ys = [x @ W.T for x in xs]
        GlobalCounters.reset()
        ys[0].realize(*ys[1:])
        return ys, GlobalCounters.kernel_count

    ys, kernels = products()
    assert kernels == 6, f"{kernels} kernels for 5 matmuls reading one weight (a copy of W.T each?)"
    for x, y in zip(xs_np, ys):
        np.testing.assert_allclose(y.numpy(), x @ w_np.T, rtol=1e-5, atol=1e-5)
    W.assign(W * 2).realize()
    ys, _ = products()
    for x, y in zip(xs_np, ys):
        np.testing.assert_allclose(y.numpy(), x @ (2 * w_np).T, rtol=1e-5, atol=1e-5)
