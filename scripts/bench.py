"""Tensorscope benchmarks against NumPy and PyTorch, measured side by side in one run.

Each workload runs in Tensorscope, NumPy and PyTorch with the same inputs (and, for the elementwise chain,
the softmax and the sum, in hand-written fused C: scripts/bench_ref.c, compiled here with gcc -O3
-march=native -ffast-math and OpenMP); results are checked against NumPy; the table shows medians (ms)
and ratios (ts/C: Tensorscope's time over the hand-written C's); contenders are timed in alternating
blocks (see race) so that a shared machine's drift falls on all of them alike. Thread counts are set
explicitly for all three
(TENSORSCOPE_THREADS, OPENBLAS_NUM_THREADS / OMP_NUM_THREADS, torch.set_num_threads) and
OPENBLAS_CORETYPE is unset, so that OpenBLAS picks its best kernels (the environment may force
Haswell, which halves its sgemm speed). Run: scripts/bench.sh [--quick] [--json FILE]
"""
import json
import os
import statistics
import sys
import time

THREADS = int(os.environ.get("BENCH_THREADS", "1"))
os.environ.pop("OPENBLAS_CORETYPE", None)
for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "TENSORSCOPE_THREADS"):
    os.environ[var] = str(THREADS)
# OpenMP workers (PyTorch's, the hand-written C's) sleep when idle instead of spinning: with libgomp's
# default policy they spin for a while, fight OpenBLAS's spinning workers for this machine's 2 cores, and
# PyTorch's 2-thread MLP step took anywhere from 0.3 to 4 ms; passive gives it its best time (0.26 ms)
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402  (after the thread variables)
import torch  # noqa: E402

import tensorscope  # noqa: E402
from tensorscope import GlobalCounters, Tensor  # noqa: E402

torch.set_num_threads(THREADS)
QUICK = "--quick" in sys.argv
REPEATS = 3 if QUICK else 7


def median_ms(fn, repeats=REPEATS):
    fn()  # warm-up: compiles, fills caches and the buffer pool
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def race(*fns, rounds=3 if QUICK else 6, block=5):
    """Medians (ms) of `fns`, measured in alternating blocks: fn 1 `block` times, fn 2 `block` times, ...,
    `rounds` times over, each round starting with the next contender. Drift on a shared machine (memory
    bandwidth, clock) then falls on every contender alike instead of on whichever ran during a slow
    minute. Each block starts with one untimed call, so that every contender finds its own data in the
    cache as it would in a loop of its own, and a pause before it, so that worker threads another
    library left spinning are asleep (OpenBLAS's spin for up to 2^28 cycles, ~60 ms here)."""
    times = [[] for _ in fns]
    for r in range(rounds):
        order = list(range(len(fns)))
        order = order[r % len(fns):] + order[:r % len(fns)]  # each round starts with the next contender
        for fn, t in ((fns[i], times[i]) for i in order):
            time.sleep(0.15 if THREADS > 1 else 0.02)
            fn()
            for _ in range(block):
                t0 = time.perf_counter()
                fn()
                t.append((time.perf_counter() - t0) * 1e3)
    return [statistics.median(t) for t in times]


def check(name, got, want, rtol=1e-3, atol=1e-4):
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        raise SystemExit(f"bench: {name}: Tensorscope's result differs from NumPy's (max abs err {np.abs(got - want).max()})")


rows = []


def row(name, ts_ms, np_ms=None, torch_ms=None, extra="", c_ms=None):
    rows.append({"workload": name, "threads": THREADS, "tensorscope_ms": ts_ms, "numpy_ms": np_ms, "torch_ms": torch_ms,
                 "hand_c_ms": c_ms, "note": extra})


