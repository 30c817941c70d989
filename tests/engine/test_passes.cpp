// The optimization passes: index simplification in the builder, and the matmul pipeline
// (upcast_global → register_tile → simplify → fuse_multiply_add) checked against the interpreter
// running the unoptimized kernel.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "ir/builder.h"
#include "ir_test_kernels.h"
#include "opt/pass_manager.h"
#include "tensorscope/ir.h"
#include "tensorscope/session.h"

using namespace ts;
using ir::Op;
using ts::test::matmul_kernel;
using ts::test::row_max_kernel;

namespace {

int count(const ir::Kernel& k, Op op) {
  int c = 0;
  for (const ir::Inst& in : k.insts) c += in.op == op;
  return c;
}

}  // namespace

TEST(Builder, DivModOfAFlatIndexFoldToLoopIndices) {
  ir::Kernel k;
  k.globals = {{DType::Int32, 1, true}};
  ir::Builder b(k);
  auto m = b.range(8, true), j = b.range(16, true);
  // flat = 512·m + 32·j + 5
  auto flat = b.add(b.add(b.mul(m, b.cint(512)), b.mul(j, b.cint(32))), b.cint(5));
  auto mod = b.alu(Op::Mod, DType::Int32, flat, b.cint(32));
  ASSERT_TRUE(b.is_const(mod));
  EXPECT_EQ(b.const_value(mod), 5);
  auto div = b.alu(Op::IDiv, DType::Int32, flat, b.cint(32));
  // 16·m + j: no IDIV or MOD left
  EXPECT_EQ(count(k, Op::IDiv), 0);
  EXPECT_EQ(count(k, Op::Mod), 0);
  const ir::Inst& sum = k.insts[div];
  EXPECT_EQ(sum.op, Op::Add);
  // (8·m + 1)·1024 distributes, so / 8192 folds to m
  auto row = b.mul(b.add(b.mul(m, b.cint(8)), b.cint(1)), b.cint(1024));
  EXPECT_EQ(b.alu(Op::IDiv, DType::Int32, row, b.cint(8192)), m);
}

TEST(Builder, AddingZeroFoldsOnlyWhereTheSumCannotBeNegativeZero) {
  // x + 0 is x except for x = -0 (-0 + +0 = +0); a sum is -0 only when both of its terms are
  ir::Kernel k;
  k.globals = {{DType::Float32, 4, false}};
  ir::Builder b(k);
  const DType F = DType::Float32;
  auto buf = b.global(0, F);
  auto x = b.load(buf, b.cint(0)), y = b.load(buf, b.cint(1)), zero = b.constant(0.0, F);
  auto first = b.alu(Op::Add, F, x, zero);  // x may be -0: kept
  EXPECT_NE(first, x);
  EXPECT_EQ(b.alu(Op::Add, F, first, zero), first);  // first is never -0
  EXPECT_EQ(b.alu(Op::Add, F, zero, b.alu(Op::Add, F, first, y)), b.alu(Op::Add, F, first, y));
  EXPECT_NE(b.alu(Op::Add, F, b.alu(Op::Add, F, x, y), zero), b.alu(Op::Add, F, x, y));  // x + y may be -0
  // adding -0 is never folded by this rule
  EXPECT_NE(b.alu(Op::Add, F, first, b.constant(-0.0, F)), first);
}

TEST(Builder, DivModKeepWhatTheyCannotProve) {
  ir::Kernel k;
  k.globals = {{DType::Int32, 1, true}};
  ir::Builder b(k);
  auto j = b.range(100, true);
  // (j + 5) % 32 is not known to be j + 5 (j + 5 may exceed 31)
  auto mod = b.alu(Op::Mod, DType::Int32, b.add(j, b.cint(5)), b.cint(32));
  EXPECT_EQ(k.insts[mod].op, Op::Mod);
}

