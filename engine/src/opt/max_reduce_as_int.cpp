// A float max-reduction runs on integer keys. The max must propagate NaN (torch.max does), so the
// renderers write it as `(a != a || a > b) ? a : b`. C compilers don't recognize that select as a
// reduction and leave the loop scalar: gcc 12 runs a 4096-wide row max at about one element per cycle.
// An integer max reduction (`a > b ? a : b` on int32) is vectorized everywhere (AVX-512 vpmaxsd).
//
// IEEE floats order like sign-magnitude integers: for the float bits b (as int32),
//
//   key(b) = b                  when b >= 0 (positive floats: larger bits, larger value)
//   key(b) = -1 - (b + 2^31)    when b < 0  (negative floats: flip the magnitude so larger is larger)
//
// is monotonic: x < y  ⇔  key(x) < key(y), with -0.0 just below +0.0. NaN gets the largest key (that of
// the quiet NaN 0x7fc00000, above +inf's), so a NaN anywhere wins the max, as in torch. key is its own
// inverse on int32, so after the loop the float is bitcast(key(acc)).
//
//   acc = -inf                           acc = key(-inf)                      (int32)
//   for r: acc = max(acc, x[r])    →     for r: acc = max(acc, key(x[r]))     (integer max)
//   … acc …                              … bitcast(key(acc)) …                (after the loop)
//
// Results are the same floats except that any NaN becomes the canonical quiet NaN and max(-0.0, +0.0)
// is +0.0 whatever the order. The keys use only +, negation, selects and comparisons, written so that no
// int32 overflows (checked by the UBSan build, scripts/test_sanitizers.sh).
#include <algorithm>
#include <cstring>

#include "opt/pass_manager.h"

