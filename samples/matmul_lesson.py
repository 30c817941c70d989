# Lesson: a matrix multiply is a broadcast multiply followed by a sum, and it costs no copies.
#
# Run it:  build/bin/tensorscope-cli run samples/matmul_lesson.py
#          DEBUG=2 build/bin/tensorscope-cli run samples/matmul_lesson.py   (kernels, fused ops, boundary reasons)
#          build/bin/tensorscope samples/matmul_lesson.py                  (the graph view and the generated C)
#
#     C[i, j] = sum_k A[i, k] * B[k, j]          A: (M, K), B: (K, N), C: (M, N)
#
# Tensorscope (like tinygrad) has no matmul primitive. It is built from movement ops, one multiply
# and one reduce:
#
#     A (M, K)    -> reshape (M, 1, K) -> expand (M, N, K)      ("row i of A, once for every j")
#     B (K, N)    -> permute (N, K)    -> reshape (1, N, K) -> expand (M, N, K)
#     multiply    (M, N, K)
#     sum over the last axis           -> (M, N)
#
# The (M, N, K) tensor is never stored. Movement ops only change the *view* (shape, strides,
# offset): an expanded axis has stride 0, so "element (i, j, k)" of the expanded A is A's element
# (i, k). When the kernel is generated, the views become index arithmetic in three nested loops,
# and the sum becomes an accumulator in a register.
import time

import numpy as np

from tensorscope import GlobalCounters, Tensor

M, K, N = 64, 32, 16
rng = np.random.default_rng(0)
A_np, B_np = rng.standard_normal((M, K)).astype(np.float32), rng.standard_normal((K, N)).astype(np.float32)
A, B = Tensor(A_np, requires_grad=True), Tensor(B_np, requires_grad=True)

# ---- 1. the built-in matmul ----------------------------------------------------------------------
GlobalCounters.reset()
C = (A @ B).realize()
print(f"A @ B: {GlobalCounters.kernel_count} kernel(s), matches numpy: {np.allclose(C.numpy(), A_np @ B_np, atol=1e-4)}")
# DEBUG=2 names the kernel r_64_16_32: a reduce ("r") with loops of 64 (i), 16 (j) and 32 (k), and
# lists its fused ops: RESHAPE EXPAND RESHAPE PERMUTE EXPAND MUL SUM RESHAPE. In the debugger, the
# source view shows the three loops; the graph view shows the ops inside one kernel cluster.

# ---- 2. the same thing by hand -------------------------------------------------------------------
by_hand = (A.reshape(M, 1, K).expand(M, N, K) * B.permute(1, 0).reshape(1, N, K).expand(M, N, K)).sum(axis=-1)
GlobalCounters.reset()
by_hand.realize()
print(f"by hand: {GlobalCounters.kernel_count} kernel(s), same numbers: {np.array_equal(by_hand.numpy(), C.numpy())}")
print(f"  the expanded operands look like {M * N * K * 4 // 1024} KiB of data, but no such buffer exists: "
      "they are views with stride 0")

# ---- 3. transposes are free -----------------------------------------------------------------------
# A.T is a permute: a new view with swapped strides, no data movement. A.T @ X reads A column-wise
# inside the same single kernel.
X = Tensor(rng.standard_normal((M, N)).astype(np.float32))
GlobalCounters.reset()
At_X = (A.T @ X).numpy()
print(f"A.T @ X: {GlobalCounters.kernel_count} kernel(s), matches numpy: {np.allclose(At_X, A_np.T @ X.numpy(), atol=1e-4)}")

# ---- 4. what runs after the sum fuses into the same kernel ------------------------------------------
# Elementwise work on the result (adding a bias, scaling) becomes the kernel's epilogue: each C[i, j]
# is finished in a register and written once. No extra pass over memory.
bias = Tensor(rng.standard_normal(N).astype(np.float32))
GlobalCounters.reset()
Y = (A @ B * 0.5 + bias).numpy()
print(f"A @ B * 0.5 + bias: {GlobalCounters.kernel_count} kernel(s)")
# Not everything fuses: a value used many times may be stored instead of recomputed. DEBUG=2 prints
# the reason next to every kernel boundary ("value with a reduce has N consumers: recomputing the
# reduction costs more than storing it"). Try (A @ B).relu() and read why.

# ---- 5. the backward pass is two more matmuls -----------------------------------------------------
# For loss = sum(C * G):   dL/dA = G @ B.T   and   dL/dB = A.T @ G.
# The chain rule through the primitives gives exactly these (the gradient of an expand is a sum, the
# gradient of a sum is an expand), but in whatever layout the forward left behind; so matmul records
# PyTorch's rule instead, and the two gradients are matmuls of their own, with the forward's fast kernels.
# The optimizer-style realize runs them in one schedule. backward() leaves the loss itself to the next
# realize (in a training step: the optimizer's, one schedule for forward and backward); here it is realized
# first, so that the count below is the gradients' alone.
G_np = rng.standard_normal((M, N)).astype(np.float32)
loss = (A @ B * Tensor(G_np)).sum()
loss.backward()
loss.realize()
GlobalCounters.reset()
A.grad.realize(B.grad)
print(f"gradients of A and B: {GlobalCounters.kernel_count} kernel(s); "
      f"dA ok: {np.allclose(A.grad.numpy(), G_np @ B_np.T, atol=1e-4)}, dB ok: {np.allclose(B.grad.numpy(), A_np.T @ G_np, atol=1e-4)}")

# ---- 6. how fast? -------------------------------------------------------------------------------
# 2*M*N*K floating-point operations (a multiply and an add per term). The first call compiles the
# kernel (cached on disk afterwards); the second one measures it again (from the CLI, the schedule
# cache skips scheduling and lowering; in the GUI or with DEBUG, every IR snapshot is taken again, which
# for this kernel costs more than running it). What makes it fast are the passes — open the kernel's
# "IR after" list: upcast_global gives one output row 32 accumulators (two AVX-512 vectors),
# register_tile moves the row loop inside and upcasts it by 8 (the 8x32 micro-kernel of every BLAS),
# simplify folds the index arithmetic, fuse_multiply_add turns acc + a*b into one FMA. For a large w
# (1 MiB and up) the matmul first copies w into 32-column panels: two PERMUTE -> CONTIGUOUS kernels.
n = 256
P, Q = Tensor(rng.standard_normal((n, n)).astype(np.float32)), Tensor(rng.standard_normal((n, n)).astype(np.float32))
(P @ Q).realize()
start = time.perf_counter()
(P @ Q).realize()
seconds = time.perf_counter() - start
print(f"{n}x{n} @ {n}x{n}: {seconds * 1e3:.2f} ms, {2 * n ** 3 / seconds / 1e9:.1f} GFLOP/s "
      f"(opt actions UPCAST_GLOBAL, REGISTER_TILE and MULACC; compare with NumPy's BLAS)")