// A watched run's snapshots keep the kernel as it was after each pass and print it when first read
// (PassSnapshot): the text is the one ir::print gave at that pass, whatever the passes did to the kernel after.
TEST(Passes, SnapshotsPrintTheKernelAsItWasAfterEachPassWhenFirstRead) {
  ir::Kernel kernel = matmul_kernel(16, 64, 24);
  const std::string lowered = ir::print(kernel);
  std::vector<PassSnapshot> snapshots;
  snapshots.emplace_back("lower", lowered);
  run_passes(kernel, &snapshots);
  ASSERT_GT(snapshots.size(), 3u);
  EXPECT_EQ(snapshots.front().ir(), lowered);
  EXPECT_EQ(snapshots.back().ir(), ir::print(kernel));  // the last pass's text is the final kernel's
  // The first pass that changed the kernel: its text is the kernel after it, neither the lowered nor the
  // final one (which a snapshot holding a reference to the kernel, or printed late from it, would show).
  size_t changed = 0;
  while (changed + 1 < snapshots.size() && snapshots[changed + 1].same_ir(snapshots[changed])) changed++;
  ASSERT_LT(changed + 1, snapshots.size());
  EXPECT_NE(snapshots[changed + 1].ir(), lowered);
  EXPECT_NE(snapshots[changed + 1].ir(), snapshots.back().ir()) << "a snapshot printed the kernel as the later passes left it";
  // A pass that changed nothing shares the listing before it (one text, printed once); so do copies.
  for (size_t i = 1; i < snapshots.size(); i++)
    if (snapshots[i].ir() == snapshots[i - 1].ir()) {
      EXPECT_EQ(&snapshots[i].ir(), &snapshots[i - 1].ir()) << snapshots[i].pass;
    }
  const PassSnapshot copy = snapshots.back();
  EXPECT_EQ(&copy.ir(), &snapshots.back().ir());
  // Read from two threads at once (the recorder's and the GUI's): one text.
  ir::Kernel again = matmul_kernel(16, 64, 24);
  run_passes(again, nullptr);
  const PassSnapshot fresh("final", again);
  const std::string* seen[2] = {nullptr, nullptr};
  std::thread a([&] { seen[0] = &fresh.ir(); }), b([&] { seen[1] = &fresh.ir(); });
  a.join();
  b.join();
  EXPECT_EQ(seen[0], seen[1]);
  EXPECT_EQ(*seen[0], ir::print(again));
}

TEST(Passes, MatmulIsRegisterTiledAndMatchesTheInterpreter) {
  const int64_t M = 16, N = 64, K = 24;
  ir::Kernel plain = matmul_kernel(M, N, K), tiled = plain;
  run_passes(tiled, nullptr);
  ASSERT_TRUE(ir::verify(tiled).empty());
  bool upcast = false, tile = false;
  for (const ir::AppliedOpt& o : tiled.opts) {
    upcast = upcast || (o.kind == ir::AppliedOpt::UpcastGlobal && o.amount == 32);
    tile = tile || (o.kind == ir::AppliedOpt::RegisterTile && o.amount == 8);
  }
  EXPECT_TRUE(upcast) << ir::print(tiled);
  EXPECT_TRUE(tile) << ir::print(tiled);
  EXPECT_EQ(count(tiled, Op::DefineAcc), 8 * 32);  // the 8×32 register tile
  EXPECT_EQ(count(tiled, Op::MulAcc), 8 * 32);     // every update one fused multiply-add
  EXPECT_EQ(count(tiled, Op::IDiv) + count(tiled, Op::Mod), 0);

  std::mt19937 rng(0);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> x(M * K), w(K * N), want(M * N), got(M * N);
  for (float& v : x) v = u(rng);
  for (float& v : w) v = u(rng);
  ir::interpret(plain, {want.data(), x.data(), w.data()});
  ir::interpret(tiled, {got.data(), x.data(), w.data()});
  for (int64_t i = 0; i < M * N; i++) {
    double ref = 0;
    for (int64_t kk = 0; kk < K; kk++) ref += static_cast<double>(x[i / N * K + kk]) * w[kk * N + i % N];
    EXPECT_NEAR(got[i], ref, 1e-4) << "element " << i;
    EXPECT_NEAR(got[i], want[i], 1e-4) << "element " << i;
  }
}

