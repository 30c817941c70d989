# Multi-output kernels (the kernelizer's rule 6, engine/src/schedule/schedule.h): elementwise kernels of one
# shape that read a common buffer, or read at their own index a value another of them stores, are one kernel
# that stores all their outputs. An optimizer's update of one parameter (Adam: m, v and the parameter, all
# reading the gradient) is one launch that reads each buffer once, as PyTorch's foreach/fused optimizers do
# by hand; small kernels of several shapes (the updates of a network's biases) are one launch over the
# largest one's elements. Counted exactly, checked against PyTorch and NumPy, on the C device and the IR
# interpreter.
import json
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import torch

import tensorscope
from tensorscope import GlobalCounters, Tensor
from tensorscope.nn import optim
from test_conv_backward import run_cli_out
from test_no_recompute import recorded_schedules

_C = tensorscope._C
DEVICES = ["C", "INTERP"]
devices = pytest.mark.parametrize("dev", DEVICES)


def _recorded_kernels(fn, tmp_path):
    """Runs fn() while recording; returns every kernel of every schedule (the recording's KernelInfo)."""
    return [k for kernels, _ in recorded_schedules(fn, tmp_path) for k in kernels]


def _cli_kernel(tmp_path, body, name):
    """(tensorscope-cli's --out folder, kernels.json's entry for kernel `name`) of the script `body` (after the
    imports of numpy and Tensor)."""
    script = tmp_path / "k.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\n" + body)
    out = run_cli_out(script, tmp_path / "out")
    (listed,) = [k for k in json.loads((out / "kernels.json").read_text())["kernels"] if k["name"] == name]
    return out, listed


def _params(dev, seed=0):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((6, 5)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    return w, b, x


OPTIMIZERS = [
    ("Adam", dict(lr=1e-2), 3),
    ("AdamW", dict(lr=1e-2, weight_decay=0.1), 3),
    ("SGD", dict(lr=1e-2, momentum=0.9), 2),
    ("SGD", dict(lr=1e-2), 1),
]


@devices
@pytest.mark.parametrize("name,kwargs,outputs", OPTIMIZERS, ids=["Adam", "AdamW", "SGD-momentum", "SGD"])
def test_an_optimizer_step_over_small_parameters_is_one_kernel(dev, name, kwargs, outputs, tmp_path):
    wv, bv, xv = _params(dev)
    w = Tensor(wv.copy(), requires_grad=True, device=dev)
    b = Tensor(bv.copy(), requires_grad=True, device=dev)
    tw = torch.tensor(wv.copy(), requires_grad=True)
    tb = torch.tensor(bv.copy(), requires_grad=True)
    opt = getattr(optim, name)([w, b], **kwargs)
    topt = getattr(torch.optim, name)([tw, tb], **kwargs)
    x = Tensor(xv, device=dev).realize()

    def backward():
        opt.zero_grad()
        (x @ w.T + b).relu().square().sum().backward()
        Tensor.realize(w.grad, b.grad)

    for step in range(3):
        backward()
        if step < 2:
            opt.step()
        else:  # the third step's schedule, recorded: one kernel with every value of every parameter it updates
            kernels = _recorded_kernels(opt.step, tmp_path)
        topt.zero_grad()
        (torch.tensor(xv) @ tw.T + tb).relu().square().sum().backward()
        topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-5, atol=1e-6)
    # w (6, 5) and b (6) are small (at most kMultiOutputSmallElements each): their updates, and Adam's bias
    # corrections b1^t and b2^t (one scalar each), are one kernel of several shapes looping over w's 30
    # elements; each parameter's values (Adam: m, v and the parameter) are computed from one read of each buffer
    (step,) = kernels
    shapes = sorted(o["shape"] for o in step["outputs"])
    scalars = [[], []] if name.startswith("Adam") else []
    assert step["name"] == "E_30" and shapes == scalars + [[6]] * outputs + [[6, 5]] * outputs, (step["name"], shapes)
    kinds = 3 if scalars else 2
    assert any(r.startswith(f"multi-output kernel: stores {len(shapes)} values of {kinds} shapes")
               for r in step["boundary_reasons"]), step["boundary_reasons"]


