"""Soak test: 1,000 training steps of each sample model, eager and under @tensorscope.jit, must run in constant
memory.

Models (rebuilt here exactly as the samples build them, like scripts/bench_training.py does):
  * samples/cnn_digits.py's CNN (conv-BN-ReLU-pool twice, linear), SGD momentum 0.9, cross-entropy with label
    smoothing 0.1, on batches of the digits data set (random batches from a fixed-seed generator);
  * samples/transformer_tiny.py's 2-layer decoder (dim 32, 4 heads), Adam 3e-3, on the sample's reversal task.
Batch sizes are the samples' (CNN 64, transformer 32): the four soaks (2 models x eager/jit, 4,000 steps) took
80 s on the project's 2-core machine (eager CNN 27 s, eager transformer 40 s, jitted 3 s and 10 s); a step's
cost is mostly per-step overhead, so smaller batches would save little.

Every 100 steps the test samples
  * live buffers: device buffers handed out by the buffer pool and not given back (`_C.counters()["live_buffers"]`),
  * the pool: buffers and bytes held free for reuse (`pool_cached_buffers`, `pool_cached_bytes`),
  * live graph nodes (`GlobalCounters.live_graph_nodes()`, after gc),
  * the process's RSS (resident pages, /proc/self/statm).
After warm-up (the first sample, at step 100: compile caches, optimizer state, jit capture and the pool's working
set are all in place by then), no counter may exceed its warm-up value; RSS may exceed it by at most 8 MiB
(allocator and Python noise; a leak of one 4 KiB buffer per step alone would be ~3.6 MiB over 900 steps, and the
live-buffer count catches that exactly). The losses must fall (the models really train: the last 100 steps' mean
loss below the first 100's), which also shows the jitted step replays real work.
"""
import gc
import os
import time

import numpy as np
import pytest

import tensorscope
from tensorscope import GlobalCounters, Tensor, _C, datasets, nn
from tensorscope.nn import optim

STEPS, EVERY = 1000, 100
RSS_TOLERANCE = 8 << 20
CNN_BATCH, TF_BATCH = 64, 32


class CNN:
    """samples/cnn_digits.py's model."""

    def __init__(self):
        self.conv1, self.bn1 = nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16)
        self.fc = nn.Linear(16 * 2 * 2, 10)

    def __call__(self, x):
        x = self.bn1(self.conv1(x)).relu().max_pool2d(kernel_size=(2, 2))
        x = self.bn2(self.conv2(x)).relu().max_pool2d(kernel_size=(2, 2))
        return self.fc(x.flatten(1))


L, SEP = 6, 10
VOCAB, T = 11, 2 * L
DIM, HEADS, LAYERS = 32, 4, 2


