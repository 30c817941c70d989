// The primitive ops of the lazy graph (tinygrad's / zyx's set). Every high-level tensor operation is
// a composition of these; the GUI shows exactly this decomposition.
#pragma once
#include <cstdint>

namespace ts {

enum class Op : uint8_t {
  // leaves
  Buffer,  // realized data on a device
  Const,   // a constant broadcast to the node's shape
  // movement ops: never copy, they become index arithmetic in the kernel
  Reshape, Permute, Expand, Pad, Shrink, Flip,
  // unary ALU
  Neg, Exp2, Log2, Sin, Sqrt, Recip, Cast,
  // binary ALU
  Add, Mul, Max, CmpLt, CmpEq, IDiv, Mod,
  // ternary ALU
  Where,
  // reductions over `arg` axes; the reduced axes keep size 1
  ReduceSum, ReduceMax,
  // materialize here (ends a kernel)
  Contiguous,
  // the source's data on another device (the node's device); always its own schedule item
  Copy,
};

enum class OpClass : uint8_t { Load, Const, Movement, Elementwise, Reduce, Other };

inline OpClass op_class(Op op) {
  switch (op) {
    case Op::Buffer: return OpClass::Load;
    case Op::Const: return OpClass::Const;
    case Op::Reshape: case Op::Permute: case Op::Expand: case Op::Pad: case Op::Shrink: case Op::Flip:
      return OpClass::Movement;
    case Op::ReduceSum: case Op::ReduceMax: return OpClass::Reduce;
    case Op::Contiguous: case Op::Copy: return OpClass::Other;
    default: return OpClass::Elementwise;
  }
}

inline bool is_movement(Op op) { return op_class(op) == OpClass::Movement; }
inline bool is_alu(Op op) { return op_class(op) == OpClass::Elementwise; }
inline bool is_reduce(Op op) { return op_class(op) == OpClass::Reduce; }

const char* op_name(Op op);             // "ADD", "RESHAPE", "SUM", ...
const char* op_class_name(OpClass c);   // "load", "const", "movement", "elementwise", "reduce", "other"

}  // namespace ts
