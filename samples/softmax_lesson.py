# Lesson: what softmax is made of, and how the engine turns it into one kernel.
#
# Run it:  build/bin/tensorscope-cli run samples/softmax_lesson.py
#          DEBUG=2 build/bin/tensorscope-cli run samples/softmax_lesson.py   (every kernel, its fused ops and
#                                                                        the reason each kernel ends)
#          build/bin/tensorscope samples/softmax_lesson.py                  (step through it in the debugger)
#
# softmax(x)_i = exp(x_i) / sum_j exp(x_j)      turns a row of scores into probabilities (>= 0, sum 1).
#
# Tensorscope has no "softmax" primitive. Like tinygrad, it builds softmax from a handful of
# primitive ops, and the graph view shows exactly those:
#
#     m = max(x, row)           REDUCE_MAX              (why: see part 3, numerical stability)
#     d = x - m                 EXPAND m back over the row, then NEG + ADD  (a - b is a + (-b))
#     e = exp(d)                MUL by log2(e), EXP2    (the hardware-friendly exponential: 2^x)
#     s = sum(e, row)           SUM
#     y = e / s                 RECIP + EXPAND + MUL    (a / b is a * (1/b))
#
# Eleven primitive ops. The kernelizer then decides which of them share a kernel.
import numpy as np

from tensorscope import GlobalCounters, Tensor

rng = np.random.default_rng(0)
x = Tensor(rng.standard_normal((4, 8)).astype(np.float32), requires_grad=True)

# ---- 1. the built-in softmax ------------------------------------------------------------------
# Nothing runs here: y is a node in the lazy graph (in the debugger's graph view: the ops listed
# above, hanging off the input buffer).
y = x.softmax(axis=-1)

GlobalCounters.reset()
y.realize()   # schedule -> lower to IR -> passes -> render C -> compile -> launch
print(f"softmax of a (4, 8) tensor: {GlobalCounters.kernel_count} kernel(s)")
# With DEBUG=2 you see one kernel named like r_4_8_8_8 (r = it reduces; the numbers are loop sizes)
# whose fused ops are "REDUCE_MAX NEG EXPAND ADD CONST MUL EXP2 SUM RECIP EXPAND MUL".
#
# Why one kernel? Each reduce produces one value per row, and that value is broadcast (EXPAND) back
# over the same row it came from. Such a "row reduction" can stay in the kernel: for every row the
# loop computes the max, then the sum of exponentials, then writes the 8 outputs, all in registers.
# A reduce whose result is broadcast over *other* rows (or over a bigger shape) would end the kernel
# ("reduce output is expanded"): recomputing it for every element would cost more than storing it.

# ---- 2. the same thing by hand ------------------------------------------------------------------
m = x.max(axis=-1, keepdim=True)       # (4, 1): keepdim keeps the axis so it broadcasts back
e = (x - m).exp()                       # (4, 8)
by_hand = e / e.sum(axis=-1, keepdim=True)

GlobalCounters.reset()
by_hand.realize()
print(f"softmax by hand: {GlobalCounters.kernel_count} kernel(s), "
      f"max difference to the built-in one: {np.abs(by_hand.numpy() - y.numpy()).max():.1e}")
# Same graph, same kernel: DEBUG=2 shows it was not even compiled again (the compile cache is keyed
# by the kernel's source, and the source is identical).
print("rows sum to", np.round(y.numpy().sum(axis=1), 6))

# ---- 3. why subtract the max: numerical stability ---------------------------------------------
# exp(1000) overflows float32 (max ~3.4e38), so the textbook formula gives inf / inf = nan.
# Subtracting the row's max first changes nothing mathematically (the factor exp(-m) cancels) but
# keeps every exponent <= 0, so exp() stays in [0, 1].
big = Tensor([[1000.0, 999.0, 0.0]])
naive = big.exp() / big.exp().sum(axis=-1, keepdim=True)
print("naive softmax of [1000, 999, 0]:", naive.numpy()[0])
print("softmax of [1000, 999, 0]:      ", np.round(big.softmax().numpy()[0], 4))

# ---- 4. the backward pass -----------------------------------------------------------------------
# The gradient of softmax is y * (g - sum(g * y)) for an upstream gradient g. backward() builds it
# from the same primitives (lazily); reading x.grad realizes it. The loss itself is left to the next
# realize as well; it is realized first here, so that the count below is the gradient's alone.
weights = Tensor(np.arange(8, dtype=np.float32))   # loss = sum_i y_i * i: "push probability to high i"
loss = (y * weights).sum()
loss.backward()
loss.realize()
GlobalCounters.reset()
grad = x.grad.numpy()
print(f"gradient: {GlobalCounters.kernel_count} kernel(s); first row {np.round(grad[0], 3)}")
# DEBUG=2 shows two kernels here: the first recomputes the max and the sum of exponentials and ends
# because "value with a reduce has 3 consumers": three parts of the gradient formula need 1/sum, and
# storing 4 floats is cheaper than recomputing the reduction three times.

# ---- 5. log_softmax, the form losses use ----------------------------------------------------------
# log(softmax(x)) = x - m - log(sum(exp(x - m))): no division, and no log(0) = -inf for tiny
# probabilities. cross-entropy losses are built on it.
GlobalCounters.reset()
ls = x.log_softmax(axis=-1).numpy()
print(f"log_softmax: {GlobalCounters.kernel_count} kernel(s), matches log(softmax): "
      f"{np.allclose(ls, np.log(y.numpy()), atol=1e-5)}")
