#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <stdexcept>

#include "tensorscope/device.h"

namespace ts {

namespace {
struct Entry {
  std::string name;
  DeviceRegistry::Factory factory;
  std::unique_ptr<Device> device;
};
struct Registry {
  std::vector<Entry> entries;
  std::vector<const Renderer*> renderers;
  int default_index = -1;
};
Registry& registry() {
  static Registry r;
  return r;
}
std::string canonical(std::string name) {
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (name.size() > 2 && name.compare(name.size() - 2, 2, ":0") == 0 && (name == "C:0" || name == "INTERP:0"))
    name.resize(name.size() - 2);
  return name;
}
}  // namespace

Buffer::~Buffer() {
  if (device && handle) device->free(handle, nbytes());
}

bool DeviceRegistry::add(const std::string& name, Factory factory) {
  registry().entries.push_back({canonical(name), std::move(factory), nullptr});
  return true;
}

bool DeviceRegistry::add_renderer(const Renderer* renderer) {
  registry().renderers.push_back(renderer);
  return true;
}

std::vector<const Renderer*> DeviceRegistry::renderers() { return registry().renderers; }

int DeviceRegistry::index(const std::string& name) {
  std::string want = canonical(name);
  auto& es = registry().entries;
  for (size_t i = 0; i < es.size(); i++) {
    if (es[i].name != want) continue;
    if (!es[i].device) es[i].device = es[i].factory();
    return static_cast<int>(i);
  }
  std::string known;
  for (auto& e : es) known += (known.empty() ? "" : ", ") + e.name;
  throw std::invalid_argument("unknown device '" + name + "': expected one of " + known);
}

Device& DeviceRegistry::at(int index) {
  auto& e = registry().entries.at(index);
  if (!e.device) e.device = e.factory();
  return *e.device;
}

std::vector<std::string> DeviceRegistry::names() {
  std::vector<std::string> out;
  for (auto& e : registry().entries) out.push_back(e.name);
  return out;
}

int DeviceRegistry::default_index() {
  Registry& r = registry();
  if (r.default_index < 0) {
    const char* env = std::getenv("TENSORSCOPE_DEVICE");
    r.default_index = index(env && *env ? env : "C");
  }
  return r.default_index;
}

void DeviceRegistry::set_default(const std::string& name) { registry().default_index = index(name); }

std::shared_ptr<Buffer> allocate_buffer(int device_index, DType dtype, int64_t numel) {
  auto b = std::make_shared<Buffer>();
  b->device = &DeviceRegistry::at(device_index);
  b->device_index = device_index;
  b->dtype = dtype;
  b->numel = numel;
  size_t bytes = std::max<size_t>(b->nbytes(), 1);
  b->handle = b->device->alloc(bytes);
  return b;
}

}  // namespace ts
