// KernelCode's listings in the languages of other devices, rendered when asked for (tensorscope/session.h).
#include <exception>
#include <stdexcept>

#include "tensorscope/device.h"
#include "tensorscope/ir.h"
#include "tensorscope/session.h"

namespace ts {

KernelCode::KernelCode(const KernelCode& other)
    : ir(other.ir),
      sources(other.sources),
      kernel(other.kernel),
      device_renderer(other.device_renderer),
      plan(other.plan),
      plan_from(other.plan_from),
      applied(other.applied) {
  std::lock_guard<std::mutex> lock(other.rendered_->mutex);
  rendered_->read_kernel = other.rendered_->read_kernel;
  rendered_->read_kernel_result = other.rendered_->read_kernel_result;
  rendered_->read_kernel_error = other.rendered_->read_kernel_error;
}

std::vector<std::string> KernelCode::languages() const {
  std::vector<std::string> out;
  auto add = [&](const std::string& language) {
    for (const std::string& l : out)
      if (l == language) return;
    out.push_back(language);
  };
  if (has_kernel_ir())
    for (const Renderer* r : DeviceRegistry::renderers()) add(r->language());
  for (const SourceListing& s : sources) add(s.renderer);
  return out;
}

const SourceListing* KernelCode::listing(const std::string& language) const {
  for (const SourceListing& s : sources)
    if (s.renderer == language) return &s;
  if (!has_kernel_ir()) return nullptr;
  const Renderer* renderer = nullptr;
  for (const Renderer* r : DeviceRegistry::renderers())
    if (r->language() == language) renderer = r;
  if (!renderer) return nullptr;
  const std::shared_ptr<const ir::Kernel> k = kernel_ir();  // before the lock: it takes it too
  std::lock_guard<std::mutex> lock(rendered_->mutex);
  std::unique_ptr<const SourceListing>& slot = rendered_->by_language[language];
  if (!slot) {
    SourceListing made;
    try {
      if (!k) throw std::runtime_error("the recording's kernel IR is damaged: " + rendered_->read_kernel_error);
      made = renderer->render(*k);
    } catch (const std::exception& e) {  // a compiler the renderer runs (glslang, NVRTC) failed
      made = SourceListing{language, std::string("// could not render: ") + e.what() + "\n", {}};
    }
    made.renderer = language;
    slot = std::make_unique<const SourceListing>(std::move(made));
  }
  return slot.get();
}

}  // namespace ts
