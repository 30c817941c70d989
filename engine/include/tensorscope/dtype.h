// Data types of tensors and kernel IR values.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace ts {

// float32 is the working type; int32 and bool serve indices, labels and comparisons
// (as in tinygrad's dtypes.float32 / int32 / bool). float16 is IEEE binary16 (1 sign, 5 exponent,
// 10 mantissa bits) held in 2 bytes: a storage type — kernels compute in float32 and round each
// op's result to float16 (round to nearest, ties to even), as PyTorch does on CPU. Not every device
// supports it (DeviceProperties::float16).
enum class DType : uint8_t { Float32, Int32, Bool, Float16 };

inline size_t dtype_size(DType d) { return d == DType::Bool ? 1 : d == DType::Float16 ? 2 : 4; }
inline bool is_float(DType d) { return d == DType::Float32 || d == DType::Float16; }
inline const char* dtype_name(DType d) {
  switch (d) {
    case DType::Float32: return "float32";
    case DType::Int32: return "int32";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
  }
  return "?";
}
// Throws std::invalid_argument naming the string when it is not a known dtype name
// ("float32"/"float", "float16"/"half", "int32"/"int", "bool").
DType dtype_from_name(const std::string& name);

}  // namespace ts
