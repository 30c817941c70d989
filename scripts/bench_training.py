"""Whole training steps: Tensorscope eager, Tensorscope under @tensorscope.jit, and PyTorch eager, in one run.

Rows (issue 13, item 4):
  1. samples/cnn_digits.py's CNN (conv-BN-ReLU-pool twice, linear), batch 64 of 8x8 digits, SGD momentum 0.9,
     cross-entropy with label smoothing 0.1;
  2. samples/transformer_tiny.py's 2-layer decoder (dim 32, 4 heads), batch 32 of 12 tokens, Adam 3e-3;
  3. an MLP 784-512-256-10, batch 128, AdamW (lr 1e-3, weight decay 0.01), cross-entropy;
  4. LeNet-5's classifier, an MLP 400-120-84-10 (widths 16 does not divide), batch 64, SGD momentum 0.9;
and models whose shapes no heuristic was written for (rows added in the fifteenth session, when they ran at
0.6-0.9x PyTorch):
  5. LeNet-5 whole (LeCun et al., 1998): 3x32x32 images, conv 5x5 into 6 and 16 channels without padding,
     ReLU, 2x2 max-pool, 400-120-84-10, batch 32, SGD momentum 0.9;
  6. Caffe's MNIST LeNet: 1x28x28, conv 5x5 into 20 and 50 channels, max-pool, 800-500-10, batch 64, SGD;
  7. an MLP 784-300-100-10 (LeCun et al.'s classic widths), batch 100, Adam;
  8. the transformer of row 2 at dim 128 (4 heads of 32, 2 layers), 32 tokens, batch 16, AdamW (added in the
     twenty-first session, which found its LayerNorm backward over rows of 256 recomputing every row's sums
     for each element of the row);
  9. the MLP of row 3 under a learning-rate schedule (linear warm-up over 10 steps, then cosine decay over
     1000), set before every step of every contender (PyTorch: `param_groups[..]["lr"]`; Tensorscope:
     `opt.lr`), as real training sets it (added in the twenty-fourth session: each new lr compiled the update
     kernels again while it was a constant, 156 ms a step);
 10. a MobileNet (depthwise + pointwise blocks, BatchNorm) on 3x32x32, batch 32, SGD (fortieth session);
 11. a GRU (torch.nn.GRU's gates) over 20 steps of 50 features, 100 hidden units, batch 32, Adam: a weight read
     once a step (forty-first session; its recurrent weight's gradient ran at 16 GFLOP/s as 20 small matmuls).
The models are rebuilt here as in the samples (the sample files are not run). Every contender starts from
the same weights: PyTorch's default initialisation, copied as NumPy arrays into each Tensorscope model
(`nn.load_state_dict`); each contender has its own model and optimizer and sees the same batch. The losses
of the first steps must agree between PyTorch, Tensorscope eager and Tensorscope jitted (checked; a
mismatch is printed and makes the exit status 1).

A step is complete when it returns: the loss is read on the host (`.numpy()` / `.item()`), and the updated
parameters are realized (Tensorscope's `opt.step()` realizes them; a jit replay runs all its kernels;
PyTorch is synchronous on the CPU). Each step is timed after 3 warm-up steps (for the jit: eager call,
capture, first replay), in alternating blocks of the three contenders so that the machine's drift falls on
all of them; the median is reported. Threads: 1 for both (TENSORSCOPE_THREADS=1, set before importing
tensorscope, is what sizes its thread pool, engine/src/runtime/thread_pool.cpp; torch.set_num_threads(1)).

Per Tensorscope step: the kernel count (GlobalCounters.kernel_count over a step), the time spent in kernels
(GlobalCounters.time_ms), and the slowest kernel of an eager step recorded with the engine's recorder
(docs/recording.md; started in-process around 6 steps, each launch's median time over the last 5), with its GFLOP/s
where the kernel is matmul-like: a SUM over a MUL (through movement ops) of two different non-constant
operands, both broadcast (EXPAND), counted as 2 * the MUL's element count = 2*M*N*K (a conv: its
multiply-adds), read from the schedule's node shapes; "n/a" otherwise. The same recording shows work done
twice in a step: a reduce whose whole input graph (same ops, same input buffers) appears in more than one
kernel. An eager step is two schedules: `loss.backward()`
realizes the loss (the forward), `opt.step()` the gradients and the update; a reduce that the forward
fused away (not stored) and the backward needs again is computed in both.

Against the roofline (issue 13's bar): every kernel of the recorded eager step gets its FLOPs (an ALU op
per output element of each fused elementwise node, one per input element of each reduce) and its bytes
(each input buffer and the output once: the least traffic it can have). A kernel whose arithmetic
intensity (FLOPs per byte) is below the machine's ridge point (best matmul GFLOP/s / memory GB/s) is
memory-bound and its target is 50% of the measured bandwidth; otherwise 25% of the best matmul's
GFLOP/s (the 1024x1024 matmul measured in the same run, before and after the convolutions: the better
of the two). Bandwidth: NumPy copying 128 MiB (a read and
a write per byte), best of 5. Per row: how many launches of the step miss their target and the share of
the step's kernel time they take, how many of those take under 2 µs (a launch costs about 1 µs by itself,
so a kernel over a few hundred bytes cannot reach its target: those are counted apart, not excused; and how
many of the misses have a target time below the step's shortest launch, which only fusing them away would
meet), and the three worst: the ones that lose the most time against their
target (ms - ms at target; a 1 µs kernel far below its target loses nothing worth printing). And the
step's share of its roofline (issue 14): the sum over its launches of the time each would take at the
roofline (the larger of FLOPs / the best matmul's FLOP/s and bytes / the bandwidth) over their measured
time.

The convolution table (issue 13's "convolutions at >= 40% of the matmul"): each shape's GFLOP/s forward and with
both gradients, as a share of the same run's matmul, and its roofline share the same way as a step's (its least
traffic: each tensor once), marked "mem" where memory bounds it (the depthwise rows: 9 multiply-adds per output).

Run: PYTHONPATH=build/python TENSORSCOPE_CACHE=build/kernel-cache /usr/bin/python3 scripts/bench_training.py [--quick]
     [--all-kernels]      (lists every launch of each step against its target, the most time lost first)
     [--record-dir DIR]   (keeps the recorded steps as DIR/step0.tsrec ...: open them with `tensorscope FILE`)
     [--only TEXT]        (only the rows whose name contains TEXT, e.g. --only LeNet)
"""
import os
import sys

# glibc's malloc returns a large freed block to the system (munmap, or trimming the heap's top) and maps it again
# at the next allocation, every page faulted in anew: PyTorch's CPU allocator has no cache of its own, so each of
# its steps paid that for its activations and gradients until some earlier allocation had raised glibc's adaptive
# thresholds, which made PyTorch's time depend on the rows before it (the MLP 784-512-256-10 step: 7.1-7.9 ms as
# a process's first MLP row, 5.8 after one). Both thresholds are set high for the whole process, before anything
# allocates (glibc reads its tunables at start-up: the script runs itself again with them), so that every row
# measures each contender's steady state. Tensorscope's buffer pool keeps its own buffers either way.
_TUNABLES = "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=1073741824"
if _TUNABLES not in os.environ.get("GLIBC_TUNABLES", ""):
    os.environ["GLIBC_TUNABLES"] = ":".join(t for t in (os.environ.get("GLIBC_TUNABLES"), _TUNABLES) if t)
    os.execv(sys.executable, [sys.executable] + sys.argv)