# Hand-written fused C (scripts/bench_ref.c), compiled here with gcc and called through ctypes.
def load_hand_c():
    import ctypes
    import subprocess
    import tempfile
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_ref.c")
    lib = os.path.join(tempfile.mkdtemp(prefix="tensorscope-bench-"), "bench_ref.so")
    subprocess.run(["gcc", "-O3", "-march=native", "-ffast-math", "-fopenmp", "-shared", "-fPIC", src, "-o", lib, "-lm"], check=True)
    c = ctypes.CDLL(lib)
    fp = ctypes.POINTER(ctypes.c_float)
    c.ref_elementwise.argtypes = [fp, fp, fp, fp, ctypes.c_long]
    c.ref_softmax.argtypes = [fp, fp, ctypes.c_long, ctypes.c_long]
    c.ref_sum.argtypes = [fp, ctypes.c_long]
    c.ref_sum.restype = ctypes.c_float
    c.ref_set_threads(THREADS)
    return c, lambda arr: arr.ctypes.data_as(fp)


hand_c, ptr = load_hand_c()


rng = np.random.default_rng(0)

# ---- relu(a*b+c)*2 + exp(-a), 16M floats ------------------------------------------------------
n = 1 << 22 if QUICK else 1 << 24
a, b, c = (rng.standard_normal(n, dtype=np.float32) for _ in range(3))
ta, tb, tc = Tensor(a), Tensor(b), Tensor(c)
pa, pb, pc = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
GlobalCounters.reset()
out = ((ta * tb + tc).relu() * 2 + (-ta).exp()).realize()
kernels = GlobalCounters.kernel_count
check("elementwise", out.numpy(), np.maximum(a * b + c, 0) * 2 + np.exp(-a))
c_out = np.empty_like(a)
hand_c.ref_elementwise(ptr(c_out), ptr(a), ptr(b), ptr(c), n)
check("elementwise (hand-written C)", c_out, np.maximum(a * b + c, 0) * 2 + np.exp(-a))
ts_ms, np_ms, torch_ms, c_ms = race(lambda: ((ta * tb + tc).relu() * 2 + (-ta).exp()).realize(),
                                    lambda: np.maximum(a * b + c, 0) * 2 + np.exp(-a),
                                    lambda: torch.relu(pa * pb + pc) * 2 + torch.exp(-pa),
                                    lambda: hand_c.ref_elementwise(ptr(c_out), ptr(a), ptr(b), ptr(c), n), rounds=3)
row(f"relu(a*b+c)*2+exp(-a), {n >> 20}M", ts_ms, np_ms, torch_ms, f"{kernels} kernel(s)", c_ms)

# ---- sin of 16M (ts_sinf: double-precision reduction, vectorized; libm's sinf is a scalar call) ----
s_in = (a * 100).astype(np.float32)
ts_in, p_in = Tensor(s_in), torch.from_numpy(s_in.copy())
check("sin", ts_in.sin().numpy(), np.sin(s_in.astype(np.float64)), rtol=0, atol=1e-6)
ts_ms, np_ms, torch_ms = race(lambda: ts_in.sin().realize(), lambda: np.sin(s_in), lambda: torch.sin(p_in), rounds=3)
row(f"sin, {n >> 20}M (|x| < ~500)", ts_ms, np_ms, torch_ms, "1 kernel")

# ---- row softmax 4096x4096 --------------------------------------------------------------------
m = 1024 if QUICK else 4096
x = rng.standard_normal((m, m), dtype=np.float32)
tx, px = Tensor(x), torch.from_numpy(x)


