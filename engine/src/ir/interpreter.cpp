// The IR interpreter: executes a kernel one instruction at a time with C semantics in float32 / int32,
// using the same math functions as the C backend (ts_math.h, libm's sinf/sqrtf). It is the oracle for
// every backend. float16 values are held as floats; loads, stores and casts convert with ts_math.h's
// exact round-to-nearest-even conversions (tested against the compiler's _Float16 in test_half.cpp).
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "ir/ts_math.h"
#include "tensorscope/ir.h"

namespace ts::ir {
namespace {

union Slot {
  float f;
  int32_t i;
};

float as_float(Slot s, DType dt) { return is_float(dt) ? s.f : static_cast<float>(s.i); }
// int32 arithmetic wraps around (two's complement), as PyTorch's int32 tensors do; computed on uint32, where
// wrapping is defined in C++, rather than on int32, where an overflow is undefined behaviour.
int32_t wrap_add(int32_t a, int32_t b) { return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b)); }
int32_t wrap_mul(int32_t a, int32_t b) { return static_cast<int32_t>(static_cast<uint32_t>(a) * static_cast<uint32_t>(b)); }

int32_t as_int(Slot s, DType dt) { return is_float(dt) ? static_cast<int32_t>(s.f) : s.i; }

Slot load(const void* p, DType dt, int32_t idx) {
  Slot s{};
  switch (dt) {
    case DType::Float32: s.f = static_cast<const float*>(p)[idx]; break;
    case DType::Int32: s.i = static_cast<const int32_t*>(p)[idx]; break;
    case DType::Bool: s.i = static_cast<const uint8_t*>(p)[idx] != 0; break;
    case DType::Float16: s.f = ts_half_to_float(static_cast<const uint16_t*>(p)[idx]); break;
  }
  return s;
}

void store(void* p, DType dt, int32_t idx, Slot v) {
  switch (dt) {
    case DType::Float32: static_cast<float*>(p)[idx] = v.f; break;
    case DType::Int32: static_cast<int32_t*>(p)[idx] = v.i; break;
    case DType::Bool: static_cast<uint8_t*>(p)[idx] = v.i != 0; break;
    case DType::Float16: static_cast<uint16_t*>(p)[idx] = ts_float_to_half(v.f); break;
  }
}

Slot make_const(double v, DType dt) {
  Slot s{};
  if (dt == DType::Float32) s.f = static_cast<float>(v);
  else if (dt == DType::Float16) s.f = ts_round_half(static_cast<float>(v));
  else s.i = dt == DType::Bool ? (v != 0) : static_cast<int32_t>(v);
  return s;
}

float fmax_nan(float a, float b) { return (a != a || a > b) ? a : b; }  // NaN propagates, as torch.maximum

}  // namespace

// An index into local memory, checked: a pass that gets it wrong fails here rather than in a GPU's
// shared memory, where an out-of-bounds access is undefined.
static size_t local_index(const Inst& in, int32_t index, int64_t size) {
  if (index < 0 || index >= size)
    throw std::runtime_error(std::string(op_name(in.op)) + " of local memory at index " + std::to_string(index) +
                             ", outside its " + std::to_string(size) + " elements");
  return static_cast<size_t>(index);
}

// The result of a float ADD or MUL when an operand is NaN: the first NaN operand, as x86's SSE/AVX adds and
// multiplies return it (IEEE 754 leaves the NaN's sign and payload to the machine). Written out because a
// compiler may swap the operands of a commutative + or *: copysign(NaN, -1) = −NaN went through NaN + −NaN.
static float nan_first(float a, float b, float result) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  return result;
}

