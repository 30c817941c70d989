#include "vulkan/vulkan_instance.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <vector>

namespace ts::vk {

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

}  // namespace

void check(VkResult r, const std::string& what) {
  if (r != VK_SUCCESS) throw std::runtime_error(what + " failed: " + vk_result_name(r) + " (" + std::to_string(r) + ")");
}

VkInstance instance() {
  static VkInstance inst = [] {
    VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
    app.pApplicationName = "tensorscope";
    app.apiVersion = VK_API_VERSION_1_1;  // properties2, subgroup properties, storage-buffer features
    VkInstanceCreateInfo ci{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
    ci.pApplicationInfo = &app;
    VkInstance i = VK_NULL_HANDLE;
    check(vkCreateInstance(&ci, nullptr, &i), "vkCreateInstance");
    return i;
  }();
  return inst;
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

bool supports_float16(VkPhysicalDevice pd) {
  VkPhysicalDevice16BitStorageFeatures f16{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES};
  VkPhysicalDeviceShaderFloat16Int8Features arith{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES};
  f16.pNext = &arith;
  VkPhysicalDeviceFeatures2 f{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  f.pNext = &f16;
  vkGetPhysicalDeviceFeatures2(pd, &f);
  return f16.storageBuffer16BitAccess && arith.shaderFloat16;
}

DeviceProperties describe(VkPhysicalDevice pd, const std::string& name) {
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
  p.name = name;
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
  p.max_kernel_buffers = std::min(base.limits.maxPerStageDescriptorStorageBuffers, base.limits.maxDescriptorSetStorageBuffers);
  p.subgroup_size = subgroup.subgroupSize;
  if (!supports_8bit_storage(pd)) p.note = "no 8-bit storage: kernels with bool buffers cannot run";
  p.float16 = supports_float16(pd);
  if (!p.float16)
    p.note += std::string(p.note.empty() ? "" : "; ") + "no storageBuffer16BitAccess/shaderFloat16: float16 unsupported";
  if (!supports_inf_nan_preserve(pd))
    p.note += std::string(p.note.empty() ? "" : "; ") + "infinities and NaNs may not survive arithmetic";
  return p;
}

}  // namespace ts::vk