THREADS = 1
os.environ.pop("OPENBLAS_CORETYPE", None)  # as scripts/bench.py: let OpenBLAS pick its best kernels
for _var in ("TENSORSCOPE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = str(THREADS)
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
os.environ.pop("TENSORSCOPE_RECORD", None)  # this script records steps of its own, in-process

import json  # noqa: E402
import math  # noqa: E402
import sqlite3  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import tensorscope  # noqa: E402
from tensorscope import GlobalCounters, Tensor, _C, nn  # noqa: E402
from tensorscope.nn import optim  # noqa: E402

torch.set_num_threads(THREADS)
QUICK = "--quick" in sys.argv
ALL_KERNELS = "--all-kernels" in sys.argv  # every launch of a row against its target, not only the three worst
TINY_MS = 0.002  # launches this short are counted apart: their time is mostly the launch's own, not their work
BUDGET_S = 0.6 if QUICK else 2.5   # timed seconds per contender and row
WARMUP = 3
mismatches = []


# ---- the models, each in Tensorscope and in PyTorch with the same attribute names -------------------------
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


class TorchCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(1, 8, 3, padding=1, bias=False), torch.nn.BatchNorm2d(8)
        self.conv2, self.bn2 = torch.nn.Conv2d(8, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16)
        self.fc = torch.nn.Linear(16 * 2 * 2, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(x.flatten(1))


L, SEP = 6, 10
VOCAB, T = 11, 2 * L
DIM, HEADS, LAYERS = 32, 4, 2
WIDE_L = 16  # the wider transformer row: sequences of 2 * 16 tokens


class Block:
    """samples/transformer_tiny.py's block (dim 32, 4 heads by default)."""

    def __init__(self, dim=DIM, heads=HEADS):
        self.dim, self.heads = dim, heads
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def attention(self, x):
        B, S, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = [t.reshape(B, S, self.heads, self.dim // self.heads).transpose(1, 2) for t in (q, k, v)]
        out = q.scaled_dot_product_attention(k, v, is_causal=True)
        return self.proj(out.transpose(1, 2).reshape(B, S, self.dim))

    def __call__(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(self.fc1(self.ln2(x)).gelu())


class TinyTransformer:
    def __init__(self, dim=DIM, heads=HEADS, layers=LAYERS, t=T):
        self.tok = nn.Embedding(VOCAB, dim)
        self.pos = nn.Embedding(t, dim)
        self.blocks = [Block(dim, heads) for _ in range(layers)]
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, VOCAB)
        self.positions = np.arange(t, dtype=np.int32)

    def __call__(self, idx):
        x = self.tok(idx) + self.pos(Tensor(self.positions[:idx.shape[1]]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class TorchBlock(torch.nn.Module):
    def __init__(self, dim=DIM, heads=HEADS):
        super().__init__()
        self.dim, self.heads = dim, heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.fc1, self.fc2 = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def attention(self, x):
        B, S, _ = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = [t.reshape(B, S, self.heads, self.dim // self.heads).transpose(1, 2) for t in (q, k, v)]
        if hasattr(F, "scaled_dot_product_attention"):  # torch >= 2.0
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch 1.13 (Debian 12): the same math spelled out
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.dim // self.heads)
            scores = scores.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), float("-inf"))
            out = scores.softmax(-1) @ v
        return self.proj(out.transpose(1, 2).reshape(B, S, self.dim))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))  # Tensorscope's gelu default


class TorchTinyTransformer(torch.nn.Module):
    def __init__(self, dim=DIM, heads=HEADS, layers=LAYERS, t=T):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, dim)
        self.pos = torch.nn.Embedding(t, dim)
        self.blocks = torch.nn.ModuleList([TorchBlock(dim, heads) for _ in range(layers)])
        self.ln = torch.nn.LayerNorm(dim)
        self.head = torch.nn.Linear(dim, VOCAB)
        self.register_buffer("positions", torch.arange(t), persistent=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(self.positions[:idx.shape[1]])
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


class MLP:
    """Linear-ReLU-Linear-ReLU-Linear with the given widths: (784, 512, 256, 10); LeNet-5's classifier
    (LeCun et al., 1998) is (400, 120, 84, 10)."""

    def __init__(self, d0, d1, d2, d3):
        self.l1, self.l2, self.l3 = nn.Linear(d0, d1), nn.Linear(d1, d2), nn.Linear(d2, d3)

    def __call__(self, x):
        return self.l3(self.l2(self.l1(x).relu()).relu())


class TorchMLP(torch.nn.Module):
    def __init__(self, d0, d1, d2, d3):
        super().__init__()
        self.l1, self.l2, self.l3 = torch.nn.Linear(d0, d1), torch.nn.Linear(d1, d2), torch.nn.Linear(d2, d3)

    def forward(self, x):
        return self.l3(F.relu(self.l2(F.relu(self.l1(x)))))


class LeNet5:
    """LeNet-5 (LeCun et al., 1998) on 3x32x32 images: two 5x5 convolutions without padding (6, 16 channels)."""

    def __init__(self):
        self.c1, self.c2 = nn.Conv2d(3, 6, 5), nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = nn.Linear(400, 120), nn.Linear(120, 84), nn.Linear(84, 10)

    def __call__(self, x):
        x = self.c1(x).relu().max_pool2d(kernel_size=(2, 2))
        x = self.c2(x).relu().max_pool2d(kernel_size=(2, 2))
        return self.f3(self.f2(self.f1(x.flatten(1)).relu()).relu())


class TorchLeNet5(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(3, 6, 5), torch.nn.Conv2d(6, 16, 5)
        self.f1, self.f2, self.f3 = torch.nn.Linear(400, 120), torch.nn.Linear(120, 84), torch.nn.Linear(84, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.c1(x)), 2)
        x = F.max_pool2d(F.relu(self.c2(x)), 2)
        return self.f3(F.relu(self.f2(F.relu(self.f1(x.flatten(1))))))


class CaffeLeNet:
    """Caffe's MNIST example (examples/mnist/lenet.prototxt): conv 5x5 20, pool, conv 5x5 50, pool, 500, 10."""

    def __init__(self):
        self.c1, self.c2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.f1, self.f2 = nn.Linear(800, 500), nn.Linear(500, 10)

    def __call__(self, x):
        x = self.c2(self.c1(x).max_pool2d(kernel_size=(2, 2))).max_pool2d(kernel_size=(2, 2))
        return self.f2(self.f1(x.flatten(1)).relu())


class TorchCaffeLeNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = torch.nn.Conv2d(1, 20, 5), torch.nn.Conv2d(20, 50, 5)
        self.f1, self.f2 = torch.nn.Linear(800, 500), torch.nn.Linear(500, 10)

    def forward(self, x):
        x = F.max_pool2d(self.c2(F.max_pool2d(self.c1(x), 2)), 2)
        return self.f2(F.relu(self.f1(x.flatten(1))))


# MobileNet v1's shape (Howard et al., 2017, https://arxiv.org/abs/1704.04861) at CIFAR size: a 3x3 stem with stride
# 2, then depthwise 3x3 (stride 1 or 2) + pointwise 1x1 blocks, each convolution followed by BatchNorm and ReLU,
# global average pooling and a linear classifier
MOBILENET_BLOCKS = [(16, 32, 1), (32, 64, 2), (64, 64, 1), (64, 128, 2)]  # (in, out channels, depthwise stride)


class MobileBlock:
    def __init__(self, cin, cout, stride):
        self.dw, self.bn1 = nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False), nn.BatchNorm2d(cin)
        self.pw, self.bn2 = nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout)

    def __call__(self, x):
        return self.bn2(self.pw(self.bn1(self.dw(x)).relu())).relu()


class MobileNet:
    def __init__(self):
        self.stem, self.bn = nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(16)
        self.blocks = [MobileBlock(*b) for b in MOBILENET_BLOCKS]
        self.fc = nn.Linear(MOBILENET_BLOCKS[-1][1], 10)

    def __call__(self, x):
        x = self.bn(self.stem(x)).relu()
        for b in self.blocks:
            x = b(x)
        return self.fc(x.mean((2, 3)))


class TorchMobileBlock(torch.nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.dw = torch.nn.Conv2d(cin, cin, 3, stride=stride, padding=1, groups=cin, bias=False)
        self.bn1 = torch.nn.BatchNorm2d(cin)
        self.pw, self.bn2 = torch.nn.Conv2d(cin, cout, 1, bias=False), torch.nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.bn2(self.pw(F.relu(self.bn1(self.dw(x))))))


class TorchMobileNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.bn = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False), torch.nn.BatchNorm2d(16)
        self.blocks = torch.nn.ModuleList([TorchMobileBlock(*b) for b in MOBILENET_BLOCKS])
        self.fc = torch.nn.Linear(MOBILENET_BLOCKS[-1][1], 10)

    def forward(self, x):
        x = F.relu(self.bn(self.stem(x)))
        for b in self.blocks:
            x = b(x)
        return self.fc(x.mean((2, 3)))


# A GRU (Cho et al., 2014, https://arxiv.org/abs/1406.1078) with torch.nn.GRU's gates and weights, unrolled over
# the sequence, then a linear classifier on the last state: its recurrent weight is read by one matmul a step, so
# its gradient sums 20 matmuls of 32 rows (one matmul of 640 rows since the forty-first session)
GRU_SHAPE = (32, 20, 50, 100)  # batch, steps, input features, hidden units


class GRU:
    def __init__(self, n_in, hidden):
        # torch.nn.GRU's parameters: gates (r, z, n) stacked along the rows
        self.weight_ih_l0 = Tensor.uniform(3 * hidden, n_in, requires_grad=True)
        self.weight_hh_l0 = Tensor.uniform(3 * hidden, hidden, requires_grad=True)
        self.bias_ih_l0 = Tensor.zeros(3 * hidden, requires_grad=True)
        self.bias_hh_l0 = Tensor.zeros(3 * hidden, requires_grad=True)
        self.hidden = hidden

    def __call__(self, x):
        H = self.hidden
        gx = x.linear(self.weight_ih_l0.T, self.bias_ih_l0)  # every step's input projection in one matmul
        h = Tensor.zeros(x.shape[0], H)
        for t in range(x.shape[1]):
            gi, gh = gx[:, t], h.linear(self.weight_hh_l0.T, self.bias_hh_l0)
            r = (gi[:, :H] + gh[:, :H]).sigmoid()
            z = (gi[:, H:2 * H] + gh[:, H:2 * H]).sigmoid()
            n = (gi[:, 2 * H:] + r * gh[:, 2 * H:]).tanh()
            h = (1 - z) * n + z * h
        return h


class GRUClassifier:
    def __init__(self):
        _, _, n_in, hidden = GRU_SHAPE
        self.gru, self.fc = GRU(n_in, hidden), nn.Linear(hidden, 10)

    def __call__(self, x):
        return self.fc(self.gru(x))


class TorchGRUClassifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _, _, n_in, hidden = GRU_SHAPE
        self.gru, self.fc = torch.nn.GRU(n_in, hidden, batch_first=True), torch.nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc(self.gru(x)[1][0])


# ---- the workloads ----------------------------------------------------------------------------------------
def digits_batch(rng, n):
    try:
        from tensorscope import datasets
        X, Y = datasets.digits()
        idx = rng.integers(0, len(X), n)
        return X[idx].reshape(-1, 1, 8, 8).astype(np.float32), Y[idx].astype(np.int32), "digits"
    except FileNotFoundError:  # no python3-sklearn: random images of the same shape (timing is the same)
        return rng.random((n, 1, 8, 8), dtype=np.float32), rng.integers(0, 10, n).astype(np.int32), "random images"


def reverse_batch(rng, n, L=L):
    x = rng.integers(0, 10, size=(n, L))
    y = x[:, ::-1]
    inputs = np.concatenate([x, np.full((n, 1), SEP), y[:, :-1]], axis=1)
    return inputs.astype(np.int32), np.ascontiguousarray(y, dtype=np.int32)


def workloads():
    rng = np.random.default_rng(0)
    cx, cy, kind = digits_batch(rng, 64)
    tx, ty = reverse_batch(rng, 32)
    wx, wy = reverse_batch(rng, 16, WIDE_L)
    mx = rng.standard_normal((128, 784), dtype=np.float32)
    my = rng.integers(0, 10, 128).astype(np.int32)
    lx = rng.standard_normal((64, 400), dtype=np.float32)
    ly = rng.integers(0, 10, 64).astype(np.int32)
    l5x = rng.standard_normal((32, 3, 32, 32), dtype=np.float32)
    l5y = rng.integers(0, 10, 32).astype(np.int32)
    cx28 = rng.standard_normal((64, 1, 28, 28), dtype=np.float32)
    cy28 = rng.integers(0, 10, 64).astype(np.int32)
    m3x = rng.standard_normal((100, 784), dtype=np.float32)
    m3y = rng.integers(0, 10, 100).astype(np.int32)
    mbx = rng.standard_normal((32, 3, 32, 32), dtype=np.float32)
    mby = rng.integers(0, 10, 32).astype(np.int32)
    grx = rng.standard_normal(GRU_SHAPE[:3], dtype=np.float32)
    gry = rng.integers(0, 10, GRU_SHAPE[0]).astype(np.int32)
    sgd = dict(ts_opt=lambda p: optim.SGD(p, lr=0.01, momentum=0.9),
               torch_opt=lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
               ts_loss=lambda out, y: out.sparse_categorical_crossentropy(y),
               torch_loss=lambda out, y: F.cross_entropy(out, y))
    return [
        dict(name="CNN digits (cnn_digits.py), b64, SGD", ts_model=CNN, torch_model=TorchCNN, x=cx, y=cy,
             ts_opt=lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
             torch_opt=lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
             ts_loss=lambda out, y: out.sparse_categorical_crossentropy(y, label_smoothing=0.1),
             torch_loss=lambda out, y: F.cross_entropy(out, y, label_smoothing=0.1), note=f"batch of {kind}"),
        dict(name="transformer_tiny.py, b32, Adam", ts_model=TinyTransformer, torch_model=TorchTinyTransformer,
             x=tx, y=ty,
             ts_opt=lambda p: optim.Adam(p, lr=3e-3), torch_opt=lambda p: torch.optim.Adam(p, lr=3e-3),
             ts_loss=lambda out, y: out[:, L:].sparse_categorical_crossentropy(y),
             torch_loss=lambda out, y: F.cross_entropy(out[:, L:].reshape(-1, VOCAB), y.reshape(-1)), note=""),
        dict(name="transformer d128 4x32 T32, b16, AdamW",
             ts_model=lambda: TinyTransformer(128, 4, 2, 2 * WIDE_L),
             torch_model=lambda: TorchTinyTransformer(128, 4, 2, 2 * WIDE_L), x=wx, y=wy,
             ts_opt=lambda p: optim.AdamW(p, lr=1e-3, weight_decay=0.01),
             torch_opt=lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01),
             ts_loss=lambda out, y: out[:, WIDE_L:].sparse_categorical_crossentropy(y),
             torch_loss=lambda out, y: F.cross_entropy(out[:, WIDE_L:].reshape(-1, VOCAB), y.reshape(-1)),
             note="the same decoder 4x wider and 2.7x longer: rows of 128 no heuristic was written for"),
        dict(name="MLP 784-512-256-10, b128, AdamW", ts_model=lambda: MLP(784, 512, 256, 10),
             torch_model=lambda: TorchMLP(784, 512, 256, 10), x=mx, y=my,
             ts_opt=lambda p: optim.AdamW(p, lr=1e-3, weight_decay=0.01),
             torch_opt=lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01),
             ts_loss=lambda out, y: out.sparse_categorical_crossentropy(y),
             torch_loss=lambda out, y: F.cross_entropy(out, y), note=""),
        dict(name="MLP 784-512-256-10, AdamW, cosine lr", ts_model=lambda: MLP(784, 512, 256, 10),
             torch_model=lambda: TorchMLP(784, 512, 256, 10), x=mx, y=my,
             ts_opt=lambda p: optim.AdamW(p, lr=1e-3, weight_decay=0.01),
             torch_opt=lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01),
             ts_loss=lambda out, y: out.sparse_categorical_crossentropy(y),
             torch_loss=lambda out, y: F.cross_entropy(out, y), lr_schedule=warmup_cosine(1e-3, 10, 1000),
             note="a new lr every step: warm-up, then cosine decay"),
        dict(name="LeNet head 400-120-84-10, b64, SGD", ts_model=lambda: MLP(400, 120, 84, 10),
             torch_model=lambda: TorchMLP(400, 120, 84, 10), x=lx, y=ly,
             ts_opt=lambda p: optim.SGD(p, lr=0.05, momentum=0.9),
             torch_opt=lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
             ts_loss=lambda out, y: out.sparse_categorical_crossentropy(y),
             torch_loss=lambda out, y: F.cross_entropy(out, y), note="widths 16 does not divide"),
        dict(name="LeNet-5 3x32x32, b32, SGD", ts_model=LeNet5, torch_model=TorchLeNet5, x=l5x, y=l5y, **sgd,
             note="6 and 16 channels, 5x5 without padding; random images"),
        dict(name="Caffe LeNet 1x28x28, b64, SGD", ts_model=CaffeLeNet, torch_model=TorchCaffeLeNet, x=cx28, y=cy28,
             **sgd, note="20 and 50 channels, 5x5 without padding, 800-500-10; random images"),
        dict(name="MLP 784-300-100-10, b100, Adam", ts_model=lambda: MLP(784, 300, 100, 10),
             torch_model=lambda: TorchMLP(784, 300, 100, 10), x=m3x, y=m3y,
             ts_opt=lambda p: optim.Adam(p, lr=1e-3), torch_opt=lambda p: torch.optim.Adam(p, lr=1e-3),
             ts_loss=lambda out, y: out.sparse_categorical_crossentropy(y),
             torch_loss=lambda out, y: F.cross_entropy(out, y), note="widths 16 does not divide, batch 100"),
        dict(name="MobileNet 3x32x32, b32, SGD", ts_model=MobileNet, torch_model=TorchMobileNet, x=mbx, y=mby, **sgd,
             note="depthwise 3x3 (stride 1 and 2) + pointwise blocks, 16-128 channels, BatchNorm; random images"),
        dict(name="GRU 50-100 x20 steps, b32, Adam", ts_model=GRUClassifier, torch_model=TorchGRUClassifier,
             x=grx, y=gry, ts_opt=lambda p: optim.Adam(p, lr=1e-3), torch_opt=lambda p: torch.optim.Adam(p, lr=1e-3),
             ts_loss=lambda out, y: out.sparse_categorical_crossentropy(y),
             torch_loss=lambda out, y: F.cross_entropy(out, y),
             note="unrolled over 20 steps (PyTorch: torch.nn.GRU); random sequences"),
    ]