TEST(Passes, FusedMultiplyAddRoundsOnce) {
  // acc = 0 + a·b with a·b not representable: MULACC keeps the exact product's rounding once
  ir::Kernel k;
  k.globals = {{DType::Float32, 1, true}, {DType::Float32, 2, false}};
  ir::Builder b(k);
  auto out = b.global(0, DType::Float32), in = b.global(1, DType::Float32);
  auto acc = b.acc(-1, DType::Float32);
  auto r = b.range(1);
  auto a = b.load(in, b.cint(0));
  b.assign(acc, b.alu(Op::Add, DType::Float32, acc, b.alu(Op::Mul, DType::Float32, a, a)));
  b.end_range(r);
  b.store(out, b.cint(0), acc);
  fuse_multiply_add(k);
  EXPECT_EQ(count(k, Op::MulAcc), 1);
  EXPECT_EQ(count(k, Op::Mul), 0);
  float x[2] = {1.0f + std::ldexp(1.0f, -12), 0}, res = 0;
  ir::interpret(k, {&res, x});
  EXPECT_EQ(res, std::fma(x[0], x[0], -1.0f));  // 2^-11 + 2^-24, which a*a - 1 would round away
}

TEST(Passes, UpcastWithoutHoistingKeepsLoopBounds) {
  // Without hoist_constants the reduce loop's bound is a constant inside the upcast loop's body: the
  // upcast copies must still find it (a stale id here once gave the reduce loop a wrong trip count).
  const int64_t M = 8, N = 4, K = 3;
  ir::Kernel plain = matmul_kernel(M, N, K), k = plain;
  upcast_global(k);
  register_tile(k);
  simplify(k);
  ASSERT_TRUE(ir::verify(k).empty()) << ir::print(k);
  std::vector<float> x(M * K), w(K * N), want(M * N), got(M * N);
  for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i % 5) - 2;
  for (size_t i = 0; i < w.size(); i++) w[i] = static_cast<float>(i % 3) + 0.5f;
  ir::interpret(plain, {want.data(), x.data(), w.data()});
  ir::interpret(k, {got.data(), x.data(), w.data()});
  EXPECT_EQ(got, want);  // same operations in the same order: bit-identical
}

TEST(Passes, UpcastReduceLooksPastLoopInvariantValues) {
  // out[m] = sum_k f(x[m·K + k]): the row offset m·K sits between the accumulator and its loop (where
  // loop-invariant code motion puts it); the reduce loop is still split into partial sums: 64 for a
  // streaming sum (f(v) = v: one load and the add), 16 when the body does more (f(v) = v·v)
  const int64_t M = 3, K = 256;
  for (bool streaming : {true, false}) {
    ir::Kernel k;
    k.name = "rowsum";
    k.globals = {{DType::Float32, M, true}, {DType::Float32, M * K, false}};
    ir::Builder b(k);
    auto out = b.global(0, DType::Float32), x = b.global(1, DType::Float32);
    auto rm = b.range(M, true);
    auto acc = b.acc(0, DType::Float32);
    auto row = b.mul(rm, b.cint(K));
    auto rk = b.range(K);
    auto v = b.load(x, b.add(row, rk));
    if (!streaming) v = b.alu(Op::Mul, DType::Float32, v, v);
    b.assign(acc, b.alu(Op::Add, DType::Float32, acc, v));
    b.end_range(rk);
    b.store(out, rm, acc);
    b.end_range(rm);
    ir::Kernel plain = k;
    upcast_reduce(k);
    ASSERT_TRUE(ir::verify(k).empty()) << ir::print(k);
    ASSERT_EQ(k.opts.size(), 1u);
    EXPECT_EQ(k.opts[0].kind, ir::AppliedOpt::UpcastReduce);
    EXPECT_EQ(k.opts[0].amount, streaming ? 64 : 16);
    std::vector<float> xs(M * K), want(M), got(M);
    for (size_t i = 0; i < xs.size(); i++) xs[i] = static_cast<float>(i % 7);  // small integers: exact sums
    ir::interpret(plain, {want.data(), xs.data()});
    ir::interpret(k, {got.data(), xs.data()});
    EXPECT_EQ(got, want);
  }
}

