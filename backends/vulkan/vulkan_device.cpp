// VULKAN:n — every Vulkan physical device with a compute queue (lavapipe on this CPU; any GPU elsewhere).
//
// Kernels are GLSL compute shaders (glsl_renderer), compiled in-process to SPIR-V (spirv_compiler). A
// program is a compute pipeline whose workgroup size is fixed by specialization constants, with one
// descriptor set binding the buffers (binding = slot). Each launch records one command buffer — timestamp,
// dispatch, timestamp — submits it and waits on a fence, so results can be read right away and the kernel
// time comes from the GPU's own clock (timestamp queries), not from the host.
//
// Memory: where the device offers memory that is both device-local and host-visible with a large heap
// (integrated GPUs, lavapipe, resizable-BAR), buffers are mapped and copies are memcpy; otherwise buffers
// live in device-local memory and copies go through a temporary host-visible staging buffer.
#include <vulkan/vulkan.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "gpu_launch.h"
#include "vulkan/glsl_renderer.h"
#include "vulkan/spirv_compiler.h"

namespace ts {
namespace {

const char* vk_result_name(VkResult r) {
  switch (r) {
    case VK_NOT_READY: return "VK_NOT_READY";
    case VK_TIMEOUT: return "VK_TIMEOUT";
    case VK_ERROR_OUT_OF_HOST_MEMORY: return "VK_ERROR_OUT_OF_HOST_MEMORY";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY: return "VK_ERROR_OUT_OF_DEVICE_MEMORY";
    case VK_ERROR_INITIALIZATION_FAILED: return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST: return "VK_ERROR_DEVICE_LOST";
    case VK_ERROR_MEMORY_MAP_FAILED: return "VK_ERROR_MEMORY_MAP_FAILED";
    case VK_ERROR_EXTENSION_NOT_PRESENT: return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT: return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER: return "VK_ERROR_INCOMPATIBLE_DRIVER (no Vulkan driver: try mesa-vulkan-drivers)";
    default: return "VkResult";
  }
}

void vk_check(VkResult r, const std::string& what) {
  if (r != VK_SUCCESS) throw std::runtime_error(what + " failed: " + vk_result_name(r) + " (" + std::to_string(r) + ")");
}

// One instance for the process, created on first use and never destroyed (devices live until exit).
VkInstance instance() {
  static VkInstance inst = [] {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "tensorscope";
    app.apiVersion = VK_API_VERSION_1_1;  // properties2, subgroup properties, storage-buffer features
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    VkInstance i = VK_NULL_HANDLE;
    vk_check(vkCreateInstance(&ci, nullptr, &i), "vkCreateInstance");
    return i;
  }();
  return inst;
}

std::string vendor_name(uint32_t id) {
  switch (id) {
    case 0x10DE: return "NVIDIA";
    case 0x1002: return "AMD";
    case 0x8086: return "Intel";
    case 0x13B5: return "ARM";
    case 0x5143: return "Qualcomm";
    case 0x106B: return "Apple";
    case 0x10005: return "Mesa";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof hex, "vendor 0x%X", id);
      return hex;
    }
  }
}

int compute_queue_family(VkPhysicalDevice pd) {
  uint32_t n = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
  std::vector<VkQueueFamilyProperties> families(n);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, families.data());
  for (uint32_t i = 0; i < n; i++)
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) return static_cast<int>(i);
  return -1;
}

// Whether shaders may ask to keep IEEE infinities and NaNs in float32 (Vulkan 1.2 float controls).
bool supports_inf_nan_preserve(VkPhysicalDevice pd) {
  VkPhysicalDeviceProperties base;
  vkGetPhysicalDeviceProperties(pd, &base);
  if (base.apiVersion < VK_API_VERSION_1_2) return false;
  VkPhysicalDeviceFloatControlsProperties fc{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES};
  VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props.pNext = &fc;
  vkGetPhysicalDeviceProperties2(pd, &props);
  return fc.shaderSignedZeroInfNanPreserveFloat32;
}

bool supports_8bit_storage(VkPhysicalDevice pd) {
  VkPhysicalDevice8BitStorageFeatures f8{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES};
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &f8;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  return f8.storageBuffer8BitAccess;
}

