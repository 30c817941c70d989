# How many kernels the scheduler makes: fusion is the engine's job, and these are its basic lessons.
# Inputs are realized first, so only the kernels of the expression itself are counted.
import numpy as np
import pytest

from tensorscope import GlobalCounters, Tensor

DEVICES = ["C", "INTERP"]
devices = pytest.mark.parametrize("dev", DEVICES)


def _realized(dev, *shape, seed=0):
    v = np.random.default_rng(seed).uniform(-2, 2, size=shape).astype(np.float32)
    return Tensor(v, device=dev).realize(), v


def _count(fn):
    GlobalCounters.reset()
    out = fn()
    out.realize()
    n = GlobalCounters.kernel_count
    return n, out


@devices
def test_elementwise_fuses_into_one_kernel(dev):
    (x, xv), (y, yv) = _realized(dev, 4, 5, seed=0), _realized(dev, 4, 5, seed=1)
    n, out = _count(lambda: (x + y) * x.sin())
    assert n == 1
    np.testing.assert_allclose(out.numpy(), (xv + yv) * np.sin(xv), rtol=1e-5, atol=1e-6)


@devices
def test_realized_inputs_launch_nothing(dev):
    x, _ = _realized(dev, 3)
    GlobalCounters.reset()
    x.realize()
    x.numpy()
    assert GlobalCounters.kernel_count == 0


@devices
def test_quickstart_matmul_sum_is_one_kernel(dev):
    x = Tensor.eye(3, requires_grad=True, device=dev)
    y = Tensor([[2.0, 0, -2.0]], requires_grad=True, device=dev)
    n, z = _count(lambda: y.matmul(x).sum())
    assert n == 1
    np.testing.assert_allclose(z.numpy(), (np.array([[2.0, 0, -2.0]]) @ np.eye(3)).sum(), rtol=1e-6)
    assert z.shape == ()


@devices
def test_chain_of_ten_elementwise_ops_is_one_kernel(dev):
    x, xv = _realized(dev, 16, 16)

    def chain(t):
        t = t + 1.0          # 1
        t = t * 0.5          # 2
        t = t.sin()          # 3
        t = t - 0.25         # 4
        t = t.exp()          # 5
        t = t / 3.0          # 6
        t = t.relu()         # 7
        t = t.sqrt()         # 8
        t = -t               # 9
        return t.tanh()      # 10

    n, out = _count(lambda: chain(x))
    assert n == 1
    expected = np.tanh(-np.sqrt(np.maximum(np.exp(np.sin((xv + 1.0) * 0.5) - 0.25) / 3.0, 0)))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


@devices
def test_reduce_is_one_kernel(dev):
    x, xv = _realized(dev, 6, 7)
    n, out = _count(lambda: x.sum(axis=1))
    assert n == 1
    np.testing.assert_allclose(out.numpy(), xv.sum(axis=1), rtol=1e-5, atol=1e-6)


@devices
def test_elementwise_before_a_reduce_fuses_into_it(dev):
    x, xv = _realized(dev, 6, 7)
    n, out = _count(lambda: (x * 2.0).exp().sum(axis=0))
    assert n == 1
    np.testing.assert_allclose(out.numpy(), np.exp(xv * 2.0).sum(axis=0), rtol=1e-5)


@devices
def test_expanded_reduce_output_ends_a_kernel(dev):
    # Column means broadcast across the rows: the reduce must be stored first, two kernels.
    x, xv = _realized(dev, 6, 7)
    n, out = _count(lambda: x - x.mean(axis=0, keepdim=True))
    assert n == 2
    np.testing.assert_allclose(out.numpy(), xv - xv.mean(axis=0, keepdims=True), rtol=1e-5, atol=1e-6)


@devices
def test_row_reduce_broadcast_along_its_row_fuses(dev):
    # The row max broadcast back along its own row fuses as a second reduction over the row: one kernel.
    x, xv = _realized(dev, 6, 7)
    n, out = _count(lambda: x - x.max(axis=1, keepdim=True))
    assert n == 1
    np.testing.assert_allclose(out.numpy(), xv - xv.max(axis=1, keepdims=True), rtol=1e-6)
    n, out = _count(lambda: x.softmax(-1))
    assert n == 1
    e = np.exp(xv - xv.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)