void interpret(const Kernel& k, const std::vector<void*>& buffers) {
  const size_t n = k.insts.size();
  std::vector<Slot> v(n);
  std::vector<void*> ptr(n, nullptr);
  std::vector<std::vector<Slot>> local_memory;  // one array per DEFINE_LOCAL (its elements are 4 bytes)
  std::vector<int64_t> local_size(n, -1);      // elements of the DEFINE_LOCAL at i, -1 for a global buffer
  std::vector<size_t> end_of(n, 0);  // RANGE → its END_RANGE
  {
    std::vector<size_t> open;
    for (size_t i = 0; i < n; i++) {
      if (k.insts[i].op == Op::Range) open.push_back(i);
      if (k.insts[i].op == Op::EndRange) {
        end_of[open.back()] = i;
        open.pop_back();
      }
    }
  }
  size_t pc = 0;
  while (pc < n) {
    const Inst& in = k.insts[pc];
    const DType dt = in.dtype;
    auto S = [&](int s) { return v[in.src[s]]; };
    auto SD = [&](int s) { return k.insts[in.src[s]].dtype; };
    Slot r{};
    switch (in.op) {
      case Op::DefineGlobal: ptr[pc] = buffers.at(in.arg); break;
      // workgroups run sequentially (ir.h): a local loop is a plain loop, local memory a plain array and
      // BARRIER nothing (every lane's writes are done before the code after the local loop reads them)
      case Op::DefineLocal:
        local_memory.emplace_back(static_cast<size_t>(in.arg), Slot{});
        ptr[pc] = local_memory.back().data();
        local_size[pc] = in.arg;
        break;
      case Op::Barrier: pc++; continue;
      case Op::DefineAcc: case Op::Const: r = make_const(in.value, dt); break;
      case Op::Range:
        r.i = 0;
        if (S(0).i <= 0) {
          v[pc] = r;
          pc = end_of[pc] + 1;
          continue;
        }
        break;
      case Op::EndRange: {
        ValueId rg = in.src[0];
        if (++v[rg].i < v[k.insts[rg].src[0]].i) {
          pc = rg + 1;
          continue;
        }
        pc++;
        continue;
      }
      case Op::Load:
        if (in.num_src == 3 && !S(2).i) r = make_const(0, dt);
        else if (local_size[in.src[0]] >= 0) r = static_cast<Slot*>(ptr[in.src[0]])[local_index(in, S(1).i, local_size[in.src[0]])];
        else r = load(ptr[in.src[0]], dt, S(1).i);
        break;
      case Op::Store:
        if (in.num_src == 4 && !S(3).i) {  // a gated store whose gate is false writes nothing (PADTO)
        } else if (local_size[in.src[0]] >= 0) {
          static_cast<Slot*>(ptr[in.src[0]])[local_index(in, S(1).i, local_size[in.src[0]])] = S(2);
        } else {
          store(ptr[in.src[0]], k.insts[in.src[0]].dtype, S(1).i, S(2));
        }
        pc++;
        continue;
      case Op::Assign: v[in.src[0]] = S(1); pc++; continue;
      case Op::Neg: if (dt == DType::Float32) r.f = -S(0).f; else r.i = wrap_mul(S(0).i, -1); break;
      case Op::Exp2: r.f = ts_exp2f(S(0).f); break;
      case Op::Log2: r.f = ts_log2f(S(0).f); break;
      case Op::Sin: r.f = ts_sinf(S(0).f); break;
      case Op::Sqrt: r.f = sqrtf(S(0).f); break;
      case Op::Recip: r.f = 1.0f / S(0).f; break;
      case Op::Bitcast: r = S(0); break;  // a Slot holds the 32 bits either way
      case Op::Cast:
        if (dt == DType::Float32) r.f = as_float(S(0), SD(0));
        else if (dt == DType::Float16) r.f = ts_round_half(as_float(S(0), SD(0)));
        else if (dt == DType::Int32) r.i = as_int(S(0), SD(0));
        else r.i = is_float(SD(0)) ? (S(0).f != 0.0f) : (S(0).i != 0);
        break;
      case Op::Add: if (dt == DType::Float32) r.f = nan_first(S(0).f, S(1).f, S(0).f + S(1).f); else r.i = wrap_add(S(0).i, S(1).i); break;
      case Op::Mul: if (dt == DType::Float32) r.f = nan_first(S(0).f, S(1).f, S(0).f * S(1).f); else r.i = wrap_mul(S(0).i, S(1).i); break;
      case Op::Max: if (dt == DType::Float32) r.f = fmax_nan(S(0).f, S(1).f); else r.i = std::max(S(0).i, S(1).i); break;
      case Op::CmpLt: r.i = is_float(SD(0)) ? (S(0).f < S(1).f) : (S(0).i < S(1).i); break;
      case Op::CmpEq: r.i = is_float(SD(0)) ? (S(0).f == S(1).f) : (S(0).i == S(1).i); break;
      case Op::IDiv:
        if (S(1).i == 0) throw std::runtime_error("integer division by zero in kernel " + k.name);
        r.i = S(0).i / S(1).i;
        break;
      case Op::Mod:
        if (S(1).i == 0) throw std::runtime_error("integer modulo by zero in kernel " + k.name);
        r.i = S(0).i % S(1).i;
        break;
      case Op::And: r.i = S(0).i && S(1).i; break;
      case Op::Where: r = S(0).i ? S(1) : S(2); break;
      case Op::MulAcc:  // one rounding, as the FMA instruction every backend emits for it
        if (dt == DType::Float32) r.f = std::fma(S(0).f, S(1).f, S(2).f); else r.i = wrap_add(wrap_mul(S(0).i, S(1).i), S(2).i);
        break;
    }
    v[pc] = r;
    pc++;
  }
}

}  // namespace ts::ir