struct VulkanBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;  // null in device-local memory (copies go through a staging buffer)
  VkDeviceSize size = 0;
};

class VulkanDevice;

class VulkanProgram : public Program {
 public:
  VulkanProgram(VulkanDevice& dev, const ir::Kernel& kernel, const std::vector<uint32_t>& spirv);
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

class VulkanDevice : public Device {
 public:
  VulkanDevice(std::string name, VkPhysicalDevice pd) : name_(std::move(name)), physical_(pd) {
    vkGetPhysicalDeviceProperties(pd, &props_);
    vkGetPhysicalDeviceMemoryProperties(pd, &memory_);
    int family = compute_queue_family(pd);
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
    has_8bit_ = supports_8bit_storage(pd);
    has_inf_nan_ = supports_inf_nan_preserve(pd);
    f8.storageBuffer8BitAccess = has_8bit_;
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    features.features.robustBufferAccess = supported.robustBufferAccess;
    features.pNext = &f8;
    const char* ext_8bit = "VK_KHR_8bit_storage";  // core since Vulkan 1.2
    VkDeviceCreateInfo dci{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
    dci.pNext = &features;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &qci;
    if (has_8bit_ && props_.apiVersion < VK_API_VERSION_1_2) {
      dci.enabledExtensionCount = 1;
      dci.ppEnabledExtensionNames = &ext_8bit;
    }
    vk_check(vkCreateDevice(pd, &dci, nullptr, &device_), name_ + ": vkCreateDevice");
    vkGetDeviceQueue(device_, qci.queueFamilyIndex, 0, &queue_);

    VkCommandPoolCreateInfo pci{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = qci.queueFamilyIndex;
    vk_check(vkCreateCommandPool(device_, &pci, nullptr, &pool_), name_ + ": vkCreateCommandPool");
    VkCommandBufferAllocateInfo cai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
    cai.commandPool = pool_;
    cai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    cai.commandBufferCount = 1;
    vk_check(vkAllocateCommandBuffers(device_, &cai, &cmd_), name_ + ": vkAllocateCommandBuffers");
    VkFenceCreateInfo fci{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    vk_check(vkCreateFence(device_, &fci, nullptr, &fence_), name_ + ": vkCreateFence");

    uint32_t n = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, nullptr);
    std::vector<VkQueueFamilyProperties> families(n);
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &n, families.data());
    timestamp_bits_ = families[qci.queueFamilyIndex].timestampValidBits;
    if (timestamp_bits_) {
      VkQueryPoolCreateInfo qpi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      qpi.queryType = VK_QUERY_TYPE_TIMESTAMP;
      qpi.queryCount = 2;
      vk_check(vkCreateQueryPool(device_, &qpi, nullptr, &timestamps_), name_ + ": vkCreateQueryPool");
    }
    // mapped buffers when device-local memory is also host-visible and its heap is not a small BAR window
    direct_type_ = find_memory(~0u, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                        VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
    if (direct_type_ >= 0 && memory_.memoryHeaps[memory_.memoryTypes[direct_type_].heapIndex].size < (1ull << 30))
      direct_type_ = -1;
  }
  // Devices live until the process ends (the registry never destroys them), so there is no teardown.

  std::string name() const override { return name_; }
  const Renderer* renderer() const override { return &glsl_renderer(); }
  VkDevice vk() const { return device_; }

  void* alloc(size_t bytes) override {
    auto* b = new VulkanBuffer;
    b->size = bytes;
    try {
      VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
      bci.size = bytes;
      bci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
      vk_check(vkCreateBuffer(device_, &bci, nullptr, &b->buffer), name_ + ": vkCreateBuffer");
      bool mapped = direct_type_ >= 0;
      bind_memory(*b, mapped ? VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                   VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
                             : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT);
      if (mapped) vk_check(vkMapMemory(device_, b->memory, 0, VK_WHOLE_SIZE, 0, &b->mapped), name_ + ": vkMapMemory");
    } catch (...) {
      release(b);
      throw;
    }
    return b;
  }
  void free(void* handle, size_t) override { release(static_cast<VulkanBuffer*>(handle)); }

  void copy_in(void* handle, const void* host, size_t bytes) override {
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
  void copy_out(void* host, const void* handle, size_t bytes) override {
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

  CompileResult compile(const ir::Kernel& kernel, const SourceListing* source) override {
    for (const ir::GlobalArg& g : kernel.globals)
      if (g.dtype == DType::Bool && !has_8bit_)
        throw std::runtime_error(name_ + ": kernel " + kernel.name +
                                 " uses a bool buffer, which needs the storageBuffer8BitAccess feature this device lacks");
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

  // Records commands with `record`, runs them and waits. A barrier before makes earlier submissions'
  // writes visible to these commands; one after makes their writes visible to the host.
  void submit(const std::function<void(VkCommandBuffer)>& record) {
    vk_check(vkResetCommandBuffer(cmd_, 0), name_ + ": vkResetCommandBuffer");
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vk_check(vkBeginCommandBuffer(cmd_, &begin), name_ + ": vkBeginCommandBuffer");
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
    vk_check(vkEndCommandBuffer(cmd_), name_ + ": vkEndCommandBuffer");
    vk_check(vkResetFences(device_, 1, &fence_), name_ + ": vkResetFences");
    VkSubmitInfo si{VK_STRUCTURE_TYPE_SUBMIT_INFO};
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd_;
    vk_check(vkQueueSubmit(queue_, 1, &si, fence_), name_ + ": vkQueueSubmit");
    vk_check(vkWaitForFences(device_, 1, &fence_, VK_TRUE, UINT64_MAX), name_ + ": vkWaitForFences");
  }

  // The timestamp query pool (VK_NULL_HANDLE where the queue has no timer), and the milliseconds between
  // its two timestamps written by the last submit().
  VkQueryPool timestamps() const { return timestamps_; }
  double timestamp_ms() const {
    uint64_t t[2] = {0, 0};
    if (vkGetQueryPoolResults(device_, timestamps_, 0, 2, sizeof t, t, sizeof t[0],
                              VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT) != VK_SUCCESS)
      return 0;
    uint64_t mask = timestamp_bits_ >= 64 ? ~0ull : (1ull << timestamp_bits_) - 1;
    return static_cast<double>((t[1] - t[0]) & mask) * props_.limits.timestampPeriod * 1e-6;  // ns → ms
  }

 private:
  int find_memory(uint32_t type_bits, VkMemoryPropertyFlags want) const {
    for (uint32_t i = 0; i < memory_.memoryTypeCount; i++)
      if ((type_bits & (1u << i)) && (memory_.memoryTypes[i].propertyFlags & want) == want) return static_cast<int>(i);
    return -1;
  }

  void bind_memory(VulkanBuffer& b, VkMemoryPropertyFlags want) {
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device_, b.buffer, &req);
    int type = find_memory(req.memoryTypeBits, want);
    if (type < 0) throw std::runtime_error(name_ + ": no memory type for a " + std::to_string(b.size) + "-byte buffer");
    VkMemoryAllocateInfo mai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    mai.allocationSize = req.size;
    mai.memoryTypeIndex = static_cast<uint32_t>(type);
    vk_check(vkAllocateMemory(device_, &mai, nullptr, &b.memory),
             name_ + ": allocating " + std::to_string(b.size) + " bytes");
    vk_check(vkBindBufferMemory(device_, b.buffer, b.memory, 0), name_ + ": vkBindBufferMemory");
  }

  void with_staging(size_t bytes, const std::function<void(VulkanBuffer&)>& use) {
    VulkanBuffer* s = new VulkanBuffer;
    s->size = bytes;
    try {
      VkBufferCreateInfo bci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
      bci.size = bytes;
      bci.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT;
      vk_check(vkCreateBuffer(device_, &bci, nullptr, &s->buffer), name_ + ": vkCreateBuffer (staging)");
      bind_memory(*s, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
      vk_check(vkMapMemory(device_, s->memory, 0, VK_WHOLE_SIZE, 0, &s->mapped), name_ + ": vkMapMemory (staging)");
      use(*s);
    } catch (...) {
      release(s);
      throw;
    }
    release(s);
  }

  void release(VulkanBuffer* b) {
    if (b->mapped) vkUnmapMemory(device_, b->memory);
    if (b->buffer) vkDestroyBuffer(device_, b->buffer, nullptr);
    if (b->memory) vkFreeMemory(device_, b->memory, nullptr);
    delete b;
  }

  std::string name_;
  VkPhysicalDevice physical_;
  VkPhysicalDeviceProperties props_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  VkCommandPool pool_ = VK_NULL_HANDLE;
  VkCommandBuffer cmd_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkQueryPool timestamps_ = VK_NULL_HANDLE;
  uint32_t timestamp_bits_ = 0;
  int direct_type_ = -1;
  bool has_8bit_ = false;
  bool has_inf_nan_ = false;
};

VulkanProgram::VulkanProgram(VulkanDevice& dev, const ir::Kernel& kernel, const std::vector<uint32_t>& spirv)
    : dev_(dev), name_(kernel.name), num_buffers_(kernel.globals.size()), grid_(glsl_renderer().grid(kernel)) {
  VkDevice vk = dev.vk();
  const std::string what = dev.name() + ": kernel " + name_ + ": ";
  try {
    VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smi.codeSize = spirv.size() * sizeof(uint32_t);
    smi.pCode = spirv.data();
    vk_check(vkCreateShaderModule(vk, &smi, nullptr, &module_), what + "vkCreateShaderModule");

    std::vector<VkDescriptorSetLayoutBinding> bindings(num_buffers_);
    for (size_t i = 0; i < num_buffers_; i++) {
      bindings[i].binding = static_cast<uint32_t>(i);
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dli{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    dli.bindingCount = static_cast<uint32_t>(bindings.size());
    dli.pBindings = bindings.data();
    vk_check(vkCreateDescriptorSetLayout(vk, &dli, nullptr, &set_layout_), what + "vkCreateDescriptorSetLayout");
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &set_layout_;
    vk_check(vkCreatePipelineLayout(vk, &pli, nullptr, &layout_), what + "vkCreatePipelineLayout");

    // the workgroup size, as specialization constants 0..2 (local_size_x_id = 0, ... in the GLSL)
    VkSpecializationMapEntry entries[3];
    for (uint32_t d = 0; d < 3; d++) entries[d] = {d, d * 4u, 4};
    VkSpecializationInfo spec{3, entries, sizeof grid_.local, grid_.local};
    VkComputePipelineCreateInfo cpi{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cpi.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    cpi.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cpi.stage.module = module_;
    cpi.stage.pName = "main";
    cpi.stage.pSpecializationInfo = &spec;
    cpi.layout = layout_;
    vk_check(vkCreateComputePipelines(vk, VK_NULL_HANDLE, 1, &cpi, nullptr, &pipeline_), what + "vkCreateComputePipelines");

    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(std::max<size_t>(1, num_buffers_))};
    VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = 1;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &size;
    vk_check(vkCreateDescriptorPool(vk, &dpi, nullptr, &pool_), what + "vkCreateDescriptorPool");
    VkDescriptorSetAllocateInfo dsi{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dsi.descriptorPool = pool_;
    dsi.descriptorSetCount = 1;
    dsi.pSetLayouts = &set_layout_;
    vk_check(vkAllocateDescriptorSets(vk, &dsi, &set_), what + "vkAllocateDescriptorSets");
  } catch (...) {
    destroy();  // the destructor does not run for a constructor that throws
    throw;
  }
}

VulkanProgram::~VulkanProgram() { destroy(); }

void VulkanProgram::destroy() {
  VkDevice vk = dev_.vk();
  if (pool_) vkDestroyDescriptorPool(vk, pool_, nullptr);
  if (pipeline_) vkDestroyPipeline(vk, pipeline_, nullptr);
  if (layout_) vkDestroyPipelineLayout(vk, layout_, nullptr);
  if (set_layout_) vkDestroyDescriptorSetLayout(vk, set_layout_, nullptr);
  if (module_) vkDestroyShaderModule(vk, module_, nullptr);
  pool_ = VK_NULL_HANDLE, pipeline_ = VK_NULL_HANDLE, layout_ = VK_NULL_HANDLE, set_layout_ = VK_NULL_HANDLE;
  module_ = VK_NULL_HANDLE;
}

double VulkanProgram::launch(const std::vector<Buffer*>& buffers) {
  if (buffers.size() != num_buffers_)
    throw std::invalid_argument(dev_.name() + ": kernel " + name_ + " takes " + std::to_string(num_buffers_) +
                                " buffers, got " + std::to_string(buffers.size()));
  // the previous launch has finished (submit waits), so the set can be rewritten in place
  std::vector<VkDescriptorBufferInfo> infos(num_buffers_);
  std::vector<VkWriteDescriptorSet> writes(num_buffers_);
  for (size_t i = 0; i < num_buffers_; i++) {
    infos[i] = {static_cast<VulkanBuffer*>(buffers[i]->handle)->buffer, 0, VK_WHOLE_SIZE};
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set_;
    writes[i].dstBinding = static_cast<uint32_t>(i);
    writes[i].descriptorCount = 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(dev_.vk(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  VkQueryPool ts = dev_.timestamps();
  auto t0 = std::chrono::steady_clock::now();
  dev_.submit([&](VkCommandBuffer cmd) {
    if (ts) {
      vkCmdResetQueryPool(cmd, ts, 0, 2);
      vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, ts, 0);
    }
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline_);
    vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout_, 0, 1, &set_, 0, nullptr);
    vkCmdDispatch(cmd, grid_.groups[0], grid_.groups[1], grid_.groups[2]);
    if (ts) vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, ts, 1);
  });
  if (ts) return dev_.timestamp_ms();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<DeviceRegistry::Offer> enumerate_vulkan() {
  VkInstance inst = instance();
  uint32_t n = 0;
  vk_check(vkEnumeratePhysicalDevices(inst, &n, nullptr), "vkEnumeratePhysicalDevices");
  if (n == 0) throw std::runtime_error("no Vulkan device found: install a Vulkan driver, e.g. mesa-vulkan-drivers");
  std::vector<VkPhysicalDevice> pds(n);
  vkEnumeratePhysicalDevices(inst, &n, pds.data());
  std::vector<DeviceRegistry::Offer> offers;
  for (VkPhysicalDevice pd : pds) {
    if (compute_queue_family(pd) < 0) continue;
    VkPhysicalDeviceProperties base;
    vkGetPhysicalDeviceProperties(pd, &base);
    VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
    VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    if (base.apiVersion >= VK_API_VERSION_1_2) subgroup.pNext = &driver;  // driver properties: core in 1.2
    VkPhysicalDeviceProperties2 props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
    props.pNext = &subgroup;
    vkGetPhysicalDeviceProperties2(pd, &props);
    VkPhysicalDeviceMemoryProperties mem;
    vkGetPhysicalDeviceMemoryProperties(pd, &mem);

    DeviceProperties p;
    p.name = "VULKAN:" + std::to_string(offers.size());
    p.backend = "VULKAN";
    p.description = base.deviceName;
    p.vendor = vendor_name(base.vendorID);
    p.driver = "Vulkan " + std::to_string(VK_API_VERSION_MAJOR(base.apiVersion)) + "." +
               std::to_string(VK_API_VERSION_MINOR(base.apiVersion)) + "." +
               std::to_string(VK_API_VERSION_PATCH(base.apiVersion));
    if (base.apiVersion >= VK_API_VERSION_1_2) p.driver += std::string(", ") + driver.driverName + " " + driver.driverInfo;
    for (uint32_t h = 0; h < mem.memoryHeapCount; h++)
      if (mem.memoryHeaps[h].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) p.memory_bytes += mem.memoryHeaps[h].size;
    p.max_workgroup_size = base.limits.maxComputeWorkGroupInvocations;
    p.local_memory_bytes = base.limits.maxComputeSharedMemorySize;
    p.subgroup_size = subgroup.subgroupSize;
    if (!supports_8bit_storage(pd)) p.note = "no 8-bit storage: kernels with bool buffers cannot run";
    if (!supports_inf_nan_preserve(pd))
      p.note += std::string(p.note.empty() ? "" : "; ") + "infinities and NaNs may not survive arithmetic";
    std::string name = p.name;
    offers.push_back({p, [name, pd] { return std::make_unique<VulkanDevice>(name, pd); }});
  }
  return offers;
}

const bool registered = DeviceRegistry::add_provider("VULKAN", enumerate_vulkan);

}  // namespace
}  // namespace ts
