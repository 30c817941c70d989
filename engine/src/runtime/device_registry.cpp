// The device registry: every device a backend offers, by name and by a small stable index (graph nodes
// store the index). Two ways in:
//   add(name, factory)          one device known at start-up (C, INTERP);
//   add_provider(backend, fn)   a backend whose devices are found by asking a driver (OpenCL, Vulkan,
//                               CUDA). The driver is asked on the first query that needs that backend,
//                               not when the library loads: starting an OpenCL platform or a Vulkan
//                               instance costs tens of milliseconds that a C-only script should not pay.
// Indices only ever grow (new devices are appended), so an index handed out stays valid.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stdexcept>

#include "tensorscope/device.h"

namespace ts {

namespace {

struct Entry {
  DeviceProperties properties;
  DeviceRegistry::Factory factory;
  std::unique_ptr<Device> device;
  std::string lost;  // why the device stopped working (DeviceLostError); "" while it works
  int rank = 0;  // display order: plain devices first, then backends in registration order
};
struct Backend {
  std::string name;
  DeviceRegistry::Provider provider;
  bool enumerated = false;
  std::string failure;  // why enumeration found nothing usable (shown when a name is unknown)
};
struct Registry {
  std::recursive_mutex mutex;  // the GUI thread lists devices while the script thread realizes
  std::vector<Entry> entries;
  std::vector<Backend> backends;
  std::vector<const Renderer*> renderers;
  int default_index = -1;
};
// Never destroyed: devices and their driver state must outlive every Buffer, including those a Python
// interpreter frees while the process exits, and driver libraries may already be unloaded by then.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

bool is_plain(const Registry& r, const std::string& name) {
  for (const Entry& e : r.entries)
    if (e.rank == 0 && e.properties.name == name) return true;
  return false;
}

// "c:0" → "C", "opencl" → "OPENCL:0", "Vulkan:1" → "VULKAN:1".
std::string canonical(const Registry& r, const std::string& name) {
  std::string n = upper(name);
  size_t colon = n.find(':');
  if (colon == std::string::npos) return is_plain(r, n) ? n : n + ":0";
  if (n.compare(colon, std::string::npos, ":0") == 0 && is_plain(r, n.substr(0, colon))) return n.substr(0, colon);
  return n;
}

// The host CPU as /proc/cpuinfo and sysconf describe it: the properties of C and INTERP.
DeviceProperties host_properties(const std::string& name) {
  DeviceProperties p;
  p.name = p.backend = name;
  std::ifstream cpuinfo("/proc/cpuinfo");
  for (std::string line; std::getline(cpuinfo, line);) {
    auto value = [&] { return line.substr(std::min(line.find(':') + 2, line.size())); };
    if (p.description.empty() && line.rfind("model name", 0) == 0) p.description = value();
    if (p.vendor.empty() && line.rfind("vendor_id", 0) == 0) p.vendor = value();
  }
  if (p.description.empty()) p.description = "host CPU";
  // the vector unit that -march=native compiles for (the C device's flags): AVX-512 has 32 registers of 64
  // bytes, AVX2 (and AVX) 16 of 32, SSE (and NEON, and anything else) 16 of 16
  p.vector_bytes = 16;
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) p.vector_bytes = 64;
  else if (__builtin_cpu_supports("avx2")) p.vector_bytes = 32;
#endif
  if (const char* forced = std::getenv("TENSORSCOPE_VECTOR_BYTES")) {
    const std::string v = forced;
    if (v == "16" || v == "32" || v == "64") p.vector_bytes = static_cast<uint32_t>(std::stoi(v));
    else if (!v.empty())
      throw std::invalid_argument("TENSORSCOPE_VECTOR_BYTES='" + v.substr(0, 20) + "': expected 16, 32 or 64 (bytes in a vector register)");
  }
  p.vector_registers = p.vector_bytes == 64 ? 32 : 16;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) p.memory_bytes = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  return p;
}

void enumerate(Registry& r, Backend& b, int rank) {
  if (b.enumerated) return;
  b.enumerated = true;  // set first: a provider that throws is not asked again
  try {
    for (DeviceRegistry::Offer& offer : b.provider()) {
      offer.properties.name = upper(offer.properties.name);
      if (offer.properties.backend.empty()) offer.properties.backend = b.name;
      r.entries.push_back({std::move(offer.properties), std::move(offer.factory), nullptr, "", rank});
    }
  } catch (const std::exception& e) {
    b.failure = e.what();
  }
}

