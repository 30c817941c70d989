// VULKAN:n — every Vulkan physical device with a compute queue (lavapipe on this CPU; any GPU elsewhere).
//
// Kernels are GLSL compute shaders (glsl_renderer), compiled in-process to SPIR-V (spirv_compiler) and
// turned into compute pipelines (vulkan_program). Every submit waits on a fence: a launch's output can be
// read right away, and a buffer is never freed while a command still uses it.
//
// Memory: where the device offers memory that is both device-local and host-visible with a large heap
// (integrated GPUs, lavapipe, resizable BAR), buffers are mapped and copies are memcpy; otherwise buffers
// live in device-local memory and copies go through a temporary host-visible staging buffer.
#pragma once
#include <vulkan/vulkan.h>

#include <functional>
#include <string>

#include "tensorscope/device.h"

namespace ts {

// What Buffer::handle points to on a Vulkan device.
struct VulkanBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // null in device-local memory (copies go through a staging buffer)
  VkDeviceSize size = 0;
};

class VulkanDevice : public Device {
 public:
  // Creates a logical device with one compute queue. Throws std::runtime_error naming the failing call.
  // Devices live until the process ends (the registry never destroys them), so there is no teardown.
  VulkanDevice(std::string name, VkPhysicalDevice physical);

  std::string name() const override { return name_; }
  const Renderer* renderer() const override;
  void* alloc(size_t bytes) override;
  void free(void* handle, size_t bytes) override;
  void copy_in(void* handle, const void* host, size_t bytes) override;
  void copy_out(void* host, const void* handle, size_t bytes) override;
  CompileResult compile(const ir::Kernel& kernel, const SourceListing* source) override;

  VkDevice vk() const { return device_; }
  // Records commands with `record`, runs them and waits. A barrier before makes earlier submissions'
  // writes visible to these commands; one after makes their writes visible to the host.
  void submit(const std::function<void(VkCommandBuffer)>& record);
  // A pool of two timestamp queries (VK_NULL_HANDLE where the queue has no timer), and the milliseconds
  // between the two timestamps the last submit() wrote.
  VkQueryPool timestamps() const { return timestamps_; }
  double timestamp_ms() const;

 private:
  int find_memory(uint32_t type_bits, VkMemoryPropertyFlags want) const;
  void bind_memory(VulkanBuffer& b, VkMemoryPropertyFlags want);
  void with_staging(size_t bytes, const std::function<void(VulkanBuffer&)>& use);
  void release(VulkanBuffer* b);

  std::string name_;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool timestamps_ = VK_NULL_HANDLE;
  uint32_t timestamp_bits_ = 0;
  int direct_type_ = -1;  // the mapped memory type, or -1: device-local memory with staging copies
  bool has_8bit_ = false;
  bool has_float16_ = false;  // storageBuffer16BitAccess and shaderFloat16
  bool has_inf_nan_ = false;
};

}  // namespace ts