def np_softmax(v):
    e = np.exp(v - v.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


GlobalCounters.reset()
out = tx.softmax(-1).realize()
kernels = GlobalCounters.kernel_count
check("softmax", out.numpy(), np_softmax(x), atol=1e-6)
c_out = np.empty_like(x)
hand_c.ref_softmax(ptr(c_out), ptr(x), m, m)
check("softmax (hand-written C)", c_out, np_softmax(x), atol=1e-6)
ts_ms, np_ms, torch_ms, c_ms = race(lambda: tx.softmax(-1).realize(), lambda: np_softmax(x), lambda: torch.softmax(px, -1),
                                    lambda: hand_c.ref_softmax(ptr(c_out), ptr(x), m, m))
row(f"softmax rows {m}x{m}", ts_ms, np_ms, torch_ms, f"{kernels} kernel(s)", c_ms)

# ---- sum of 16M ---------------------------------------------------------------------------------
# float32 summation error grows with n: compare against the float64 sum within 1e-6 of sum|a|
check("sum", ta.sum().numpy(), np.sum(a, dtype=np.float64), rtol=0, atol=1e-6 * float(np.abs(a).sum()))
# Each contender sums its own copy: 64 MiB fits this CPU's L3 (105 MiB), and contenders sharing one
# array would find it in the cache after each other while the one with its own copy would not.
a_torch, a_c = a.copy(), a.copy()
pa_own = torch.from_numpy(a_torch)
ts_ms, np_ms, torch_ms, c_ms = race(lambda: ta.sum().realize(), lambda: a.sum(), lambda: pa_own.sum(),
                                    lambda: hand_c.ref_sum(ptr(a_c), n), rounds=10)
row(f"sum of {n >> 20}M", ts_ms, np_ms, torch_ms, c_ms=c_ms)

# ---- matmul -----------------------------------------------------------------------------------
for size in ([256] if QUICK else [1024, 2048]):
    p = rng.standard_normal((size, size), dtype=np.float32)
    q = rng.standard_normal((size, size), dtype=np.float32)
    tp, tq, pp, pq = Tensor(p), Tensor(q), torch.from_numpy(p), torch.from_numpy(q)
    check("matmul", (tp @ tq).numpy(), p @ q, rtol=1e-3, atol=1e-2)
    flop = 2 * size ** 3
    ts_ms, np_ms, torch_ms = race(lambda: (tp @ tq).realize(), lambda: p @ q, lambda: pp @ pq, rounds=3, block=2)
    row(f"matmul {size}", ts_ms, np_ms, torch_ms,
        f"{flop / ts_ms / 1e6:.0f} GFLOP/s vs NumPy {flop / np_ms / 1e6:.0f}")

# ---- 1000 chained tiny adds, realized once -------------------------------------------------------
one = Tensor(np.ones(4, dtype=np.float32))


def chain():
    t = one
    for _ in range(1000):
        t = t + 1.0
    return t.realize()


def chain_phases():
    """(build, realize) in ms: the python + graph-building part and the schedule + run part."""
    t0 = time.perf_counter()
    t = one
    for _ in range(1000):
        t = t + 1.0
    t1 = time.perf_counter()
    t.realize()
    return (t1 - t0) * 1e3, (time.perf_counter() - t1) * 1e3


check("chain", chain().numpy(), np.full(4, 1001, dtype=np.float32))
phases = [chain_phases() for _ in range(REPEATS + 1)][1:]
build_us, realize_us = statistics.median(p[0] for p in phases), statistics.median(p[1] for p in phases)
row("1000 chained tiny adds (per op)", median_ms(chain) / 1000, median_ms(lambda: [np.add(o, 1.0) for o in [np.ones(4, np.float32)] * 1000]) / 1000,
    median_ms(lambda: [torch.add(t, 1.0) for t in [torch.ones(4)] * 1000]) / 1000,
    f"build + schedule + run, warm cache: {build_us:.2f} + {realize_us:.2f} us/op")

# ---- MLP 64-128-10 train step, batch 128 -----------------------------------------------------------
from tensorscope import nn  # noqa: E402
from tensorscope.nn import optim  # noqa: E402

X = rng.standard_normal((128, 64), dtype=np.float32)
Y = rng.integers(0, 10, 128).astype(np.int32)
l1, l2 = nn.Linear(64, 128), nn.Linear(128, 10)
opt = optim.SGD(nn.get_parameters([l1, l2]), lr=0.01)
tX, tY = Tensor(X), Tensor(Y)


def ts_step():
    opt.zero_grad()
    loss = l2(l1(tX).relu()).sparse_categorical_crossentropy(tY)
    loss.backward()
    opt.step()
    return loss


Tensor.training = True
ts_step()
GlobalCounters.reset()
ts_step()
step_kernels = GlobalCounters.kernel_count
pl1, pl2 = torch.nn.Linear(64, 128), torch.nn.Linear(128, 10)
popt = torch.optim.SGD(list(pl1.parameters()) + list(pl2.parameters()), lr=0.01)
pX, pY = torch.from_numpy(X), torch.from_numpy(Y).long()


def torch_step():
    popt.zero_grad()
    loss = torch.nn.functional.cross_entropy(pl2(torch.relu(pl1(pX))), pY)
    loss.backward()
    popt.step()


def kernel_ms_per_step(step, n=10):
    GlobalCounters.reset()
    for _ in range(n):
        step()
    return GlobalCounters.time_ms / n


ts_step_ms, torch_step_ms = race(ts_step, torch_step, rounds=10, block=20)
row("MLP 64-128-10 train step, batch 128", ts_step_ms, None, torch_step_ms,
    f"{step_kernels} kernels per step (tinygrad: 16), {kernel_ms_per_step(ts_step):.3f} ms in kernels")

# the same step captured once and replayed (@tensorscope.jit, tinygrad's TinyJit): no graph building,
# scheduling or python per step, only the 12 launches; its own model and optimizer, same start
jl1, jl2 = nn.Linear(64, 128), nn.Linear(128, 10)
jopt = optim.SGD(nn.get_parameters([jl1, jl2]), lr=0.01)


@tensorscope.jit
def jit_step(x, y):
    jopt.zero_grad()
    loss = jl2(jl1(x).relu()).sparse_categorical_crossentropy(y)
    loss.backward()
    jopt.step()
    return loss


for _ in range(3):  # eager, capture, first replay
    jit_step(tX, tY)
GlobalCounters.reset()
jit_step(tX, tY)
assert GlobalCounters.schedule_count == 0 and GlobalCounters.replayed_kernels == step_kernels, "the jitted step did not replay"
jit_step_ms, torch_step_ms = race(lambda: jit_step(tX, tY), torch_step, rounds=10, block=20)
row("MLP train step, jitted (@tensorscope.jit)", jit_step_ms, None, torch_step_ms,
    f"{jit_step.jit_cache_size} replayed kernels, {kernel_ms_per_step(lambda: jit_step(tX, tY)):.3f} ms in kernels")

# ---- table -------------------------------------------------------------------------------------------
def fmt(v):
    return "-" if v is None else f"{v:.3f}" if v >= 0.1 else f"{v:.5f}"


print(f"\nTensorscope benchmarks — {THREADS} thread(s), OPENBLAS_CORETYPE unset, medians in ms")
print(f"{'workload':42} {'tensorscope':>12} {'numpy':>10} {'torch':>10} {'hand C':>9} {'np/ts':>7} {'torch/ts':>8} {'ts/C':>6}  note")
for r in rows:
    ratio_np = f"{r['numpy_ms'] / r['tensorscope_ms']:.2f}" if r["numpy_ms"] else "-"
    ratio_t = f"{r['torch_ms'] / r['tensorscope_ms']:.2f}" if r["torch_ms"] else "-"
    ratio_c = f"{r['tensorscope_ms'] / r['hand_c_ms']:.2f}" if r["hand_c_ms"] else "-"
    print(f"{r['workload']:42} {fmt(r['tensorscope_ms']):>12} {fmt(r['numpy_ms']):>10} {fmt(r['torch_ms']):>10} "
          f"{fmt(r['hand_c_ms']):>9} {ratio_np:>7} {ratio_t:>8} {ratio_c:>6}  {r['note']}")
if "--json" in sys.argv:
    path = sys.argv[sys.argv.index("--json") + 1]
    with open(path, "w") as f:
        json.dump({"threads": THREADS, "rows": rows}, f, indent=2)
    print(f"wrote {path}")
