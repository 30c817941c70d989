// The Vulkan instance and what a physical device offers: the queries the registry (to list devices) and
// the device (to enable features) share.
#pragma once
#include <vulkan/vulkan.h>

#include <string>

#include "tensorscope/device.h"

namespace ts::vk {

// Throws std::runtime_error "<what> failed: VK_ERROR_... (code)" unless r is VK_SUCCESS.
void check(VkResult r, const std::string& what);

// The process's instance (Vulkan 1.1), created on first use and never destroyed: devices live until exit.
VkInstance instance();

// The first queue family that runs compute shaders, or -1.
int compute_queue_family(VkPhysicalDevice pd);

// bool buffers hold one byte per element: shaders need storageBuffer8BitAccess (Vulkan 1.2 / KHR_8bit_storage).
bool supports_8bit_storage(VkPhysicalDevice pd);

// float16 buffers hold float16_t: shaders need storageBuffer16BitAccess (Vulkan 1.1) and, to round a float
// to float16, shaderFloat16 (Vulkan 1.2 / KHR_shader_float16_int8).
bool supports_float16(VkPhysicalDevice pd);

// Whether shaders may ask to keep IEEE infinities and NaNs in float32 (Vulkan 1.2 float controls).
bool supports_inf_nan_preserve(VkPhysicalDevice pd);

// Name, vendor, driver, memory and compute limits of `pd`, registered as `name` ("VULKAN:0").
DeviceProperties describe(VkPhysicalDevice pd, const std::string& name);

}  // namespace ts::vk