def test_kernel_count_resets():
    x = Tensor([1.0, 2.0]).realize()
    GlobalCounters.reset()
    (x * 3.0).realize()
    assert GlobalCounters.kernel_count == 1
    GlobalCounters.reset()
    assert GlobalCounters.kernel_count == 0


def test_layernorm_and_conv2d_kernel_counts():
    rng = np.random.default_rng(0)
    t = Tensor(rng.standard_normal((16, 32), dtype=np.float32)).realize()
    n, _ = _count(lambda: t.layernorm())
    assert n == 1  # mean, variance and normalization fused per row
    x = Tensor(rng.standard_normal((2, 3, 8, 8), dtype=np.float32), requires_grad=True).realize()
    w = Tensor(rng.standard_normal((4, 3, 3, 3), dtype=np.float32), requires_grad=True).realize()
    n, y = _count(lambda: x.conv2d(w, padding=1))
    assert n == 1  # pad + pool (movement) + mul + sum: one kernel
    loss = y.sum()
    loss.backward()
    loss.realize()  # backward() leaves the loss to the next realize: this one, alone
    GlobalCounters.reset()
    x.grad.realize(w.grad)
    assert GlobalCounters.kernel_count == 2  # one kernel per gradient (too small for im2col: ops_nn.cpp)


def test_mlp_train_step_kernel_count():
    # forward, backward and the SGD update of a 64-128-10 MLP: tinygrad needs 16 kernels. The count is the C
    # device's (which alone copies W1.T contiguous, and W2.T padded to 16 columns: 11 kernels on CUDA, seen on an H200), so the device is named
    from tensorscope import Device
    default_device, Device.DEFAULT = Device.DEFAULT, "C"
    try:
        _mlp_train_step_kernel_count()
    finally:
        Device.DEFAULT = default_device


def _mlp_train_step_kernel_count():
    from tensorscope import nn
    from tensorscope.nn import optim
    rng = np.random.default_rng(0)
    X = Tensor(rng.standard_normal((128, 64), dtype=np.float32))
    Y = Tensor(rng.integers(0, 10, 128).astype(np.int32))
    l1, l2 = nn.Linear(64, 128), nn.Linear(128, 10)
    opt = optim.SGD(nn.get_parameters([l1, l2]), lr=0.01)

    def step():
        opt.zero_grad()
        loss = l2(l1(X).relu()).sparse_categorical_crossentropy(Y)
        loss.backward()
        opt.step()

    step()
    GlobalCounters.reset()
    step()
    # 12, forward, loss, backward and update in one schedule: the contiguous copy of W1.T, the copy of W2.T padded
    # to 16 columns (a head of 10: one vector of outputs per row, register-tiled, its 6 extra columns cropped), the logits stored
    # once, their logsumexp per row (max and sum of exponentials in one kernel) stored once for the loss and its
    # gradient, the gradient softmax - one-hot = exp(x - logsumexp) - one-hot written out as PyTorch's
    # log_softmax_backward and nll_loss_backward compute it (one elementwise kernel, stored since it feeds two
    # matmuls; through the log-softmax's chain rule it was a kernel with a row sum of the one-hot's gradient), and
    # no recompute of x @ W1.T + b in the backward. (13 while x - max and its row sums were two kernels.)
    assert GlobalCounters.kernel_count == 12


def test_chained_matmuls_are_two_kernels_and_relu_fuses_into_matmul():
    # (a @ b) @ d: the first product is broadcast along a middle dim of the second: it must be stored,
    # not recomputed inside the second matmul (a regression of the row-reduction fusion)
    rng = np.random.default_rng(0)
    a, b, d = (Tensor(rng.standard_normal((16, 16), dtype=np.float32)).realize() for _ in range(3))
    n, out = _count(lambda: (a @ b) @ d)
    assert n == 2
    np.testing.assert_allclose(out.numpy(), (a.numpy() @ b.numpy()) @ d.numpy(), rtol=1e-4, atol=1e-4)
    # relu reads its input three times (x <= 0, x == 0, WHERE); all three fuse with the matmul
    n, out = _count(lambda: (a @ b).relu())
    assert n == 1
    np.testing.assert_allclose(out.numpy(), np.maximum(a.numpy() @ b.numpy(), 0), rtol=1e-4, atol=1e-5)


