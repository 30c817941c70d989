// Files of the on-disk caches (the C backend's shared objects, the GPU program caches) and of exported
// listings: names that always fit the file system, and writes that never leave half a file.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace ts {

// 64-bit FNV-1a hash of `text` (stable across runs and machines; used in cache file names).
uint64_t fnv1a(std::string_view text);

// A file-name stem for a kernel name. Names of at most kMaxFileStem bytes are returned unchanged; a longer
// one (a kernel fusing 300 reductions is named r_64_64_64_... with thousands of characters, and Linux allows
// 255 bytes per file name) keeps its first kFileStemPrefix bytes, readable, and appends "_" and 16 hex
// digits of fnv1a(name), as tinygrad shortens long kernel names. Only file names use this: the full name is
// what every listing, event and panel shows.
inline constexpr size_t kMaxFileStem = 96;
inline constexpr size_t kFileStemPrefix = 64;
std::string file_stem(const std::string& name);

// ".<pid>.<n>": unique among the processes and threads writing one cache directory at the same time.
std::string unique_suffix();

// Writes `bytes` to `path` atomically: to a temporary file in the same directory, then rename(2), so a
// concurrent reader sees either no file or the whole file. Returns false (leaving no temporary behind)
// when the directory cannot be written.
bool write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace ts