class Block:
    """samples/transformer_tiny.py's block."""

    def __init__(self):
        self.ln1, self.ln2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.qkv = nn.Linear(DIM, 3 * DIM)
        self.proj = nn.Linear(DIM, DIM)
        self.fc1, self.fc2 = nn.Linear(DIM, 4 * DIM), nn.Linear(4 * DIM, DIM)

    def attention(self, x):
        B, S, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = [t.reshape(B, S, HEADS, DIM // HEADS).transpose(1, 2) for t in (q, k, v)]
        out = q.scaled_dot_product_attention(k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, S, DIM))

    def __call__(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(self.fc1(self.ln2(x)).gelu())


class TinyTransformer:
    """samples/transformer_tiny.py's model."""

    def __init__(self):
        self.tok = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Embedding(T, DIM)
        self.blocks = [Block() for _ in range(LAYERS)]
        self.ln = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)
        self.positions = np.arange(T, dtype=np.int32)

    def __call__(self, idx):
        x = self.tok(idx) + self.pos(Tensor(self.positions[:idx.shape[1]]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def _cnn_batches(rng):
    X, Y = datasets.digits()
    X = X.reshape(-1, 1, 8, 8).astype(np.float32)
    Y = Y.astype(np.int32)
    while True:
        idx = rng.integers(0, len(X), CNN_BATCH)
        yield X[idx], Y[idx]


def _reverse_batches(rng):
    while True:
        x = rng.integers(0, 10, size=(TF_BATCH, L))
        y = x[:, ::-1]
        inputs = np.concatenate([x, np.full((TF_BATCH, 1), SEP), y[:, :-1]], axis=1)
        yield inputs.astype(np.int32), np.ascontiguousarray(y, dtype=np.int32)


WORKLOADS = {
    "cnn": dict(model=CNN, opt=lambda p: optim.SGD(p, lr=0.05, momentum=0.9), batches=_cnn_batches,
                loss=lambda out, y: out.sparse_categorical_crossentropy(y, label_smoothing=0.1)),
    "transformer": dict(model=TinyTransformer, opt=lambda p: optim.Adam(p, lr=3e-3), batches=_reverse_batches,
                        loss=lambda out, y: out[:, L:].sparse_categorical_crossentropy(y)),
}


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _sample():
    gc.collect()
    c = _C.counters()
    return dict(live_buffers=c["live_buffers"], live_buffer_bytes=c["live_buffer_bytes"],
                pool_cached_buffers=c["pool_cached_buffers"], pool_cached_bytes=c["pool_cached_bytes"],
                live_graph_nodes=GlobalCounters.live_graph_nodes(), rss=_rss_bytes())


@pytest.mark.parametrize("mode", ["eager", "jit"])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_soak_1000_steps_constant_memory(name, mode):
    w = WORKLOADS[name]
    Tensor.manual_seed(0)
    rng = np.random.default_rng(0)
    model = w["model"]()
    opt = w["opt"](nn.get_parameters(model))
    batches = w["batches"](rng)

    def train(x, y):
        opt.zero_grad()
        loss = w["loss"](model(x), y)
        loss.backward()
        opt.step()  # realizes the parameters, the optimizer state and BatchNorm's running statistics
        return loss

    step_fn = tensorscope.jit(train) if mode == "jit" else train
    losses, samples = [], []
    Tensor.training = True
    start = time.perf_counter()
    try:
        for step in range(1, STEPS + 1):
            x, y = next(batches)
            losses.append(float(step_fn(Tensor(x), Tensor(y)).numpy()))
            if step % EVERY == 0:
                samples.append((step, _sample()))
    finally:
        Tensor.training = False
    elapsed = time.perf_counter() - start
    if mode == "jit":  # the soak must have exercised replays, not 1,000 eager calls
        GlobalCounters.reset()
        x, y = next(batches)
        step_fn(Tensor(x), Tensor(y)).numpy()
        c = _C.counters()
        assert c["replayed_kernels"] > 0 and c["schedule_count"] == 0, f"the jitted step did not replay: {c}"
    report = "\n".join(f"step {s:5d}: " + ", ".join(f"{k}={v}" for k, v in d.items()) for s, d in samples)
    print(f"{name}/{mode}: {STEPS} steps in {elapsed:.1f} s\n{report}")
    warm = samples[0][1]
    for step, d in samples[1:]:
        for key in ("live_buffers", "live_buffer_bytes", "pool_cached_buffers", "pool_cached_bytes", "live_graph_nodes"):
            assert d[key] <= warm[key], f"{key} grew after warm-up: {warm[key]} at step {EVERY}, {d[key]} at step {step}\n{report}"
        assert d["rss"] <= warm["rss"] + RSS_TOLERANCE, (
            f"RSS grew by {(d['rss'] - warm['rss']) / 2**20:.1f} MiB after warm-up (tolerance 8 MiB) at step {step}\n{report}")
    assert np.all(np.isfinite(losses))
    assert np.mean(losses[-EVERY:]) < np.mean(losses[:EVERY]), "the model did not train"