def warmup_cosine(base, warmup, total):
    """lr(step): linear warm-up to `base` over `warmup` steps, then cosine decay to 0 at step `total`."""
    return lambda i: base * min(1.0, (i + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * min(i, total) / total))


def build(w, state):
    """A Tensorscope model with the torch model's initial weights (NumPy copies) and its optimizer."""
    model = w["ts_model"]()
    nn.load_state_dict(model, {k: v.copy() for k, v in state.items()})
    return model, w["ts_opt"](nn.get_parameters(model))


# ---- timing -----------------------------------------------------------------------------------------------
def race(fns, n):
    """Medians (ms) of each fn in `fns` (None: skipped), timed in alternating blocks, n calls each."""
    times = [[] for _ in fns]
    rounds = 5 if n >= 10 else max(1, n // 2)
    per_block = max(1, math.ceil(n / rounds))
    for r in range(rounds):
        order = list(range(len(fns)))
        order = order[r % len(fns):] + order[:r % len(fns)]
        for i in order:
            if fns[i] is None:
                continue
            fns[i]()  # untimed: each contender finds its own data in the caches
            for _ in range(per_block):
                t0 = time.perf_counter()
                fns[i]()
                times[i].append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) if t else None for t in times]


# ---- one recorded step: per-kernel times, FLOPs and work done twice ---------------------------------------
def record_step(step, path, steps=12, timed=6):
    """Runs `step` `steps` times with the engine's recorder on; returns (schedules, launches) of the first
    step, the schedules with kernel ids and node uids resolved (docs/recording.md, 'A schedule that repeats a
    structure'), each launch's time_ms the median over the last `timed` steps of the launch at its position (one
    launch on this shared 2-core machine can take several times its usual time). The steps before those are
    not timed: while the first runs, the recorder encodes and stores every kernel's listings (each pass's IR,
    five sources), 3,900 page faults in the LeNet head's, and the steps after it are slower for a while (the
    same head's first-layer weight copy, E_400_128, 7-10 us a step unrecorded: 38-43 us in the first recorded
    step, 17-33 in the second to fifth, 7-10 again from about the sixth; the encoding finished before the
    second, they were as slow), so that per-launch medians over the second to sixth steps, as this function
    took until the sixty-fifth session, counted that warm-up as the kernels' time (that copy at 50 us)."""
    _C.start_recording(path, os.path.abspath(__file__), "", list(sys.argv), sys.version)
    try:
        for _ in range(steps):
            step()
    finally:
        _C.finish_recording("finished", 0, "")
    db = sqlite3.connect(path)
    blobs = {}

    def blob(h):
        if h not in blobs:
            blobs[h] = json.loads(db.execute("SELECT CAST(data AS TEXT) FROM blobs WHERE hash = ?", (h,)).fetchone()[0])
        return blobs[h]

    schedules, launches = [], []
    for kind, payload in db.execute("SELECT kind, payload FROM events WHERE kind IN ('schedule', 'launch') ORDER BY seq"):
        p = json.loads(payload)
        if kind == "launch":
            launches.append(p)
            continue
        if "structure" in p:
            s, pos = blob(p["structure"]), p["position_uids"]
            uid = lambda q: pos[q]  # noqa: E731
            nodes = [dict(n, uid=uid(n["uid"]), srcs=[uid(q) for q in n["srcs"]]) for n in s["nodes"]]
            kernels = [dict(k, id=kid, nodes=[uid(q) for q in k["nodes"]]) for k, kid in zip(s["kernels"], p["kernel_ids"])]
        else:
            nodes, kernels = p["nodes"], p["kernels"]
        schedules.append({"nodes": {n["uid"]: n for n in nodes}, "kernels": kernels})
    db.close()
    per = len(launches) // steps
    runs = [launches[i * per:(i + 1) * per] for i in range(steps)]
    if per * steps != len(launches) or any([e["name"] for e in r] != [e["name"] for e in runs[0]] for r in runs):
        raise SystemExit(f"bench_training: the {steps} recorded steps launched different kernels")
    first_ids = {e["kernel_id"] for e in runs[0]}
    schedules = [s for s in schedules if any(k["id"] in first_ids for k in s["kernels"])]
    return schedules, [dict(e, time_ms=statistics.median(r[i]["time_ms"] for r in runs[-timed:])) for i, e in enumerate(runs[0])]


