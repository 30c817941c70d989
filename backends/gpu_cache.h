// The on-disk cache of compiled GPU programs (OpenCL binaries), next to the C backend's shared objects:
//   $TENSORSCOPE_CACHE/<backend>, else $XDG_CACHE_HOME/tensorscope/<backend>, else ~/.cache/tensorscope/<backend>.
// Entries are keyed by a hash of everything that decides the binary (device, driver version, options,
// source), so a stale entry is never found; files appear atomically (write, then rename), so concurrent
// processes never read half a file.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

namespace ts::gpu {

class ProgramCache {
 public:
  explicit ProgramCache(const std::string& backend);
  // The file name for (kernel name, key text): "<kernel>_<hash of key>.bin", where <kernel> is
  // ts::file_stem(kernel) (a long name is shortened with a hash; runtime/cache_file.h).
  std::string path(const std::string& kernel, const std::string& key) const;
  std::optional<std::string> read(const std::string& path) const;
  // Best effort: a cache that cannot be written only costs the next run a compile.
  void write(const std::string& path, const std::string& bytes) const;

 private:
  std::string dir_;
};

}  // namespace ts::gpu