namespace ts {
namespace {

using ir::Inst;
using ir::Op;
using ir::ValueId;

constexpr int32_t kQuietNaNKey = 0x7fc00000;  // key of the quiet NaN (a positive float's key is its bits)

int32_t key_of(float x) {
  if (x != x) return kQuietNaNKey;
  int32_t b;
  std::memcpy(&b, &x, 4);
  return b >= 0 ? b : static_cast<int32_t>(-1 - (static_cast<int64_t>(b) + 2147483648LL));
}

}  // namespace

void max_reduce_as_int(ir::Kernel& k) {
  // A kernel whose accumulators UPCAST_GLOBAL put side by side (one per neighbouring output) is
  // vectorized across them by the compiler's SLP vectorizer, which packs the NaN-propagating selects as
  // they are; the keys would only add work (cnn_digits' second max-pool over channels-last input:
  // 0.055 ms with keys, 0.028 ms without).
  for (const ir::AppliedOpt& o : k.opts)
    if (o.kind == ir::AppliedOpt::UpcastGlobal) return;
  // So is one whose reduce loops UPCAST_REDUCE left short (under kMinKeyedMaxTrips trips): its partial
  // accumulators vectorize the same way, and the keys' ten or so integer ops per element cost more than
  // a long loop's vector max would save (a max over rows of 12: 0.057 ms with keys, 0.006 without; rows
  // of 64: 0.22 against 0.14 ms; rows of 4096: 0.55 ms with keys against 2.3 ms without). On C a float max
  // over a loop of kMinKeyedMaxTrips or more is no longer upcast (upcast_reduce): it comes here whole.
  bool upcast_reduce = false;
  int64_t longest = 0;
  for (const ir::AppliedOpt& o : k.opts) upcast_reduce = upcast_reduce || o.kind == ir::AppliedOpt::UpcastReduce;
  for (const Inst& in : k.insts)
    if (in.op == Op::Range && in.arg == 0 && k.insts[in.src[0]].op == Op::Const)
      longest = std::max(longest, static_cast<int64_t>(k.insts[in.src[0]].value));
  if (upcast_reduce && longest < kMinKeyedMaxTrips) return;
  const std::vector<Inst> old = k.insts;
  std::vector<int> uses(old.size(), 0);
  for (const Inst& in : old)
    for (int s = 0; s < in.num_src; s++) uses[in.src[s]]++;
  // candidates: float32 accumulators updated in a loop as acc = max(acc, v)
  std::vector<bool> is_candidate(old.size(), false), is_update(old.size(), false);
  std::vector<ValueId> update_of(old.size(), ir::kNone);  // the MAX of an update → its accumulator
  // An accumulator updated in a reduce loop of under kMinKeyedMaxTrips trips keeps its float max: such a loop is
  // not vectorized either way, and the keys' integer ops cost more than the selects they replace (a
  // cross-entropy's row max over 10 classes inside its loss kernel: 7.7 us with keys, 4.6 without).
  std::vector<bool> short_loop(old.size(), false);
  std::vector<size_t> ranges;  // the loops around the current instruction, innermost last
  for (size_t i = 0; i < old.size(); i++) {
    const Inst& in = old[i];
    if (in.op == Op::Range) ranges.push_back(i);
    if (in.op == Op::EndRange && !ranges.empty()) ranges.pop_back();
    if (in.op != Op::Assign || ranges.empty() || old[in.src[0]].dtype != DType::Float32) continue;
    const Inst& x = old[in.src[1]];
    if (x.op == Op::Max && uses[in.src[1]] == 1 && (x.src[0] == in.src[0] || x.src[1] == in.src[0])) {
      is_candidate[in.src[0]] = true;
      is_update[in.src[1]] = true;
      update_of[in.src[1]] = in.src[0];
      const Inst& loop = old[ranges.back()];
      if (loop.arg == ir::kReduceLoop && old[loop.src[0]].op == Op::Const && old[loop.src[0]].value < kMinKeyedMaxTrips)
        short_loop[in.src[0]] = true;
    }
  }
  for (size_t i = 0; i < old.size(); i++) {
    if (short_loop[i]) is_candidate[i] = false;
    if (update_of[i] != ir::kNone && short_loop[update_of[i]]) is_update[i] = false;
  }
  bool any = false;
  for (bool c : is_candidate) any = any || c;
  if (!any) return;

  std::vector<Inst> out;
  std::vector<ValueId> remap(old.size(), ir::kNone);
  auto emit = [&](Op op, DType dt, std::initializer_list<ValueId> src, double value = 0) {
    Inst in{op, dt, static_cast<uint8_t>(src.size()), {ir::kNone, ir::kNone, ir::kNone}, 0, value};
    int s = 0;
    for (ValueId v : src) in.src[s++] = v;
    out.push_back(in);
    return static_cast<ValueId>(out.size() - 1);
  };
  auto cint = [&](double v) { return emit(Op::Const, DType::Int32, {}, v); };
  // key() on int32 bits: the same formula maps float bits to keys and keys back to float bits
  auto flip_negative = [&](ValueId bits) {
    // -1 - (b + 2^31) as (-(b + 1)) + INT32_MIN: no step overflows for b < 0. Both sides of a WHERE are
    // computed, so the negative side gets b = -1 in place of a non-negative b (an overflow there would be
    // undefined behaviour in the generated C, whose result the WHERE drops, but UB all the same).
    ValueId negative = emit(Op::CmpLt, DType::Bool, {bits, cint(0)});
    ValueId negative_bits = emit(Op::Where, DType::Int32, {negative, bits, cint(-1)});
    ValueId flipped = emit(Op::Add, DType::Int32,
                           {emit(Op::Neg, DType::Int32, {emit(Op::Add, DType::Int32, {negative_bits, cint(1)})}),
                            cint(-2147483648.0)});
    return emit(Op::Where, DType::Int32, {negative, flipped, bits});
  };
  auto key = [&](ValueId x) {  // float32 → key
    ValueId k_bits = flip_negative(emit(Op::Bitcast, DType::Int32, {x}));
    ValueId not_nan = emit(Op::CmpEq, DType::Bool, {x, x});
    return emit(Op::Where, DType::Int32, {not_nan, k_bits, cint(kQuietNaNKey)});
  };
  auto value = [&](ValueId acc) { return emit(Op::Bitcast, DType::Float32, {flip_negative(acc)}); };  // key → float32

  for (size_t i = 0; i < old.size(); i++) {
    Inst in = old[i];
    if (in.op == Op::DefineAcc && is_candidate[i]) {
      remap[i] = emit(Op::DefineAcc, DType::Int32, {}, key_of(static_cast<float>(in.value)));
      continue;
    }
    if (is_update[i]) {  // max(acc, v) → integer max(acc, key(v))
      const ValueId acc = update_of[i], v = in.src[0] == acc ? in.src[1] : in.src[0];
      // v may be another keyed accumulator (acc0 = max(acc0, acc1), the combine after an UPCAST_REDUCE by 2):
      // already a key, and the max of keys is the key of the max
      remap[i] = emit(Op::Max, DType::Int32, {remap[acc], is_candidate[v] ? remap[v] : key(remap[v])});
      continue;
    }
    if (in.op == Op::Assign && is_candidate[in.src[0]]) {
      ValueId v = is_update[in.src[1]] ? remap[in.src[1]] : key(remap[in.src[1]]);
      emit(Op::Assign, DType::Int32, {remap[in.src[0]], v});
      continue;
    }
    for (int s = 0; s < in.num_src; s++)  // any other read of a keyed accumulator reads its float value
      in.src[s] = is_candidate[in.src[s]] ? value(remap[in.src[s]]) : remap[in.src[s]];
    out.push_back(in);
    remap[i] = static_cast<ValueId>(out.size() - 1);
  }
  k.insts = std::move(out);
}

}  // namespace ts