void enumerate_all(Registry& r) {
  for (size_t i = 0; i < r.backends.size(); i++) enumerate(r, r.backends[i], static_cast<int>(i) + 1);
}

// The order names() lists: plain devices by name (C, INTERP), then backends as registered.
std::vector<size_t> display_order(const Registry& r) {
  std::vector<size_t> order(r.entries.size());
  for (size_t i = 0; i < order.size(); i++) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const Entry &ea = r.entries[a], &eb = r.entries[b];
    if (ea.rank != eb.rank) return ea.rank < eb.rank;
    return ea.rank == 0 && ea.properties.name < eb.properties.name;
  });
  return order;
}

Entry& entry(Registry& r, int index) {
  if (index < 0 || static_cast<size_t>(index) >= r.entries.size())
    throw std::out_of_range("device index " + std::to_string(index) + " out of range: " +
                            std::to_string(r.entries.size()) + " devices are registered");
  Entry& e = r.entries[index];
  if (!e.device) e.device = e.factory();
  return e;
}

}  // namespace

Buffer::~Buffer() {
  if (device && handle) device->free(handle, nbytes());
}

bool DeviceRegistry::add(const std::string& name, Factory factory) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  DeviceProperties p;
  p.name = p.backend = upper(name);
  r.entries.push_back({std::move(p), std::move(factory), nullptr, "", 0});
  return true;
}

bool DeviceRegistry::add_provider(const std::string& backend, Provider provider) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.backends.push_back({upper(backend), std::move(provider), false, ""});
  return true;
}

bool DeviceRegistry::add_renderer(const Renderer* renderer) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.renderers.push_back(renderer);
  return true;
}

std::vector<const Renderer*> DeviceRegistry::renderers() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return r.renderers;
}

int DeviceRegistry::index(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  std::string want = canonical(r, name);
  std::string backend = want.substr(0, want.find(':'));
  for (size_t i = 0; i < r.backends.size(); i++)
    if (r.backends[i].name == backend) enumerate(r, r.backends[i], static_cast<int>(i) + 1);
  for (size_t i = 0; i < r.entries.size(); i++) {
    if (r.entries[i].properties.name != want) continue;
    entry(r, static_cast<int>(i));  // create the device now: a driver failure surfaces at the name, not later
    return static_cast<int>(i);
  }
  enumerate_all(r);
  std::string known, why;
  for (size_t i : display_order(r)) known += (known.empty() ? "" : ", ") + r.entries[i].properties.name;
  for (const Backend& b : r.backends)
    if (b.name == backend && !b.failure.empty()) why = " (" + b.name + ": " + b.failure + ")";
  throw std::invalid_argument("unknown device '" + name + "': expected one of " + known + why);
}

Device& DeviceRegistry::at(int index) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  return *entry(r, index).device;
}

std::vector<std::string> DeviceRegistry::names() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  enumerate_all(r);
  std::vector<std::string> out;
  for (size_t i : display_order(r)) out.push_back(r.entries[i].properties.name);
  return out;
}

DeviceProperties DeviceRegistry::properties(int index) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (index < 0 || static_cast<size_t>(index) >= r.entries.size())
    throw std::out_of_range("device index " + std::to_string(index) + " out of range");
  Entry& e = r.entries[index];
  if (e.rank == 0 && e.properties.description.empty()) e.properties = host_properties(e.properties.name);
  return e.properties;
}

std::vector<DeviceProperties> DeviceRegistry::list() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  enumerate_all(r);
  std::vector<DeviceProperties> out;
  for (size_t i : display_order(r)) out.push_back(properties(static_cast<int>(i)));
  return out;
}

int DeviceRegistry::default_index() {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.default_index < 0) {
    const char* env = std::getenv("TENSORSCOPE_DEVICE");
    r.default_index = index(env && *env ? env : "C");
  }
  return r.default_index;
}

void DeviceRegistry::set_default(const std::string& name) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  r.default_index = index(name);
}

DeviceLostError::DeviceLostError(const std::string& device, const std::string& reason)
    : std::runtime_error("device " + device + " was lost (" + reason +
                         "): its buffers are gone; tensors realized on it cannot be read. Run on another device "
                         "(e.g. TENSORSCOPE_DEVICE=C, or Tensor.to(\"C\") on data you still have)"),
      device_(device),
      reason_(reason) {}

