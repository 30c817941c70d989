// IR kernels built by hand for the pass tests (test_passes.cpp, test_opt_plan.cpp).
#pragma once
#include <cmath>
#include <cstdint>

#include "ir/builder.h"
#include "tensorscope/ir.h"

namespace ts::test {

// out (M, N) = x (M, K) @ w (K, N), the loop nest lowering produces: m, n global; k reduce.
// Globals: out (M·N float32), x (M·K), w (K·N).
inline ir::Kernel matmul_kernel(int64_t m, int64_t n, int64_t k) {
  ir::Kernel kern;
  kern.name = "matmul";
  kern.globals = {{DType::Float32, m * n, true}, {DType::Float32, m * k, false}, {DType::Float32, k * n, false}};
  ir::Builder b(kern);
  auto out = b.global(0, DType::Float32), x = b.global(1, DType::Float32), w = b.global(2, DType::Float32);
  auto rm = b.range(m, true);
  auto rn = b.range(n, true);
  auto acc = b.acc(0, DType::Float32);
  auto rk = b.range(k);
  auto xv = b.load(x, b.add(b.mul(rm, b.cint(k)), rk));
  auto wv = b.load(w, b.add(b.mul(rk, b.cint(n)), rn));
  b.assign(acc, b.alu(ir::Op::Add, DType::Float32, acc, b.alu(ir::Op::Mul, DType::Float32, xv, wv)));
  b.end_range(rk);
  b.store(out, b.add(b.mul(rm, b.cint(n)), rn), acc);
  b.end_range(rn);
  b.end_range(rm);
  return kern;
}

// out[r] = max over row r of x (R rows of C floats), a float max reduction as lowering writes it: r global,
// the row's loop a reduce. Globals: out (R float32), x (R·C).
inline ir::Kernel row_max_kernel(int64_t R, int64_t C) {
  ir::Kernel k;
  k.name = "rowmax";
  k.globals = {{DType::Float32, R, true}, {DType::Float32, R * C, false}};
  ir::Builder b(k);
  auto out = b.global(0, DType::Float32), x = b.global(1, DType::Float32);
  auto rr = b.range(R, true);
  auto acc = b.acc(-INFINITY, DType::Float32);
  auto rc = b.range(C);
  b.assign(acc, b.alu(ir::Op::Max, DType::Float32, acc, b.load(x, b.add(b.mul(rr, b.cint(C)), rc))));
  b.end_range(rc);
  b.store(out, rr, acc);
  b.end_range(rr);
  return k;
}

}  // namespace ts::test