@devices
def test_a_weight_gradient_kernel_also_stores_the_momentum_and_the_parameter(dev, tmp_path):
    # One schedule per SGD step (backward realizes nothing): the weight gradient's reduce kernel computes the
    # new momentum buffer b = 0.9·b + xᵀg; the parameter's update p - lr·b reads b at its own index, so it
    # joins that kernel as a second output (rule 6 with a reduce kernel at its head, on devices without
    # workgroups): one launch per parameter, b read back from memory by no one. Values against PyTorch.
    rng = np.random.default_rng(3)
    wv, bv = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal(24).astype(np.float32)
    xv = rng.standard_normal((16, 40)).astype(np.float32)
    w = Tensor(wv.copy(), requires_grad=True, device=dev)
    b = Tensor(bv.copy(), requires_grad=True, device=dev)
    tw, tb = torch.tensor(wv.copy(), requires_grad=True), torch.tensor(bv.copy(), requires_grad=True)
    opt = optim.SGD([w, b], lr=1e-2, momentum=0.9)
    topt = torch.optim.SGD([tw, tb], lr=1e-2, momentum=0.9)
    x = Tensor(xv, device=dev).realize()

    def step():
        opt.zero_grad()
        (x @ w.T + b).relu().square().sum().backward()
        opt.step()

    for i in range(3):
        if i < 2:
            step()
        else:
            kernels = _recorded_kernels(step, tmp_path)
        topt.zero_grad()
        (torch.tensor(xv) @ tw.T + tb).relu().square().sum().backward()
        topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-5, atol=1e-5)
    updates = [k for k in kernels if [o["shape"] for o in k["outputs"]] in ([[24, 40], [24, 40]], [[24], [24]])]
    assert sorted(k["name"] for k in updates) == ["r_24_16", "r_24_40_16"], [k["name"] for k in kernels]
    for k in updates:
        assert any(r.startswith("multi-output kernel: stores 2 values of one shape") for r in k["boundary_reasons"])
    # nothing else stores a (24, 40) or (24,) value: no separate momentum or parameter kernel
    assert not [k["name"] for k in kernels if k not in updates and [o["shape"] for o in k["outputs"]][0] in ([24, 40], [24])]


@devices
def test_values_read_by_each_other_are_one_kernel(dev):
    xv = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    x = Tensor(xv, device=dev).realize()
    a = x * 2 + 1
    b = a.exp() - x  # reads a at its own index: computed once, in the same loop
    c = (x - 3).abs()  # reads x, as a does
    GlobalCounters.reset()
    Tensor.realize(a, b, c)
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_allclose(a.numpy(), xv * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), np.exp(xv * 2 + 1) - xv, rtol=1e-5)
    np.testing.assert_allclose(c.numpy(), np.abs(xv - 3), rtol=1e-6)


@devices
def test_small_kernels_of_one_shape_are_one_kernel(dev):
    # no buffer in common, but at most 4096 elements each (kMultiOutputSmallElements): a launch costs more
    # than their work (SGD's updates of a network's biases)
    xv = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)
    yv = np.linspace(1, 3, 64, dtype=np.float32).reshape(8, 8)
    x, y = Tensor(xv, device=dev).realize(), Tensor(yv, device=dev).realize()
    a, b = x + 1, y * 2
    GlobalCounters.reset()
    Tensor.realize(a, b)
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_allclose(a.numpy(), xv + 1)
    np.testing.assert_allclose(b.numpy(), yv * 2)


@devices
def test_outputs_of_different_dtypes_share_a_kernel(dev):
    # one loop over the shape, each output stored in its own dtype: bool, float32, float16
    from tensorscope import dtypes
    xv = np.linspace(-2, 2, 64, dtype=np.float32).reshape(8, 8)
    x = Tensor(xv, device=dev).realize()
    a, b, c = x > 0, x * 2, x.cast(dtypes.float16) + 1
    GlobalCounters.reset()
    Tensor.realize(a, b, c)
    assert GlobalCounters.kernel_count == 1
    np.testing.assert_array_equal(a.numpy(), xv > 0)
    np.testing.assert_allclose(b.numpy(), xv * 2)
    np.testing.assert_array_equal(c.numpy(), xv.astype(np.float16) + np.float16(1))


