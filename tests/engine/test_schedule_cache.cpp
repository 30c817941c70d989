// The schedule cache (runtime/realize.h) and CapturedJit (tensorscope/jit.h): a graph with the structure
// of an earlier one reuses its kernels on its own buffers; a capture replays its launches on new inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/realize.h"
#include "tensorscope/device.h"
#include "tensorscope/ir.h"
#include "tensorscope/jit.h"
#include "tensorscope/recording.h"
#include "tensorscope/session.h"
#include "tensorscope/tensor.h"

using ts::GlobalCounters;
using ts::Tensor;

namespace {

Tensor filled(std::vector<int64_t> shape, float start) {
  std::vector<float> v(Tensor::ones(shape).numel());
  for (size_t i = 0; i < v.size(); i++) v[i] = start + static_cast<float>(i);
  return Tensor::from_data(v.data(), ts::DType::Float32, shape);
}

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(t.numel());
  t.copy_to_host(v.data());
  return v;
}

}  // namespace

TEST(ScheduleCache, SameStructureReusesTheKernelsOnNewBuffers) {
  auto build = [](float start) { return filled({2, 3}, start).mul(2.0).add(filled({3}, 10.0f)).sum(std::vector<int64_t>{1}); };
  build(0).realize();  // fills the cache
  GlobalCounters::reset();
  Tensor t = build(100);
  t.realize();
  EXPECT_EQ(GlobalCounters::schedule_count, 0);
  EXPECT_EQ(GlobalCounters::schedule_cache_hits, 1);
  EXPECT_EQ(GlobalCounters::kernel_count, 1);
  // row i: sum_j 2 (100 + 3i + j) + (10 + j)
  EXPECT_EQ(values(t), (std::vector<float>{2 * 303 + 33, 2 * 312 + 33}));
}

TEST(ScheduleCache, AnotherConstantOrShapeIsAnotherSchedule) {
  filled({4}, 0).mul(3.0).realize();
  GlobalCounters::reset();
  Tensor a = filled({4}, 0).mul(5.0);  // another constant
  a.realize();
  Tensor b = filled({5}, 0).mul(3.0);  // another shape
  b.realize();
  EXPECT_EQ(GlobalCounters::schedule_count, 2);
  EXPECT_EQ(GlobalCounters::schedule_cache_hits, 0);
  EXPECT_EQ(values(a), (std::vector<float>{0, 5, 10, 15}));
  EXPECT_EQ(values(b), (std::vector<float>{0, 3, 6, 9, 12}));
}

TEST(ScheduleCache, SharedNodesAreToldApartFromEqualOnes) {
  // x * x (one input read twice) and x * y (two inputs) must not share a schedule
  Tensor x = filled({3}, 1), y = filled({3}, 2);
  Tensor xx = x.mul(x);
  xx.realize();
  Tensor xy = x.mul(y);
  xy.realize();
  EXPECT_EQ(values(xx), (std::vector<float>{1, 4, 9}));
  EXPECT_EQ(values(xy), (std::vector<float>{2, 6, 12}));
}

