#include "vulkan/vulkan_device.h"

#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "tensorscope/device.h"
#include "vulkan/glsl_renderer.h"
#include "vulkan/spirv_compiler.h"
#include "vulkan/vulkan_instance.h"
#include "vulkan/vulkan_program.h"

namespace ts {

VulkanDevice::VulkanDevice(std::string name, VkPhysicalDevice pd) : name_(std::move(name)) {
  vkGetPhysicalDeviceProperties(pd, &props_);
  vkGetPhysicalDeviceMemoryProperties(pd, &memory_);
  int family = vk::compute_queue_family(pd);
  if (family < 0) throw std::runtime_error(name_ + ": no compute queue");
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  qci.queueFamilyIndex = static_cast<uint32_t>(family);
  qci.queueCount = 1;
  qci.pQueuePriorities = &priority;
  // bool buffers need 8-bit storage; robust buffer access turns a stray read into a zero, not a crash
  VkPhysicalDeviceFeatures supported{};
  vkGetPhysicalDeviceFeatures(pd, &supported);
  VkPhysicalDevice8BitStorageFeatures f8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  has_8bit_ = vk::supports_8bit_storage(pd);
  has_inf_nan_ = vk::supports_inf_nan_preserve(pd);
  f8.storageBuffer8BitAccess = has_8bit_;
  // float16 buffers need 16-bit storage (core 1.1) and shaderFloat16 (core 1.2) to round floats to float16
  has_float16_ = vk::supports_float16(pd);
  VkPhysicalDevice16BitStorageFeatures f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features f16_arith{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  f16.storageBuffer16BitAccess = has_float16_;
  f16_arith.shaderFloat16 = has_float16_;
  f8.pNext = &f16;
  f16.pNext = &f16_arith;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.features.robustBufferAccess = supported.robustBufferAccess;
  features.pNext = &f8;
  std::vector<const char*> extensions;  // both core since Vulkan 1.2
  if (has_8bit_ && props_.apiVersion < VK_API_VERSION_1_2) extensions.push_back("VK_KHR_8bit_storage");
  if (has_float16_ && props_.apiVersion < VK_API_VERSION_1_2) extensions.push_back("VK_KHR_shader_float16_int8");
  VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  dci.pNext = &features;
  dci.queueCreateInfoCount = 1;
  dci.pQueueCreateInfos = &qci;
  dci.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  dci.ppEnabledExtensionNames = extensions.data();
  vk::check(vkCreateDevice(pd, &dci, nullptr, &device_), name_ + ": vkCreateDevice");
  vkGetDeviceQueue(device_, qci.queueFamilyIndex, 0, &queue_);

  VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pci.queueFamilyIndex = qci.queueFamilyIndex;
  vk::check(vkCreateCommandPool(device_, &pci, nullptr, &pool_), name_ + ": vkCreateCommandPool");
  VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  cai.commandPool = pool_;
  cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  cai.commandBufferCount = 1;
  vk::check(vkAllocateCommandBuffers(device_, &cai, &cmd_), name_ + ": vkAllocateCommandBuffers");
  VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  vk::check(vkCreateFence(device_, &fci, nullptr, &fence_), name_ + ": vkCreateFence");

  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, families.data());
  timestamp_bits_ = families[qci.queueFamilyIndex].timestampValidBits;
  if (timestamp_bits_) {
    VkQueryPoolCreateInfo qpi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qpi.queryCount = 2;
    vk::check(vkCreateQueryPool(device_, &qpi, nullptr, &timestamps_), name_ + ": vkCreateQueryPool");
  }
  // mapped buffers when device-local memory is also host-visible and its heap is not a small BAR window
  direct_type_ = find_memory(~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  if (direct_type_ >= 0 && memory_.memoryHeaps[memory_.memoryTypes[direct_type_].heapIndex].size < (1ull << 30))
    direct_type_ = -1;
}

const Renderer* VulkanDevice::renderer() const { return &glsl_renderer(); }

void* VulkanDevice::alloc(size_t bytes) {
  auto* b = new VulkanBuffer;
  b->size = bytes;
  try {
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    vk::check(vkCreateBuffer(device_, &bci, nullptr, &b->buffer), name_ + ": vkCreateBuffer");
    bool mapped = direct_type_ >= 0;
    bind_memory(*b, mapped ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                 VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                           : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
    if (mapped) vk::check(vkMapMemory(device_, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), name_ + ": vkMapMemory");
  } catch (...) {
    release(b);
    throw;
  }
  return b;
}
void VulkanDevice::free(void* handle, size_t) { release(static_cast<VulkanBuffer*>(handle)); }

void VulkanDevice::copy_in(void* handle, const void* host, size_t bytes) {
  auto* b = static_cast<VulkanBuffer*>(handle);
  if (b->mapped) {
    std::memcpy(b->mapped, host, bytes);
    return;
  }
  with_staging(bytes, [&](VulkanBuffer& staging) {
    std::memcpy(staging.mapped, host, bytes);
    submit([&](VkCommandBuffer cmd) {
      VkBufferCopy region{0, 0, bytes};
      vkCmdCopyBuffer(cmd, staging.buffer, b->buffer, 1, &region);
    });
  });
}
void VulkanDevice::copy_out(void* host, const void* handle, size_t bytes) {
  auto* b = static_cast<const VulkanBuffer*>(handle);
  if (b->mapped) {
    std::memcpy(host, b->mapped, bytes);
    return;
  }
  with_staging(bytes, [&](VulkanBuffer& staging) {
    submit([&](VkCommandBuffer cmd) {
      VkBufferCopy region{0, 0, bytes};
      vkCmdCopyBuffer(cmd, b->buffer, staging.buffer, 1, &region);
    });
    std::memcpy(host, staging.mapped, bytes);
  });
}

CompileResult VulkanDevice::compile(const ir::Kernel& kernel, const SourceListing* source) {
  for (const ir::GlobalArg& g : kernel.globals)
    if (g.dtype == DType::Bool && !has_8bit_)
      throw std::runtime_error(name_ + ": kernel " + kernel.name +
                               " uses a bool buffer, which needs the storageBuffer8BitAccess feature this device lacks");
  if (!has_float16_ && CStyleRenderer::uses_float16(kernel))
    throw std::runtime_error(name_ + ": kernel " + kernel.name + " uses float16, which needs the storageBuffer16BitAccess " +
                             "and shaderFloat16 features this device lacks");
  auto t0 = std::chrono::steady_clock::now();
  std::string glsl = source->code;
  if (!has_inf_nan_) {  // this device cannot promise IEEE specials: compile without asking for them
    size_t at = glsl.find(GLSLRenderer::kPreserveInfNan);
    if (at != std::string::npos) glsl.erase(at, std::strlen(GLSLRenderer::kPreserveInfNan));
  }
  SpirvModule spirv = compile_glsl(glsl, name_ + " kernel " + kernel.name);
  CompileResult r;
  r.program = std::make_unique<VulkanProgram>(*this, kernel, spirv.words);
  r.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

void VulkanDevice::submit(const std::function<void(VkCommandBuffer)>& record) {
  vk::check(vkResetCommandBuffer(cmd_, 0), name_ + ": vkResetCommandBuffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  vk::check(vkBeginCommandBuffer(cmd_, &begin), name_ + ": vkBeginCommandBuffer");
  const VkPipelineStageFlags work = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT;
  VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  before.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                         VK_ACCESS_TRANSFER_WRITE_BIT;
  vkCmdPipelineBarrier(cmd_, work | VK_PIPELINE_STAGE_HOST_BIT, work, 0, 1, &before, 0, nullptr, 0, nullptr);
  record(cmd_);
  VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  after.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  after.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
  vkCmdPipelineBarrier(cmd_, work, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0, nullptr, 0, nullptr);
  vk::check(vkEndCommandBuffer(cmd_), name_ + ": vkEndCommandBuffer");
  vk::check(vkResetFences(device_, 1, &fence_), name_ + ": vkResetFences");
  VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  si.commandBufferCount = 1;
  si.pCommandBuffers = &cmd_;
  // VK_ERROR_DEVICE_LOST (Vulkan spec, "Lost Device"): the GPU was reset or removed, or the driver gave up
  // on it; nothing on this VkDevice can be used again
  auto check_lost = [&](VkResult r, const char* call) {
    if (r == VK_ERROR_DEVICE_LOST) throw DeviceLostError(name_, std::string("VK_ERROR_DEVICE_LOST in ") + call);
    vk::check(r, name_ + ": " + call);
  };
  check_lost(vkQueueSubmit(queue_, 1, &si, fence_), "vkQueueSubmit");
  check_lost(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), "vkWaitForFences");
}

double VulkanDevice::timestamp_ms() const {
  uint64_t t[2] = {0, 0};
  if (vkGetQueryPoolResults(device_, timestamps_, 0, 2, sizeof t, t, sizeof t[0],
                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
    return 0;
  uint64_t mask = timestamp_bits_ >= 64 ? ~0ull : (1ull << timestamp_bits_) - 1;
  return static_cast<double>((t[1] - t[0]) & mask) * props_.limits.timestampPeriod * 1e-6;  // ns → ms
}

int VulkanDevice::find_memory(uint32_t type_bits, VkMemoryPropertyFlags want) const {
  for (uint32_t i = 0; i < memory_.memoryTypeCount; i++)
    if ((type_bits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
  return -1;
}

void VulkanDevice::bind_memory(VulkanBuffer& b, VkMemoryPropertyFlags want) {
  VkMemoryRequirements req;
  vkGetBufferMemoryRequirements(device_, b.buffer, &req);
  int type = find_memory(req.memoryTypeBits, want);
  if (type < 0) throw std::runtime_error(name_ + ": no memory type for a " + std::to_string(b.size) + "-byte buffer");
  VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  mai.allocationSize = req.size;
  mai.memoryTypeIndex = static_cast<uint32_t>(type);
  vk::check(vkAllocateMemory(device_, &mai, nullptr, &b.memory),
           name_ + ": allocating " + std::to_string(b.size) + " bytes");
  vk::check(vkBindBufferMemory(device_, b.buffer, b.memory, 0), name_ + ": vkBindBufferMemory");
}

void VulkanDevice::with_staging(size_t bytes, const std::function<void(VulkanBuffer&)>& use) {
  VulkanBuffer* s = new VulkanBuffer;
  s->size = bytes;
  try {
    VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    vk::check(vkCreateBuffer(device_, &bci, nullptr, &s->buffer), name_ + ": vkCreateBuffer (staging)");
    bind_memory(*s, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    vk::check(vkMapMemory(device_, s->memory, 0, VK_WHOLE_SIZE, 0, &s->mapped), name_ + ": vkMapMemory (staging)");
    use(*s);
  } catch (...) {
    release(s);
    throw;
  }
  release(s);
}

void VulkanDevice::release(VulkanBuffer* b) {
  if (b->mapped) vkUnmapMemory(device_, b->memory);
  if (b->buffer) vkDestroyBuffer(device_, b->buffer, nullptr);
  if (b->memory) vkFreeMemory(device_, b->memory, nullptr);
  delete b;
}

namespace {

std::vector<DeviceRegistry::Offer> enumerate_vulkan() {
  VkInstance inst = vk::instance();
  uint32_t n = 0;
  vk::check(vkEnumeratePhysicalDevices(inst, &n, nullptr), "vkEnumeratePhysicalDevices");
  if (n == 0) throw std::runtime_error("no Vulkan device found: install a Vulkan driver, e.g. mesa-vulkan-drivers");
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(inst, &n, pds.data());
  std::vector<DeviceRegistry::Offer> offers;
  for (VkPhysicalDevice pd : pds) {
    if (vk::compute_queue_family(pd) < 0) continue;
    std::string name = "VULKAN:" + std::to_string(offers.size());
    offers.push_back({vk::describe(pd, name), [name, pd] { return std::make_unique<VulkanDevice>(name, pd); }});
  }
  return offers;
}

const bool registered = DeviceRegistry::add_provider("VULKAN", enumerate_vulkan);

}  // namespace
}  // namespace ts
