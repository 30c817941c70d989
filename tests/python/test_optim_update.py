# The optimizers' updates are built by the engine in one call (engine/src/tensor/optim.cpp, _C.sgd_update and
# _C.lamb_update), from the formulas nn/optim.py documents. These tests build the same formulas one Python op at a
# time (the way nn/optim.py did before) and check that the parameters and the state come out bitwise equal step
# after step (the same ops in the same order give the same kernels), and that the result matches PyTorch's
# optimizers; test_training_vs_torch.py checks whole training runs.
import numpy as np
import pytest
import torch

from tensorscope import Tensor, _C
from tensorscope.nn import optim

SHAPES = [(7, 5), (5,), (3, 4, 2)]


def _params(seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [Tensor(rng.standard_normal(s).astype(dtype), requires_grad=True) for s in SHAPES]


def _grads(step, dtype=np.float32):
    rng = np.random.default_rng(100 + step)
    return [rng.standard_normal(s).astype(dtype) for s in SHAPES]


def _reference_sgd(params, bufs, grads, lr, momentum, wd, nesterov):
    for i, (p, g) in enumerate(zip(params, grads)):
        if wd:
            g = g + wd * p.detach()
        if momentum:
            bufs[i].assign(momentum * bufs[i] + g)
            g = g + momentum * bufs[i] if nesterov else bufs[i]
        p.assign(p.detach() - lr * g)
    (params + bufs)[0].realize(*(params + bufs)[1:])


def _reference_lamb(params, m, v, b_t, grads, lr, b1, b2, eps, wd, adam):
    b_t[0].assign(b_t[0] * b1)
    b_t[1].assign(b_t[1] * b2)
    c1, c2 = 1.0 - b_t[0], 1.0 - b_t[1]
    for p, g, mi, vi in zip(params, grads, m, v):
        mi.assign(b1 * mi + (1.0 - b1) * g)
        vi.assign(b2 * vi + (1.0 - b2) * (g * g))
        up = (mi / c1) / ((vi / c2).sqrt() + eps)
        if wd:
            up = up + wd * p.detach()
        if not adam:
            r1, r2 = p.detach().square().sum().sqrt(), up.square().sum().sqrt()
            up = up * ((r1 > 0) & (r2 > 0)).where(r1 / r2, 1.0)
        p.assign(p.detach() - lr * up)
    everything = params + m + v + b_t
    everything[0].realize(*everything[1:])


@pytest.mark.parametrize("momentum,wd,nesterov", [(0.0, 0.0, False), (0.9, 0.0, False), (0.9, 1e-2, True), (0.5, 1e-3, False)])
def test_sgd_update_is_the_formula_op_by_op(momentum, wd, nesterov):
    params, ref = _params(0), _params(0)
    opt = optim.SGD(params, lr=0.05, momentum=momentum, weight_decay=wd, nesterov=nesterov)
    bufs = [Tensor(np.zeros(s, np.float32)) for s in SHAPES] if momentum else []
    for step in range(4):
        gs = _grads(step)
        for p, g in zip(params, gs):
            p.grad = Tensor(g)
        opt.step()
        _reference_sgd(ref, bufs, [Tensor(g) for g in gs], 0.05, momentum, wd, nesterov)
        for a, b in zip(params, ref):
            np.testing.assert_array_equal(a.numpy(), b.numpy())
        for a, b in zip(opt.b, bufs):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("make,wd,adam", [(optim.Adam, 0.0, True), (optim.AdamW, 0.01, True), (optim.LAMB, 0.0, False),
                                         (optim.LAMB, 0.01, False)])
def test_lamb_and_adam_updates_are_the_formula_op_by_op(make, wd, adam):
    params, ref = _params(1), _params(1)
    if make is optim.LAMB:
        opt = make(params, lr=3e-3, eps=1e-8, weight_decay=wd)
    else:
        opt = make(params, lr=3e-3) if wd == 0 else make(params, lr=3e-3, weight_decay=wd)
    m = [Tensor(np.zeros(s, np.float32)) for s in SHAPES]
    v = [Tensor(np.zeros(s, np.float32)) for s in SHAPES]
    b_t = [Tensor(np.array(1.0, np.float32)), Tensor(np.array(1.0, np.float32))]
    for step in range(4):
        gs = _grads(step)
        for p, g in zip(params, gs):
            p.grad = Tensor(g)
        opt.step()
        _reference_lamb(ref, m, v, b_t, [Tensor(g) for g in gs], 3e-3, 0.9, 0.999, 1e-8, wd, adam)
        for a, b in zip(params + opt.m + opt.v, ref + m + v):
            np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.parametrize("kind", ["sgd", "sgd_nesterov_wd", "adam", "adamw"])
def test_updates_match_torch(kind):
    params = _params(2)
    tparams = [torch.tensor(p.numpy(), requires_grad=True) for p in params]
    if kind.startswith("sgd"):
        extra = dict(momentum=0.9, weight_decay=1e-2, nesterov=True) if kind == "sgd_nesterov_wd" else dict(momentum=0.9)
        opt, topt = optim.SGD(params, lr=0.05, **extra), torch.optim.SGD(tparams, lr=0.05, **extra)
    elif kind == "adam":
        opt, topt = optim.Adam(params, lr=3e-3), torch.optim.Adam(tparams, lr=3e-3)
    else:
        opt, topt = optim.AdamW(params, lr=3e-3, weight_decay=0.05), torch.optim.AdamW(tparams, lr=3e-3, weight_decay=0.05)
    for step in range(5):
        for p, tp, g in zip(params, tparams, _grads(step)):
            p.grad, tp.grad = Tensor(g), torch.from_numpy(g.copy())
        opt.step()
        topt.step()
    for p, tp in zip(params, tparams):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9), lambda ps: optim.Adam(ps, lr=1e-2),
                                  lambda ps: optim.AdamW(ps, lr=1e-2)])
