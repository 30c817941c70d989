// The optimization actions as data (ir::OptPlan, issue 14): on matmul and row-sum kernels of random
// shapes, every requested amount of every action is either applied exactly (when legal: the trip count is a
// multiple, the unrolled body fits) or not at all, and the result matches the unoptimized kernel on the
// interpreter and on the C device (whose renderer writes register-tiled kernels differently). Whatever
// subset of actions applies, results must not change.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "ir/builder.h"
#include "ir_test_kernels.h"
#include "opt/pass_manager.h"
#include "tensorscope/device.h"
#include "tensorscope/ir.h"

using namespace ts;
using ir::AppliedOpt;
using ir::Op;

namespace {

// A hand-built matmul (ir_test_kernels.h), named by its shape.
ir::Kernel matmul(int64_t m, int64_t n, int64_t k) {
  ir::Kernel kern = test::matmul_kernel(m, n, k);
  kern.name = "plan_matmul_" + std::to_string(m) + "_" + std::to_string(n) + "_" + std::to_string(k);
  return kern;
}

int applied(const ir::Kernel& k, AppliedOpt::Kind kind) {  // the amount applied (0: none); every time the same
  int amount = 0;
  for (const AppliedOpt& o : k.opts)
    if (o.kind == kind) amount = o.amount;
  return amount;
}

// Runs `k` (globals: out, x, w) on the interpreter and on the C device.
std::pair<std::vector<float>, std::vector<float>> run(const ir::Kernel& k, const std::vector<float>& x,
                                                      const std::vector<float>& w) {
  std::vector<float> interp(k.globals[0].numel), c(k.globals[0].numel);
  ir::interpret(k, {interp.data(), const_cast<float*>(x.data()), const_cast<float*>(w.data())});
  Device& dev = DeviceRegistry::at(DeviceRegistry::index("C"));
  SourceListing src = dev.renderer()->render(k);
  CompileResult compiled = dev.compile(k, &src);
  std::vector<std::shared_ptr<Buffer>> bufs;
  const std::vector<const std::vector<float>*> inputs = {nullptr, &x, &w};
  std::vector<Buffer*> raw;
  for (size_t i = 0; i < k.globals.size(); i++) {
    bufs.push_back(allocate_buffer(DeviceRegistry::index("C"), DType::Float32, k.globals[i].numel));
    if (inputs[i]) write_buffer(*bufs.back(), inputs[i]->data());
    raw.push_back(bufs.back().get());
  }
  compiled.program->launch(raw);
  read_buffer(*bufs[0], c.data());
  return {interp, c};
}

}  // namespace

TEST(OptPlan, ParsesAndPrintsAndRejectsBadText) {
  ir::OptPlan p = ir::OptPlan::parse("UPCAST_GLOBAL=8, REGISTER_TILE=0,UPCAST_REDUCE=auto");
  EXPECT_EQ(p.get(AppliedOpt::UpcastGlobal), 8);
  EXPECT_EQ(p.get(AppliedOpt::RegisterTile), 0);
  EXPECT_EQ(p.get(AppliedOpt::UpcastReduce), ir::OptPlan::kAuto);
  EXPECT_EQ(p.str(), "UPCAST_GLOBAL=8,REGISTER_TILE=0");
  EXPECT_TRUE(ir::OptPlan::parse("").automatic());
  for (const char* bad : {"UPCAST=4", "UPCAST_GLOBAL", "UPCAST_GLOBAL=-2", "UPCAST_GLOBAL=1", "REGISTER_TILE=x"}) {
    try {
      ir::OptPlan::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
    }
  }
}

TEST(OptPlan, TheDefaultPlanIsTheHeuristic) {
  ir::Kernel heuristic = matmul(16, 64, 24), planned = heuristic;
  planned.plan = ir::OptPlan::parse("UPCAST_GLOBAL=auto");
  run_passes(heuristic, nullptr);
  run_passes(planned, nullptr);
  EXPECT_EQ(ir::print(heuristic), ir::print(planned));
  EXPECT_EQ(applied(heuristic, AppliedOpt::UpcastGlobal), 32);
  EXPECT_EQ(applied(heuristic, AppliedOpt::RegisterTile), 8);
}