@devices
def test_what_is_not_merged(dev):
    # 80 x 64 = 5120 elements: above kMultiOutputSmallElements, so only a shared buffer merges kernels
    xv = np.linspace(-2, 2, 5120, dtype=np.float32).reshape(80, 64)
    yv = np.linspace(1, 3, 5120, dtype=np.float32).reshape(80, 64)
    x, y = Tensor(xv, device=dev).realize(), Tensor(yv, device=dev).realize()
    cases = [
        # no buffer in common: two kernels
        (lambda: (x + 1, y * 2), 2, lambda: (xv + 1, yv * 2)),
        # another shape: two kernels
        (lambda: (x + 1, x[:40] * 2), 2, lambda: (xv + 1, xv[:40] * 2)),
        # b reads a through a movement (a flip): not at its own index, two kernels
        (lambda: ((a := x + 1), a.flip(1) * x), 2, lambda: (xv + 1, (xv + 1)[:, ::-1] * xv)),
        # a reduce in between reads a: a's kernel must run before it, so c does not join a
        (lambda: ((a := x + 1), x * a.sum()), 3, lambda: (xv + 1, xv * (xv + 1).sum())),
        # contiguous() ends a kernel, even where the next would read it at its own index
        (lambda: ((x + 1).contiguous() * x,), 2, lambda: ((xv + 1) * xv,)),
    ]
    for make, kernels, want in cases:
        outs = make()
        GlobalCounters.reset()
        Tensor.realize(*outs)
        assert GlobalCounters.kernel_count == kernels
        for got, ref in zip(outs, want()):
            np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-6)



@devices
def test_a_stored_reduction_read_at_its_own_index_joins_the_kernel_that_reduces_it(dev):
    # m = x.mean(0) is stored: x - m reads it through a broadcast (recomputing the reduction for each element
    # costs more). (m + 1).sqrt() reads it at its own index, so it joins m's kernel as a second output, as
    # BatchNorm's 1/sqrt(var + eps) joins the kernel of its batch variance: two kernels, not three, although
    # realize() asked for m by no name. In realize's order the sqrt comes before x - m; the other way round,
    # x - m runs between the two and needs m stored first, so the sqrt stays a kernel of its own.
    xv = np.linspace(-2, 2, 80 * 64, dtype=np.float32).reshape(80, 64)
    x = Tensor(xv, device=dev).realize()
    for order, kernels in (("sqrt first", 2), ("sqrt last", 3)):
        m = x.mean(0)
        centered, s = x - m, (m + 1).sqrt()
        GlobalCounters.reset()
        Tensor.realize(*((s, centered) if order == "sqrt first" else (centered, s)))
        assert GlobalCounters.kernel_count == kernels, order
    np.testing.assert_allclose(centered.numpy(), xv - xv.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(s.numpy(), np.sqrt(xv.mean(0) + 1), rtol=1e-5)


def test_batchnorm_statistics_join_the_variance_kernel(tmp_path):
    # training-mode BatchNorm2d forward: the batch mean, the batch variance (reading the mean through a
    # broadcast), then per channel 1/sqrt(var + eps) and the running statistics' update, which read the mean
    # and the variance at their own index: they are outputs of the variance's kernel, not a kernel of their own.
    # Values and running statistics against PyTorch.
    from tensorscope import nn
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((8, 16, 6, 6)).astype(np.float32)
    bn, tbn = nn.BatchNorm2d(16), torch.nn.BatchNorm2d(16).train()
    Tensor.training = True
    try:
        x = Tensor(xv).realize()
        out = bn(x)
        kernels = _recorded_kernels(lambda: out.realize(bn.running_mean, bn.running_var), tmp_path)
    finally:
        Tensor.training = False
    want = tbn(torch.tensor(xv)).detach().numpy()
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(bn.running_mean.numpy(), tbn.running_mean.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), tbn.running_var.numpy(), rtol=1e-5, atol=1e-6)
    # num_batches_tracked + 1, the mean, the variance (+ the per-channel values), the normalization
    assert [k["name"] for k in kernels] == ["E_1", "r_16_8_6_6", "r_16_8_6_6", "E_8_16_6_6"]
    variance = kernels[2]
    assert len(variance["outputs"]) > 1 and all(o["shape"] in ([16], [1, 16, 1, 1]) for o in variance["outputs"])
    assert any(r.startswith("multi-output kernel") for r in variance["boundary_reasons"])