TEST(Passes, MaxReduceOnIntegerKeysKeepsEveryValue) {
  // out[r] = max over a row of special values; the integer-key version must give the same floats
  // (NaN wins; -0.0 stays -0.0 when the row has nothing larger). Rows of 16 (-inf after the first five): a
  // loop of under 16 trips keeps its float max (checked below).
  std::vector<std::vector<float>> rows = {
      {1.0f, -0.0f, 0.0f, NAN, 3.0f}, {-INFINITY, -5.0f, -1e-40f, -3.0f, -2.0f}, {-0.0f, -0.0f, -0.0f, -0.0f, -0.0f},
      {INFINITY, 1.0f, 2.0f, 3.0f, -INFINITY}, {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY}, {2.5f, 1e30f, -1e30f, 7e-45f, 0.0f}};
  const int64_t R = static_cast<int64_t>(rows.size()), C = 16;
  for (auto& row : rows) row.resize(C, -INFINITY);
  ir::Kernel keyed = row_max_kernel(R, C);
  max_reduce_as_int(keyed);
  ASSERT_TRUE(ir::verify(keyed).empty()) << ir::print(keyed);
  EXPECT_EQ(count(keyed, Op::Bitcast), 2);  // the key of each element, the float of the result
  std::vector<float> xs, got(R);
  for (auto& row : rows) xs.insert(xs.end(), row.begin(), row.end());
  ir::interpret(keyed, {got.data(), xs.data()});
  const std::vector<float> want = {NAN, -1e-40f, -0.0f, INFINITY, -INFINITY, 1e30f};
  for (int64_t r = 0; r < R; r++) {
    if (std::isnan(want[r])) {
      EXPECT_TRUE(std::isnan(got[r])) << "row " << r;
    } else {
      EXPECT_EQ(got[r], want[r]) << "row " << r;
      EXPECT_EQ(std::signbit(got[r]), std::signbit(want[r])) << "row " << r;
    }
  }
}

TEST(Passes, MaxReduceOverAShortLoopKeepsItsFloatMax) {
  // a row max over 10 values (a cross-entropy's classes): no keys, the same values
  const ir::Kernel k = row_max_kernel(4, 10);
  ir::Kernel kept = k;
  max_reduce_as_int(kept);
  ASSERT_TRUE(ir::verify(kept).empty()) << ir::print(kept);
  EXPECT_EQ(count(kept, Op::Bitcast), 0);
  std::vector<float> xs(40), got(4), want(4);
  for (size_t i = 0; i < xs.size(); i++) xs[i] = static_cast<float>((i * 7) % 11) - 5.0f;
  xs[13] = NAN;
  ir::interpret(k, {want.data(), xs.data()});
  ir::interpret(kept, {got.data(), xs.data()});
  EXPECT_TRUE(std::isnan(got[1]));
  for (int r : {0, 2, 3}) EXPECT_EQ(got[r], want[r]) << "row " << r;
}

TEST(Passes, UpcastReduceLeavesALongFloatMaxWholeForIntegerKeys) {
  // A row max over 32 (attention's over 32 keys): not upcast, so that max_reduce_as_int's keys make it an
  // integer max loop the C compiler vectorizes (upcast, the partial maxima were NaN-propagating selects that
  // gcc 12 left scalar: 105 against 36 us for 262,144 floats). The same values, NaN included.
  const int64_t R = 4, C = 32;
  const ir::Kernel plain = row_max_kernel(R, C);
  ir::Kernel k = plain;
  upcast_reduce(k);
  ASSERT_TRUE(ir::verify(k).empty()) << ir::print(k);
  EXPECT_TRUE(k.opts.empty());
  max_reduce_as_int(k);
  ASSERT_TRUE(ir::verify(k).empty()) << ir::print(k);
  EXPECT_EQ(count(k, Op::Bitcast), 2);  // keyed
  std::vector<float> xs(R * C), want(R), got(R);
  for (size_t i = 0; i < xs.size(); i++) xs[i] = static_cast<float>((i * 13) % 29) - 14.0f;
  xs[40] = NAN;
  xs[70] = INFINITY;
  ir::interpret(plain, {want.data(), xs.data()});
  ir::interpret(k, {got.data(), xs.data()});
  EXPECT_TRUE(std::isnan(got[1]));
  for (int r : {0, 2, 3}) EXPECT_EQ(got[r], want[r]) << "row " << r;
  // a row max of 12 keeps its upcast (its partial maxima vectorize, and keys would not apply), and a plan
  // that asks for the upcast gets it
  ir::Kernel short_row = row_max_kernel(R, 12);
  upcast_reduce(short_row);
  ASSERT_EQ(short_row.opts.size(), 1u);
  EXPECT_EQ(short_row.opts[0].kind, ir::AppliedOpt::UpcastReduce);
  ir::Kernel planned = plain;
  planned.plan.set(ir::AppliedOpt::UpcastReduce, 8);
  upcast_reduce(planned);
  ASSERT_EQ(planned.opts.size(), 1u);
  EXPECT_EQ(planned.opts[0].amount, 8);
}