def test_big_full_reduction_splits_into_two_kernels():
    # SPLIT_REDUCEOP (tinygrad): a full sum of 2^20 floats is 256 partial sums (a global loop the threads
    # share; the elementwise producer fuses into it) and then one sum of the partials
    x, xv = _realized("C", 1 << 20)
    n, out = _count(lambda: (x * 2).sum())
    assert n == 2
    np.testing.assert_allclose(out.numpy(), (xv.astype(np.float64) * 2).sum(), rtol=1e-5)
    small, sv = _realized("C", 1000)
    n, out = _count(lambda: small.sum())
    assert n == 1  # small reductions stay one kernel


@devices
def test_matmul_read_in_two_loops_is_stored(dev):
    # log_softmax of a matmul's output: the row max and the row logsumexp are two loops over the row; a
    # value that holds a reduction per element (the logits) is stored once rather than computed in
    # both loops (a row of K-long dot products each time). softmax of a realized x stays one kernel.
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((8, 32), dtype=np.float32), rng.standard_normal((32, 10), dtype=np.float32)
    tx, tw = Tensor(x, device=dev).realize(), Tensor(w, device=dev).realize()
    n, out = _count(lambda: (tx @ tw).log_softmax(-1))
    assert n == 2
    logits = x.astype(np.float64) @ w
    want = logits - logits.max(1, keepdims=True)
    want -= np.log(np.exp(want).sum(1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)
    n, _ = _count(lambda: tx.log_softmax(-1))
    assert n == 1


def test_transposed_weight_is_copied_once_on_c():
    # x @ W.T (nn.Linear) on the C device: W.T is copied to a contiguous (K, N) first (one small kernel),
    # so that the matmul register-tiles instead of summing dot products; on INTERP no copy. A width 16 does not
    # divide (40) is copied padded to 48 and the product stored 48 wide, then cropped (a third kernel; with a
    # bias or an activation after it, that kernel is theirs: (x @ W.T + b).relu() has as many kernels).
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 24), dtype=np.float32)
    for cols, kernels in ((48, {"C": 2, "INTERP": 1}), (40, {"C": 3, "INTERP": 1})):
        w, b = rng.standard_normal((cols, 24), dtype=np.float32), rng.standard_normal(cols, dtype=np.float32)
        for dev in ("C", "INTERP"):
            tx, tw, tb = (Tensor(a, device=dev).realize() for a in (x, w, b))
            n, out = _count(lambda: tx @ tw.T)
            assert n == kernels[dev], (dev, cols)
            np.testing.assert_allclose(out.numpy(), x @ w.T, rtol=1e-4, atol=1e-4)
            n, out = _count(lambda: (tx @ tw.T + tb).relu())
            assert n == kernels[dev], (dev, cols)  # the bias and relu join the matmul, or the crop
            np.testing.assert_allclose(out.numpy(), np.maximum(x @ w.T + b, 0), rtol=1e-4, atol=1e-4)


@devices
def test_transcendental_read_through_a_wide_broadcast_is_stored(dev):
    # exp(x) @ w reads each exp(x) once per output column: from 8 columns on, exp(x) is stored (2 kernels)
    # instead of computed once per column; with 4 columns it stays fused (1 kernel)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 32), dtype=np.float32)
    tx = Tensor(x, device=dev).realize()
    for cols, kernels in ((16, 2), (4, 1)):
        w = rng.standard_normal((32, cols), dtype=np.float32)
        tw = Tensor(w, device=dev).realize()
        n, out = _count(lambda: tx.exp() @ tw)
        assert n == kernels, cols
        np.testing.assert_allclose(out.numpy(), np.exp(x.astype(np.float64)) @ w, rtol=1e-4, atol=1e-4)


def test_value_read_twice_through_one_view_is_stored():
    # x is read only through v = x.reshape(2, 4), but v is read twice (v and v.flip): x is inlined twice.
    # Forty such steps would inline 2^40 copies (a hang); counting the reads through the view stores x
    # once its subtree exceeds the recompute limit (16 ALU ops): every 4th step, 10 kernels
    xv = np.arange(8, dtype=np.float32)
    x = Tensor(xv).realize()
    for _ in range(40):
        v = x.reshape(2, 4)
        x = (v + v.flip(1)).reshape(8) * 0.5
        vv = xv.reshape(2, 4)
        xv = (vv + vv[:, ::-1]).reshape(8) * np.float32(0.5)
    n, out = _count(lambda: x)
    assert n == 10
    np.testing.assert_allclose(out.numpy(), xv, rtol=1e-6)