MOVEMENT = {"RESHAPE", "EXPAND", "PERMUTE", "PAD", "SHRINK", "FLIP"}


DTYPE_BYTES = {"float32": 4, "int32": 4, "float16": 2, "bool": 1}


def kernel_cost(nodes, k):
    """(FLOPs, bytes) of a kernel, from its schedule's node shapes (see the module docstring)."""
    flops = 0
    for u in k["nodes"]:
        n = nodes[u]
        if n["op_class"] == "elementwise":
            flops += math.prod(n["shape"])
        elif n["op_class"] == "reduce":
            flops += math.prod(nodes[n["srcs"][0]]["shape"])
    moved = sum(math.prod(b["shape"]) * DTYPE_BYTES.get(b["dtype"], 4) for b in k["inputs"] + k["outputs"])
    return flops, moved


def analyse(schedules):
    """{kernel id: (name, matmul-like FLOPs or None)}, {kernel id: (FLOPs, bytes)} and the reduces computed
    in more than one kernel."""
    info, seen, costs = {}, {}, {}
    for si, s in enumerate(schedules):
        nodes = s["nodes"]
        for ki, k in enumerate(s["kernels"]):
            members, memo = set(k["nodes"]), {}

            def sig(u):  # the node's whole input graph inside this kernel; leaves are the kernel's inputs
                if u not in memo:
                    n = nodes[u]
                    memo[u] = (f"{n['op']}[{n['arg']}]{tuple(n['shape'])}(" + ",".join(sig(q) for q in n["srcs"]) + ")"
                               if u in members else f"in#{u}")
                return memo[u]

            def strip(u):  # through movement ops inside the kernel: (the node below, broadcast on the way)
                expanded = False
                while u in members and nodes[u]["op"] in MOVEMENT and nodes[u]["srcs"]:
                    expanded |= nodes[u]["op"] == "EXPAND"
                    u = nodes[u]["srcs"][0]
                return u, expanded

            costs[k["id"]] = kernel_cost(nodes, k)
            flops = 0
            for u in k["nodes"]:
                n = nodes[u]
                if n["op_class"] != "reduce":
                    continue
                what = f"{n['op']} {tuple(nodes[n['srcs'][0]]['shape'])} -> {tuple(n['shape'])}"
                seen.setdefault(sig(u), []).append((k["id"], k["name"], what, si))
                below = strip(n["srcs"][0])[0] if n["op"] == "SUM" and len(n["srcs"]) == 1 else None
                if below not in members or nodes[below]["op"] != "MUL":
                    continue
                mul = nodes[below]
                (a, ea), (b, eb) = (strip(q) for q in mul["srcs"])
                if a != b and ea and eb and all(nodes.get(q, {}).get("op_class") != "const" for q in (a, b)):
                    flops += 2 * math.prod(mul["shape"])
            info[k["id"]] = (k["name"], flops or None)
    twice = [v for v in seen.values() if len({kid for kid, _, _, _ in v}) > 1]
    return info, costs, twice


