# @tensorscope.jit (tinygrad's TinyJit semantics): call 1 runs eagerly, call 2 captures the kernel
# launches, later calls replay them on the new inputs without building or scheduling anything.
# A jitted training step must compute exactly what the eager step computes (same kernels, same
# buffers bound), and both must agree with PyTorch.
import gc
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import tensorscope
from tensorscope import Device, GlobalCounters, JitError, Tensor, nn
from tensorscope.nn import optim

STEPS, BATCH = 8, 32


class MLP:
    def __init__(self):
        self.l1, self.l2 = nn.Linear(64, 128), nn.Linear(128, 10)

    def __call__(self, x):
        return self.l2(self.l1(x).relu())


def _batches(steps=STEPS):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((BATCH, 64)).astype(np.float32), rng.integers(0, 10, BATCH).astype(np.int32))
            for _ in range(steps)]


def _trainer(opt_name, kwargs):
    Tensor.manual_seed(0)
    model = MLP()
    opt = getattr(optim, opt_name)(nn.get_parameters(model), **kwargs)

    def step(x, y):
        opt.zero_grad()
        loss = model(x).sparse_categorical_crossentropy(y)
        loss.backward()
        opt.step()
        return loss

    return model, step


def _torch_mlp(model):
    ref = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    # tensorscope's Linear weight is (out, in) in the state dict like torch's
    sd = nn.get_state_dict(model)
    ref.load_state_dict({"0.weight": torch.from_numpy(sd["l1.weight"].numpy().copy()), "0.bias": torch.from_numpy(sd["l1.bias"].numpy().copy()),
                         "2.weight": torch.from_numpy(sd["l2.weight"].numpy().copy()), "2.bias": torch.from_numpy(sd["l2.bias"].numpy().copy())})
    return ref