TEST(CapturedJit, ReplaysOnNewInputsWithFreshOutputs) {
  Tensor state = filled({3}, 0);
  Tensor a = filled({3}, 1), b = filled({3}, 2);
  std::vector<Tensor> outs;
  ts::CapturedJit captured = ts::CapturedJit::capture(
      {a, b},
      [&] {
        state.assign(state.add(a));
        return std::vector<Tensor>{a.mul(b).add(state)};
      },
      &outs);
  EXPECT_EQ(values(outs[0]), (std::vector<float>{1 * 2 + 1, 2 * 3 + 3, 3 * 4 + 5}));
  EXPECT_EQ(values(state), (std::vector<float>{1, 3, 5}));
  // the new state and the output are one multi-output kernel (the kernelizer's rule 6): both read a
  EXPECT_EQ(captured.launch_count(), 1);
  EXPECT_EQ(captured.state_count(), 1);

  GlobalCounters::reset();
  std::vector<Tensor> r1 = captured.replay({filled({3}, 10), filled({3}, 0)});
  std::vector<Tensor> r2 = captured.replay({filled({3}, 0), filled({3}, 1)});
  EXPECT_EQ(GlobalCounters::schedule_count, 0);
  EXPECT_EQ(GlobalCounters::replayed_kernels, 2);
  // state: 1,3,5 → +10,11,12 → 11,14,17 → +0,1,2 → 11,15,19
  EXPECT_EQ(values(state), (std::vector<float>{11, 15, 19}));
  EXPECT_EQ(values(r1[0]), (std::vector<float>{10 * 0 + 11, 11 * 1 + 14, 12 * 2 + 17}));  // not overwritten by r2
  EXPECT_EQ(values(r2[0]), (std::vector<float>{0 * 1 + 11, 1 * 2 + 15, 2 * 3 + 19}));
  EXPECT_THROW(captured.replay({filled({4}, 0), filled({3}, 0)}), std::invalid_argument);
  EXPECT_THROW(captured.replay({filled({3}, 0)}), std::invalid_argument);
}

TEST(CapturedJit, HostReadsCannotBeCaptured) {
  Tensor a = filled({3}, 1);
  EXPECT_THROW(ts::CapturedJit::capture({a}, [&] { return std::vector<Tensor>{a.mul(a.sum().item())}; }, nullptr),
               std::runtime_error);
}

namespace {
// Keeps the KernelCode of every launch it is told of.
struct CodeCollector : ts::SessionObserver {
  std::vector<std::pair<std::string, std::shared_ptr<const ts::KernelCode>>> launches;
  void on_event(uint64_t, const ts::Event& event) override {
    if (const auto* run = std::get_if<ts::KernelRunEvent>(&event); run && run->code) launches.emplace_back(run->name, run->code);
  }
};
}  // namespace

// A kernel lowered again in another schedule shares the listings built the first time (realize.cpp's
// code_cache): the same KernelCode object, not a copy printed and rendered again.
TEST(ScheduleCache, AKernelLoweredAgainSharesItsKernelCode) {
  CodeCollector collector;
  ts::Session::get().subscribe(&collector);
  // 5000 elements: above kMultiOutputSmallElements, so a + 3 and b * 5 (no buffer in common) stay two kernels
  Tensor a = filled({5000}, 1.0f), b = filled({5000}, 7.0f);
  a.realize();
  b.realize();
  a.add(3.0).realize();                                  // schedule 1: a + 3
  Tensor x = a.add(3.0), y = b.mul(5.0);                 // schedule 2: a + 3 beside b * 5
  Tensor::realize_all({x, y});
  ts::Session::get().unsubscribe(&collector);
  std::vector<std::shared_ptr<const ts::KernelCode>> e5;
  for (const auto& [name, code] : collector.launches)
    if (name == "E_5000") e5.push_back(code);
  ASSERT_EQ(e5.size(), 3u);
  const bool shared = e5[1] == e5[0] || e5[2] == e5[0];  // the second schedule's a + 3
  EXPECT_TRUE(shared);
  EXPECT_NE(e5[1], e5[2]);  // b * 5 has listings of its own
  EXPECT_EQ(e5[0]->ir.front().pass, "lower");
  EXPECT_GT(e5[0]->ir.size(), 5u);
  const std::vector<float> got = values(x);
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 5), (std::vector<float>{4, 5, 6, 7, 8}));
  EXPECT_EQ(got.back(), 5003.0f);
}