# ---- a row ------------------------------------------------------------------------------------------------
def run_row(w, rec_dir):
    torch.manual_seed(0)
    pmodel = w["torch_model"]().train()
    state = {k: v.detach().numpy().copy() for k, v in pmodel.state_dict().items()}
    popt = w["torch_opt"](pmodel.parameters())
    px, py = torch.from_numpy(w["x"]), torch.from_numpy(w["y"]).long()
    x_np, y_np = w["x"], w["y"]
    Tensor.training = True
    # a learning-rate schedule: each contender counts its own steps, so all three see the same lr sequence
    schedule, steps_taken = w.get("lr_schedule"), {"torch": 0, "eager": 0, "jit": 0}

    def next_lr(who):
        steps_taken[who] += 1
        return schedule(steps_taken[who] - 1)

    def torch_step():
        if schedule:
            lr = next_lr("torch")
            for group in popt.param_groups:
                group["lr"] = lr
        popt.zero_grad()
        loss = w["torch_loss"](pmodel(px), py)
        loss.backward()
        popt.step()
        return loss.item()

    model, opt = build(w, state)

    def ts_step():
        if schedule:
            opt.lr = next_lr("eager")
        opt.zero_grad()
        loss = w["ts_loss"](model(Tensor(x_np)), Tensor(y_np))
        loss.backward()
        opt.step()  # realizes the parameters, the optimizer state and BatchNorm's running statistics
        return float(loss.numpy())

    jmodel, jopt = build(w, state)

    @tensorscope.jit
    def jit_fn(x, y):
        jopt.zero_grad()
        loss = w["ts_loss"](jmodel(x), y)
        loss.backward()
        jopt.step()
        return loss

    def jit_step():
        if schedule:
            jopt.lr = next_lr("jit")  # between calls: replays read it (the update kernels load lr)
        return float(jit_fn(Tensor(x_np), Tensor(y_np)).numpy())

    # warm-up; the losses of these steps check that the three train alike from the same weights
    losses = {"torch": [torch_step() for _ in range(WARMUP)], "eager": [ts_step() for _ in range(WARMUP)]}
    jit_error = None
    try:
        losses["jit"] = [jit_step() for _ in range(WARMUP)]
        GlobalCounters.reset()
        jit_step()
        c = _C.counters()
        if c["replayed_kernels"] == 0 or c["schedule_count"] or c["schedule_cache_hits"]:
            jit_error = f"the jitted step did not replay ({c})"
    except Exception as e:  # noqa: BLE001  (the row says why instead of a number)
        jit_error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:160]
    check = []
    for name, ls in losses.items():
        if name == "torch":
            continue
        rel = max(abs(a - b) / max(abs(b), 1e-6) for a, b in zip(ls, losses["torch"]))
        check.append(f"{name} {ls[0]:.5f}" + (f" (max rel diff over {WARMUP} steps {rel:.1e})"))
        if abs(ls[0] - losses["torch"][0]) > 1e-3 * max(1.0, abs(losses["torch"][0])) or rel > 2e-2:
            mismatches.append(f"{w['name']}: Tensorscope {name} losses {ls} vs PyTorch {losses['torch']}")
    loss_line = f"first-step loss: PyTorch {losses['torch'][0]:.5f}, Tensorscope " + ", ".join(check)

    # kernels per step and their time
    def per_step(step, steps=3):
        GlobalCounters.reset()
        for _ in range(steps):
            step()
        return GlobalCounters.kernel_count / steps, GlobalCounters.time_ms / steps

    eager_kernels, eager_kernel_ms = per_step(ts_step)
    jit_kernels, jit_kernel_ms = per_step(jit_step) if jit_error is None else (None, None)

    # timing: n steps each, chosen from the warm-up so that a contender takes about BUDGET_S
    t0 = time.perf_counter()
    ts_step()
    one = time.perf_counter() - t0
    n = max(5, min(200, int(BUDGET_S / max(one, 1e-4))))
    eager_ms, jit_ms, torch_ms = race([ts_step, None if jit_error else jit_step, torch_step], n)

    # recorded eager steps: the slowest kernel, its FLOPs, work done twice
    schedules, launches = record_step(ts_step, os.path.join(rec_dir, f"step{len(rows)}.tsrec"))
    info, costs, twice = analyse(schedules)
    slow = max(launches, key=lambda e: e["time_ms"])
    flops = info.get(slow["kernel_id"], (None, None))[1]
    gflops = f"{flops / (slow['time_ms'] * 1e-3) / 1e9:.1f}" if flops else "n/a"
    names = {}
    for e in launches:
        names[e["name"]] = names.get(e["name"], 0) + 1
    matmul_like = [(info[e["kernel_id"]][1] / (e["time_ms"] * 1e-3) / 1e9, e["name"], e["time_ms"])
                   for e in launches if info.get(e["kernel_id"], (None, None))[1]]
    return dict(name=w["name"], note=w["note"], eager_ms=eager_ms, jit_ms=jit_ms, torch_ms=torch_ms, n=n,
                jit_error=jit_error, eager_kernels=eager_kernels, eager_kernel_ms=eager_kernel_ms,
                jit_kernels=jit_kernels, jit_kernel_ms=jit_kernel_ms,
                slow=f"{slow['name']} {slow['time_ms']:.3f} ms {gflops}", loss_line=loss_line,
                launches=len(launches), schedules=len(schedules), twice=twice,
                per_schedule=[len(s["kernels"]) for s in schedules],
                same_name={k: v for k, v in names.items() if v > 1}, matmul_like=sorted(matmul_like),
                costs=[(e["name"], e["time_ms"]) + costs.get(e["kernel_id"], (0, 0)) for e in launches])


