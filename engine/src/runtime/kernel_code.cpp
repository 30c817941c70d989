// KernelCode's listings in the languages of other devices, rendered when asked for (tensorscope/session.h).
#include <exception>

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
      applied(other.applied) {}

std::vector<std::string> KernelCode::languages() const {
  std::vector<std::string> out;
  auto add = [&](const std::string& language) {
    for (const std::string& l : out)
      if (l == language) return;
    out.push_back(language);
  };
  if (kernel)
    for (const Renderer* r : DeviceRegistry::renderers()) add(r->language());
  for (const SourceListing& s : sources) add(s.renderer);
  return out;
}

const SourceListing* KernelCode::listing(const std::string& language) const {
  for (const SourceListing& s : sources)
    if (s.renderer == language) return &s;
  if (!kernel) return nullptr;
  const Renderer* renderer = nullptr;
  for (const Renderer* r : DeviceRegistry::renderers())
    if (r->language() == language) renderer = r;
  if (!renderer) return nullptr;
  std::lock_guard<std::mutex> lock(rendered_->mutex);
  std::unique_ptr<const SourceListing>& slot = rendered_->by_language[language];
  if (!slot) {
    SourceListing made;
    try {
      made = renderer->render(*kernel);
    } catch (const std::exception& e) {  // a compiler the renderer runs (glslang, NVRTC) failed
      made = SourceListing{language, std::string("// could not render: ") + e.what() + "\n", {}};
    }
    made.renderer = language;
    slot = std::make_unique<const SourceListing>(std::move(made));
  }
  return slot.get();
}

}  // namespace ts