@devices
def test_batchnorm_backward_coefficients_join_the_kernel_of_the_sums_they_read(dev, tmp_path):
    # A convolution, a training-mode BatchNorm2d and a ReLU, with SGD: the backward sums g·(x - mean) per channel
    # into a (1, C, 1, 1) value, stored (two kernels read it), and the per-channel coefficients in front of the
    # input gradient read that sum as (C), through a reshape of axes of size 1 (the kernelizer's reads_in_place):
    # they are a second output of the kernel that sums, not an E_16 of their own. 17 kernels a step on C, 18
    # before (MobileNet: one launch fewer per BatchNorm). Parameters after two steps against PyTorch's.
    from tensorscope import Device, nn
    rng = np.random.default_rng(3)
    xv = rng.standard_normal((8, 8, 6, 6)).astype(np.float32)
    default_device, Device.DEFAULT = Device.DEFAULT, dev  # the layers' parameters on `dev` too
    try:
        conv, bn = nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16)
    finally:
        Device.DEFAULT = default_device
    tconv, tbn = torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.BatchNorm2d(16).train()
    with torch.no_grad():
        tconv.weight.copy_(torch.tensor(conv.weight.numpy()))
        tconv.bias.copy_(torch.tensor(conv.bias.numpy()))
    params = [conv.weight, conv.bias, bn.weight, bn.bias]
    opt = optim.SGD(params, lr=0.1)
    topt = torch.optim.SGD([tconv.weight, tconv.bias, tbn.weight, tbn.bias], lr=0.1)

    def step():
        opt.zero_grad()
        loss = bn(conv(Tensor(xv, device=dev))).relu().mean()
        loss.backward()
        opt.step()
        loss.realize()

    Tensor.training = True
    try:
        step()
        kernels = _recorded_kernels(step, tmp_path)
    finally:
        Tensor.training = False
    for _ in range(2):
        topt.zero_grad()
        tbn(tconv(torch.tensor(xv))).relu().mean().backward()
        topt.step()
    for p, tp in zip(params, [tconv.weight, tconv.bias, tbn.weight, tbn.bias]):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-4, atol=1e-6)
    assert len(kernels) == {"C": 17, "INTERP": 16}[dev], [k["name"] for k in kernels]  # C copies the weight transposed
    joined = [k for k in kernels if k["name"] == "r_16_8_6_6" and sorted(o["shape"] for o in k["outputs"]) == [[1, 16, 1, 1], [16]]]
    assert len(joined) == 1, [(k["name"], [o["shape"] for o in k["outputs"]]) for k in kernels]
    assert "SQRT" in joined[0]["ops"] and any(r.startswith("multi-output kernel") for r in joined[0]["boundary_reasons"])


def test_multi_output_kernel_in_a_jit_replay():
    xv = np.arange(8, dtype=np.float32)
    state = Tensor(np.zeros(8, dtype=np.float32)).realize()

    @tensorscope.jit
    def step(x):
        state.assign(state + x)
        return x * 3 + state  # realized with the new state, in one schedule

    for i in range(4):
        out = step(Tensor(xv + i))
    # state: sum of xv + i over i = 0..3; the output reads the new state where it is stored
    np.testing.assert_allclose(state.numpy(), 4 * xv + 6)
    np.testing.assert_allclose(out.numpy(), (xv + 3) * 3 + 4 * xv + 6)
    GlobalCounters.reset()
    step(Tensor(xv))
    assert GlobalCounters.kernel_count == 1


