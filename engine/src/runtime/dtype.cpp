#include <stdexcept>

#include "tensorscope/dtype.h"

namespace ts {

DType dtype_from_name(const std::string& name) {
  if (name == "float32" || name == "float") return DType::Float32;
  if (name == "float16" || name == "half") return DType::Float16;
  if (name == "int32" || name == "int") return DType::Int32;
  if (name == "bool") return DType::Bool;
  throw std::invalid_argument("unknown dtype '" + name + "': expected float32, float16, int32 or bool");
}

}  // namespace ts
