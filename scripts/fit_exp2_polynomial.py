#!/usr/bin/env python3
"""The coefficients of ts_exp2f's polynomial (engine/src/ir/ts_math.h): 2^t on t in [-0.5, 0.5].

The polynomial 1 + c1 t + ... + c6 t^6 that minimizes the largest relative error (the minimax polynomial;
its constant term is 1 so that exp2 of an integer is exact), found by Lawson's algorithm: weighted least
squares on Chebyshev points, each point's weight multiplied by its error until the error equioscillates
(C. L. Lawson, "Contributions to the theory of linear least maximum approximation", 1961; see also
L. N. Trefethen, "Approximation Theory and Approximation Practice", ch. 10). Prints the float32
coefficients, highest degree first as Horner's rule uses them, and the largest error of float32 Horner
evaluation in fused multiply-adds against the exact 2^t, in units in the last place.

    /usr/bin/python3 scripts/fit_exp2_polynomial.py
"""
import numpy as np

DEGREE = 6
t = 0.5 * np.cos(np.linspace(0.0, np.pi, 20001))  # Chebyshev points of [-0.5, 0.5]
exact = np.exp2(t)
A = np.stack([t**k for k in range(1, DEGREE + 1)], axis=1) / exact[:, None]  # relative error of c: A c - b
b = (exact - 1.0) / exact
weights = np.full_like(t, 1.0 / t.size)
for _ in range(200):
    root = np.sqrt(weights)
    c, *_ = np.linalg.lstsq(A * root[:, None], b * root, rcond=None)
    error = np.abs(A @ c - b)
    weights *= error
    weights /= weights.sum()
print(f"largest relative error (exact arithmetic): {error.max():.2e}")

c32 = c.astype(np.float32)
print("coefficients, t^6 down to t^1:", ", ".join(f"{v:.9g}f" for v in c32[::-1]))


def fma(x, y, z):  # float32 fused multiply-add: the float64 product of two float32 is exact
    return (x.astype(np.float64) * y + np.float64(z)).astype(np.float32)


ts = np.linspace(-0.5, 0.5, 2_000_001).astype(np.float32)
p = fma(ts, np.full_like(ts, c32[5]), c32[4])
for k in (3, 2, 1, 0):
    p = fma(ts, p, c32[k])
p = fma(ts, p, 1.0)
want = np.exp2(ts.astype(np.float64))
print(f"largest float32 error: {np.max(np.abs(p - want) / np.spacing(want.astype(np.float32))):.3f} ulp")