TEST(Passes, AnEpiloguesLoadsSinkBehindTheReduceLoop) {
  // out[m, n] = 0.9·buf[m, n] + Σ_k x[m, k]·w[k, n], written as lowering writes an SGD momentum update
  // fused into a weight gradient: buf's load and its product in front of the accumulator and its loop.
  // sink_after_loops moves both behind the loop (they are used only by the store); the row offset
  // m·K, which the loop uses, stays in front. The interpreter gives the same floats.
  const int64_t M = 5, N = 7, K = 9;
  ir::Kernel k;
  k.name = "momentum";
  k.globals = {{DType::Float32, M * N, true}, {DType::Float32, M * K, false}, {DType::Float32, K * N, false},
               {DType::Float32, M * N, false}};
  ir::Builder b(k);
  auto out = b.global(0, DType::Float32), x = b.global(1, DType::Float32), w = b.global(2, DType::Float32),
       buf = b.global(3, DType::Float32);
  auto rm = b.range(M, true), rn = b.range(N, true);
  auto at = b.add(b.mul(rm, b.cint(N)), rn);
  auto decayed = b.alu(Op::Mul, DType::Float32, b.load(buf, at), b.constant(0.9, DType::Float32));
  auto acc = b.acc(0, DType::Float32);
  auto rk = b.range(K);
  auto xv = b.load(x, b.add(b.mul(rm, b.cint(K)), rk)), wv = b.load(w, b.add(b.mul(rk, b.cint(N)), rn));
  b.assign(acc, b.alu(Op::Add, DType::Float32, acc, b.alu(Op::Mul, DType::Float32, xv, wv)));
  b.end_range(rk);
  b.store(out, at, b.alu(Op::Add, DType::Float32, decayed, acc));
  b.end_range(rn);
  b.end_range(rm);
  ir::Kernel plain = k;
  sink_after_loops(k);
  ASSERT_TRUE(ir::verify(k).empty()) << ir::print(k);
  size_t reduce_end = 0, buf_load = 0, scale = 0;
  for (size_t i = 0; i < k.insts.size(); i++) {
    const ir::Inst& in = k.insts[i];
    if (in.op == Op::EndRange && k.insts[in.src[0]].arg == ir::kReduceLoop) reduce_end = i;
    if (in.op == Op::Load && k.insts[in.src[0]].arg == 3) buf_load = i;
    if (in.op == Op::Mul && in.dtype == DType::Float32 && in.src[0] == buf_load) scale = i;
  }
  EXPECT_GT(buf_load, reduce_end) << ir::print(k);
  EXPECT_GT(scale, buf_load) << ir::print(k);
  std::vector<float> xs(M * K), ws(K * N), bufs(M * N), want(M * N), got(M * N);
  for (size_t i = 0; i < xs.size(); i++) xs[i] = static_cast<float>(i % 7) - 3;
  for (size_t i = 0; i < ws.size(); i++) ws[i] = static_cast<float>(i % 5) * 0.25f;
  for (size_t i = 0; i < bufs.size(); i++) bufs[i] = static_cast<float>(i) * 0.1f;
  ir::interpret(plain, {want.data(), xs.data(), ws.data(), bufs.data()});
  ir::interpret(k, {got.data(), xs.data(), ws.data(), bufs.data()});
  EXPECT_EQ(got, want);
  // a loop that stores keeps what is in front of it: a load moved behind a store could read what it stored
  ir::Kernel stores;
  stores.globals = {{DType::Float32, 4, true}, {DType::Float32, 4, true}};
  ir::Builder s(stores);
  auto o = s.global(0, DType::Float32), in = s.global(1, DType::Float32);
  auto first = s.load(o, s.cint(0));
  auto r = s.range(4);
  s.store(o, r, s.load(in, r));
  s.end_range(r);
  s.store(in, s.cint(0), first);
  const std::string before = ir::print(stores);
  sink_after_loops(stores);
  EXPECT_EQ(ir::print(stores), before);
  // ... and a load in front of a store outside the loop stays in front of that store
  ir::Kernel stored_first;
  stored_first.globals = {{DType::Float32, 4, true}, {DType::Float32, 4, false}};
  ir::Builder f(stored_first);
  auto out2 = f.global(0, DType::Float32), in2 = f.global(1, DType::Float32);
  auto old_value = f.load(out2, f.cint(0));
  f.store(out2, f.cint(0), f.load(in2, f.cint(1)));
  auto sum = f.acc(0, DType::Float32);
  auto r2 = f.range(4);
  f.assign(sum, f.alu(Op::Add, DType::Float32, sum, f.load(in2, r2)));
  f.end_range(r2);
  f.store(out2, f.cint(1), f.alu(Op::Add, DType::Float32, sum, old_value));
  const std::string unsunk = ir::print(stored_first);
  sink_after_loops(stored_first);
  EXPECT_EQ(ir::print(stored_first), unsunk);
}

