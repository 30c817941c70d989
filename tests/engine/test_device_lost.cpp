// A device that vanishes in the middle of a run (issue 16): the launch that finds it gone raises
// DeviceLostError naming the device and the driver's reason, every later use of that device raises the same
// at once (no crash, no hang, no call into a dead driver), and the other devices keep working.
//
// The GPU drivers cannot be made to lose a device on purpose, so the test registers LOSSY: the C device
// behind a wrapper whose programs throw DeviceLostError from their fourth launch on, the way the Vulkan,
// OpenCL and CUDA backends throw it for VK_ERROR_DEVICE_LOST, CL_DEVICE_NOT_AVAILABLE and sticky CUDA errors.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "tensorscope/device.h"
#include "tensorscope/tensor.h"

using ts::Tensor;

namespace {

std::atomic<int> g_launches{0};
constexpr int kLaunchesBeforeLoss = 3;

class LossyProgram : public ts::Program {
 public:
  explicit LossyProgram(std::unique_ptr<ts::Program> inner) : inner_(std::move(inner)) {}
  double launch(const std::vector<ts::Buffer*>& buffers) override {
    if (++g_launches > kLaunchesBeforeLoss) throw ts::DeviceLostError("LOSSY", "simulated: the GPU was unplugged");
    return inner_->launch(buffers);
  }

 private:
  std::unique_ptr<ts::Program> inner_;
};

// Memory and compilation are the C device's; launches go through LossyProgram.
class LossyDevice : public ts::Device {
 public:
  LossyDevice() : c_(ts::DeviceRegistry::at(ts::DeviceRegistry::index("C"))) {}
  std::string name() const override { return "LOSSY"; }
  void* alloc(size_t bytes) override { return c_.alloc(bytes); }
  void free(void* handle, size_t bytes) override { c_.free(handle, bytes); }
  void copy_in(void* handle, const void* host, size_t bytes) override { c_.copy_in(handle, host, bytes); }
  void copy_out(void* host, const void* handle, size_t bytes) override { c_.copy_out(host, handle, bytes); }
  const ts::Renderer* renderer() const override { return c_.renderer(); }
  ts::CompileResult compile(const ts::ir::Kernel& kernel, const ts::SourceListing* source) override {
    ts::CompileResult r = c_.compile(kernel, source);
    r.program = std::make_unique<LossyProgram>(std::move(r.program));
    return r;
  }

 private:
  ts::Device& c_;
};

const bool registered = ts::DeviceRegistry::add("LOSSY", [] { return std::make_unique<LossyDevice>(); });

std::vector<float> values(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  t.copy_to_host(v.data());
  return v;
}

}  // namespace

TEST(DeviceLost, LaterUsesFailAtOnceAndOtherDevicesKeepWorking) {
  ASSERT_TRUE(registered);
  std::vector<float> data{1, 2, 3, 4};
  Tensor x = Tensor::from_data(data.data(), ts::DType::Float32, {4}, "LOSSY");
  // launches 1..3 work
  for (int i = 1; i <= kLaunchesBeforeLoss; i++) {
    std::vector<float> got = values(x.mul(static_cast<double>(i)).add(1.0));
    EXPECT_EQ(got[3], 4.0f * static_cast<float>(i) + 1.0f);
  }
  // the fourth finds the device gone: a DeviceLostError that names the device and the driver's reason
  Tensor y = x.exp();
  try {
    y.realize();
    FAIL() << "the launch on a lost device did not raise";
  } catch (const ts::DeviceLostError& e) {
    EXPECT_EQ(e.device(), "LOSSY");
    const std::string what = e.what();
    EXPECT_NE(what.find("device LOSSY was lost"), std::string::npos) << what;
    EXPECT_NE(what.find("simulated: the GPU was unplugged"), std::string::npos) << what;
    EXPECT_NE(what.find("another device"), std::string::npos) << what;
  }
  const int index = ts::DeviceRegistry::index("LOSSY");
  EXPECT_EQ(ts::DeviceRegistry::lost_reason(index), "simulated: the GPU was unplugged");

  // every later use fails at once with the same reason, without reaching the device: reading a tensor
  // realized there, allocating there, launching there
  const int launches = g_launches;
  EXPECT_THROW(values(x), ts::DeviceLostError);
  EXPECT_THROW(Tensor::from_data(data.data(), ts::DType::Float32, {4}, "LOSSY"), ts::DeviceLostError);
  EXPECT_THROW(x.add(2.0).realize(), ts::DeviceLostError);
  EXPECT_EQ(g_launches, launches);

  // the C device is untouched
  Tensor c = Tensor::from_data(data.data(), ts::DType::Float32, {4}, "C");
  EXPECT_EQ(values(c.mul(2.0).sum())[0], 20.0f);
}