void DeviceRegistry::mark_lost(int index, const std::string& reason) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (index < 0 || static_cast<size_t>(index) >= r.entries.size()) return;
  std::string& lost = r.entries[index].lost;
  if (lost.empty()) lost = reason.empty() ? "the driver gave no reason" : reason;
}

std::string DeviceRegistry::lost_reason(int index) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (index < 0 || static_cast<size_t>(index) >= r.entries.size()) return "";
  return r.entries[index].lost;
}

void DeviceRegistry::require_not_lost(int index) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (index < 0 || static_cast<size_t>(index) >= r.entries.size()) return;
  const Entry& e = r.entries[index];
  if (!e.lost.empty()) throw DeviceLostError(e.properties.name, e.lost);
}

void read_buffer(const Buffer& buffer, void* host) {
  if (buffer.nbytes()) on_device(buffer.device_index, [&] { buffer.device->copy_out(host, buffer.handle, buffer.nbytes()); });
}

void write_buffer(Buffer& buffer, const void* host) {
  if (buffer.nbytes()) on_device(buffer.device_index, [&] { buffer.device->copy_in(buffer.handle, host, buffer.nbytes()); });
}

double launch_on_device(Program& program, const std::vector<Buffer*>& buffers) {
  return on_device(buffers.at(0)->device_index, [&] { return program.launch(buffers); });
}

namespace {
thread_local double compile_limit_ms = 0;
}  // namespace

double compile_time_limit_ms() { return compile_limit_ms; }
ScopedCompileLimit::ScopedCompileLimit(double ms) : previous_(compile_limit_ms) { compile_limit_ms = ms; }
ScopedCompileLimit::~ScopedCompileLimit() { compile_limit_ms = previous_; }

void require_dtype(int device_index, DType dtype) {
  if (dtype != DType::Float16) return;
  DeviceProperties p = DeviceRegistry::properties(device_index);
  if (!p.float16)
    throw std::runtime_error("float16 is not supported on device " + p.name + " (" + p.description + ")" +
                             (p.note.empty() ? "" : ": " + p.note) + "; use float32 there");
}

std::string format_bytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024 && u < 6) bytes /= 1024, u++;
  char buf[48];
  if (u == 0) std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  else std::snprintf(buf, sizeof buf, "%.1f %s", bytes, units[u]);
  return buf;
}

std::shared_ptr<Buffer> allocate_buffer(int device_index, DType dtype, int64_t numel, const std::vector<int64_t>* shape) {
  require_dtype(device_index, dtype);
  const double need = static_cast<double>(numel) * static_cast<double>(dtype_size(dtype));
  const DeviceProperties props = DeviceRegistry::properties(device_index);
  auto what = [&] {
    std::string dims;
    if (shape) {
      for (size_t i = 0; i < shape->size(); i++) dims += (i ? ", " : "") + std::to_string((*shape)[i]);
      if (shape->size() == 1) dims += ",";
    } else {
      dims = std::to_string(numel) + ",";
    }
    return "Tensor of shape (" + dims + ") " + dtype_name(dtype) + " needs " + format_bytes(need) + "; device " +
           props.name;
  };
  // ask for nothing the device cannot have: malloc may promise it (overcommit) and the kernel's first
  // touch would then kill the process instead of raising
  if (props.memory_bytes && need > static_cast<double>(props.memory_bytes))
    throw OutOfMemoryError(what() + " has " + format_bytes(static_cast<double>(props.memory_bytes)));
  auto b = std::make_shared<Buffer>();
  b->device = &DeviceRegistry::at(device_index);
  b->device_index = device_index;
  b->dtype = dtype;
  b->numel = numel;
  size_t bytes = std::max<size_t>(b->nbytes(), 1);
  try {
    b->handle = on_device(device_index, [&] { return b->device->alloc(bytes); });
  } catch (const DeviceLostError&) {
    b->device = nullptr;  // nothing to free
    throw;
  } catch (const std::bad_alloc&) {
    b->device = nullptr;  // nothing to free
    throw OutOfMemoryError(what() + " could not allocate it" +
                           (props.memory_bytes ? " (it has " + format_bytes(static_cast<double>(props.memory_bytes)) + ")"
                                               : std::string()));
  }
  return b;
}

}  // namespace ts
