// A compiled Vulkan kernel: a compute pipeline whose workgroup size is set by specialization constants
// (the grid plan of gpu_launch.h), and one descriptor set binding the buffers (binding = slot). A launch
// records timestamp, dispatch, timestamp in one command buffer, so the kernel time comes from the
// device's own clock, not the host's.
#pragma once
#include <vulkan/vulkan.h>

#include <string>
#include <vector>

#include "gpu_launch.h"
#include "tensorscope/device.h"

namespace ts {

class VulkanDevice;

class VulkanProgram : public Program {
 public:
  // Throws std::runtime_error naming the kernel and the failing Vulkan call.
  VulkanProgram(VulkanDevice& device, const ir::Kernel& kernel, const std::vector<uint32_t>& spirv);
  ~VulkanProgram() override;
  double launch(const std::vector<Buffer*>& buffers) override;

 private:
  void destroy();
  VulkanDevice& dev_;
  std::string name_;
  size_t num_buffers_;
  gpu::Grid grid_;
  VkShaderModule module_ = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout_ = VK_NULL_HANDLE;
  VkPipelineLayout layout_ = VK_NULL_HANDLE;
  VkPipeline pipeline_ = VK_NULL_HANDLE;
  VkDescriptorPool pool_ = VK_NULL_HANDLE;
  VkDescriptorSet set_ = VK_NULL_HANDLE;
};

}  // namespace ts
