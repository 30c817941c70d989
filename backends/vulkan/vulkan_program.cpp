#include "vulkan/vulkan_program.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>

#include "vulkan/glsl_renderer.h"
#include "vulkan/vulkan_device.h"
#include "vulkan/vulkan_instance.h"

namespace ts {

VulkanProgram::VulkanProgram(VulkanDevice& dev, const ir::Kernel& kernel, const std::vector<uint32_t>& spirv)
    : dev_(dev), name_(kernel.name), num_buffers_(kernel.globals.size()), grid_(glsl_renderer().grid(kernel)) {
  VkDevice vk = dev.vk();
  const std::string what = dev.name() + ": kernel " + name_ + ": ";
  try {
    VkShaderModuleCreateInfo smi{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    smi.codeSize = spirv.size() * sizeof(uint32_t);
    smi.pCode = spirv.data();
    vk::check(vkCreateShaderModule(vk, &smi, nullptr, &module_), what + "vkCreateShaderModule");

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
    vk::check(vkCreateDescriptorSetLayout(vk, &dli, nullptr, &set_layout_), what + "vkCreateDescriptorSetLayout");
    VkPipelineLayoutCreateInfo pli{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &set_layout_;
    vk::check(vkCreatePipelineLayout(vk, &pli, nullptr, &layout_), what + "vkCreatePipelineLayout");

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
    vk::check(vkCreateComputePipelines(vk, VK_NULL_HANDLE, 1, &cpi, nullptr, &pipeline_), what + "vkCreateComputePipelines");

    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, static_cast<uint32_t>(std::max<size_t>(1, num_buffers_))};
    VkDescriptorPoolCreateInfo dpi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    dpi.maxSets = 1;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &size;
    vk::check(vkCreateDescriptorPool(vk, &dpi, nullptr, &pool_), what + "vkCreateDescriptorPool");
    VkDescriptorSetAllocateInfo dsi{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
    dsi.descriptorPool = pool_;
    dsi.descriptorSetCount = 1;
    dsi.pSetLayouts = &set_layout_;
    vk::check(vkAllocateDescriptorSets(vk, &dsi, &set_), what + "vkAllocateDescriptorSets");
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

}  // namespace ts