def test_float16_parameters_train_in_float16(make):
    # the state is kept in the parameter's dtype, as PyTorch does (float32 state made the update float32, and
    # assigning it to the float16 parameter raised); the result is close to the same steps in float32
    half, single = _params(3, np.float16), _params(3, np.float16)
    single = [Tensor(p.numpy().astype(np.float32), requires_grad=True) for p in single]
    opt_h, opt_s = make(half), make(single)
    for step in range(3):
        for p, q, g in zip(half, single, _grads(step, np.float16)):
            p.grad, q.grad = Tensor(g), Tensor(g.astype(np.float32))
        opt_h.step()
        opt_s.step()
    assert all(p.dtype == "float16" for p in half + opt_h.params)
    for p, q in zip(half, single):
        np.testing.assert_allclose(p.numpy().astype(np.float32), q.numpy(), rtol=1e-2, atol=2e-3)


def test_mismatched_lists_name_what_is_missing():
    params = _params(4)
    grads = [p.detach()._t for p in params[:2]]
    lr = Tensor(np.array(0.1, np.float32))._t
    with pytest.raises(ValueError, match="3 parameters but 2 gradients"):
        _C.sgd_update([p._t for p in params], grads, [], lr, 0.0, 0.0, False)
    with pytest.raises(ValueError, match="3 parameters but 0 momentum buffers"):
        _C.sgd_update([p._t for p in params], [p.detach()._t for p in params], [], lr, 0.9, 0.0, False)
    b = Tensor(np.array(1.0, np.float32))._t
    with pytest.raises(ValueError, match="3 parameters but 2 first moments"):
        _C.lamb_update([p._t for p in params], [p.detach()._t for p in params], grads, grads, b, b, lr, 0.9, 0.999,
                       1e-8, 0.0, True)


# ---- a learning-rate schedule: lr is a tensor the kernels read (nn/optim.py), not a constant ----------------
LRS = [0.05, 0.04, 0.025, 0.01, 0.003, 0.02]  # a new value every step (warm-up and decay alike)


