// IR kernels built by hand for the pass tests (test_passes.cpp, test_opt_plan.cpp).
#pragma once
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

}  // namespace ts::test