namespace {

// out[b, t, j] = in[b, j / D, t, j % D] (attention's heads (B, H, T, D) copied back into rows (B, T, H·D)), the
// row j in one loop of H·D starting at `first` (a piece of a concatenation: j = i + first): an elementwise kernel
// whose row is taken apart by a division and a modulo.
ir::Kernel heads_to_rows_kernel(int64_t B, int64_t H, int64_t T, int64_t D, int64_t first) {
  ir::Kernel k;
  k.globals = {{DType::Float32, B * T * (H * D + first), true}, {DType::Float32, B * H * T * D, false}};
  ir::Builder b(k);
  auto out = b.global(0, DType::Float32), in = b.global(1, DType::Float32);
  auto rb = b.range(B, true), rt = b.range(T, true), ri = b.range(H * D, true);
  auto j = b.alu(Op::Add, DType::Int32, ri, b.cint(first));
  auto head = b.alu(Op::IDiv, DType::Int32, j, b.cint(D)), lane = b.alu(Op::Mod, DType::Int32, j, b.cint(D));
  if (first) {  // the piece's own position: (j - first) / D, (j - first) % D
    head = b.alu(Op::Add, DType::Int32, head, b.cint(-first / D));
  }
  auto mul = [&](ir::ValueId a, int64_t c) { return b.alu(Op::Mul, DType::Int32, a, b.cint(c)); };
  auto add = [&](ir::ValueId a, ir::ValueId c) { return b.alu(Op::Add, DType::Int32, a, c); };
  auto src = add(mul(add(mul(add(mul(rb, H), head), T), rt), D), lane);
  auto dst = add(mul(add(mul(rb, T), rt), H * D + first), j);
  b.store(out, dst, b.load(in, src));
  b.end_range(ri);
  b.end_range(rt);
  b.end_range(rb);
  return k;
}

}  // namespace

TEST(Passes, DelinearizeRunsAnElementwiseRowTakenApartByDivisionsAsNestedLoops) {
  // delinearize_reduce on an elementwise kernel: the row of H·D becomes (H, D) loops and no division is left,
  // also where the row's index starts at a multiple of D (split_index_set's piece of a concatenation); the
  // outermost loop (the threads' split) is not touched. Same values as the kernel before the pass.
  const int64_t B = 2, H = 3, T = 5, D = 4;
  for (int64_t first : {int64_t{0}, 2 * D}) {
    ir::Kernel plain = heads_to_rows_kernel(B, H, T, D, first), k = plain;
    ASSERT_GT(count(plain, Op::IDiv) + count(plain, Op::Mod), 0) << ir::print(plain);
    delinearize_reduce(k);
    ASSERT_TRUE(ir::verify(k).empty()) << ir::print(k);
    EXPECT_EQ(count(k, Op::IDiv) + count(k, Op::Mod), 0) << ir::print(k);
    EXPECT_EQ(count(k, Op::Range), 4) << ir::print(k);  // B, T, then H and D
    std::vector<float> x(B * H * T * D), want(B * T * (H * D + first), -1), got(want);
    for (size_t i = 0; i < x.size(); i++) x[i] = static_cast<float>(i);
    ir::interpret(plain, {want.data(), x.data()});
    ir::interpret(k, {got.data(), x.data()});
    EXPECT_EQ(got, want) << "first " << first;
  }
  // a row starting where D does not divide (j = i + 3): left as it is
  ir::Kernel odd = heads_to_rows_kernel(B, H, T, D, 3), k = odd;
  delinearize_reduce(k);
  EXPECT_EQ(count(k, Op::Range), 3) << ir::print(k);
}
