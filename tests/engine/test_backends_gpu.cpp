// The GPU backends: every renderer renders every kernel; OPENCL and VULKAN devices compute what the
// interpreter computes (on random data: elementwise, reductions, matmul, gated loads from pad, int and
// bool buffers, grids larger than one launch); CUDA compiles every kernel with NVRTC. Devices that are
// not built or not present here are skipped, so the suite passes on any machine.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include "../../backends/gpu_launch.h"  // the grid mapping shared by the GPU backends (not a public header)
#include "ir/builder.h"
#include "ir/ts_math.h"
#include "tensorscope/device.h"
#include "tensorscope/ir.h"
#include "tensorscope/tensor.h"

using namespace ts;
using ir::Op;
using ir::ValueId;

namespace {

// ---- kernels, built with the IR builder -------------------------------------------------------------

struct TestKernel {
  ir::Kernel kernel;
  double rtol = 1e-6;  // transcendental functions get a few ulp more on GPU libraries
};

// out[i, j] for a grid that fills no workgroup exactly: exp2, log2, sin, sqrt, recip, max, neg, where.
TestKernel elementwise() {
  ir::Kernel k;
  k.name = "E_37_129";
  const int64_t M = 37, N = 129;
  k.globals = {{DType::Float32, M * N, true}, {DType::Float32, M * N, false}, {DType::Float32, N, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, DType::Float32), x = b.global(1, DType::Float32), y = b.global(2, DType::Float32);
  ValueId i = b.range(M, true), j = b.range(N, true);
  ValueId idx = b.add(b.mul(i, b.cint(N)), j);
  ValueId xv = b.load(x, idx), yv = b.load(y, j);  // y broadcast along i
  auto F = DType::Float32;
  ValueId ax = b.alu(Op::Max, F, xv, b.alu(Op::Neg, F, xv));
  ValueId t = b.alu(Op::Mul, F, b.alu(Op::Exp2, F, yv), b.alu(Op::Sin, F, xv));
  t = b.alu(Op::Add, F, t, b.alu(Op::Log2, F, b.alu(Op::Add, F, ax, b.constant(0.5, F))));
  t = b.alu(Op::Add, F, t, b.alu(Op::Mul, F, b.alu(Op::Sqrt, F, ax), b.alu(Op::Recip, F, b.alu(Op::Add, F, ax, b.constant(1, F)))));
  ValueId neg = b.alu(Op::CmpLt, DType::Bool, xv, b.constant(0, F));
  t = b.alu(Op::Where, F, neg, t, b.alu(Op::Max, F, t, yv));
  b.store(out, idx, t);
  b.end_range(j);
  b.end_range(i);
  return {k, 2e-5};
}

// out[i] = sum_j x[i, j] and a max over the same row, -inf initialized.
TestKernel reduction() {
  ir::Kernel k;
  k.name = "r_33_100";
  const int64_t M = 33, N = 100;
  k.globals = {{DType::Float32, M, true}, {DType::Float32, M * N, false}};
  ir::Builder b(k);
  auto F = DType::Float32;
  ValueId out = b.global(0, F), x = b.global(1, F);
  ValueId i = b.range(M, true);
  ValueId sum = b.acc(0, F), mx = b.acc(-INFINITY, F);
  ValueId j = b.range(N);
  ValueId v = b.load(x, b.add(b.mul(i, b.cint(N)), j));
  b.assign(sum, b.alu(Op::Add, F, sum, v));
  b.assign(mx, b.alu(Op::Max, F, mx, v));
  b.end_range(j);
  b.store(out, i, b.alu(Op::Add, F, sum, mx));
  b.end_range(i);
  return {k, 1e-6};
}

// out[i, j] = sum_k a[i, k] * b[k, j]: two grid dimensions and a reduce loop inside.
TestKernel matmul() {
  ir::Kernel k;
  k.name = "r_19_23_45";
  const int64_t M = 19, N = 23, K = 45;
  auto F = DType::Float32;
  k.globals = {{F, M * N, true}, {F, M * K, false}, {F, K * N, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), A = b.global(1, F), B = b.global(2, F);
  ValueId i = b.range(M, true), j = b.range(N, true);
  ValueId acc = b.acc(0, F);
  ValueId r = b.range(K);
  ValueId av = b.load(A, b.add(b.mul(i, b.cint(K)), r)), bv = b.load(B, b.add(b.mul(r, b.cint(N)), j));
  b.assign(acc, b.alu(Op::Add, F, acc, b.alu(Op::Mul, F, av, bv)));
  b.end_range(r);
  b.store(out, b.add(b.mul(i, b.cint(N)), j), acc);
  b.end_range(j);
  b.end_range(i);
  return {k, 1e-6};
}

// pad: out[i] = x[i - 3] where 3 <= i < 3 + n, else 0 — the load's index is negative when its gate is off.
TestKernel gated_pad() {
  ir::Kernel k;
  k.name = "E_pad_70";
  const int64_t n = 64, lo = 3;
  auto F = DType::Float32;
  k.globals = {{F, n + 6, true}, {F, n, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), x = b.global(1, F);
  ValueId i = b.range(n + 6, true);
  ValueId gate = b.land(b.alu(Op::CmpLt, DType::Bool, b.cint(lo - 1), i), b.alu(Op::CmpLt, DType::Bool, i, b.cint(lo + n)));
  ValueId v = b.load(x, b.add(i, b.cint(-lo)), gate);
  b.store(out, i, b.alu(Op::Mul, F, v, b.constant(2, F)));
  b.end_range(i);
  return {k, 0};
}

// int32: C division and remainder (truncating, also for negative operands), max, casts both ways.
TestKernel integers() {
  ir::Kernel k;
  k.name = "E_int_300";
  const int64_t n = 300;
  auto I = DType::Int32, F = DType::Float32;
  k.globals = {{I, n, true}, {I, n, false}, {I, n, false}, {F, n, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, I), a = b.global(1, I), d = b.global(2, I), f = b.global(3, F);
  ValueId i = b.range(n, true);
  ValueId av = b.load(a, i), dv = b.load(d, i);
  ValueId q = b.alu(Op::IDiv, I, av, dv), r = b.alu(Op::Mod, I, av, dv);
  ValueId t = b.alu(Op::Add, I, b.alu(Op::Mul, I, q, b.cint(1000)), r);
  t = b.alu(Op::Max, I, t, b.alu(Op::Neg, I, av));
  ValueId fi = b.cast(b.alu(Op::Mul, F, b.load(f, i), b.constant(10, F)), I);  // float → int truncates
  t = b.alu(Op::Add, I, t, b.cast(b.cast(fi, F), I));
  t = b.alu(Op::Where, I, b.alu(Op::CmpEq, DType::Bool, r, b.cint(0)), b.cint(-7), t);
  b.store(out, i, t);
  b.end_range(i);
  return {k, 0};
}

// bool buffers in and out: a comparison stored as bool, and bools loaded, combined and cast.
TestKernel booleans() {
  ir::Kernel k;
  k.name = "E_bool_129";
  const int64_t n = 129;
  auto B = DType::Bool, F = DType::Float32;
  k.globals = {{B, n, true}, {B, n, false}, {F, n, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, B), m = b.global(1, B), x = b.global(2, F);
  ValueId i = b.range(n, true);
  ValueId mv = b.load(m, i);
  ValueId pos = b.alu(Op::CmpLt, B, b.constant(0, F), b.load(x, i));
  ValueId both = b.alu(Op::And, B, mv, pos);
  ValueId as_float = b.alu(Op::Add, F, b.cast(mv, F), b.cast(pos, F));  // 0, 1 or 2
  ValueId two = b.alu(Op::CmpEq, B, as_float, b.constant(2, F));
  b.store(out, i, b.alu(Op::Where, B, b.cast(b.load(x, i), B), b.alu(Op::CmpEq, B, both, two), b.cbool(false)));
  b.end_range(i);
  return {k, 0};
}

// Four nested global ranges: three become grid dimensions, the innermost stays a loop.
TestKernel four_dims() {
  ir::Kernel k;
  k.name = "E_3_5_7_11";
  const int64_t D[4] = {3, 5, 7, 11};
  const int64_t n = D[0] * D[1] * D[2] * D[3];
  auto F = DType::Float32;
  k.globals = {{F, n, true}, {F, n, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), x = b.global(1, F);
  ValueId r[4], idx = b.cint(0);
  for (int d = 0; d < 4; d++) {
    r[d] = b.range(D[d], true);
    idx = b.add(b.mul(idx, b.cint(D[d])), r[d]);
  }
  ValueId f = b.cast(b.add(r[0], b.mul(r[3], b.cint(10))), F);
  b.store(out, idx, b.alu(Op::Add, F, b.load(x, idx), f));
  for (int d = 3; d >= 0; d--) b.end_range(r[d]);
  return {k, 0};
}

// A 1-D grid longer than 65535 workgroups of 64: Vulkan and CUDA must loop (grid-stride) to cover it.
TestKernel long_grid() {
  ir::Kernel k;
  k.name = "E_4194307";
  const int64_t n = (int64_t{1} << 22) + 3;
  auto F = DType::Float32;
  k.globals = {{F, n, true}, {F, n, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), x = b.global(1, F);
  ValueId i = b.range(n, true);
  b.store(out, i, b.alu(Op::Add, F, b.load(x, i), b.constant(1, F)));
  b.end_range(i);
  return {k, 0};
}

// No global range at all: one thread sums everything.
TestKernel full_sum() {
  ir::Kernel k;
  k.name = "r_1000";
  auto F = DType::Float32;
  k.globals = {{F, 1, true}, {F, 1000, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, F), x = b.global(1, F);
  ValueId acc = b.acc(0, F);
  ValueId r = b.range(1000);
  b.assign(acc, b.alu(Op::Add, F, acc, b.load(x, r)));
  b.end_range(r);
  b.store(out, b.cint(0), acc);
  return {k, 1e-6};
}

// float16 buffers: load, widen, add a float32 value, round (CAST to float16), scale, select, store; every
// step is exact or correctly rounded in IEEE arithmetic, so every device must match the interpreter bit for bit.
TestKernel halves() {
  ir::Kernel k;
  k.name = "E_1000_f16";
  const int64_t N = 1000;
  auto F = DType::Float32, H = DType::Float16;
  k.globals = {{H, N, true}, {H, N, false}, {F, N, false}};
  ir::Builder b(k);
  ValueId out = b.global(0, H), x = b.global(1, H), y = b.global(2, F);
  ValueId i = b.range(N, true);
  ValueId xv = b.load(x, i);
  ValueId xf = b.cast(xv, F);
  ValueId sum = b.cast(b.alu(Op::Add, F, xf, b.load(y, i)), H);
  ValueId scaled = b.cast(b.alu(Op::Mul, F, b.cast(sum, F), b.constant(1000.5, F)), H);  // overflows to inf at times
  ValueId neg = b.alu(Op::CmpLt, DType::Bool, xf, b.constant(0, F));
  b.store(out, i, b.alu(Op::Where, H, neg, scaled, sum));
  b.end_range(i);
  return {k, 0};
}

std::vector<TestKernel> all_kernels() {
  return {elementwise(), reduction(), matmul(), gated_pad(), integers(), booleans(), four_dims(), long_grid(),
          full_sum(), halves()};
}

// ---- running a kernel on a device and on the interpreter --------------------------------------------

using Bytes = std::vector<uint8_t>;

// Random inputs per global: floats in [-3, 3] (float16: [-70, 70]), ints in [-50, 50] (a divisor buffer — slot 2 of the int
// kernel — gets nonzero values), bools 0/1. The output starts as a 0xAB pattern, so an element a device
// forgets to write shows up.
std::vector<Bytes> random_buffers(const ir::Kernel& k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Bytes> bufs;
  for (size_t s = 0; s < k.globals.size(); s++) {
    const ir::GlobalArg& g = k.globals[s];
    Bytes b(static_cast<size_t>(g.numel) * dtype_size(g.dtype), 0xAB);
    if (!g.is_output) {
      for (int64_t e = 0; e < g.numel; e++) {
        if (g.dtype == DType::Float32) {
          float v = std::uniform_real_distribution<float>(-3, 3)(rng);
          std::memcpy(&b[e * 4], &v, 4);
        } else if (g.dtype == DType::Float16) {
          uint16_t v = ts_float_to_half(std::uniform_real_distribution<float>(-70, 70)(rng));
          std::memcpy(&b[e * 2], &v, 2);
        } else if (g.dtype == DType::Int32) {
          int32_t v = std::uniform_int_distribution<int32_t>(-50, 50)(rng);
          if (s == 2) v = std::uniform_int_distribution<int32_t>(1, 7)(rng) * (v < 0 ? -1 : 1);
          std::memcpy(&b[e * 4], &v, 4);
        } else {
          b[e] = static_cast<uint8_t>(rng() & 1);
        }
      }
    }
    bufs.push_back(std::move(b));
  }
  return bufs;
}

Bytes run_on_interpreter(const ir::Kernel& k, std::vector<Bytes> bufs) {
  std::vector<void*> ptrs;
  for (Bytes& b : bufs) ptrs.push_back(b.data());
  ir::interpret(k, ptrs);
  return bufs[0];
}

Bytes run_on_device(int device, const ir::Kernel& k, const std::vector<Bytes>& host, double* ms = nullptr) {
  Device& dev = DeviceRegistry::at(device);
  std::vector<std::shared_ptr<Buffer>> owned;
  std::vector<Buffer*> bufs;
  for (size_t s = 0; s < k.globals.size(); s++) {
    owned.push_back(allocate_buffer(device, k.globals[s].dtype, k.globals[s].numel));
    dev.copy_in(owned.back()->handle, host[s].data(), host[s].size());
    bufs.push_back(owned.back().get());
  }
  SourceListing src = dev.renderer()->render(k);
  CompileResult cr = dev.compile(k, &src);
  double t = cr.program->launch(bufs);
  if (ms) *ms = t;
  Bytes out(host[0].size());
  dev.copy_out(out.data(), owned[0]->handle, out.size());
  return out;
}

// Elementwise comparison with a relative tolerance for floats (NaN equals NaN); exact for int and bool.
::testing::AssertionResult same_values(const ir::GlobalArg& g, const Bytes& got, const Bytes& want, double rtol) {
  for (int64_t e = 0; e < g.numel; e++) {
    if (g.dtype == DType::Float32) {
      float a, b;
      std::memcpy(&a, &got[e * 4], 4);
      std::memcpy(&b, &want[e * 4], 4);
      if (std::isnan(a) && std::isnan(b)) continue;
      if (a == b || std::fabs(a - b) <= rtol * std::max(1.0f, std::fabs(b))) continue;
      return ::testing::AssertionFailure() << "element " << e << ": got " << a << ", interpreter " << b;
    }
    size_t size = dtype_size(g.dtype);
    if (std::memcmp(&got[e * size], &want[e * size], size) != 0) {
      int32_t a = 0, b = 0;
      std::memcpy(&a, &got[e * size], size);
      std::memcpy(&b, &want[e * size], size);
      return ::testing::AssertionFailure() << "element " << e << ": got " << a << ", interpreter " << b;
    }
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

void expect_agrees_with_interpreter(const std::string& backend) {
  std::vector<std::string> devices = runnable(backend);
  if (devices.empty()) GTEST_SKIP() << "no " << backend << " device here";
  for (const std::string& name : devices) {
    int dev = DeviceRegistry::index(name);
    uint32_t seed = 1;
    for (const TestKernel& t : all_kernels()) {
      ASSERT_TRUE(ir::verify(t.kernel).empty()) << t.kernel.name;
      std::vector<Bytes> bufs = random_buffers(t.kernel, seed++);
      Bytes want = run_on_interpreter(t.kernel, bufs);
      double ms = -1;
      Bytes got = run_on_device(dev, t.kernel, bufs, &ms);
      EXPECT_TRUE(same_values(t.kernel.globals[0], got, want, t.rtol))
          << name << ", kernel " << t.kernel.name << ":\n" << ir::print(t.kernel);
      EXPECT_GE(ms, 0) << name << " reports the kernel time in ms";
    }
  }
}

}  // namespace

// ---- the tests ----------------------------------------------------------------------------------------

TEST(DeviceRegistry, NamesAreCaseInsensitiveAndDefaultToDeviceZero) {
  std::vector<std::string> names = DeviceRegistry::names();
  ASSERT_GE(names.size(), 2u);
  EXPECT_EQ(names[0], "C");
  EXPECT_EQ(names[1], "INTERP");
  EXPECT_EQ(DeviceRegistry::index("c:0"), DeviceRegistry::index("C"));
  EXPECT_EQ(DeviceRegistry::index("interp"), DeviceRegistry::index("INTERP"));
  for (std::string backend : {"OPENCL", "VULKAN", "CUDA"}) {
    bool present = std::find(names.begin(), names.end(), backend + ":0") != names.end();
    if (!present) continue;
    EXPECT_EQ(DeviceRegistry::index(backend), DeviceRegistry::index(backend + ":0"));
    std::string lower = backend;
    for (char& c : lower) c = static_cast<char>(std::tolower(c));
    EXPECT_EQ(DeviceRegistry::index(lower), DeviceRegistry::index(backend + ":0"));
    EXPECT_EQ(DeviceRegistry::at(DeviceRegistry::index(backend)).name(), backend + ":0");
  }
  EXPECT_THROW(DeviceRegistry::index("TPU"), std::invalid_argument);
}

TEST(DeviceRegistry, ListsPropertiesWithoutSurprises) {
  for (const DeviceProperties& p : DeviceRegistry::list()) {
    EXPECT_FALSE(p.name.empty());
    EXPECT_FALSE(p.backend.empty()) << p.name;
    EXPECT_FALSE(p.description.empty()) << p.name;
    if (p.backend == "OPENCL" || p.backend == "VULKAN") {
      EXPECT_GT(p.memory_bytes, 0u) << p.name;
      EXPECT_GT(p.max_workgroup_size, 0u) << p.name;
    }
    if (!p.can_run) { EXPECT_FALSE(p.note.empty()) << p.name << " is compile-only and should say why"; }
  }
}

TEST(GpuLaunch, GridCoversTheBoundsAndRespectsLimits) {
  const uint32_t vulkan[3] = {65535, 65535, 65535}, unlimited[3] = {1u << 31, 1u << 31, 1u << 31};
  ir::Kernel k = matmul().kernel;  // grid 19 x 23
  gpu::Grid g = gpu::plan_grid(k, vulkan);
  ASSERT_EQ(g.ranges.size(), 2u);
  EXPECT_EQ(g.dims, 2u);
  EXPECT_EQ(k.insts[k.insts[g.ranges[0]].src[0]].value, 23);  // the inner range (contiguous in memory) is x
  EXPECT_GE(g.global(0), 23u);
  EXPECT_GE(g.global(1), 19u);
  EXPECT_LE(g.local[0] * g.local[1] * g.local[2], gpu::kWorkgroupSize);
  EXPECT_FALSE(g.strided[0] || g.strided[1]);

  EXPECT_EQ(gpu::plan_grid(four_dims().kernel, vulkan).ranges.size(), 3u);  // the fourth stays a loop

  // 4194307 elements need 65537 workgroups of 64: more than Vulkan promises, so the loop form
  gpu::Grid big = gpu::plan_grid(long_grid().kernel, vulkan);
  EXPECT_TRUE(big.strided[0]);
  EXPECT_EQ(big.groups[0], 65535u);
  EXPECT_FALSE(gpu::plan_grid(long_grid().kernel, unlimited).strided[0]);

  gpu::Grid scalar = gpu::plan_grid(full_sum().kernel, vulkan);
  EXPECT_TRUE(scalar.ranges.empty());
  EXPECT_EQ(scalar.global(0), 1u);
}

TEST(Renderers, EveryRendererRendersEveryKernel) {
  std::vector<const Renderer*> renderers = DeviceRegistry::renderers();
  ASSERT_FALSE(renderers.empty());
  for (const TestKernel& t : all_kernels()) {
    for (const Renderer* r : renderers) {
      SourceListing s = r->render(t.kernel);
      EXPECT_EQ(s.renderer, r->language());
      EXPECT_FALSE(s.code.empty()) << r->language() << " " << t.kernel.name;
      EXPECT_EQ(s.ir_op_line.size(), t.kernel.insts.size());
      int mapped = 0;
      for (int line : s.ir_op_line) mapped += line > 0;
      EXPECT_GT(mapped, 0) << r->language() << " maps no IR op to a line of " << t.kernel.name << ":\n" << s.code;
      if (r->language() == "SPIR-V") { EXPECT_NE(s.code.find("OpEntryPoint"), std::string::npos) << s.code; }
      if (r->language() == "PTX") {
        EXPECT_NE(s.code.find(".entry " + t.kernel.name), std::string::npos) << s.code;
      }
    }
  }
}

TEST(Renderers, GpuGlobalRangesBecomeThreadIds) {
  for (const Renderer* r : DeviceRegistry::renderers()) {
    std::string code = r->render(matmul().kernel).code;
    if (r->language() == "OpenCL C") { EXPECT_NE(code.find("get_global_id(0)"), std::string::npos) << code; }
    if (r->language() == "GLSL") {
      EXPECT_NE(r->render(long_grid().kernel).code.find("gl_NumWorkGroups.x"), std::string::npos)
          << "a grid larger than 65535 workgroups becomes a grid-stride loop";
    }
    if (r->language() == "GLSL") { EXPECT_NE(code.find("gl_GlobalInvocationID.y"), std::string::npos) << code; }
    if (r->language() == "CUDA C") { EXPECT_NE(code.find("blockIdx.x"), std::string::npos) << code; }
    if (r->language() == "C") { EXPECT_EQ(code.find("global_id"), std::string::npos) << code; }
  }
}

TEST(OpenCL, AgreesWithTheInterpreter) { expect_agrees_with_interpreter("OPENCL"); }

TEST(Vulkan, AgreesWithTheInterpreter) { expect_agrees_with_interpreter("VULKAN"); }

TEST(CUDA, EveryKernelCompilesWithNVRTC) {
  bool found = false;
  for (const DeviceProperties& p : DeviceRegistry::list()) {
    if (p.backend != "CUDA") continue;
    found = true;
    Device& dev = DeviceRegistry::at(DeviceRegistry::index(p.name));
    for (const TestKernel& t : all_kernels()) {
      SourceListing src = dev.renderer()->render(t.kernel);
      EXPECT_NO_THROW(dev.compile(t.kernel, &src)) << p.name << " " << t.kernel.name << ":\n" << src.code;
    }
  }
  if (!found) GTEST_SKIP() << "built without CUDA";
}

TEST(CUDA, CompileOnlyDeviceRefusesToRunWithAClearError) {
  for (const DeviceProperties& p : DeviceRegistry::list()) {
    if (p.backend != "CUDA" || p.can_run) continue;
    std::vector<float> v = {1, 2, 3};
    try {
      Tensor::from_data(v.data(), DType::Float32, {3}, p.name).realize();
      FAIL() << p.name << " is compile-only but accepted a tensor";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("compile-only"), std::string::npos) << e.what();
    }
    return;
  }
  GTEST_SKIP() << "no compile-only CUDA device here";
}

// The whole pipeline (schedule → lowering → passes → render → compile → launch) on each GPU device,
// against the interpreter: softmax of a matmul, padding, flips, int and bool tensors.
TEST(GpuDevices, TensorProgramsAgreeWithTheInterpreter) {
  std::vector<std::string> devices = runnable("OPENCL");
  for (const std::string& d : runnable("VULKAN")) devices.push_back(d);
  if (devices.empty()) GTEST_SKIP() << "no OpenCL or Vulkan device here";
  std::vector<float> v(6 * 5);
  for (size_t i = 0; i < v.size(); i++) v[i] = -1.5f + 0.37f * static_cast<float>(i);
  auto run = [&](const std::string& dev) {
    Tensor x = Tensor::from_data(v.data(), DType::Float32, {6, 5}, dev);
    Tensor y = x.exp().mul(x.sin()).add(x.transpose().matmul(x).sum(std::vector<int64_t>{0}, true).reshape({1, 5}))
                   .log_softmax(1).pad({{1, 0}, {0, 2}}).flip({0});
    std::vector<float> out(y.numel());
    y.copy_to_host(out.data());
    return out;
  };
  std::vector<float> want = run("INTERP");
  for (const std::string& dev : devices) {
    std::vector<float> got = run(dev);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << dev << " " << i;
  }
}
