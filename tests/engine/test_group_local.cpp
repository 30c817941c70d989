// Workgroups in the IR (DEFINE_LOCAL, BARRIER, local loops; ir.h) and the GPU actions that use them:
// GROUP (a reduce split across the lanes of a workgroup, group_reduce.cpp) and LOCAL (the workgroup size,
// local_size.cpp). Each action is asked for on random shapes, and where it applies the kernel computes on
// OPENCL and VULKAN what the interpreter computes on the same IR (and, within float32 reassociation, what
// the kernel computed without the action); where it is illegal (odd sizes, a device without workgroups)
// nothing is applied. Devices that are not here are skipped, as in test_backends_gpu.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../../backends/gpu_launch.h"  // the grid mapping shared by the GPU backends (not a public header)
#include "ir/builder.h"
#include "opt/pass_manager.h"
#include "tensorscope/device.h"
#include "tensorscope/ir.h"

using namespace ts;
using ir::Op;
using ir::ValueId;

namespace {

constexpr DType F = DType::Float32;

enum class Reduce { Sum, Max };

// out[i] = epilogue(reduce_j x[i*N + j]) for i < M (M = 0: a full reduction, no global loop).
ir::Kernel row_reduce(int64_t M, int64_t N, Reduce r, bool epilogue) {
  ir::Kernel k;
  k.name = std::string(r == Reduce::Sum ? "r_sum_" : "r_max_") + std::to_string(M) + "_" + std::to_string(N);
  const int64_t rows = std::max<int64_t>(M, 1);
  k.globals = {{F, rows, true}, {F, rows * N, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), x = b.global(1, F);
  ValueId i = M > 0 ? b.range(M, true) : b.cint(0);
  ValueId acc = b.acc(r == Reduce::Sum ? 0.0 : -INFINITY, F);
  ValueId j = b.range(N);
  ValueId v = b.load(x, b.add(b.mul(i, b.cint(N)), j));
  b.assign(acc, b.alu(r == Reduce::Sum ? Op::Add : Op::Max, F, acc, v));
  b.end_range(j);
  ValueId result = acc;
  if (epilogue) result = b.alu(Op::Add, F, b.alu(Op::Mul, F, acc, b.constant(0.5, F)), b.alu(Op::Sqrt, F, b.alu(Op::Max, F, acc, b.constant(0, F))));
  b.store(out, i, result);
  if (M > 0) b.end_range(i);
  return k;
}

// out[i, j] = x[i, j] - max_j' x[i, j'] for i < M, j < N: a softmax's shape, whose row's outputs are a global
// loop inside the row's loop, after the reduction.
ir::Kernel sub_row_max(int64_t M, int64_t N) {
  ir::Kernel k;
  k.name = "r_sub_max_" + std::to_string(M) + "_" + std::to_string(N);
  k.globals = {{F, M * N, true}, {F, M * N, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), x = b.global(1, F);
  ValueId i = b.range(M, true);
  ValueId acc = b.acc(-INFINITY, F);
  ValueId j = b.range(N);
  b.assign(acc, b.alu(Op::Max, F, acc, b.load(x, b.add(b.mul(i, b.cint(N)), j))));
  b.end_range(j);
  ValueId j2 = b.range(N, true);
  ValueId idx = b.add(b.mul(i, b.cint(N)), j2);
  b.store(out, idx, b.alu(Op::Add, F, b.load(x, idx), b.alu(Op::Neg, F, acc)));
  b.end_range(j2);
  b.end_range(i);
  return k;
}

// out[i, j] = x[i, j] * 2 + 1: an elementwise kernel for LOCAL.
ir::Kernel elementwise(int64_t M, int64_t N) {
  ir::Kernel k;
  k.name = "E_" + std::to_string(M) + "_" + std::to_string(N);
  k.globals = {{F, M * N, true}, {F, M * N, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), x = b.global(1, F);
  ValueId i = b.range(M, true), j = b.range(N, true);
  ValueId idx = b.add(b.mul(i, b.cint(N)), j);
  b.store(out, idx, b.alu(Op::Add, F, b.alu(Op::Mul, F, b.load(x, idx), b.constant(2, F)), b.constant(1, F)));
  b.end_range(j);
  b.end_range(i);
  return k;
}

// out[i, j] = sum_k a[i, k] * b[k, j]: the UPCAST passes make it a register tile of many accumulators
// before GROUP splits its reduce (one local array per accumulator), and fuse_multiply_add runs after.
// With `epilogue`: relu(acc + bias[j]), and the A operand scaled (a fused elementwise op on it).
ir::Kernel matmul(int64_t M, int64_t N, int64_t K, bool epilogue = false) {
  ir::Kernel k;
  k.name = "r_mm_" + std::to_string(M) + "_" + std::to_string(N) + "_" + std::to_string(K);
  k.globals = {{F, M * N, true}, {F, M * K, false}, {F, K * N, false}};
  if (epilogue) k.globals.push_back({F, N, false});
  ir::Builder b(k);
  ValueId out = b.global(0, F), a = b.global(1, F), w = b.global(2, F);
  ValueId bias = epilogue ? b.global(3, F) : ir::kNone;
  ValueId i = b.range(M, true), j = b.range(N, true);
  ValueId acc = b.acc(0, F);
  ValueId r = b.range(K);
  ValueId av = b.load(a, b.add(b.mul(i, b.cint(K)), r));
  if (epilogue) av = b.alu(Op::Mul, F, av, b.constant(0.5, F));
  ValueId prod = b.alu(Op::Mul, F, av, b.load(w, b.add(b.mul(r, b.cint(N)), j)));
  b.assign(acc, b.alu(Op::Add, F, acc, prod));
  b.end_range(r);
  ValueId result = acc;
  if (epilogue) result = b.alu(Op::Max, F, b.alu(Op::Add, F, acc, b.load(bias, j)), b.constant(0, F));
  b.store(out, b.add(b.mul(i, b.cint(N)), j), result);
  b.end_range(j);
  b.end_range(i);
  return k;
}

using Floats = std::vector<float>;

std::vector<Floats> random_buffers(const ir::Kernel& k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Floats> bufs;
  for (const ir::GlobalArg& g : k.globals) {
    Floats b(static_cast<size_t>(g.numel), 0.0f);
    if (!g.is_output)
      for (float& v : b) v = std::uniform_real_distribution<float>(-3, 3)(rng);
    bufs.push_back(std::move(b));
  }
  return bufs;
}

Floats interpret(const ir::Kernel& k, std::vector<Floats> bufs) {
  std::vector<void*> ptrs;
  for (Floats& b : bufs) ptrs.push_back(b.data());
  ir::interpret(k, ptrs);
  return bufs[0];
}

Floats run_on(int device, const ir::Kernel& k, const std::vector<Floats>& host) {
  Device& dev = DeviceRegistry::at(device);
  std::vector<std::shared_ptr<Buffer>> owned;
  std::vector<Buffer*> bufs;
  for (size_t s = 0; s < k.globals.size(); s++) {
    owned.push_back(allocate_buffer(device, k.globals[s].dtype, k.globals[s].numel));
    dev.copy_in(owned.back()->handle, host[s].data(), host[s].size() * 4);
    bufs.push_back(owned.back().get());
  }
  SourceListing src = dev.renderer() ? dev.renderer()->render(k) : SourceListing{};
  CompileResult cr = dev.compile(k, dev.renderer() ? &src : nullptr);
  cr.program->launch(bufs);
  Floats out(host[0].size());
  dev.copy_out(out.data(), owned[0]->handle, out.size() * 4);
  return out;
}

::testing::AssertionResult close(const Floats& got, const Floats& want, double rtol) {
  for (size_t e = 0; e < want.size(); e++) {
    if (got[e] == want[e] || std::fabs(got[e] - want[e]) <= rtol * std::max(1.0f, std::fabs(want[e]))) continue;
    return ::testing::AssertionFailure() << "element " << e << ": got " << got[e] << ", want " << want[e];
  }
  return ::testing::AssertionSuccess();
}

// The registry's devices of `backend` that can run kernels.
std::vector<std::string> runnable(const std::string& backend) {
  std::vector<std::string> out;
  for (const DeviceProperties& p : DeviceRegistry::list())
    if (p.backend == backend && p.can_run) out.push_back(p.name);
  return out;
}

ir::Target target_of(const std::string& device) {
  DeviceProperties p = DeviceRegistry::properties(DeviceRegistry::index(device));
  return {static_cast<uint32_t>(p.max_workgroup_size), p.local_memory_bytes};
}

// A GPU-like target for tests that need no device: 256 threads, 32 KiB of local memory.
constexpr ir::Target kGpuTarget{256, 32768};
// The same with warps of 32 threads, as an NVIDIA GPU reports (the default plan's GPU rules apply), and with
// lavapipe's subgroups of 8 (a CPU: they do not).
constexpr ir::Target kWarpTarget{1024, 49152, 32};
constexpr ir::Target kLavapipeTarget{1024, 32768, 8};

// `k` through the pass pipeline for `target` with `kind` = `amount` in its plan.
ir::Kernel optimized(ir::Kernel k, ir::Target target, ir::AppliedOpt::Kind kind, int amount) {
  k.target = target;
  k.plan.set(kind, amount);
  run_passes(k, nullptr, -1, /*gated=*/false);
  return k;
}

int applied(const ir::Kernel& k, ir::AppliedOpt::Kind kind) {
  for (const ir::AppliedOpt& o : k.opts)
    if (o.kind == kind) return o.amount;
  return 0;
}

// The reduce kernels of the GROUP tests: sum and max over rows of random lengths (some a multiple of the
// lanes, some not), full reductions, and a reduce with an elementwise epilogue.
struct Case {
  ir::Kernel kernel;
  int lanes;
  // the same IR, so the same additions in the same order: only the GPU's math functions differ (and
  // lavapipe's fma rounds differently from std::fma by a few ulp, with or without GROUP)
  double rtol = 2e-6;
};
std::vector<Case> group_cases() {
  std::mt19937 rng(14);
  std::vector<Case> cases;
  const int lane_choices[] = {4, 16, 64, 256};
  for (int c = 0; c < 14; c++) {
    const int lanes = lane_choices[c % 4];
    const int64_t M = std::vector<int64_t>{0, 1, 3, 7, 33}[rng() % 5];
    // a multiple of the lanes (times 1..40) most of the time; otherwise an odd length
    const bool multiple = c % 3 != 2;
    const int64_t N = multiple ? lanes * static_cast<int64_t>(1 + rng() % 40) : 2 * static_cast<int64_t>(rng() % 500) + 3;
    cases.push_back({row_reduce(M, N, c % 2 ? Reduce::Max : Reduce::Sum, c % 4 == 3), lanes});
  }
  cases.push_back({row_reduce(0, 1 << 16, Reduce::Sum, false), 256});  // a full sum of a big tensor
  cases.push_back({row_reduce(4, 97, Reduce::Sum, false), 4});          // prime length: illegal
  cases.push_back({row_reduce(2, 96, Reduce::Max, true), 32});
  cases.push_back({matmul(16, 32, 64), 16, 1e-5});  // register-tiled first: GROUP after UPCAST, with MULACC
  return cases;
}

int64_t reduce_length(const ir::Kernel& k) {
  return k.globals.size() == 3 ? k.globals[1].numel * k.globals[2].numel / k.globals[0].numel  // matmul's K
                               : k.globals[1].numel / k.globals[0].numel;
}

void expect_group_agrees(const std::string& backend) {
  std::vector<std::string> devices = runnable(backend);
  if (devices.empty()) GTEST_SKIP() << "no " << backend << " device here";
  for (const std::string& name : devices) {
    const int dev = DeviceRegistry::index(name);
    const ir::Target target = target_of(name);
    ASSERT_TRUE(target.workgroups() && target.local_memory_bytes > 0) << name << " reports no local memory";
    uint32_t seed = 1;
    int grouped = 0;
    for (const Case& c : group_cases())
    for (ir::AppliedOpt::Kind kind : {ir::AppliedOpt::Group, ir::AppliedOpt::GroupTop}) {
      const ir::Kernel plain = optimized(c.kernel, target, ir::AppliedOpt::Group, 0);
      const ir::Kernel k = optimized(c.kernel, target, kind, c.lanes);
      const int64_t n = reduce_length(c.kernel);
      const int lanes = applied(k, kind);
      if (n % c.lanes != 0) {
        EXPECT_EQ(lanes, 0) << "GROUP(" << c.lanes << ") applied to a reduce of " << n << ":\n" << ir::print(k);
      } else if (n % (c.lanes * 64) == 0) {  // legal whatever UNROLL did to the loop first
        EXPECT_EQ(lanes, c.lanes) << ir::print(k);
      }
      EXPECT_EQ(ir::local_loop_lanes(k), lanes);
      ASSERT_TRUE(ir::verify(k).empty()) << ir::verify(k).front() << "\n" << ir::print(k);
      grouped += lanes > 0;
      std::vector<Floats> bufs = random_buffers(k, seed++);
      const Floats want = interpret(k, bufs);
      // the same IR on the GPU: the same order of additions
      EXPECT_TRUE(close(run_on(dev, k, bufs), want, c.rtol)) << name << " " << k.name << " " << ir::applied_str(k) << ":\n"
                                                            << ir::print(k);
      // and the action only reassociates the reduction
      EXPECT_TRUE(close(want, interpret(plain, bufs), 1e-4)) << k.name;
    }
    EXPECT_GE(grouped, 16) << "most cases should take the action";
  }
}

void expect_local_agrees(const std::string& backend) {
  std::vector<std::string> devices = runnable(backend);
  if (devices.empty()) GTEST_SKIP() << "no " << backend << " device here";
  for (const std::string& name : devices) {
    const int dev = DeviceRegistry::index(name);
    const ir::Target target = target_of(name);
    const ir::Kernel base = elementwise(37, 129);
    std::vector<Floats> bufs = random_buffers(base, 7);
    const Floats want = interpret(base, bufs);
    for (int u : {1, 16, 64, 128, 256}) {
      const ir::Kernel k = optimized(base, target, ir::AppliedOpt::Local, u);
      ASSERT_EQ(applied(k, ir::AppliedOpt::Local), u) << name;
      const uint32_t max_groups[3] = {65535, 65535, 65535};
      const gpu::Grid g = gpu::plan_grid(k, max_groups);
      EXPECT_LE(g.local[0] * g.local[1] * g.local[2], static_cast<uint32_t>(u));
      EXPECT_EQ(g.local[0], static_cast<uint32_t>(std::min(u, 256)));  // x first: 129 rounds up to 256
      EXPECT_TRUE(close(run_on(dev, k, bufs), want, 0)) << name << " LOCAL(" << u << ")";
    }
  }
}

}  // namespace

// ---- the IR: rules, sequential meaning ------------------------------------------------------------------

TEST(Workgroups, VerifyRejectsABarrierInsideALocalLoop) {
  ir::Kernel k = row_reduce(3, 64, Reduce::Sum, false);
  k = optimized(k, kGpuTarget, ir::AppliedOpt::Group, 16);
  ASSERT_EQ(applied(k, ir::AppliedOpt::Group), 16);
  ASSERT_TRUE(ir::verify(k).empty());
  // move the BARRIER into the local loop, before its END_RANGE
  auto barrier = std::find_if(k.insts.begin(), k.insts.end(), [](const ir::Inst& in) { return in.op == Op::Barrier; });
  ASSERT_NE(barrier, k.insts.end());
  const size_t b = static_cast<size_t>(barrier - k.insts.begin());
  ASSERT_EQ(k.insts[b - 1].op, Op::EndRange);
  ASSERT_EQ(k.insts[k.insts[b - 1].src[0]].arg, ir::kLocalLoop);
  std::swap(k.insts[b - 1], k.insts[b]);  // both define no value: no operand is renumbered
  std::vector<std::string> errors = ir::verify(k);
  ASSERT_FALSE(errors.empty()) << ir::print(k);
  EXPECT_NE(errors.front().find("BARRIER inside a local loop"), std::string::npos) << errors.front();
}

TEST(Workgroups, VerifyChecksTheOtherRules) {
  auto first_error = [](const ir::Kernel& k) {
    std::vector<std::string> e = ir::verify(k);
    return e.empty() ? std::string() : e.front();
  };
  {  // local memory read by another region without a BARRIER between
    ir::Kernel k;
    k.name = "no_barrier";
    k.globals = {{F, 1, true}};
    ir::Builder b(k);
    ValueId out = b.global(0, F), mem = b.define_local(F, 8);
    ValueId l = b.local_range(8);
    b.store(mem, l, b.constant(1, F));
    b.end_range(l);
    b.store(out, b.cint(0), b.load(mem, b.cint(3)));
    EXPECT_NE(first_error(k).find("without a BARRIER"), std::string::npos) << ir::print(k);
  }
  {  // an accumulator of the uniform code updated per lane
    ir::Kernel k;
    k.name = "outer_acc";
    k.globals = {{F, 1, true}};
    ir::Builder b(k);
    ValueId out = b.global(0, F);
    ValueId acc = b.acc(0, F);
    ValueId l = b.local_range(8);
    b.assign(acc, b.alu(Op::Add, F, acc, b.constant(1, F)));
    b.end_range(l);
    b.store(out, b.cint(0), acc);
    EXPECT_NE(first_error(k).find("per-lane state"), std::string::npos) << ir::print(k);
  }
  {  // two workgroup sizes in one kernel; local memory inside a loop; a store to it from uniform code
    ir::Kernel k;
    k.name = "sizes";
    k.globals = {{F, 1, true}};
    ir::Builder b(k);
    b.global(0, F);
    ValueId l = b.local_range(8);
    b.end_range(l);
    ValueId l2 = b.local_range(16);
    b.end_range(l2);
    EXPECT_NE(first_error(k).find("same bound"), std::string::npos) << ir::print(k);
  }
  {
    ir::Kernel k;
    k.name = "uniform_store";
    k.globals = {{F, 1, true}};
    ir::Builder b(k);
    b.global(0, F);
    ValueId mem = b.define_local(F, 4);
    b.store(mem, b.cint(0), b.constant(2, F));
    EXPECT_NE(first_error(k).find("outside a local loop"), std::string::npos) << ir::print(k);
  }
}

// The sequential meaning (ir.h): INTERP and C run a hand-written workgroup kernel as plain loops and agree.
TEST(Workgroups, InterpreterAndCRunLocalLoopsAsPlainLoops) {
  ir::Kernel k;
  k.name = "lanes_sum";
  const int64_t L = 8, N = 64;
  k.globals = {{F, 1, true}, {F, N, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), x = b.global(1, F), mem = b.define_local(F, L);
  ValueId l = b.local_range(L);
  ValueId acc = b.acc(0, F);
  ValueId q = b.range(N / L);
  b.assign(acc, b.alu(Op::Add, F, acc, b.load(x, b.add(b.mul(q, b.cint(L)), l))));
  b.end_range(q);
  b.store(mem, l, acc);
  b.end_range(l);
  b.barrier();
  ValueId total = b.acc(0, F);
  ValueId t = b.range(L);
  b.assign(total, b.alu(Op::Add, F, total, b.load(mem, t)));
  b.end_range(t);
  b.store(out, b.cint(0), total);
  ASSERT_TRUE(ir::verify(k).empty()) << ir::verify(k).front() << "\n" << ir::print(k);
  EXPECT_NE(ir::print(k).find("DEFINE_LOCAL.float32 [8]"), std::string::npos) << ir::print(k);
  EXPECT_NE(ir::print(k).find("; local"), std::string::npos);
  EXPECT_NE(ir::print(k).find("BARRIER"), std::string::npos);
  Floats xs(N);
  for (int64_t e = 0; e < N; e++) xs[e] = static_cast<float>(e);  // exact sums
  EXPECT_EQ(interpret(k, {Floats(1), xs})[0], N * (N - 1) / 2.0f);
  EXPECT_EQ(run_on(DeviceRegistry::index("C"), k, {Floats(1), xs})[0], N * (N - 1) / 2.0f);
}

// ---- GROUP ----------------------------------------------------------------------------------------------

TEST(Group, NotAppliedWithoutWorkgroupsOrWhenOff) {
  const ir::Kernel k = row_reduce(3, 256, Reduce::Sum, false);
  EXPECT_EQ(applied(optimized(k, ir::Target{}, ir::AppliedOpt::Group, 16), ir::AppliedOpt::Group), 0)
      << "the C device and the interpreter have no workgroups";
  EXPECT_EQ(applied(optimized(k, kGpuTarget, ir::AppliedOpt::Group, 0), ir::AppliedOpt::Group), 0);
  EXPECT_EQ(applied(optimized(k, kGpuTarget, ir::AppliedOpt::Group, ir::OptPlan::kAuto), ir::AppliedOpt::Group), 0)
      << "the default plan leaves GROUP to the search";
  EXPECT_EQ(applied(optimized(k, kGpuTarget, ir::AppliedOpt::Group, 512), ir::AppliedOpt::Group), 0)
      << "more lanes than the device's workgroup";
  EXPECT_EQ(applied(optimized(k, kGpuTarget, ir::AppliedOpt::Group, 12), ir::AppliedOpt::Group), 0) << "not a power of two";
  EXPECT_EQ(applied(optimized(k, ir::Target{256, 64}, ir::AppliedOpt::Group, 64), ir::AppliedOpt::Group), 0)
      << "the partials do not fit in local memory";
  // a register-tiled matmul (256 accumulators): 64 KiB of partials, over the 16 KiB cap even where the
  // device has a megabyte of local memory
  const ir::Kernel tiled = optimized(matmul(16, 32, 64), ir::Target{256, 1 << 20}, ir::AppliedOpt::Group, 64);
  EXPECT_EQ(applied(tiled, ir::AppliedOpt::RegisterTile), 8);
  EXPECT_EQ(applied(tiled, ir::AppliedOpt::Group), 0);
  EXPECT_EQ(applied(optimized(k, kGpuTarget, ir::AppliedOpt::Group, 64), ir::AppliedOpt::Group), 64)
      << ir::print(optimized(k, kGpuTarget, ir::AppliedOpt::Group, 64));
}

TEST(Group, DefaultPlanGroupsKernelsOfFewThreadsOnALockstepGpu) {
  const auto auto_group = [](const ir::Kernel& k, ir::Target t) {
    return applied(optimized(k, t, ir::AppliedOpt::Group, ir::OptPlan::kAuto), ir::AppliedOpt::Group);
  };
  const ir::Kernel full_sum = row_reduce(0, 1 << 16, Reduce::Sum, false);
  EXPECT_EQ(auto_group(full_sum, kWarpTarget), 256);
  EXPECT_EQ(auto_group(row_reduce(7, 1024, Reduce::Max, true), kWarpTarget), 256);
  EXPECT_EQ(auto_group(row_reduce(7, 48, Reduce::Sum, false), kWarpTarget), 16) << "48 is no multiple of 256";
  EXPECT_EQ(auto_group(row_reduce(7, 97, Reduce::Sum, false), kWarpTarget), 0) << "a prime length";
  EXPECT_EQ(auto_group(row_reduce(1 << 20, 256, Reduce::Sum, false), kWarpTarget), 0)
      << "a million threads fill the GPU without it";
  EXPECT_EQ(auto_group(sub_row_max(4096, 4096), kWarpTarget), 256)
      << "4096 threads reduce; the 16M outputs after the reduction do not count";
  EXPECT_EQ(auto_group(sub_row_max(32768, 256), kWarpTarget), 0);
  const ir::Kernel tiled = optimized(matmul(128, 128, 64), kWarpTarget, ir::AppliedOpt::Group, ir::OptPlan::kAuto);
  EXPECT_GT(applied(tiled, ir::AppliedOpt::RegisterTile), 0);
  EXPECT_EQ(applied(tiled, ir::AppliedOpt::Group), 0) << "a register tile's many accumulators: parallel enough";
  EXPECT_EQ(auto_group(full_sum, kGpuTarget), 0) << "no subgroup size: PoCL, where GROUP lost";
  EXPECT_EQ(auto_group(full_sum, kLavapipeTarget), 0) << "subgroups of 8: a CPU";
  EXPECT_EQ(applied(optimized(full_sum, kWarpTarget, ir::AppliedOpt::Group, 0), ir::AppliedOpt::Group), 0)
      << "GROUP=0 turns it off";
  // what the default plan applied only reassociates the sum
  const ir::Kernel grouped = optimized(full_sum, kWarpTarget, ir::AppliedOpt::Group, ir::OptPlan::kAuto);
  ASSERT_TRUE(ir::verify(grouped).empty()) << ir::verify(grouped).front();
  std::vector<Floats> bufs = random_buffers(full_sum, 3);
  EXPECT_TRUE(close(interpret(grouped, bufs), interpret(optimized(full_sum, kWarpTarget, ir::AppliedOpt::Group, 0), bufs), 1e-4));
  const ir::Kernel rows = sub_row_max(5, 512);
  const ir::Kernel rows_grouped = optimized(rows, kWarpTarget, ir::AppliedOpt::Group, ir::OptPlan::kAuto);
  ASSERT_EQ(applied(rows_grouped, ir::AppliedOpt::Group), 256);
  ASSERT_TRUE(ir::verify(rows_grouped).empty()) << ir::verify(rows_grouped).front();
  bufs = random_buffers(rows, 4);
  EXPECT_TRUE(close(interpret(rows_grouped, bufs), interpret(rows, bufs), 0)) << "a max is exact in any order";
}

TEST(Group, EveryRendererWritesTheBarrierAndTheSharedArray) {
  const ir::Kernel k = optimized(row_reduce(5, 1024, Reduce::Sum, true), kGpuTarget, ir::AppliedOpt::Group, 64);
  ASSERT_EQ(applied(k, ir::AppliedOpt::Group), 64);
  int checked = 0;
  for (const Renderer* r : DeviceRegistry::renderers()) {
    const std::string code = r->render(k).code;
    if (r->language() == "OpenCL C") {
      EXPECT_NE(code.find("barrier(CLK_LOCAL_MEM_FENCE);"), std::string::npos) << code;
      EXPECT_NE(code.find("__local float lmem"), std::string::npos) << code;
      EXPECT_NE(code.find("get_local_id(0)"), std::string::npos) << code;
      EXPECT_NE(code.find("get_group_id(0)"), std::string::npos) << code;
      checked++;
    } else if (r->language() == "GLSL") {
      EXPECT_NE(code.find("barrier();"), std::string::npos) << code;
      EXPECT_NE(code.find("memoryBarrierShared();"), std::string::npos) << code;
      EXPECT_LT(code.find("shared float lmem"), code.find("void main()")) << "shared arrays at global scope:\n" << code;
      EXPECT_NE(code.find("gl_LocalInvocationID.x"), std::string::npos) << code;
      checked++;
    } else if (r->language() == "CUDA C") {
      EXPECT_NE(code.find("__syncthreads();"), std::string::npos) << code;
      EXPECT_NE(code.find("__shared__ float lmem"), std::string::npos) << code;
      EXPECT_NE(code.find("threadIdx.x"), std::string::npos) << code;
      checked++;
    } else if (r->language() == "C") {
      EXPECT_EQ(code.find("barrier"), std::string::npos) << code;
      EXPECT_NE(code.find("float lmem"), std::string::npos) << code;
    }
  }
  // CUDA compiles with NVRTC where the build has it
  for (const DeviceProperties& p : DeviceRegistry::list()) {
    if (p.backend != "CUDA") continue;
    Device& dev = DeviceRegistry::at(DeviceRegistry::index(p.name));
    // a compile-only device (no GPU) reports no limits: a typical GPU's
    ir::Kernel ck = optimized(row_reduce(5, 1024, Reduce::Max, true), kGpuTarget, ir::AppliedOpt::Group, 128);
    ASSERT_EQ(applied(ck, ir::AppliedOpt::Group), 128);
    SourceListing src = dev.renderer()->render(ck);
    EXPECT_NO_THROW(dev.compile(ck, &src)) << p.name << ":\n" << src.code;
  }
  // a build with no GPU backend (the sanitizer build: C and INTERP only) has nothing else to check
  if (checked == 0) GTEST_SKIP() << "no GPU renderer in this build (only the C renderer was checked)";
}

TEST(Group, OpenCLAgreesWithTheInterpreter) { expect_group_agrees("OPENCL"); }
TEST(Group, VulkanAgreesWithTheInterpreter) { expect_group_agrees("VULKAN"); }

// ---- LOCAL ----------------------------------------------------------------------------------------------

TEST(Local, LegalOnlyWithWorkgroupsAndGlobalLoops) {
  EXPECT_EQ(applied(optimized(elementwise(8, 8), ir::Target{}, ir::AppliedOpt::Local, 32), ir::AppliedOpt::Local), 0);
  EXPECT_EQ(applied(optimized(elementwise(8, 8), kGpuTarget, ir::AppliedOpt::Local, 512), ir::AppliedOpt::Local), 0);
  EXPECT_EQ(applied(optimized(row_reduce(0, 64, Reduce::Sum, false), kGpuTarget, ir::AppliedOpt::Local, 32),
                    ir::AppliedOpt::Local), 0) << "a kernel without a global loop has one thread";
  const ir::Kernel k = optimized(elementwise(8, 8), kGpuTarget, ir::AppliedOpt::Local, 32);
  EXPECT_EQ(applied(k, ir::AppliedOpt::Local), 32);
  // the workgroup size is in the source: caches keyed by source tell the sizes apart
  for (const Renderer* r : DeviceRegistry::renderers()) {
    if (r->language() != "OpenCL C") continue;
    EXPECT_NE(r->render(k).code, r->render(optimized(elementwise(8, 8), kGpuTarget, ir::AppliedOpt::Local, 16)).code);
  }
}

TEST(Local, DefaultPlanGivesElementwiseKernels256ThreadsOnALockstepGpu) {
  const auto auto_local = [](const ir::Kernel& k, ir::Target t) {
    return applied(optimized(k, t, ir::AppliedOpt::Local, ir::OptPlan::kAuto), ir::AppliedOpt::Local);
  };
  EXPECT_EQ(auto_local(elementwise(37, 129), kWarpTarget), 256);
  EXPECT_EQ(auto_local(elementwise(37, 129), kGpuTarget), 0) << "PoCL keeps the grid's 64";
  EXPECT_EQ(auto_local(elementwise(37, 129), kLavapipeTarget), 0);
  EXPECT_EQ(auto_local(row_reduce(1 << 20, 256, Reduce::Sum, false), kWarpTarget), 0) << "a reduction keeps 64";
  EXPECT_EQ(auto_local(elementwise(37, 129), ir::Target{128, 49152, 32}), 0) << "more than the device's workgroup";
  EXPECT_EQ(applied(optimized(elementwise(37, 129), kWarpTarget, ir::AppliedOpt::Local, 32), ir::AppliedOpt::Local), 32)
      << "the plan's amount wins";
}

TEST(Local, OpenCLAgreesWithTheInterpreter) { expect_local_agrees("OPENCL"); }
TEST(Local, VulkanAgreesWithTheInterpreter) { expect_local_agrees("VULKAN"); }

// ---- TILE -----------------------------------------------------------------------------------------------

namespace {

void expect_tile_agrees(const std::string& backend) {
  std::vector<std::string> devices = runnable(backend);
  if (devices.empty()) GTEST_SKIP() << "no " << backend << " device here";
  std::mt19937 rng(5);
  for (const std::string& name : devices) {
    const int dev = DeviceRegistry::index(name);
    const ir::Target target = target_of(name);
    int tiled = 0;
    for (int c = 0; c < 8; c++) {
      const int T = c % 2 ? 16 : 8;
      // multiples of T, except the last case's odd K (illegal)
      const int64_t M = T * (1 + rng() % 4), N = T * (1 + rng() % 4), K = c == 7 ? 3 * T + 1 : T * (1 + rng() % 5);
      const ir::Kernel base = matmul(M, N, K, c % 3 == 0);
      const ir::Kernel k = optimized(base, target, ir::AppliedOpt::Tile, T);
      const int got = applied(k, ir::AppliedOpt::Tile);
      EXPECT_EQ(got, K % T == 0 ? T : 0) << ir::print(k);
      ASSERT_TRUE(ir::verify(k).empty()) << ir::verify(k).front() << "\n" << ir::print(k);
      tiled += got > 0;
      std::vector<Floats> bufs = random_buffers(k, 40 + c);
      const Floats want = interpret(k, bufs);
      EXPECT_TRUE(close(run_on(dev, k, bufs), want, 1e-5)) << name << " " << ir::applied_str(k) << ":\n" << ir::print(k);
      const ir::Kernel plain = optimized(base, target, ir::AppliedOpt::Tile, 0);
      EXPECT_TRUE(close(want, interpret(plain, bufs), 1e-4)) << k.name;
    }
    EXPECT_GE(tiled, 6);
  }
}

}  // namespace

TEST(Tile, RendersBarriersAndSharedTiles) {
  const ir::Kernel k = optimized(matmul(32, 32, 32, true), kGpuTarget, ir::AppliedOpt::Tile, 16);
  ASSERT_EQ(applied(k, ir::AppliedOpt::Tile), 16) << ir::print(k);
  EXPECT_EQ(ir::local_loop_lanes(k), 256);
  EXPECT_EQ(applied(k, ir::AppliedOpt::RegisterTile) + applied(k, ir::AppliedOpt::UpcastGlobal), 0)
      << "the tile replaces the register tile";
  EXPECT_EQ(applied(optimized(matmul(32, 32, 32), ir::Target{}, ir::AppliedOpt::Tile, 16), ir::AppliedOpt::Tile), 0)
      << "no workgroups: not applied";
  EXPECT_EQ(applied(optimized(matmul(32, 32, 32), kGpuTarget, ir::AppliedOpt::Tile, 32), ir::AppliedOpt::Tile), 0)
      << "1024 threads: more than the device's workgroup";
  for (const Renderer* r : DeviceRegistry::renderers()) {
    const std::string code = r->render(k).code;
    if (r->language() == "OpenCL C") {
      // the kt loop ends with a barrier too: the next tile is written only when every lane has read this one
      size_t first = code.find("barrier(CLK_LOCAL_MEM_FENCE);");
      ASSERT_NE(first, std::string::npos) << code;
      EXPECT_NE(code.find("barrier(CLK_LOCAL_MEM_FENCE);", code.find("barrier(CLK_LOCAL_MEM_FENCE);", first + 1) + 1),
                std::string::npos) << code;
    }
  }
  for (const DeviceProperties& p : DeviceRegistry::list()) {
    if (p.backend != "CUDA") continue;
    Device& dev = DeviceRegistry::at(DeviceRegistry::index(p.name));
    SourceListing src = dev.renderer()->render(k);
    EXPECT_NO_THROW(dev.compile(k, &src)) << p.name << ":\n" << src.code;
  }
}

TEST(Tile, OpenCLAgreesWithTheInterpreter) { expect_tile_agrees("OPENCL"); }
TEST(Tile, VulkanAgreesWithTheInterpreter) { expect_tile_agrees("VULKAN"); }
