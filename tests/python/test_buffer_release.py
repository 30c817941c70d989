# Buffers released during a schedule (runtime/realize.cpp, release_plan): an intermediate that a kernel
# stores and nothing outside the schedule holds goes back to the buffer pool after the last kernel that
# reads it, so a later kernel's output reuses it within the same realize. What something outside holds (a
# Tensor, a lazy node, a value an autograd history saved and retain_graph kept) keeps its buffer. Values
# are checked against NumPy; the buffer pool's counters (`_C.counters()`) measure what a schedule holds at
# once: `peak_live_buffer_bytes` since `_C.reset_peak_live_buffer_bytes()` (torch.cuda's
# max_memory_allocated and reset_peak_memory_stats).
import numpy as np
import pytest

from tensorscope import GlobalCounters, Tensor, _C

N = 48
MATRIX = N * N * 4  # bytes of one (N, N) float32 buffer


def chain(x, links=4, start=None):
    """`links` matmuls by x from `start` (x), each stored (the next one's reduce reads it): every link is
    dead once the next one is computed."""
    y = x if start is None else start
    for _ in range(links):
        y = (y @ x).relu()
    return y


def reference(v, links=4, start=None):
    y = v if start is None else start
    for _ in range(links):
        y = np.maximum(y @ v, 0)
    return y


def peak_of(fn):
    """(what fn returns, the most bytes live at once while it ran beyond those live before)."""
    live = _C.counters()["live_buffer_bytes"]
    _C.reset_peak_live_buffer_bytes()
    out = fn()
    return out, _C.counters()["peak_live_buffer_bytes"] - live


@pytest.mark.parametrize("dev", ["C", "INTERP"])
def test_a_chain_of_stored_intermediates_holds_two_at_once(dev):
    v = np.random.default_rng(0).uniform(-0.5, 0.5, (N, N)).astype(np.float32)
    x = Tensor(v, device=dev).realize()
    for attempt in range(2):  # the second realize is the schedule cache's replay of the same structure
        out, peak = peak_of(lambda: chain(x).realize())
        # link i is written while link i-1 is read; each goes back to the pool after its reader (held to
        # the end of the schedule, the 4 links took 4 buffers at once)
        assert peak == 2 * MATRIX, (attempt, peak / MATRIX)
        np.testing.assert_allclose(out.numpy(), reference(v), rtol=1e-4, atol=1e-5)


def test_an_intermediate_a_tensor_holds_keeps_its_buffer():
    v = np.random.default_rng(1).uniform(-0.5, 0.5, (N, N)).astype(np.float32)
    x = Tensor(v).realize()
    held = (x @ x).relu()  # the script holds the first link: it keeps its value, computed once
    out, peak = peak_of(lambda: chain(x, links=3, start=held).realize())
    assert peak == 3 * MATRIX  # the held link, and the two the chain needs at once
    GlobalCounters.reset()
    np.testing.assert_allclose(held.numpy(), np.maximum(v @ v, 0), rtol=1e-4, atol=1e-5)
    assert GlobalCounters.kernel_count == 0  # stored by that schedule, not computed again
    np.testing.assert_allclose(out.numpy(), reference(v, links=3, start=np.maximum(v @ v, 0)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("retain", [False, True])
def test_a_training_step_releases_the_forwards_activations_unless_the_graph_is_retained(retain):
    # After backward() the history's saved values are freed (PyTorch's rule), the forward's activations
    # are read only inside the step's schedule and go back to the pool there; with retain_graph=True the
    # history still holds them and they outlive the schedule with their buffers.
    rng = np.random.default_rng(2)
    w1 = Tensor(rng.uniform(-0.1, 0.1, (64, 96)).astype(np.float32), requires_grad=True)
    w2 = Tensor(rng.uniform(-0.1, 0.1, (96, 10)).astype(np.float32), requires_grad=True)
    x = Tensor(rng.uniform(-1, 1, (128, 64)).astype(np.float32)).realize()
    w1.realize(), w2.realize()
    loss = (x @ w1).relu().matmul(w2).square().mean()
    loss.backward(retain_graph=retain)
    live_before = _C.counters()["live_buffer_bytes"]
    Tensor.realize(w1.grad, w2.grad)
    grown = _C.counters()["live_buffer_bytes"] - live_before
    kept = (64 * 96 + 96 * 10 + 1) * 4  # the two gradients and the loss (realized with them)
    if retain:
        assert grown >= kept + 128 * 96 * 4  # and at least the (128, 96) activation relu's backward saved
    else:
        assert grown == kept
    h = np.maximum(x.numpy() @ w1.numpy(), 0)
    g_out = 2 * (h @ w2.numpy()) / (128 * 10)
    np.testing.assert_allclose(loss.numpy(), np.mean((h @ w2.numpy()) ** 2), rtol=1e-5)
    np.testing.assert_allclose(w2.grad.numpy(), h.T @ g_out, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(w1.grad.numpy(), x.numpy().T @ ((g_out @ w2.numpy().T) * (h > 0)),
                               rtol=1e-4, atol=1e-6)