@pytest.mark.parametrize("opt_name,kwargs,torch_name,torch_kwargs", [
    ("SGD", dict(lr=0.1), "SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3), "SGD",
     dict(lr=0.05, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("Adam", dict(lr=0.003), "Adam", dict(lr=0.003)),
], ids=["sgd", "sgd-nesterov", "adam"])
def test_jitted_training_matches_eager_and_torch(opt_name, kwargs, torch_name, torch_kwargs):
    eager_model, eager_step = _trainer(opt_name, kwargs)
    jit_model, step = _trainer(opt_name, kwargs)
    jit_step = tensorscope.jit(step)
    ref = _torch_mlp(eager_model)
    topt = getattr(torch.optim, torch_name)(ref.parameters(), **torch_kwargs)
    Tensor.training = True
    try:
        eager_losses, jit_losses, torch_losses = [], [], []
        for x, y in _batches():  # each call gets new data: replays must read the new inputs
            eager_losses.append(eager_step(Tensor(x), Tensor(y)).item())
            jit_losses.append(jit_step(Tensor(x), Tensor(y)).item())
            topt.zero_grad()
            tl = torch.nn.functional.cross_entropy(ref(torch.from_numpy(x)), torch.from_numpy(y).long())
            tl.backward()
            topt.step()
            torch_losses.append(tl.item())
    finally:
        Tensor.training = False
    assert jit_step.cnt == STEPS and jit_step.jit_cache_size > 0  # it did replay
    # the same kernels on the same values: bit for bit
    assert jit_losses == eager_losses
    for k, v in nn.get_state_dict(jit_model).items():
        np.testing.assert_array_equal(v.numpy(), nn.get_state_dict(eager_model)[k].numpy(), err_msg=k)
    np.testing.assert_allclose(jit_losses, torch_losses, rtol=1e-5, atol=1e-5)
    tsd = ref.state_dict()
    for ours, theirs in (("l1.weight", "0.weight"), ("l1.bias", "0.bias"), ("l2.weight", "2.weight"), ("l2.bias", "2.bias")):
        np.testing.assert_allclose(nn.get_state_dict(jit_model)[ours].numpy(), tsd[theirs].numpy(), rtol=1e-5, atol=1e-5,
                                   err_msg=ours)


def test_replay_launches_the_captured_kernels_without_scheduling():
    _, step = _trainer("SGD", dict(lr=0.1))
    jit_step = tensorscope.jit(step)
    (x, y), = _batches(1)
    GlobalCounters.reset()
    jit_step(Tensor(x), Tensor(y))  # eager
    eager_kernels = GlobalCounters.kernel_count
    GlobalCounters.reset()
    jit_step(Tensor(x), Tensor(y))  # capture
    assert GlobalCounters.kernel_count == eager_kernels
    assert jit_step.jit_cache_size == eager_kernels
    for _ in range(3):
        GlobalCounters.reset()
        jit_step(Tensor(x), Tensor(y))
        assert GlobalCounters.kernel_count == eager_kernels
        assert GlobalCounters.replayed_kernels == eager_kernels
        assert GlobalCounters.schedule_count == 0 and GlobalCounters.schedule_cache_hits == 0  # no realize at all


def test_shape_change_raises_a_clear_error():
    f = tensorscope.jit(lambda a, b: (a * b + 1).sum(axis=1))
    for _ in range(3):
        f(Tensor.ones(4, 3), Tensor.ones(4, 3))
    with pytest.raises(JitError, match=r"Tensor argument 0 .*\(5, 3\).*captured with shape \(4, 3\)"):
        f(Tensor.ones(5, 3), Tensor.ones(4, 3))
    with pytest.raises(JitError, match="int32"):
        f(Tensor.ones(4, 3), Tensor.ones(4, 3, dtype="int32"))
    with pytest.raises(JitError, match="2 Tensor argument"):
        f(Tensor.ones(4, 3))
    # the engine checks too, for C++ users and for replays called directly
    with pytest.raises(ValueError, match="input 1 is"):
        f.captured.replay([Tensor.ones(4, 3)._t, Tensor.ones(2, 3)._t])


def test_changed_output_structure_raises():
    calls = []

    def f(a):
        calls.append(1)
        return (a + 1, a * 2) if len(calls) == 1 else (a + 1,)

    jf = tensorscope.jit(f)
    jf(Tensor.ones(3))
    with pytest.raises(JitError, match="different structure"):
        jf(Tensor.ones(3))


def test_outputs_are_fresh_each_call_and_follow_the_inputs():
    f = tensorscope.jit(lambda a, b: {"sum": (a + b).realize(), "prod": [a * b]})
    outs = []
    for i in range(6):
        a = Tensor(np.full((2, 3), i, np.float32))
        b = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
        outs.append(f(a, b))
    for i, o in enumerate(outs):  # earlier results are not overwritten by later calls
        np.testing.assert_array_equal(o["sum"].numpy(), i + np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(o["prod"][0].numpy(), i * np.arange(6).reshape(2, 3))
    assert outs[4]["sum"]._t.uid != outs[5]["sum"]._t.uid


def test_state_assigned_inside_is_updated_by_replays():
    counter = Tensor(np.zeros(3, np.float32))

    @tensorscope.jit
    def bump(x):
        counter.assign(counter + x)
        return counter * 2

    results = [bump(Tensor(np.full(3, 1.0, np.float32))).numpy() for _ in range(5)]
    np.testing.assert_array_equal(counter.numpy(), np.full(3, 5.0))
    np.testing.assert_array_equal(np.stack(results)[:, 0], [2, 4, 6, 8, 10])
    counter.assign(Tensor(np.full(3, 100.0, np.float32)))  # an assign from outside is seen by the next replay
    np.testing.assert_array_equal(bump(Tensor(np.full(3, 1.0, np.float32))).numpy(), np.full(3, 202.0))


def test_host_reads_and_random_draws_cannot_be_captured():
    f = tensorscope.jit(lambda a: a * (a.sum().item()))
    f(Tensor.ones(3))
    with pytest.raises(JitError, match="on the host"):
        f(Tensor.ones(3))
    g = tensorscope.jit(lambda a: a + Tensor.rand(3))
    g(Tensor.ones(3))
    with pytest.raises(JitError, match="random"):
        g(Tensor.ones(3))
    h = tensorscope.jit(lambda a: a.sum().item())
    with pytest.raises(JitError, match="returned a float"):
        h(Tensor.ones(3))


def test_no_leak_over_many_replays():
    _, step = _trainer("Adam", dict(lr=0.01))
    jit_step = tensorscope.jit(step)
    (x, y), = _batches(1)
    Tensor.training = True
    try:
        for _ in range(4):
            jit_step(Tensor(x), Tensor(y)).numpy()
        gc.collect()
        baseline = GlobalCounters.live_graph_nodes()
        for _ in range(50):
            jit_step(Tensor(x), Tensor(y)).numpy()
        gc.collect()
        after = GlobalCounters.live_graph_nodes()
    finally:
        Tensor.training = False
    assert after <= baseline, f"live graph nodes grew from {baseline} to {after} over 50 replays"


def test_replayed_kernels_reach_the_session_marked_as_replays():
    script = (
        "import tensorscope\n"
        "from tensorscope import Tensor\n"
        "f = tensorscope.jit(lambda a: (a + 1).sum())\n"
        "for _ in range(3): f(Tensor.ones(4))\n"
    )
    env = dict(os.environ, DEBUG="1")
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    replayed = [line for line in out.stderr.splitlines() if "jit replay of kernel" in line]
    assert len(replayed) == 1 and "r_4" in replayed[0], out.stderr


def test_an_optimizer_update_writes_the_new_value_into_the_old_buffer_when_nothing_else_holds_it():
    # A replay writes a state's new value into its old value's buffer when the update reads the old value
    # elementwise and nothing else holds it (jit.cpp, build_plan/replay): Adam's W, m and v of each of the
    # four parameters, and the powers of its bias corrections. Results bit for bit those of fresh buffers
    # (TENSORSCOPE_JIT_IN_PLACE=0) and of eager steps. The count is the C device's: there split_index_set
    # takes the masks off the stores of the kernel that updates both biases and W2 (one kernel of 1280
    # threads); on a GPU device those two biases' stores stay masked, which in_place_pairs does not take
    # (8 outputs in place: a TENSORSCOPE_DEVICE=CUDA:0 run on an H200 counted them). The device is named so
    # that such runs of this file still test C.
    batches = _batches()
    runs = {}
    for mode in ("in place", "fresh", "eager"):
        os.environ["TENSORSCOPE_JIT_IN_PLACE"] = "0" if mode == "fresh" else "1"
        default_device, Device.DEFAULT = Device.DEFAULT, "C"
        try:
            model, step = _trainer("Adam", dict(lr=0.003))
            f = step if mode == "eager" else tensorscope.jit(step)
            before = GlobalCounters.in_place_outputs
            runs[mode] = [f(Tensor(x), Tensor(y)).item() for x, y in batches], nn.get_state_dict(model)
            written = GlobalCounters.in_place_outputs - before
        finally:
            del os.environ["TENSORSCOPE_JIT_IN_PLACE"]
            Device.DEFAULT = default_device
        if mode == "in place":
            # 4 x (W, m, v), and the powers b1^t and b2^t of the bias corrections
            assert f.captured.in_place_output_count == 14, f.captured.in_place_output_count
            assert written == 14 * (STEPS - 2), written  # every replay (the first two calls run and capture)
        else:
            assert written == 0
    for mode in ("fresh", "eager"):
        assert runs["in place"][0] == runs[mode][0], mode
        for k, v in runs[mode][1].items():
            np.testing.assert_array_equal(runs["in place"][1][k].numpy(), v.numpy(), err_msg=f"{k} ({mode})")


def test_an_old_value_held_elsewhere_or_read_out_of_place_gets_a_fresh_buffer():
    counter = Tensor(np.arange(3, dtype=np.float32))

    @tensorscope.jit
    def bump(x):
        counter.assign(counter + x)
        return counter * 2

    for _ in range(3):
        bump(Tensor(np.ones(3, np.float32)))
    assert bump.captured.in_place_output_count == 1
    kept = counter.detach()  # shares the old value: the next replay must not overwrite it
    before = GlobalCounters.in_place_outputs
    bump(Tensor(np.ones(3, np.float32)))
    assert GlobalCounters.in_place_outputs == before
    np.testing.assert_array_equal(kept.numpy(), [3, 4, 5])
    np.testing.assert_array_equal(counter.numpy(), [4, 5, 6])
    del kept
    bump(Tensor(np.ones(3, np.float32)))  # held by the tensor alone again: in place
    assert GlobalCounters.in_place_outputs == before + 1
    np.testing.assert_array_equal(counter.numpy(), [5, 6, 7])

    rev = Tensor(np.arange(3, dtype=np.float32))

    @tensorscope.jit
    def turn(x):  # the new value reads the old one at other indices: never in place
        rev.assign(rev.flip(0) + x)
        return rev * 1

    expected = np.arange(3, dtype=np.float32)
    for _ in range(5):
        turn(Tensor(np.ones(3, np.float32)))
        expected = expected[::-1] + 1
    assert turn.captured.in_place_output_count == 0
    np.testing.assert_array_equal(rev.numpy(), expected)
