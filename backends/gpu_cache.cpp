#include "gpu_cache.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "runtime/cache_file.h"

namespace ts::gpu {

namespace fs = std::filesystem;

ProgramCache::ProgramCache(const std::string& backend) {
  fs::path dir;
  if (const char* d = std::getenv("TENSORSCOPE_CACHE"); d && *d) dir = fs::path(d);
  else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) dir = fs::path(x) / "tensorscope";
  else if (const char* h = std::getenv("HOME"); h && *h) dir = fs::path(h) / ".cache" / "tensorscope";
  else dir = fs::temp_directory_path() / "tensorscope";
  dir_ = (dir / backend).string();
}

std::string ProgramCache::path(const std::string& kernel, const std::string& key) const {
  std::ostringstream name;
  name << ts::file_stem(kernel) << "_" << std::hex << ts::fnv1a(key) << ".bin";
  return (fs::path(dir_) / name.str()).string();
}

std::optional<std::string> ProgramCache::read(const std::string& path) const {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (bytes.empty()) return std::nullopt;
  return bytes;
}

void ProgramCache::write(const std::string& path, const std::string& bytes) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  ts::write_file_atomic(path, bytes);
}

}  // namespace ts::gpu