def _lr_schedule_run(make_opt, jitted=False):
    """Trains a 6-5-3 MLP for len(LRS) steps, opt.lr set to LRS[i] before step i; returns the parameters and,
    per step, the schedule-cache misses (realizes whose graph structure was new) of the step."""
    import tensorscope
    from tensorscope import GlobalCounters
    rng = np.random.default_rng(7)
    w1, w2 = rng.standard_normal((5, 6)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    params = [Tensor(w1, requires_grad=True), Tensor(w2, requires_grad=True)]
    opt = make_opt(params)

    def step(x, y):
        opt.zero_grad()
        loss = (x @ params[0].T).relu().matmul(params[1].T).sparse_categorical_crossentropy(y)
        loss.backward()
        opt.step()
        return loss

    f = tensorscope.jit(step) if jitted else step
    misses = []
    for i, lr in enumerate(LRS):
        opt.lr = lr
        x = Tensor(rng.standard_normal((4, 6)).astype(np.float32))
        y = Tensor(rng.integers(0, 3, 4).astype(np.int32))
        before = GlobalCounters.schedule_count
        f(x, y).numpy()
        misses.append(GlobalCounters.schedule_count - before)
    return [p.numpy() for p in params], misses, (w1, w2)


def _torch_lr_schedule_run(make_opt, w1, w2):
    rng = np.random.default_rng(7)
    rng.standard_normal((5, 6)), rng.standard_normal((3, 5))  # the draws of the initial weights
    params = [torch.tensor(w1, requires_grad=True), torch.tensor(w2, requires_grad=True)]
    opt = make_opt(params)
    for lr in LRS:
        for group in opt.param_groups:
            group["lr"] = lr
        x = torch.tensor(rng.standard_normal((4, 6)).astype(np.float32))
        y = torch.tensor(rng.integers(0, 3, 4).astype(np.int64))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(torch.relu(x @ params[0].T) @ params[1].T, y).backward()
        opt.step()
    return [p.detach().numpy() for p in params]


OPTIMIZERS = {
    "SGD momentum": (lambda ps: optim.SGD(ps, lr=LRS[0], momentum=0.9),
                     lambda ps: torch.optim.SGD(ps, lr=LRS[0], momentum=0.9)),
    "AdamW": (lambda ps: optim.AdamW(ps, lr=LRS[0], weight_decay=0.01),
              lambda ps: torch.optim.AdamW(ps, lr=LRS[0], weight_decay=0.01)),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_a_learning_rate_schedule_compiles_nothing_and_matches_pytorch(name):
    ours, theirs = OPTIMIZERS[name]
    params, misses, (w1, w2) = _lr_schedule_run(ours)
    # the first step's graph is new, and so is the second's (its parameters are the first step's outputs);
    # after that every step reuses the schedule, whatever its lr (as a constant, each new lr was a new graph)
    assert misses[2:] == [0] * (len(LRS) - 2), misses
    for p, q in zip(params, _torch_lr_schedule_run(theirs, w1, w2)):
        np.testing.assert_allclose(p, q, rtol=1e-5, atol=1e-6)
    # jit replays read the lr set between calls: the same parameters bit for bit as the eager steps
    jitted, _, _ = _lr_schedule_run(ours, jitted=True)
    for p, q in zip(jitted, params):
        np.testing.assert_array_equal(p, q)


def test_setting_lr_inside_a_jitted_function_fails_the_capture():
    import tensorscope
    from tensorscope import JitError
    p = Tensor(np.ones((2, 2), np.float32), requires_grad=True)
    opt = optim.SGD([p], lr=0.1)

    @tensorscope.jit
    def step(x):
        opt.lr = opt.lr * 0.5  # a replay would not run this line
        opt.zero_grad()
        (p * x).sum().backward()
        opt.step()
        return p

    with pytest.raises(JitError, match="outside the jitted function"):
        for _ in range(3):
            step(Tensor(np.ones((2, 2), np.float32)))


def test_copy_from_numpy_checks_size_and_realization():
    t = Tensor(np.zeros(3, np.float32)).realize()
    t._t.copy_from_numpy(np.array([1, 2, 3]))  # converted to the tensor's dtype
    np.testing.assert_array_equal(t.numpy(), [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="2 values for a tensor of 3 elements"):
        t._t.copy_from_numpy(np.zeros(2, np.float32))
    with pytest.raises(ValueError, match=r"shape \(3\) holds no buffer of its own"):
        (t + 1)._t.copy_from_numpy(np.zeros(3, np.float32))


def test_sgd_over_parameters_on_two_devices_reads_lr_on_each():
    # the lr tensor lives on the first parameter's device; a parameter elsewhere gets a copy of it
    a = Tensor(np.ones((2, 3), np.float32), device="C", requires_grad=True)
    b = Tensor(np.ones(4, np.float32), device="INTERP", requires_grad=True)
    opt = optim.SGD([a, b], lr=0.5)
    for lr in (0.5, 0.25):
        opt.lr = lr
        opt.zero_grad()
        ((a * 2).sum() + (b * 3).sum().to("C")).backward()
        opt.step()
    np.testing.assert_allclose(a.numpy(), 1 - 0.75 * 2, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), 1 - 0.75 * 3, rtol=1e-6)
    assert b.device == "INTERP"