def test_big_sum_reads_four_streams_in_two_kernels():
    # from 2^23 float32 elements (32 MiB) a full sum on C adds four quarters elementwise inside the partial
    # sums' loop (four memory streams at once) — still two kernels; its gradient is still all ones
    n = 1 << 23
    xv = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    x = Tensor(xv, requires_grad=True).realize()
    n_kernels, out = _count(lambda: x.sum())
    assert n_kernels == 2
    np.testing.assert_allclose(out.numpy(), xv.astype(np.float64).sum(), rtol=0, atol=1e-6 * np.abs(xv).sum())
    out.backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.ones(n, dtype=np.float32))
    m = x.mean()
    np.testing.assert_allclose(m.numpy(), xv.astype(np.float64).mean(), rtol=0, atol=1e-6 * np.abs(xv).mean())


@devices
def test_a_matmul_read_by_a_reduction_is_stored_and_tiled(dev):
    # (a @ b).relu().mean(0), (a @ b).sum(): fused into the outer reduction, the matmul's dot products ran one at
    # a time inside its loop (256²: 14.6 ms against 0.35 ms); stored, the matmul is register-tiled (schedule.cpp)
    (a, av), (b, bv) = _realized(dev, 64, 48, seed=0), _realized(dev, 48, 40, seed=1)
    n, out = _count(lambda: (a @ b).relu().mean(0))
    assert n == 2
    np.testing.assert_allclose(out.numpy(), np.maximum(av @ bv, 0).mean(0), rtol=1e-5, atol=1e-5)
    n, out = _count(lambda: (a @ b).sum())
    assert n == 2
    np.testing.assert_allclose(out.numpy(), (av.astype(np.float64) @ bv).sum(), rtol=1e-4)
    n, out = _count(lambda: (a @ b).sum(axis=1))  # a reduction over the matmul's own output axis: the same
    assert n == 2
    np.testing.assert_allclose(out.numpy(), (av @ bv).sum(axis=1), rtol=1e-5, atol=1e-4)
    # a softmax over the logits: the logits stored, then one kernel per row (max, sum and division)
    n, out = _count(lambda: (a @ b).softmax(-1))
    assert n == 2
    e = np.exp(av @ bv - (av @ bv).max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def _three_linear_layers_step(tmp_path, optimizer):
    """The kernels of one step (backward and `optimizer`'s step, one schedule) of Linear layers 64-128-96-10 with
    ReLUs and a cross-entropy, run under the CLI: (kernels.json's kernels, their names, the position of the kernel
    that stores each node). Checks that every kernel launches after the kernels that store its inputs."""
    from test_conv_backward import script_kernels
    _, kernels = script_kernels(tmp_path, "rng = np.random.default_rng(0)\n"
                                          "l1, l2, l3 = nn.Linear(64, 128), nn.Linear(128, 96), nn.Linear(96, 10)\n"
                                          f"opt = optim.{optimizer}(nn.get_parameters([l1, l2, l3]), lr=0.01)\n"
                                          "x = Tensor(rng.standard_normal((32, 64)).astype(np.float32))\n"
                                          "y = Tensor(rng.integers(0, 10, 32).astype(np.int32))\n"
                                          "l3(l2(l1(x).relu()).relu()).sparse_categorical_crossentropy(y).backward()\n"
                                          "opt.step()\n")
    names = [k["name"] for k in kernels]
    stored_at = {o["node"]: i for i, k in enumerate(kernels) for o in k["outputs"]}
    for i, k in enumerate(kernels):
        for inp in k["inputs"]:
            assert stored_at.get(inp["node"], -1) < i, (k["name"], inp, names)
    return kernels, names, stored_at


def test_an_sgd_step_updates_each_layer_as_backpropagation_reaches_it(tmp_path):
    # Rule 7 (schedule.h): the launch order is a list schedule that runs first the ready kernel whose latest
    # input was stored last, and an update that a jit replay may write over its parameter after the other
    # readers of the old value. An SGD step over three Linear layers realizes the updates in one schedule; the
    # graph's depth-first order launched them first layer first (the order of the parameters), so the last
    # layer's weight gradient ran after the whole backward pass, when the activations it reads had left the
    # caches. Now it runs before the backward pass reaches the first layer.
    kernels, names, stored_at = _three_linear_layers_step(tmp_path, "SGD")
    # each weight's gradient and SGD update is one kernel (rule 6 on C): W3 (10 x 96) is updated before the
    # backward pass computes the first layer's output gradient (32 x 128, from W2 (96 x 128))
    w3_update, dh1 = names.index("r_10_96_32"), names.index("r_32_128_96")
    assert w3_update < dh1, names
    # the kernels that read a weight's old value launch before the kernel that stores its new value
    for update in ("r_10_96_32", "r_96_128_32", "r_128_64_32"):
        i = names.index(update)
        (old,) = [inp["node"] for inp in kernels[i]["inputs"] if inp["node"] not in stored_at and len(inp["shape"]) == 2
                  and inp["shape"] == kernels[i]["outputs"][0]["shape"]]
        readers = [j for j, k in enumerate(kernels) if j != i and any(inp["node"] == old for inp in k["inputs"])]
        assert readers and max(readers) < i, (update, readers, names)


def test_an_adam_step_updates_each_layer_and_its_bias_as_backpropagation_reaches_it(tmp_path):
    # Rule 7 (schedule.h) with Adam: its bias corrections (two scalars from the step count, read by every update)
    # wait for no kernel; run when no other was ready, they came after the whole backward pass and held every
    # update back with them, and the list schedule's "latest input first" ran the chain of input gradients to
    # its end before any kernel that reads an older output gradient (a layer's bias gradient: d128's 1 MB GELU
    # gradient read back from memory). Now a small kernel that several kernels wait for runs first, and the
    # other readers of what the last kernel read run before the kernels that wait for the last one.
    kernels, names, _ = _three_linear_layers_step(tmp_path, "Adam")
    shapes = [[o["shape"] for o in k["outputs"]] for k in kernels]
    assert shapes[0] == [[], []], names  # the bias corrections
    # each parameter's update (m, v and the new value: three outputs of its shape) launches before the backward
    # pass computes the input gradient of the layer below: W3 (10, 96) and b2 (96) before dh1 (32, 128), which W2
    # (96, 128) and b1 (128) follow
    update = {tuple(s[0]): i for i, s in enumerate(shapes) if len(s) == 3 and s[0] == s[1] == s[2]}
    assert set(update) == {(10, 96), (10,), (96, 128), (96,), (128, 64), (128,)}, names
    dh1 = names.index("r_32_128_96")
    assert max(update[(10, 96)], update[(96,)]) < dh1 < min(update[(96, 128)], update[(128,)]), names


def test_a_value_of_two_tensors_copied_transposed_is_stored_first():
    # A BatchNorm's backward, g·a + (x - m)·b + c per channel, copied channels-last (NCHW -> NHWC, as a
    # convolution's weight gradient copies its output gradient): fused, the copy read g and x across its rows
    # element by element (MobileNet's 32 x 64 x 8 x 8: 0.31 ms); on C from 65536 elements the value is stored
    # first (2 kernels), and the copy moves one tensor in 8x8 tiles (TRANSPOSE_TILE). One tensor with per-channel
    # parameters keeps one kernel (TRANSPOSE_TILE's copy that computes), as do smaller values and INTERP.
    rng = np.random.default_rng(0)

    def case(dev, shape, second):
        gv, xv = (rng.standard_normal(shape, dtype=np.float32) for _ in range(2))
        pv = [rng.standard_normal((1, shape[1], 1, 1), dtype=np.float32) for _ in range(3)]
        g, x = Tensor(gv, device=dev).realize(), Tensor(xv, device=dev).realize()
        p = [Tensor(v, device=dev).realize() for v in pv]
        value = g * p[0] + ((x - p[1]) * p[2] if second else p[1])
        want = gv * pv[0] + ((xv - pv[1]) * pv[2] if second else pv[1])
        n, out = _count(lambda: value.permute(0, 2, 3, 1).contiguous())
        np.testing.assert_allclose(out.numpy(), want.transpose(0, 2, 3, 1), rtol=1e-6, atol=1e-6)
        return n

    assert case("C", (32, 64, 8, 8), second=True) == 2
    assert case("C", (32, 64, 8, 8), second=False) == 1
    assert case("C", (16, 16, 8, 8), second=True) == 1  # 16384 elements: the launch would cost more
    assert case("INTERP", (32, 64, 8, 8), second=True) == 1