def test_adam_update_kernel_is_vectorized_without_alias_checks(tmp_path):
    # The C renderer passes the buffers as restrict parameters of a static kernel function: gcc versioned
    # loops over restrict locals loaded from bufs[] with run-time alias checks, at most 10, and the three
    # outputs and four inputs of an Adam update need more (the loop stayed scalar, 4x slower).
    script = tmp_path / "adam.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\nfrom tensorscope.nn import optim\n"
                      "w = Tensor(np.ones((64, 100), dtype=np.float32), requires_grad=True)\n"
                      "opt = optim.Adam([w], lr=1e-3)\n"
                      "for _ in range(2):\n"
                      "    opt.zero_grad()\n"
                      "    (w * w).sum().backward()\n"
                      "    opt.step()\n")
    out = run_cli_out(script, tmp_path / "out")
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    updates = [k for k in kernels if k["name"] == "E_64_100" and len(k["outputs"]) == 3]
    assert updates, [(k["name"], len(k["outputs"])) for k in kernels]
    source = (out / updates[0]["sources"]["C"]).read_text()
    assert "static void E_64_100_kernel(" in source and "float* restrict data2,  /* output" in source, source
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "k.c").write_text(source)
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    r = subprocess.run([cc, "-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fopt-info-vec-all",
                        "-I", os.path.join(repo, "engine", "src", "ir"), "-c", str(tmp_path / "k.c"),
                        "-o", str(tmp_path / "k.o")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "loop vectorized" in r.stderr and "versioned for vectorization" not in r.stderr, r.stderr[-3000:]


def _runnable_devices():
    return [d for d in _C.device_names() if _C.device_properties(d)["can_run"]]


@pytest.mark.parametrize("dev", _runnable_devices())
def test_merged_kernels_take_no_more_buffers_than_the_device_binds(dev, tmp_path):
    # 60 parameters of one small shape, plain SGD: each update stores 1 and reads 2 buffers (180 in all), no
    # buffer in common. They merge as small kernels of at most 32 buffers (kMaxMultiOutputBuffers), fewer where
    # the device binds fewer (DeviceProperties::max_kernel_buffers: PoCL 128, lavapipe 32; C and INTERP: no
    # limit), and every value is PyTorch's.
    bound = _C.device_properties(dev)["max_kernel_buffers"]
    most = min(bound, 32) if bound else 32
    rng = np.random.default_rng(5)
    values = [rng.standard_normal(7).astype(np.float32) for _ in range(60)]
    grads = [rng.standard_normal(7).astype(np.float32) for _ in range(60)]
    params = [Tensor(v.copy(), requires_grad=True, device=dev) for v in values]
    opt = optim.SGD(params, lr=0.1)
    for p, g in zip(params, grads):
        p.grad = Tensor(g, device=dev).realize()
    kernels = _recorded_kernels(opt.step, tmp_path)
    tparams = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    for p, g in zip(tparams, grads):
        p.grad = torch.tensor(g)
    torch.optim.SGD(tparams, lr=0.1).step()
    for p, t in zip(params, tparams):
        np.testing.assert_allclose(p.numpy(), t.detach().numpy(), rtol=1e-6, atol=1e-7)
    sizes = [len(k["outputs"]) + len(k["inputs"]) for k in kernels]
    assert sum(len(k["outputs"]) for k in kernels) == 60
    assert max(sizes) <= most and len(kernels) == -(-180 // (most // 3 * 3)), sizes


@devices
def test_small_kernels_of_several_shapes_are_one_kernel_over_the_largest(dev, tmp_path):
    # Three small elementwise results of shapes (16,), (3, 5) (through a transpose) and () realized together:
    # one kernel loops over 16 elements, each output stored where its own elements are. split_index_set splits
    # the loop where the outputs end (at 1 and 15), so no store is left masked in the C code.
    rng = np.random.default_rng(11)
    av, bv, cv = (rng.standard_normal(16).astype(np.float32), rng.standard_normal((5, 3)).astype(np.float32),
                  rng.standard_normal(()).astype(np.float32))
    a, b, c = (Tensor(v, device=dev).realize() for v in (av, bv, cv))
    x, y, z = a * 2 + 1, b.T.exp(), (c - 3).abs()

    def realize():
        x.realize(y, z)

    (kernel,) = _recorded_kernels(realize, tmp_path)
    assert kernel["name"] == "E_16" and sorted(o["shape"] for o in kernel["outputs"]) == [[], [3, 5], [16]], kernel
    assert any(r.startswith("multi-output kernel: stores 3 values of 3 shapes") for r in kernel["boundary_reasons"])
    np.testing.assert_array_equal(x.numpy(), av * 2 + 1)
    np.testing.assert_allclose(y.numpy(), torch.tensor(bv).T.exp().numpy(), rtol=1e-6)
    np.testing.assert_array_equal(z.numpy(), np.abs(cv - np.float32(3)))
    if dev == "C":  # the generated code, through tensorscope-cli: no comparison left after the split
        out, listed = _cli_kernel(tmp_path, "a, b, c = Tensor(np.ones(16, np.float32)), Tensor(np.ones((5, 3), np.float32)), "
                                            "Tensor(np.float32(2))\n(a * 2 + 1).realize(b.T.exp(), (c - 3).abs())\n", "E_16")
        code = (out / listed["sources"]["C"]).read_text().split("static void ")[-1]
        assert "if (" not in code and not re.search(r"\((v|ridx)\d+ < \d+\)", code), code  # no mask of an index


@devices
def test_a_kernel_of_several_shapes_loops_over_the_largest_ones_axes(dev, tmp_path):
    # A 2-d largest output (a loss gradient's (8, 10) rows, each scaled by its row's 1 / sum) merged with a
    # (8,) and a () result: the loop runs over (8, 10), so the largest is indexed without taking a flat index
    # apart by / 10 and % 10 (each element did over a flat loop of 80: the CNN's (64, 10) loss gradient took
    # 7.6 µs, 1-2 µs over its rows), and the smaller ones store at the rows' linear index.
    rng = np.random.default_rng(12)
    xv, sv, cv = (rng.standard_normal((8, 10)).astype(np.float32), rng.random((8, 1)).astype(np.float32) + 1,
                  rng.standard_normal(()).astype(np.float32))
    x, s, c = (Tensor(v, device=dev).realize() for v in (xv, sv, cv))
    y, w, z = x.exp() * s.reciprocal(), s.reshape(8) * 2, c + 1

    def realize():
        y.realize(w, z)

    (kernel,) = _recorded_kernels(realize, tmp_path)
    assert kernel["name"] == "E_80" and sorted(o["shape"] for o in kernel["outputs"]) == [[], [8], [8, 10]], kernel
    np.testing.assert_allclose(y.numpy(), (torch.tensor(xv).exp() * torch.tensor(sv).reciprocal()).numpy(), rtol=1e-6)
    np.testing.assert_array_equal(w.numpy(), sv.reshape(8) * 2)
    np.testing.assert_array_equal(z.numpy(), cv + np.float32(1))
    if dev == "C":  # the generated code, through tensorscope-cli: two loops over the rows and their 10 columns
        out, listed = _cli_kernel(tmp_path, "x, s, c = Tensor(np.ones((8, 10), np.float32)), Tensor(np.ones((8, 1), np.float32)), "
                                            "Tensor(np.float32(2))\n(x.exp() * s.reciprocal()).realize(s.reshape(8) * 2, c + 1)\n", "E_80")
        code = (out / listed["sources"]["C"]).read_text().split("static void ")[-1]
        assert re.search(r"ridx\d+ < 10;", code) and not re.search(r" [/%] 10\)", code), code


# SGD with momentum over a stem convolution, a 1x1 convolution and their BatchNorms, as in MobileNet's step: the
# convolutions' weight gradients arrive transposed ((27, 16) and (16, 32), channel-last matmuls), the other four
# parameters are (16,) and (32,) vectors (their gradients scaled by 1 / sqrt(var + eps), computed in the kernel). Each
# update stores the new momentum buffer and the new parameter.
SGD_PARTS = "\n".join([
    "shapes = [((16, 3, 3, 3), (27, 16)), ((16,), None), ((16,), None), ((32, 16, 1, 1), (16, 32)), ((32,), None), ((32,), None)]",
    "rng = np.random.default_rng(13)",
    "params, bufs, grads = [], [], []",
    "var = {(n,): Tensor(rng.random(n).astype(np.float32), device=DEV).realize() for n in (16, 32)}  # 32 buffers in all",
    "for shape, stored in shapes:",
    "    params.append(Tensor(rng.standard_normal(shape).astype(np.float32), device=DEV).realize())",
    "    bufs.append(Tensor(rng.standard_normal(shape).astype(np.float32), device=DEV).realize())",
    "    g = rng.standard_normal(stored or shape).astype(np.float32)",
    "    if stored:",
    "        grads.append(Tensor(g, device=DEV).realize().T.reshape(shape))",
    "    else:  # a BatchNorm parameter's gradient: a sum over the batch, times 1 / sqrt(var + eps)",
    "        grads.append(Tensor(g, device=DEV).realize() * (var[shape] + 1e-5).sqrt().reciprocal())",
    "new_bufs = [b * 0.9 + g for b, g in zip(bufs, grads)]",
    "new_params = [p - nb * 0.01 for p, nb in zip(params, new_bufs)]",
    "outs = [t for pair in zip(new_bufs, new_params) for t in pair]",
    "",
])


@devices
def test_a_kernel_of_several_shapes_computes_each_output_only_where_it_has_elements(dev, tmp_path):
    # The 12 updates are one kernel over the largest output's 512 elements, UPCAST by 16: 1,750 instructions of 12
    # outputs a step, each masked where its output has ended. split_index_set splits the loop where the outputs
    # end (after 1, 2 and 27 steps of 16): the four copies of the body measured 7,000 instructions, over its limit
    # of 6,000, and the split was dropped (every output computed and masked at all 512 indices: MobileNet's E_512,
    # 14 us). The size is now checked after simplify, which leaves each range only the outputs that have elements
    # there (about 3,200 instructions): the C code stores without a mask. The (16, 3, 3, 3) outputs take their
    # linear index apart as (16, 27) (Lowerer::output_indices): the gradient stored transposed, (27, 16), is read at
    # at / 27 + (at % 27)·16, not through / and % by 3 and 9 (6 for each of the 16 lanes; 14 -> 4-5 us in all).
    scope = {"np": np, "Tensor": Tensor, "DEV": dev}
    exec(SGD_PARTS, scope)
    outs = scope["outs"]

    def realize():
        outs[0].realize(*outs[1:])

    (kernel,) = _recorded_kernels(realize, tmp_path)
    assert kernel["name"] == "E_512" and len(kernel["outputs"]) == 12, kernel
    for b, g, p, nb, np_ in zip(scope["bufs"], scope["grads"], scope["params"], outs[0::2], outs[1::2]):
        want_b = torch.tensor(b.numpy()) * 0.9 + torch.tensor(g.numpy())
        np.testing.assert_allclose(nb.numpy(), want_b.numpy(), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(np_.numpy(), (torch.tensor(p.numpy()) - want_b * 0.01).numpy(), rtol=1e-6, atol=1e-7)
    if dev == "C":  # the generated code, through tensorscope-cli: one loop per range, no masked store
        out, listed = _cli_kernel(tmp_path, "DEV = 'C'\n" + SGD_PARTS + "outs[0].realize(*outs[1:])\n", "E_512")
        code = (out / listed["sources"]["C"]).read_text().split("static void ")[-1]
        assert len(re.findall(r"for \(int ridx", code)) == 4 and "if (" not in code, code
        assert not re.search(r" [/%] [39]\)", code) and re.search(r" % 27\)", code), code


@devices
def test_a_transposing_copy_of_1024_or_more_keeps_its_own_loop(dev, tmp_path):
    # LeNet-5's head: W (16, 84) copied transposed (1,344 elements, kMultiOutputOwnLoopTransposeElements = 1,024)
    # and a (32, 84) ReLU realized together are two kernels: merged, the copy's indices came from divisions of
    # the other's flat index (7 us for the pair, scalar); apart, the copy is tiled (TRANSPOSE_TILE on C). A (3, 5)
    # transpose still shares a loop (test_small_kernels_of_several_shapes_are_one_kernel_over_the_largest).
    rng = np.random.default_rng(12)
    wv, av = rng.standard_normal((16, 84)).astype(np.float32), rng.standard_normal((32, 84)).astype(np.float32)
    w, a = Tensor(wv, device=dev).realize(), Tensor(av, device=dev).realize()
    wt, r = w.T.contiguous(), a.relu()

    def realize():
        wt.realize(r)

    kernels = _recorded_kernels(realize, tmp_path)
    assert sorted(k["name"] for k in kernels) == ["E_32_84", "E_84_16"], [k["name"] for k in kernels]
    np.testing.assert_array_equal(wt.numpy(), wv.T)
    np.testing.assert_array_equal(r.numpy(), np.maximum(av, 0))
    if dev == "C":  # the applied actions, through tensorscope-cli
        _, copy = _cli_kernel(tmp_path, "w, a = Tensor(np.ones((16, 84), np.float32)), Tensor(np.ones((32, 84), np.float32))\n"
                                        "w.T.contiguous().realize(a.relu())\n", "E_84_16")
        assert "TRANSPOSE_TILE(8)" in copy["actions"]["applied"], copy["actions"]


@devices
def test_small_results_of_random_shapes_and_dtypes_realized_together_are_one_kernel(dev):
    # Fixed-seed programs: 2 to 6 small results of random shapes (0-d to 3-d), float and bool, some read through
    # a transpose or a reversed view, realized together: one kernel each time, every value as NumPy computes it.
    rng = np.random.default_rng(7)
    for _ in range(20):
        results, wants = [], []
        for _ in range(int(rng.integers(2, 7))):
            shape = tuple(int(s) for s in rng.integers(1, 9, size=int(rng.integers(0, 4))))
            a = rng.standard_normal(shape).astype(np.float32)
            t = Tensor(a, device=dev).realize()
            kind = int(rng.integers(0, 4))
            if kind == 0:
                results.append(t * 2 + 1), wants.append(a * np.float32(2) + np.float32(1))
            elif kind == 1:
                results.append(t > 0), wants.append(a > 0)
            elif kind == 2 and len(shape) >= 2:
                results.append(t.transpose(0, 1) * 3), wants.append(a.swapaxes(0, 1) * np.float32(3))
            else:
                results.append(t.reshape(-1)[::-1].exp()), wants.append(np.exp(a.reshape(-1)[::-1]))
        GlobalCounters.reset()
        results[0].realize(*results[1:])
        assert GlobalCounters.kernel_count == 1, [r.shape for r in results]
        for got, want in zip(results, wants):
            value = got.numpy()
            assert value.shape == want.shape and value.dtype == want.dtype, (value.shape, value.dtype, want.dtype)
            np.testing.assert_allclose(value, want, rtol=1e-6, atol=1e-6)


@devices
def test_adam_over_a_large_weight_and_a_small_bias_is_three_kernels(dev, tmp_path):
    # w (128, 64) has more than 4,096 elements: its m, v and new value are one kernel of one shape (reading the
    # gradient once), and b's (128) are another. Adam's two bias corrections (scalars) are one kernel before them:
    # w's update, launched before b's, reads them, so no later kernel may join theirs (it runs where its last
    # member would).
    rng = np.random.default_rng(2)
    wv, bv = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    xv = rng.standard_normal((16, 64)).astype(np.float32)
    w, b = Tensor(wv.copy(), requires_grad=True, device=dev), Tensor(bv.copy(), requires_grad=True, device=dev)
    tw, tb = torch.tensor(wv.copy(), requires_grad=True), torch.tensor(bv.copy(), requires_grad=True)
    opt, topt = optim.Adam([w, b], lr=1e-2), torch.optim.Adam([tw, tb], lr=1e-2)
    x = Tensor(xv, device=dev).realize()
    for step in range(3):
        opt.zero_grad()
        (x @ w.T + b).relu().square().sum().backward()
        Tensor.realize(w.grad, b.grad)
        kernels = _recorded_kernels(opt.step, tmp_path) if step == 2 else opt.step()
        topt.zero_grad()
        (torch.tensor(xv) @ tw.T + tb).relu().square().sum().backward()
        topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=1e-5, atol=1e-6)
    found = sorted((k["name"], sorted(o["shape"] for o in k["outputs"])) for k in kernels)
    assert found == [("E_1", [[], []]), ("E_128", [[128]] * 3), ("E_128_64", [[128, 64]] * 3)], found


@devices
def test_a_value_whose_readers_all_join_its_kernel_is_not_stored(dev, tmp_path):
    # A transformer's MLP block backward, x + fc2(gelu(fc1(x))): fc2's input gradient g @ W2 (a reduce) is read by
    # the two products of the GELU backward, which the cost model does not see meet in one kernel, so it is
    # decided stored; the GELU backward then joins the matmul's kernel (it reads the reduce at its own index) and
    # both readers are in that kernel. Nothing else reads the reduce, so the merged kernel keeps it in registers
    # and stores only the GELU backward (d128's 512 x 512 layer stored 1 MB a step that no kernel read). So every
    # stored value of the step's schedule is read by a later kernel or is the loss or a gradient asked for.
    # Gradients against PyTorch.
    rng = np.random.default_rng(5)
    xv = rng.standard_normal((4, 8, 32)).astype(np.float32)
    w1, b1 = (rng.standard_normal((64, 32)) * 0.2).astype(np.float32), (rng.standard_normal(64) * 0.1).astype(np.float32)
    w2, b2 = (rng.standard_normal((32, 64)) * 0.2).astype(np.float32), (rng.standard_normal(32) * 0.1).astype(np.float32)
    x = Tensor(xv, requires_grad=True, device=dev)
    params = [Tensor(v, requires_grad=True, device=dev) for v in (w1, b1, w2, b2)]

    def backward():
        h = (x @ params[0].T + params[1]).gelu()
        y = x + h @ params[2].T + params[3]
        (y * y).sum().backward()
        Tensor.realize(x.grad, *[p.grad for p in params])

    kernels, _ = recorded_schedules(backward, tmp_path)[-1]
    read = {i["node"] for k in kernels for i in k["inputs"]}
    asked = [[]] + [list(xv.shape)] + [list(v.shape) for v in (w1, b1, w2, b2)]  # the loss, the gradients
    unread = [(k["name"], o["shape"]) for k in kernels for o in k["outputs"] if o["node"] not in read]
    assert all(shape in asked for _, shape in unread), unread
    merged = [k for k in kernels if any(r.startswith("merged kernel: stores") for r in k["boundary_reasons"])]
    assert len(merged) == 1 and [o["shape"] for o in merged[0]["outputs"]] == [[4, 8, 64]], [k["name"] for k in kernels]
    decisions = merged[0]["fusion_decisions"]
    assert [d["stored"] for d in decisions if d["reason"].startswith("used where it is computed")] == [False], decisions

    tx = torch.tensor(xv, requires_grad=True)
    tp = [torch.tensor(v, requires_grad=True) for v in (w1, b1, w2, b2)]
    th = torch.nn.functional.gelu(tx @ tp[0].T + tp[1], approximate="tanh")
    ty = tx + th @ tp[2].T + tp[3]
    (ty * ty).sum().backward()
    for got, want in zip([x] + params, [tx] + tp):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-4, atol=1e-4)