def memory_bandwidth(mib=128, repeats=5):
    """GB/s of NumPy copying `mib` MiB on one thread (a read and a write per byte), best of `repeats`."""
    a = np.ones(mib * 2**20 // 4, dtype=np.float32)
    b = np.empty_like(a)
    np.copyto(b, a)
    best = min(_timed(lambda: np.copyto(b, a)) for _ in range(repeats))
    return 2 * a.nbytes / (best * 1e-3) / 1e9


def roofline(costs, peak_gflops, bandwidth):
    """Each launch against its target: [(ms lost, fraction of target, name, ms, GFLOP/s, GB/s, bound)], the most
    time lost first (ms lost = ms - ms at the target, 0 when the kernel meets it)."""
    ridge = peak_gflops / bandwidth  # FLOPs per byte where the two limits meet
    out = []
    for name, ms, flops, moved in costs:
        if ms <= 0:
            continue
        gflops, gbs = flops / (ms * 1e-3) / 1e9, moved / (ms * 1e-3) / 1e9
        memory_bound = moved > 0 and flops / moved < ridge
        frac = gbs / (0.5 * bandwidth) if memory_bound else gflops / (0.25 * peak_gflops)
        out.append((ms * max(0.0, 1 - frac), frac, name, ms, gflops, gbs, "memory" if memory_bound else "compute"))
    return sorted(out, key=lambda x: -x[0])


def roofline_share(costs, peak_gflops, bandwidth):
    """The step's kernel time at the roofline over its measured kernel time (1.0: every kernel as fast as the
    machine's best matmul or its memory bandwidth allow; issue 14's "already runs at >= 60% of its roofline").
    A launch's time at the roofline is the larger of FLOPs / the best matmul's FLOP/s and bytes / bandwidth."""
    at_roof = sum(max(flops / (peak_gflops * 1e9), moved / (bandwidth * 1e9)) * 1e3 for _, ms, flops, moved in costs if ms > 0)
    total = sum(ms for _, ms, _, _ in costs if ms > 0)
    return at_roof / total if total else 0.0


def matmul_reference(size=1024, repeats=7):
    rng = np.random.default_rng(1)
    a, b = (Tensor(rng.standard_normal((size, size), dtype=np.float32)) for _ in range(2))
    (a @ b).realize()
    best = min(_timed(lambda: (a @ b).realize()) for _ in range(repeats))
    pa, pb = (torch.from_numpy(rng.standard_normal((size, size), dtype=np.float32)) for _ in range(2))
    pa @ pb
    best_torch = min(_timed(lambda: pa @ pb) for _ in range(repeats))
    flop = 2 * size ** 3
    return flop / best / 1e6, flop / best_torch / 1e6


# Convolutions against the matmul (issue 13, item 3: >= 40% of the matmul's GFLOP/s for channel counts >= 16).
# (batch, C_in, C_out, H=W, kernel, stride, padding, groups): small-image training shapes, none of which a
# heuristic was written for, 1x1 to 5x5, strided and grouped among them.
CONV_SHAPES = [(32, 16, 16, 32, 3, 1, 1, 1), (32, 32, 32, 16, 3, 1, 1, 1), (32, 64, 64, 16, 3, 1, 1, 1),
               (32, 16, 32, 28, 5, 1, 2, 1), (32, 32, 64, 16, 3, 2, 1, 1), (32, 64, 64, 16, 1, 1, 0, 1),
               (32, 64, 64, 16, 3, 1, 1, 4),
               # depthwise (groups = channels, MobileNet's 3x3): 9 multiply-adds per output, memory-bound; also at
               # stride 2 (rows of 14 read every other input) and on 14x14 and 7x7 maps (rows under a vector of 16)
               (32, 16, 16, 28, 3, 1, 1, 16), (32, 24, 24, 28, 3, 2, 1, 24), (32, 32, 32, 14, 3, 1, 1, 32),
               (32, 64, 64, 7, 3, 1, 1, 64),
               # no padding, channel counts 16 does not divide (Caffe's LeNet, LeNet-5; the last one, 3 -> 6
               # channels, is under the issue's 16 and shown for what it is)
               (64, 20, 50, 12, 5, 1, 0, 1), (32, 6, 16, 14, 5, 1, 0, 1), (32, 3, 6, 32, 5, 1, 0, 1)]


def conv_rows(repeats=3 if QUICK else 7):
    """[(shape text, GFLOP/s fwd, GFLOP/s fwd+bwd, torch fwd, torch fwd+bwd, fwd FLOPs, fwd bytes, fwd+bwd bytes)]:
    the multiply-adds of the forward (2 * N * C_out * H_out * W_out * C_in/groups * k * k) over the kernel time of
    realizing it (GlobalCounters.time_ms: every kernel of the schedule, im2col and packing included); fwd+bwd:
    three times those FLOPs (input and weight gradients are convolutions of the same size) over forward plus
    backward (x.grad and w.grad realized). PyTorch: wall time of the same, best of `repeats`. Bytes: what any
    implementation must move at least, each tensor once: the forward reads x and w and writes y; with the
    backward, which reads g (y's size), x and w and writes dx and dw, 3 x + 3 w + 2 y (float32)."""
    rng = np.random.default_rng(3)
    out = []
    for n, cin, cout, hw, k, stride, pad, groups in CONV_SHAPES:
        x_np = rng.standard_normal((n, cin, hw, hw), dtype=np.float32)
        w_np = rng.standard_normal((cout, cin // groups, k, k), dtype=np.float32) * 0.1
        ho = (hw + 2 * pad - k) // stride + 1
        flop = 2 * n * cout * ho * ho * (cin // groups) * k * k
        g_np = rng.standard_normal((n, cout, ho, ho), dtype=np.float32)
        x, w, g = Tensor(x_np, requires_grad=True), Tensor(w_np, requires_grad=True), Tensor(g_np)

        def ts_fwd():
            GlobalCounters.reset()
            x.conv2d(w, stride=stride, padding=pad, groups=groups).realize()
            return GlobalCounters.time_ms

        def ts_both():
            x.grad = w.grad = None
            GlobalCounters.reset()
            x.conv2d(w, stride=stride, padding=pad, groups=groups).backward(g)
            x.grad.realize(w.grad)  # the gradients are lazy: both in one schedule
            return GlobalCounters.time_ms

        px, pw, pg = torch.from_numpy(x_np).requires_grad_(), torch.from_numpy(w_np).requires_grad_(), torch.from_numpy(g_np)

        def torch_fwd():
            with torch.no_grad():
                F.conv2d(px, pw, stride=stride, padding=pad, groups=groups)

        def torch_both():
            px.grad = pw.grad = None
            F.conv2d(px, pw, stride=stride, padding=pad, groups=groups).backward(pg)

        ts_fwd(), ts_both(), torch_fwd(), torch_both()  # compile / warm up
        fwd = min(ts_fwd() for _ in range(repeats))
        both = min(ts_both() for _ in range(repeats))
        tfwd = min(_timed(torch_fwd) for _ in range(repeats))
        tboth = min(_timed(torch_both) for _ in range(repeats))
        name = f"{n}x{cin}x{hw}x{hw} -> {cout}, {k}x{k}" + (f" s{stride}" if stride > 1 else "") + \
               (f" g{groups}" if groups > 1 else "")
        xb, wb, yb = 4 * x_np.size, 4 * w_np.size, 4 * g_np.size
        out.append((name, flop / fwd / 1e6, 3 * flop / both / 1e6, flop / tfwd / 1e6, 3 * flop / tboth / 1e6,
                    flop, xb + wb + yb, 3 * xb + 3 * wb + 2 * yb))
    return out


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


# ---- main -------------------------------------------------------------------------------------------------
start = time.perf_counter()
rows = []
with tempfile.TemporaryDirectory(prefix="tensorscope-bench-training-") as tmp:
    rec_dir = sys.argv[sys.argv.index("--record-dir") + 1] if "--record-dir" in sys.argv else tmp
    os.makedirs(rec_dir, exist_ok=True)
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else ""
    for w in workloads():
        if only not in w["name"]:
            continue
        rows.append(run_row(w, rec_dir))
        print(f"  {rows[-1]['name']}: done ({time.perf_counter() - start:.0f} s)", file=sys.stderr, flush=True)
mm_first = matmul_reference()
bandwidth = memory_bandwidth()
convs = conv_rows()
# the reference matmul again after the convolutions, the better of the two: a moment this machine is loaded only
# slows a measurement, and one slowed reference inflated every percentage against it (71.8 GFLOP/s instead of ~96
# in one run)
mm_ts, mm_torch = (max(first, again) for first, again in zip(mm_first, matmul_reference()))


def fmt(v):
    return "-" if v is None else f"{v:.2f}" if v < 100 else f"{v:.0f}"


print(f"\nTraining steps — 1 thread each: Tensorscope via TENSORSCOPE_THREADS={os.environ['TENSORSCOPE_THREADS']} "
      f"(set before import), PyTorch {torch.__version__} via torch.set_num_threads({torch.get_num_threads()}); "
      f"medians in ms after {WARMUP} warm-up steps{' (--quick)' if QUICK else ''}")
print("ratio = PyTorch / Tensorscope (> 1: Tensorscope is faster); slowest kernel: of a recorded eager step "
      "(per launch: the median over the last 6 of 12 recorded steps: the first records the kernels, the next ones warm up)")
head = (f"{'model':38} | {'TS eager':>8} | {'TS jit':>8} | {'PyTorch':>7} | {'ratio eager':>11} | {'ratio jit':>9} | "
        f"{'kernels/step':>12} | {'kernel ms/step':>14} | slowest kernel (name, ms, GFLOP/s)")
print(head)
print("-" * len(head))
for r in rows:
    jit = fmt(r["jit_ms"]) if r["jit_error"] is None else "failed"
    rj = f"{r['torch_ms'] / r['jit_ms']:.3f}" if r["jit_error"] is None else "-"
    kern = f"{r['eager_kernels']:g}" + (f" / {r['jit_kernels']:g}" if r["jit_kernels"] is not None else "")
    kms = f"{r['eager_kernel_ms']:.2f}" + (f" / {r['jit_kernel_ms']:.2f}" if r["jit_kernel_ms"] is not None else "")
    print(f"{r['name']:38} | {fmt(r['eager_ms']):>8} | {jit:>8} | {fmt(r['torch_ms']):>7} | "
          f"{r['torch_ms'] / r['eager_ms']:>11.3f} | {rj:>9} | {kern:>12} | {kms:>14} | {r['slow']}")
print("(kernels/step and kernel ms/step, the device time of the kernels (mean of 3 steps): eager / jit)")
print(f"reference: 1024x1024 matmul, best of 7 before and of 7 after the convolutions: "
      f"Tensorscope {mm_ts:.1f} GFLOP/s, PyTorch {mm_torch:.1f} GFLOP/s; "
      f"memory: NumPy copy {bandwidth:.1f} GB/s; targets: compute-bound kernels >= {0.25 * mm_ts:.1f} GFLOP/s, "
      f"memory-bound (< {mm_ts / bandwidth:.1f} FLOP/byte) >= {0.5 * bandwidth:.1f} GB/s")
for r in rows:
    print(f"\n{r['name']}: {r['n']} timed steps per contender{'; ' + r['note'] if r['note'] else ''}")
    print(f"  {r['loss_line']}")
    if r["jit_error"]:
        print(f"  jit: {r['jit_error']}")
    print(f"  recorded eager step: {r['schedules']} schedule(s) ({', '.join(map(str, r['per_schedule']))} kernels), "
          f"{r['launches']} launches")
    if r["matmul_like"]:
        worst, best = r["matmul_like"][0], r["matmul_like"][-1]
        print(f"  matmul-like kernels: {len(r['matmul_like'])}, from {worst[0]:.1f} GFLOP/s ({worst[1]}, {worst[2]:.3f} ms) "
              f"to {best[0]:.1f} GFLOP/s ({best[1]}, {best[2]:.3f} ms)")
    roof = roofline(r["costs"], mm_ts, bandwidth)
    below = [x for x in roof if x[1] < 1]
    total_ms = sum(x[3] for x in roof) or 1
    print(f"  roofline: the step's kernels run at {100 * roofline_share(r['costs'], mm_ts, bandwidth):.0f}% of it "
          f"(their time at the roofline / their measured time); {len(below)} of {len(roof)} launches below target, "
          f"{100 * sum(x[3] for x in below) / total_ms:.0f}% of the step's kernel time; "
          + ("every launch, the most time lost first:" if ALL_KERNELS else "the three that lose the most time against it:"))
    tiny = [x for x in below if x[3] < TINY_MS]
    # a kernel's time is its function's call alone (CProgram::launch), the shortest launch of the step for scale;
    # a launch whose target time (its measured time x its share of the target) is shorter than that cannot meet
    # the target by faster code, only by not being a launch of its own (fused into another kernel)
    shortest = min(x[3] for x in roof)
    unreachable = sum(1 for x in below if x[3] * x[1] < shortest)
    print(f"    ({len(tiny)} of the {len(below)} below target take under {TINY_MS * 1e3:.0f} us, "
          f"{100 * sum(x[3] for x in tiny) / total_ms:.0f}% of the step's kernel time: optimizer updates of small "
          f"tensors, BatchNorm statistics, the loss, rows of 10 to 12; the shortest launch of the step took "
          f"{shortest * 1e3:.2f} us, and {unreachable} of the {len(below)} would have to run in less than that to "
          f"meet their target)")
    for lost, frac, name, ms, gflops, gbs, bound in (roof if ALL_KERNELS else roof[:3]):
        print(f"    {name:28} {ms:8.3f} ms  {gflops:6.1f} GFLOP/s  {gbs:6.1f} GB/s  {bound}-bound, "
              f"{100 * frac:.0f}% of target, {lost:.3f} ms lost")
    for v in r["twice"]:
        print(f"  computed twice: {v[0][2]}, in " + ", ".join(f"{name} (#{kid}, schedule {si + 1})" for kid, name, _, si in v))
    if r["same_name"]:
        print("  kernel names launched more than once (same shapes, not necessarily the same work): "
              + ", ".join(f"{k} x{v}" for k, v in r["same_name"].items()))
print(f"\nConvolutions against the matmul (issue 13: >= 40% of the matmul's {mm_ts:.1f} GFLOP/s = {0.4 * mm_ts:.1f}); "
      "GFLOP/s of the multiply-adds, best of several runs; Tensorscope: kernel time of every kernel realized "
      "(im2col and packing included); fwd+bwd: 3x the forward's FLOPs over forward, input and weight gradients; "
      f"roof: the time at the roofline (the larger of FLOPs / the matmul's GFLOP/s and the least bytes any "
      f"implementation moves / NumPy's {bandwidth:.1f} GB/s) over the time measured, 'mem' where the bytes bound it "
      "(a depthwise convolution's 9 multiply-adds per output)")
head = (f"{'N x C_in x H x W -> C_out, kernel':34} | {'TS fwd':>7} | {'% mm':>5} | {'roof':>9} | {'TS f+b':>7} | {'% mm':>5} | "
        f"{'roof':>9} | {'torch fwd':>9} | {'torch f+b':>9}")
print(head)
print("-" * len(head))


def roof_text(gflops, flop, moved):
    """'NN% mem' / 'NN%': the time at the roofline over the measured time, and whether memory bounds it."""
    compute_ms, memory_ms = flop / (mm_ts * 1e6), moved / (bandwidth * 1e6)
    return f"{100 * max(compute_ms, memory_ms) / (flop / (gflops * 1e6)):4.0f}%" + (" mem" if memory_ms > compute_ms else "    ")


for name, fwd, both, tfwd, tboth, flop, fwd_bytes, both_bytes in convs:
    print(f"{name:34} | {fwd:7.1f} | {100 * fwd / mm_ts:4.0f}% | {roof_text(fwd, flop, fwd_bytes):>9} | {both:7.1f} | "
          f"{100 * both / mm_ts:4.0f}% | {roof_text(both, 3 * flop, both_bytes):>9} | {tfwd:9.1f} | {tboth:9.1f}")
print(f"\ntotal {time.perf_counter() - start:.0f} s")
if mismatches:
    print("\nMISMATCH: Tensorscope and PyTorch do not train alike from the same weights:\n  " + "\n  ".join(mismatches))
    sys.exit(1)
