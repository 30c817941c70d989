// Data types of tensors and kernel IR values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ts {

// float32 is the working type; int32 and bool serve indices, labels and comparisons
// (as in tinygrad's dtypes.float32 / int32 / bool).
enum class DType : uint8_t { Float32, Int32, Bool };

inline size_t dtype_size(DType d) { return d == DType::Bool ? 1 : 4; }
inline bool is_float(DType d) { return d == DType::Float32; }
inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Int32: return "int32";
    case DType::Bool: return "bool";
  }
  return "?";
}
// Throws std::invalid_argument naming the string when it is not a known dtype name.
DType dtype_from_name(const std::string& name);

}  // namespace ts