TEST(OptPlan, EveryActionIsAppliedWhenLegalAndResultsMatchOnRandomShapes) {
  std::mt19937 rng(14);
  std::uniform_int_distribution<int> dim(1, 48);
  std::uniform_real_distribution<float> value(-2, 2);
  const int amounts[] = {0, 2, 3, 4, 8, 16, 32};
  int legal_seen = 0, illegal_seen = 0;
  for (int trial = 0; trial < 6; trial++) {
    const int64_t m = dim(rng), n = dim(rng), k = dim(rng);
    std::vector<float> x(m * k), w(k * n);
    for (float& v : x) v = value(rng);
    for (float& v : w) v = value(rng);
    const ir::Kernel plain = matmul(m, n, k);
    std::vector<float> want(m * n);
    ir::interpret(plain, {want.data(), x.data(), w.data()});
    for (int kind = 0; kind < ir::OptPlan::kKinds; kind++) {
      for (int amount : amounts) {
        ir::Kernel opt = plain;
        // the other actions off, so the requested one meets the loop it is for
        for (int other = 0; other < ir::OptPlan::kKinds; other++) opt.plan.set(static_cast<AppliedOpt::Kind>(other), 0);
        opt.plan.set(static_cast<AppliedOpt::Kind>(kind), amount);
        if (kind == AppliedOpt::RegisterTile) opt.plan.set(AppliedOpt::UpcastGlobal, n % 16 == 0 ? 16 : 0);
        run_passes(opt, nullptr);
        ASSERT_TRUE(ir::verify(opt).empty());
        const int got = applied(opt, static_cast<AppliedOpt::Kind>(kind));
        const int64_t trip = kind == AppliedOpt::UpcastGlobal ? n : kind == AppliedOpt::UpcastReduce ? k : m;
        SCOPED_TRACE(opt.name + " " + opt.plan.str());
        if (amount == 0 || trip % amount != 0 || amount > trip) {
          EXPECT_EQ(got, 0) << ir::print(opt);  // illegal or off: not applied
        }
        if (got) {
          EXPECT_EQ(got, amount);
          legal_seen++;
        } else if (amount) {
          illegal_seen++;
        }
        auto [interp, c] = run(opt, x, w);
        for (int64_t i = 0; i < m * n; i++) {
          ASSERT_NEAR(interp[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "element " << i;
          ASSERT_NEAR(c[i], interp[i], 1e-4 * (1 + std::fabs(want[i]))) << "element " << i;
        }
      }
    }
  }
  EXPECT_GT(legal_seen, 10);   // the shapes exercised both sides of every legality check
  EXPECT_GT(illegal_seen, 10);
}

TEST(OptPlan, AReduceUpcastThatWouldUnrollTooFarIsNotApplied) {
  ir::Kernel k = matmul(2, 3, 4096 * 2);
  k.plan = ir::OptPlan::parse("UPCAST_GLOBAL=0,REGISTER_TILE=0,UPCAST_REDUCE=4096");
  run_passes(k, nullptr);
  EXPECT_EQ(applied(k, AppliedOpt::UpcastReduce), 0) << ir::print(k);
  EXPECT_NE(ir::print(k).find("; plan: UPCAST_GLOBAL=0,REGISTER_TILE=0,UPCAST_REDUCE=4096"), std::string::npos);
}

TEST(OptPlan, AMaxReduceUpcastByTwoStaysValidAndExact) {
  // row max: the combine after UPCAST_REDUCE=2 is acc0 = max(acc0, acc1), two accumulators max_reduce_as_int keys
  const int64_t m = 3, k = 10;
  ir::Kernel kern;
  kern.name = "plan_rowmax";
  kern.globals = {{DType::Float32, m, true}, {DType::Float32, m * k, false}};
  ir::Builder b(kern);
  auto out = b.global(0, DType::Float32), x = b.global(1, DType::Float32);
  auto rm = b.range(m, true);
  auto acc = b.acc(-INFINITY, DType::Float32);
  auto rk = b.range(k);
  b.assign(acc, b.alu(Op::Max, DType::Float32, acc, b.load(x, b.add(b.mul(rm, b.cint(k)), rk))));
  b.end_range(rk);
  b.store(out, rm, acc);
  b.end_range(rm);
  std::vector<float> xs(m * k), want(m), got(m);
  for (size_t i = 0; i < xs.size(); i++) xs[i] = static_cast<float>((static_cast<int>(i) * 7) % 11) - 5.5f;
  ir::interpret(kern, {want.data(), xs.data()});
  for (int u : {2, 5}) {
    ir::Kernel opt = kern;
    opt.plan.set(AppliedOpt::UpcastReduce, u);
    run_passes(opt, nullptr);  // throws if a pass leaves invalid IR
    EXPECT_EQ(applied(opt, AppliedOpt::UpcastReduce), u);
    ir::interpret(opt, {got.data(), xs.data()});
    EXPECT_EQ(got, want) << "UPCAST_REDUCE=" << u;
  }
}