// A watched kernel keeps the source its device compiled and its IR; the listings in the other devices'
// languages are rendered from that IR when someone asks for them (KernelCode::listing), and are the ones
// the renderers give for the kernel. A recording keeps the IR (the code blob's "kernel"), and the decoded
// IR renders the same listings.
TEST(ScheduleCache, OtherLanguagesAreRenderedOnDemandAndReadBackFromARecording) {
  CodeCollector collector;
  ts::Session::get().subscribe(&collector);
  Tensor a = filled({64, 33}, -3.0f);
  a.realize();
  Tensor m = a.max(std::vector<int64_t>{1}).sqrt();  // a max-reduce starts from -inf: a constant JSON has no number for
  m.realize();
  ts::Session::get().unsubscribe(&collector);
  ASSERT_FALSE(collector.launches.empty());
  const ts::KernelCode& code = *collector.launches.back().second;
  ASSERT_TRUE(code.kernel);
  ASSERT_EQ(code.sources.size(), 1u);  // only what the device compiled was rendered while it ran
  EXPECT_EQ(code.sources[0].renderer, code.device_renderer);
  const std::vector<std::string> languages = code.languages();
  ASSERT_EQ(languages.size(), ts::DeviceRegistry::renderers().size());
  for (const ts::Renderer* r : ts::DeviceRegistry::renderers()) {
    const ts::SourceListing* listing = code.listing(r->language());
    ASSERT_NE(listing, nullptr) << r->language();
    if (r->language() == code.device_renderer) continue;
    const ts::SourceListing direct = r->render(*code.kernel);
    EXPECT_EQ(listing->code, direct.code) << r->language();
    EXPECT_EQ(listing->ir_op_line, direct.ir_op_line) << r->language();
    EXPECT_EQ(code.listing(r->language()), listing) << "rendered once";
  }
  EXPECT_EQ(code.listing("Fortran"), nullptr);

  ts::EventEncoder encoder;
  ts::EventDecoder decoder;
  ts::KernelRunEvent run;
  run.kernel_id = 1;
  run.name = code.kernel->name;
  run.device = "C";
  run.code = collector.launches.back().second;
  std::vector<ts::Blob> blobs;
  const ts::EncodedEvent e = encoder.encode(0, 0, run, blobs);
  for (ts::Blob& b : blobs) decoder.add_blob(std::move(b));
  const ts::Event back = decoder.decode(e);
  const auto& decoded = *std::get<ts::KernelRunEvent>(back).code;
  EXPECT_FALSE(decoded.kernel) << "a decoded kernel IR is read when first needed";
  ASSERT_TRUE(decoded.has_kernel_ir());
  ASSERT_TRUE(decoded.kernel_ir());
  EXPECT_EQ(ts::ir::print(*decoded.kernel_ir()), ts::ir::print(*code.kernel));
  EXPECT_EQ(decoded.languages(), languages);
  for (const std::string& language : languages) EXPECT_EQ(decoded.listing(language)->code, code.listing(language)->code) << language;
}

// Intermediates that only the target reads (a matmul, a softmax's row max and sum, which the kernelizer
// stores for the kernels after them) get their buffers while they are still alive: realize() makes the
// target a buffer leaf, which drops its sources, so every stored node is held until each has its buffer
// (Graph::set_realized throws for a freed node, whose slot would otherwise keep the buffer for the next
// node made in it). Scheduled, then from the schedule cache; on C against the interpreter.
TEST(ScheduleCache, IntermediatesOnlyTheTargetReadsGetTheirBuffersFirst) {
  std::vector<float> v(6 * 5);
  for (size_t i = 0; i < v.size(); i++) v[i] = -1.5f + 0.37f * static_cast<float>(i);
  auto run = [&](const std::string& dev) {
    Tensor x = Tensor::from_data(v.data(), ts::DType::Float32, {6, 5}, dev);
    Tensor y = x.exp().mul(x.sin()).add(x.transpose().matmul(x).sum(std::vector<int64_t>{0}, true).reshape({1, 5}))
                   .log_softmax(1).pad({{1, 0}, {0, 2}}).flip({0});
    std::vector<float> out = values(y);
    // nodes made next, in the slots the realize freed, are computed, not taken for buffers
    std::vector<float> next = values(x.add(1.0).mul(2.0));
    out.insert(out.end(), next.begin(), next.end());
    return out;
  };
  const std::vector<float> want = run("INTERP");
  for (int pass = 0; pass < 2; pass++) {
    std::vector<float> got;
    ASSERT_NO_THROW(got = run("C"));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); i++) EXPECT_NEAR(got[i], want[i], 1e-4f * (1.0f + std::abs(want[i]))) << i;
  }
}
