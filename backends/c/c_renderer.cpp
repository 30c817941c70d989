#include "c/c_renderer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <tuple>

#include "opt/pass_manager.h"

namespace ts {

static CStyleLanguage c_language() {
  CStyleLanguage l;
  l.name = "C";
  l.prelude =
      "#include <stdint.h>\n"
      "#include \"ts_math.h\"  /* ts_exp2f, ts_log2f, ts_sinf: vectorizable polynomials; float16 <-> float conversions; fmaf, sqrtf */\n"
      "/* NaN-propagating max, as torch.maximum (fmaxf would drop the NaN): a when a is NaN or greater, else b. Written\n"
      "   as x86's maxss (a > b ? a : b: b when either is NaN) and a select on a's NaN, which gcc compiles without a\n"
      "   branch (maxss, a blend); as (a != a || a > b) ? a : b it branched on every comparison, and a 2x2 max-pool over\n"
      "   random values mispredicted half of them (32 x 6 x 28 x 28: 0.5 ms) */\n"
      "static inline float ts_fmaxf(float a, float b) {\n"
      "  const float m = a > b ? a : b;\n"
      "  return a != a ? a : m;\n"
      "}\n"
      "/* the same as a bit-mask select, for upcast kernels: gcc's SLP packs no group of the select form */\n"
      "static inline float ts_fmaxf_lanes(float a, float b) {\n"
      "  int32_t m = -(int32_t)((a != a) | (a > b));\n"
      "  return ts_bits_to_float((ts_float_to_bits(a) & m) | (ts_float_to_bits(b) & ~m));\n"
      "}\n"
      "/* WHERE on float32 as a bit mask (see CRenderer::alu) */\n"
      "static inline float ts_where_f32(_Bool c, float a, float b) {\n"
      "  int32_t m = -(int32_t)c;\n"
      "  return ts_bits_to_float((ts_float_to_bits(a) & m) | (ts_float_to_bits(b) & ~m));\n"
      "}\n"
      "/* the same as a select, for kernels without upcast outputs: gcc's loop vectorizer packs it, the mask\n"
      "   form from a float compare it may not (see CRenderer::alu_in) */\n"
      "static inline float ts_select_f32(_Bool c, float a, float b) { return c ? a : b; }\n"
      "/* x, with gcc told nothing of its value (a lane loop's row stride: CRenderer::kernel_prologue) */\n"
      "static inline int32_t ts_opaque_int(int32_t x) { __asm__(\"\" : \"+r\"(x)); return x; }\n"
      "/* TRANSPOSE_TILE: dst[j*dst_stride + i] = src[i*src_stride + j] for i, j < 8, in registers: eight row\n"
      "   loads, three rounds of shuffles (rows in pairs, pairs of pairs, halves), eight row stores. A source row\n"
      "   whose bit in `rows` is clear reads as zeros (a padded weight's rows past its own). */\n"
      "#if defined(__GNUC__) && !defined(__clang__)\n"
      "typedef float ts_f8 __attribute__((vector_size(32)));\n"
      "typedef int32_t ts_i8 __attribute__((vector_size(32)));\n"
      "static inline void ts_transpose_8x8(const float* src, int src_stride, float* dst, int dst_stride, int rows) {\n"
      "  ts_f8 r[8], t[8], u[8];\n"
      "  for (int i = 0; i < 8; i++) {\n"
      "    r[i] = (ts_f8){0};\n"
      "    if (rows >> i & 1) __builtin_memcpy(&r[i], src + i * src_stride, sizeof r[i]);\n"
      "  }\n"
      "  for (int i = 0; i < 8; i += 2) {  /* t[i]: columns 0 1 4 5 of rows i and i+1 interleaved; t[i+1]: 2 3 6 7 */\n"
      "    t[i] = __builtin_shuffle(r[i], r[i + 1], (ts_i8){0, 8, 1, 9, 4, 12, 5, 13});\n"
      "    t[i + 1] = __builtin_shuffle(r[i], r[i + 1], (ts_i8){2, 10, 3, 11, 6, 14, 7, 15});\n"
      "  }\n"
      "  for (int i = 0; i < 8; i += 4)  /* u[i + c]: column c of rows i..i+3, then column c + 4 of them */\n"
      "    for (int h = 0; h < 2; h++) {\n"
      "      u[i + 2 * h] = __builtin_shuffle(t[i + h], t[i + h + 2], (ts_i8){0, 1, 8, 9, 4, 5, 12, 13});\n"
      "      u[i + 2 * h + 1] = __builtin_shuffle(t[i + h], t[i + h + 2], (ts_i8){2, 3, 10, 11, 6, 7, 14, 15});\n"
      "    }\n"
      "  for (int c = 0; c < 4; c++) {  /* column c (and c + 4) of all eight rows: row c (c + 4) of dst */\n"
      "    ts_f8 lo = __builtin_shuffle(u[c], u[c + 4], (ts_i8){0, 1, 2, 3, 8, 9, 10, 11});\n"
      "    ts_f8 hi = __builtin_shuffle(u[c], u[c + 4], (ts_i8){4, 5, 6, 7, 12, 13, 14, 15});\n"
      "    __builtin_memcpy(dst + c * dst_stride, &lo, sizeof lo);\n"
      "    __builtin_memcpy(dst + (c + 4) * dst_stride, &hi, sizeof hi);\n"
      "  }\n"
      "}\n"
      "#else\n"
      "static inline void ts_transpose_8x8(const float* src, int src_stride, float* dst, int dst_stride, int rows) {\n"
      "  for (int j = 0; j < 8; j++)\n"
      "    for (int i = 0; i < 8; i++) dst[j * dst_stride + i] = (rows >> i & 1) ? src[i * src_stride + j] : 0.0f;\n"
      "}\n"
      "#endif\n"
      "/* Vector accumulators (CRenderer::vector_accumulators): 16, 8 or 4 lanes of an upcast group as one vector;\n"
      "   a lane's multiply-add rounds once, as fmaf */\n"
      "/* ts_vN_load keeps what it loaded in a register (GCC on x86, where the vector is one register): GCC folded a\n"
      "   vector that several multiply-adds of a register tile share into each of them as a memory operand, one load\n"
      "   per use (the 4 x 16 tile of d128's 32 x 32 x 32 attention matmuls: 12 loads for 8 FMAs a step of k, load-bound;\n"
      "   r_16_4_32_32_32 alone on Zen 3: 62 -> 92 GFLOP/s). The empty asm emits nothing; \"v\" is any vector register\n"
      "   (AVX-512's 32 too), and GCC still merges two loads of one address. */\n"
      "#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)\n"
      "#define TS_IN_REGISTER(v) __asm__(\"\" : \"+v\"(v))\n"
      "#else\n"
      "#define TS_IN_REGISTER(v) (void)(v)\n"
      "#endif\n"
      "#define TS_IN_REGISTER4(v) TS_IN_REGISTER(v)\n"
      "#if defined(__AVX__)\n"
      "#define TS_IN_REGISTER8(v) TS_IN_REGISTER(v)\n"
      "#else\n"
      "#define TS_IN_REGISTER8(v) (void)(v) /* two registers */\n"
      "#endif\n"
      "#if defined(__AVX512F__)\n"
      "#define TS_IN_REGISTER16(v) TS_IN_REGISTER(v)\n"
      "#else\n"
      "#define TS_IN_REGISTER16(v) (void)(v)\n"
      "#endif\n"
      "#define TS_VECTOR(n)                                                                                  \\\n"
      "  typedef float ts_v##n __attribute__((vector_size(4 * n)));                                           \\\n"
      "  typedef float ts_u##n __attribute__((vector_size(4 * n), aligned(4), may_alias)); /* unaligned */   \\\n"
      "  static inline ts_v##n ts_v##n##_load(const float* p) {                                             \\\n"
      "    ts_v##n v = *(const ts_u##n*)p;                                                                    \\\n"
      "    TS_IN_REGISTER##n(v);                                                                              \\\n"
      "    return v;                                                                                          \\\n"
      "  }                                                                                                    \\\n"
      "  static inline ts_v##n ts_v##n##_splat(float x) { return x - (ts_v##n){0}; } /* x - +0 is x, -0 too */  \\\n"
      "  typedef int32_t ts_m##n __attribute__((vector_size(4 * n))); /* a lane mask: -1 or 0 */             \\\n"
      "  static inline ts_v##n ts_v##n##_where(ts_m##n m, ts_v##n a, ts_v##n b) { /* ts_where_f32 lane by lane */ \\\n"
      "    return (ts_v##n)(((ts_m##n)a & m) | ((ts_m##n)b & ~m));                                            \\\n"
      "  }                                                                                                    \\\n"
      "  static inline ts_v##n ts_v##n##_max(ts_v##n a, ts_v##n b) { /* ts_fmaxf lane by lane */             \\\n"
      "    ts_m##n m = (a != a) | (a > b);                                                                    \\\n"
      "    return (ts_v##n)(((ts_m##n)a & m) | ((ts_m##n)b & ~m));                                            \\\n"
      "  }                                                                                                    \\\n"
      "  /* the lanes' max, the tree upcast_reduce combines them in ((0 1) (2 3)) ..., in vector registers */    \\\n"
      "  static inline float ts_v##n##_hmax(ts_v##n v) {                                                      \\\n"
      "    for (int s = 1; s < n; s *= 2) {                                                                   \\\n"
      "      ts_m##n other;                                                                                   \\\n"
      "      for (int i = 0; i < n; i++) other[i] = i ^ s;                                                    \\\n"
      "      v = ts_v##n##_max(v, __builtin_shuffle(v, other));                                               \\\n"
      "    }                                                                                                  \\\n"
      "    return v[0];                                                                                       \\\n"
      "  }\n"
      "TS_VECTOR(16)\n"
      "TS_VECTOR(8)\n"
      "TS_VECTOR(4)\n"
      "/* ts_vN_fma(a, b, c): a * b + c lane by lane, rounded once (fmaf). Where the CPU has FMA, GCC's builtins for\n"
      "   vfmadd: through the lane-by-lane fmaf loop GCC loaded a splat operand (x[i, k] of a register tile) as a\n"
      "   whole vector at the scalar's address and broadcast its first lane from the register, a load that crosses\n"
      "   a cache line in most trips (a 6 x 16 tile on Zen 3: 63 GFLOP/s; with the builtin, broadcast from memory:\n"
      "   82). */\n"
      "#define TS_FMA_LANES(n)                                                                               \\\n"
      "  static inline ts_v##n ts_v##n##_fma(ts_v##n a, ts_v##n b, ts_v##n c) {                              \\\n"
      "    for (int i = 0; i < n; i++) c[i] = fmaf(a[i], b[i], c[i]);                                         \\\n"
      "    return c;                                                                                          \\\n"
      "  }\n"
      "#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)\n"
      "static inline ts_v16 ts_v16_fma(ts_v16 a, ts_v16 b, ts_v16 c) {\n"
      "  return (ts_v16)__builtin_ia32_vfmaddps512_mask(a, b, c, (unsigned short)0xffff, 4); /* 4: the current rounding */\n"
      "}\n"
      "#else\n"
      "TS_FMA_LANES(16)\n"
      "#endif\n"
      "#if defined(__FMA__) && defined(__GNUC__) && !defined(__clang__)\n"
      "static inline ts_v8 ts_v8_fma(ts_v8 a, ts_v8 b, ts_v8 c) { return (ts_v8)__builtin_ia32_vfmaddps256(a, b, c); }\n"
      "static inline ts_v4 ts_v4_fma(ts_v4 a, ts_v4 b, ts_v4 c) { return (ts_v4)__builtin_ia32_vfmaddps(a, b, c); }\n"
      "#else\n"
      "TS_FMA_LANES(8)\n"
      "TS_FMA_LANES(4)\n"
      "#endif\n"
      "/* ts_vN_maskz_load(p, m): lane i is p[i] where bit i of m is set, else 0 (a row read through a pad view: its\n"
      "   lanes past the edge are not read). AVX-512's masked loads (GCC's builtins for _mm512_maskz_loadu_ps and\n"
      "   the 256- and 128-bit forms, without immintrin.h's parse time) do not touch a lane whose bit is clear. */\n"
      "#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__GNUC__) && !defined(__clang__)\n"
      "static inline ts_v16 ts_v16_maskz_load(const float* p, unsigned m) {\n"
      "  return (ts_v16)__builtin_ia32_loadups512_mask(p, (ts_v16){0}, (unsigned short)m);\n"
      "}\n"
      "static inline ts_v8 ts_v8_maskz_load(const float* p, unsigned m) { return (ts_v8)__builtin_ia32_loadups256_mask(p, (ts_v8){0}, (unsigned char)m); }\n"
      "static inline ts_v4 ts_v4_maskz_load(const float* p, unsigned m) { return (ts_v4)__builtin_ia32_loadups128_mask(p, (ts_v4){0}, (unsigned char)m); }\n"
      "#elif defined(__AVX__) && defined(__GNUC__) && !defined(__clang__)\n"
      "/* AVX's vmaskmovps (_mm256_maskload_ps) does not touch a lane whose mask's sign bit is clear either: bit i of m\n"
      "   becomes lane i's mask of -1 or 0. A vector of 16 (the AVX-512 target's code on an AVX2 CPU) is two of 8. */\n"
      "static inline ts_v8 ts_v8_maskz_load(const float* p, unsigned m) {\n"
      "  const ts_m8 lanes = (((ts_m8){0} + (int)m) & (ts_m8){1, 2, 4, 8, 16, 32, 64, 128}) != 0;\n"
      "  return (ts_v8)__builtin_ia32_maskloadps256((const ts_v8*)p, lanes);\n"
      "}\n"
      "static inline ts_v4 ts_v4_maskz_load(const float* p, unsigned m) {\n"
      "  const ts_m4 lanes = (((ts_m4){0} + (int)m) & (ts_m4){1, 2, 4, 8}) != 0;\n"
      "  return (ts_v4)__builtin_ia32_maskloadps((const ts_v4*)p, lanes);\n"
      "}\n"
      "static inline ts_v16 ts_v16_maskz_load(const float* p, unsigned m) {\n"
      "  const ts_v8 lo = ts_v8_maskz_load(p, m & 0xffu), hi = ts_v8_maskz_load(p + 8, m >> 8 & 0xffu);\n"
      "  ts_v16 v;\n"
      "  __builtin_memcpy(&v, &lo, sizeof lo);\n"
      "  __builtin_memcpy((char*)&v + sizeof lo, &hi, sizeof hi);\n"
      "  return v;\n"
      "}\n"
      "#else\n"
      "#define TS_MASKZ_LOAD(n)                                                                              \\\n"
      "  static inline ts_v##n ts_v##n##_maskz_load(const float* p, unsigned m) {                             \\\n"
      "    ts_v##n v;                                                                                         \\\n"
      "    for (int i = 0; i < n; i++) v[i] = (m >> i & 1) ? p[i] : 0.0f;                                     \\\n"
      "    return v;                                                                                          \\\n"
      "  }\n"
      "TS_MASKZ_LOAD(16)\n"
      "TS_MASKZ_LOAD(8)\n"
      "TS_MASKZ_LOAD(4)\n"
      "#endif\n"
      "/* ts_vN_select_bytes(c, x): lane i is x[i] where the bool c[i] is true, else +0 (a row of a bool mask selecting\n"
      "   what a sum adds): the n bools as a bit mask (AVX-512BW's vptestmb), then a masked move */\n"
      "#if defined(__AVX512F__) && defined(__AVX512VL__) && defined(__AVX512BW__) && defined(__GNUC__) && !defined(__clang__)\n"
      "typedef char ts_q16 __attribute__((vector_size(16)));\n"
      "static inline unsigned ts_bool_bits(const _Bool* c, int n) {\n"
      "  ts_q16 b = {0};\n"
      "  __builtin_memcpy(&b, c, n);\n"
      "  return __builtin_ia32_ptestmb128(b, b, (unsigned short)0xffff);\n"
      "}\n"
      "static inline ts_v16 ts_v16_maskz_mov(unsigned m, ts_v16 x) { return (ts_v16)__builtin_ia32_movaps512_mask(x, (ts_v16){0}, (unsigned short)m); }\n"
      "static inline ts_v8 ts_v8_maskz_mov(unsigned m, ts_v8 x) { return (ts_v8)__builtin_ia32_movaps256_mask(x, (ts_v8){0}, (unsigned char)m); }\n"
      "static inline ts_v4 ts_v4_maskz_mov(unsigned m, ts_v4 x) { return (ts_v4)__builtin_ia32_movaps128_mask(x, (ts_v4){0}, (unsigned char)m); }\n"
      "#else\n"
      "static inline unsigned ts_bool_bits(const _Bool* c, int n) {\n"
      "  unsigned m = 0;\n"
      "  for (int i = 0; i < n; i++) m |= (unsigned)c[i] << i;\n"
      "  return m;\n"
      "}\n"
      "/* lane i of x where bit i of m is set, else +0: the bits as lane masks of -1 or 0, and an and (vector code on any\n"
      "   target, where a select lane by lane would be scalar code without AVX-512) */\n"
      "static inline ts_v16 ts_v16_maskz_mov(unsigned m, ts_v16 x) {\n"
      "  const ts_m16 bit = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768};\n"
      "  return (ts_v16)((ts_m16)x & ((((ts_m16){0} + (int)m) & bit) != 0));\n"
      "}\n"
      "static inline ts_v8 ts_v8_maskz_mov(unsigned m, ts_v8 x) {\n"
      "  return (ts_v8)((ts_m8)x & ((((ts_m8){0} + (int)m) & (ts_m8){1, 2, 4, 8, 16, 32, 64, 128}) != 0));\n"
      "}\n"
      "static inline ts_v4 ts_v4_maskz_mov(unsigned m, ts_v4 x) {\n"
      "  return (ts_v4)((ts_m4)x & ((((ts_m4){0} + (int)m) & (ts_m4){1, 2, 4, 8}) != 0));\n"
      "}\n"
      "#endif\n"
      "#define TS_SELECT_BYTES(n)                                                                            \\\n"
      "  static inline ts_v##n ts_v##n##_select_bytes(const _Bool* c, ts_v##n x) { return ts_v##n##_maskz_mov(ts_bool_bits(c, n), x); }\n"
      "TS_SELECT_BYTES(16)\n"
      "TS_SELECT_BYTES(8)\n"
      "TS_SELECT_BYTES(4)\n"
      "/* ts_vN_load2(p): lane i is p[2i] (a row read at every other element: a stride-2 convolution's input), from two\n"
      "   loads of n neighbours, p[0 .. n-1] and p[n-1 .. 2n-2] (nothing past the last lane's element is read), and\n"
      "   ts_vN_even: the first's even and the second's odd elements. On AVX2 the 8 lanes are one vshufps within each\n"
      "   half and one vpermpd of the halves' pairs (as one shuffle of both, gcc wrote two vpermd and a blend).\n"
      "   ts_vN_maskz_load2(p, m): lane i is 0, and p[2i] not read, where bit i of m is clear: each lane's bit moved\n"
      "   to its element's place in its load, and a load whose lanes are all set, with an element read on its other\n"
      "   side (the ends of the buffer lie outside the two), a plain one. */\n"
      "static inline ts_v4 ts_v4_even(ts_v4 lo, ts_v4 hi) { return __builtin_shuffle(lo, hi, (ts_m4){0, 2, 5, 7}); }\n"
      "#if defined(__AVX__) && !defined(__AVX512VL__)\n"
      "typedef double ts_d4 __attribute__((vector_size(32)));\n"
      "typedef long long ts_l4 __attribute__((vector_size(32)));\n"
      "static inline ts_v8 ts_v8_even(ts_v8 lo, ts_v8 hi) {\n"
      "  const ts_v8 pairs = __builtin_shuffle(lo, hi, (ts_m8){0, 2, 9, 11, 4, 6, 13, 15});\n"
      "  return (ts_v8)__builtin_shuffle((ts_d4)pairs, (ts_l4){0, 2, 1, 3});\n"
      "}\n"
      "#else\n"
      "static inline ts_v8 ts_v8_even(ts_v8 lo, ts_v8 hi) { return __builtin_shuffle(lo, hi, (ts_m8){0, 2, 4, 6, 9, 11, 13, 15}); }\n"
      "#endif\n"
      "static inline ts_v16 ts_v16_even(ts_v16 lo, ts_v16 hi) {\n"
      "  return __builtin_shuffle(lo, hi, (ts_m16){0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31});\n"
      "}\n"
      "#define TS_LOAD2(n)                                                                                   \\\n"
      "  static inline ts_v##n ts_v##n##_load2(const float* p) { return ts_v##n##_even(ts_v##n##_load(p), ts_v##n##_load(p + n - 1)); } \\\n"
      "  static inline ts_v##n ts_v##n##_maskz_load2(const float* p, unsigned m) {                           \\\n"
      "    unsigned lo = 0, hi = 0, lo_all = 0, hi_all = 0;                                                  \\\n"
      "    for (int i = 0; i < n / 2; i++) lo |= (m >> i & 1u) << 2 * i, lo_all |= 1u << 2 * i;               \\\n"
      "    for (int i = n / 2; i < n; i++) hi |= (m >> i & 1u) << (2 * i - (n - 1)), hi_all |= 1u << (2 * i - (n - 1)); \\\n"
      "    const ts_v##n a = lo == lo_all && (hi & 2u) ? ts_v##n##_load(p) : ts_v##n##_maskz_load(p, lo);      \\\n"
      "    const ts_v##n b = hi == hi_all && lo ? ts_v##n##_load(p + n - 1) : ts_v##n##_maskz_load(p + n - 1, hi); \\\n"
      "    return ts_v##n##_even(a, b);                                                                       \\\n"
      "  }\n"
      "TS_LOAD2(16)\n"
      "TS_LOAD2(8)\n"
      "TS_LOAD2(4)\n"
      "/* THREADS: thread ts_core of ts_cores runs rows [TS_LO(n), TS_HI(n)) of the outermost global loop */\n"
      "#define TS_LO(n) ((int)(((long long)(n) * ts_core) / ts_cores))\n"
      "#define TS_HI(n) ((int)(((long long)(n) * (ts_core + 1)) / ts_cores))\n";
  l.exp2 = "ts_exp2f";
  l.log2 = "ts_log2f";
  l.sin = "ts_sinf";
  l.kernel_prefix = "void";
  l.buffer_qualifier = "restrict";
  return l;
}

CRenderer::CRenderer() : CStyleRenderer(c_language()) {}

// True for a kernel whose output axes were upcast (UPCAST_GLOBAL, REGISTER_TILE). Its reduce loop is
// written as groups of isomorphic statements that gcc's SLP vectorizer packs into vector registers;
// gcc's loop vectorizer would instead vectorize across the reduce loop itself and turn the loads into
// gathers (10-40x slower, measured on this machine), so it is switched off for such kernels. (An
// UPCAST_REDUCE kernel is the opposite case: only the loop vectorizer turns its partial sums into
// vector adds.)
static bool has_upcast_outputs(const ir::Kernel& k) {
  for (const ir::AppliedOpt& opt : k.opts)
    if (opt.kind == ir::AppliedOpt::UpcastGlobal || opt.kind == ir::AppliedOpt::RegisterTile) return true;
  return false;
}

// Whether the kernel is a few short rows, each a reduction and the row's outputs from it: no optimization applied,
// an outer global loop of at most kShortRowsMaxRows rows whose body holds loops of at most 16 trips and nothing
// deeper, at least one a reduce loop and one a global loop, and no EXP2, LOG2, SIN or SQRT (the loss's
// x + b - max(x + b) over rows of 10 classes: r_32_10_10). gcc unrolls the short loops and vectorizes the loop
// over the rows 16 rows at a time, gathering each element across rows, with an 8-wide and a scalar remainder for
// the thread's run-time bounds (TS_LO, TS_HI): 6.5 KB of machine code for 320 outputs. Run again and again it
// takes 0.16 us, but in a training step its code is out of the caches and the kernel took 3-6 us, most of it
// fetching code; without the loop vectorizer the function is 655 bytes (scalar rows) and took 0.4-2 us in the
// same steps (in-step medians, 1 thread, Zen 5, alternating builds: the MLP's r_128_10_10 2.9-3.3 -> 1.3-1.6 us,
// the GRU's r_32_10_10 2.8-3.3 -> 0.7-1.3, Caffe's r_64_10_10 3.7-4.1 -> 1.7-2.1). Warm, the scalar rows cost
// more per row (0.55 -> 0.70 us for 128 rows, 2.1 -> 3.1 for 512, 4.1 -> 7.9 for 1024), hence the bound on the
// rows. A transcendental keeps the vectorizer: it evaluates 16 rows' exponentials at once (the loss gradient
// E_320, its exponentials scalar under gcc's cheapest vectorizer cost model: 0.9 -> 2.3 us in the step), and so
// does a kernel an optimization pass has shaped for it.
constexpr int64_t kShortRowsMaxRows = 256;
static bool is_few_short_rows(const ir::Kernel& k) {
  if (!k.opts.empty()) return false;
  int depth = 0;
  bool outer = false, reduce = false, global = false;
  for (const ir::Inst& in : k.insts) {
    if (in.op == ir::Op::Exp2 || in.op == ir::Op::Log2 || in.op == ir::Op::Sin || in.op == ir::Op::Sqrt) return false;
    if (in.op == ir::Op::EndRange) depth--;
    if (in.op != ir::Op::Range) continue;
    const ir::Inst& bound = k.insts[in.src[0]];
    if (bound.op != ir::Op::Const) return false;
    const int64_t trips = static_cast<int64_t>(bound.value);
    if (++depth == 1) {
      if (outer || in.arg != ir::kGlobalLoop || trips > kShortRowsMaxRows) return false;  // one row loop
      outer = true;
    } else if (depth == 2 && trips <= 16) {
      (in.arg == ir::kReduceLoop ? reduce : global) = true;
    } else {
      return false;
    }
  }
  return reduce && global;
}

bool CRenderer::stages_strided_store_groups(const ir::Kernel& k) const { return has_upcast_outputs(k); }

// Whether one trip of a reduce loop loads what the next trip loads again: two loads of one buffer whose
// indices are the loop's stride apart (a convolution read in place, x[.., ow + kw + lane] for the lanes of a
// register tile: from kw to kw + 1, 31 of 32 lanes are the same elements). gcc's predictive commoning then
// keeps the elements in scalar registers from trip to trip, and the tile's lanes are assembled from scalars in
// every trip instead of loaded as vectors (16 -> 16 channels 3x3 on 32x32 images: 6.3 ms, 2.2 without it;
// other kernels lose up to 20% without it, so only these get the attribute).
static bool loads_overlap_across_trips(const ir::Kernel& k) {
  const std::vector<ir::Inst>& insts = k.insts;
  for (size_t r = 0; r < insts.size(); r++) {
    if (insts[r].op != ir::Op::Range || insts[r].arg != ir::kReduceLoop) continue;
    const size_t r_end = end_of_range(insts, r);
    std::map<std::pair<ir::ValueId, int64_t>, std::set<int64_t>> at;  // (buffer, stride) -> indices at trip 0
    for (size_t x = r + 1; x < r_end; x++) {
      if (insts[x].op != ir::Op::Load || insts[x].num_src > 2) continue;
      const int64_t i0 = eval_index(insts, insts[x].src[1], static_cast<ir::ValueId>(r), 0);
      const int64_t stride = eval_index(insts, insts[x].src[1], static_cast<ir::ValueId>(r), 1) - i0;
      if (stride != 0) at[{insts[x].src[0], stride}].insert(i0);
    }
    for (const auto& [key, indices] : at)
      for (int64_t i : indices)
        if (indices.count(i + key.second)) return true;
  }
  return false;
}

// Whether `range` is a lane loop (kLocalLoop: rows side by side, their accumulators in a local array) whose body has
// a float MAX or a transcendental: written for gcc's loop vectorizer, which if-converts ts_fmaxf's NaN select and
// ts_exp2f's clamps into vector blends. Left to gcc's defaults, a lane loop of 16 trips with a short body is
// unrolled completely before vectorization (cunrolli) and its 16 copies go to the SLP vectorizer, which packs no
// select; and the loop over a row's elements around it is unrolled and jammed by 2, which left the exponentials
// scalar. So such a lane loop is kept a loop (#pragma GCC unroll 1, loop_pragmas) and its kernel is compiled
// without unroll-and-jam (signature). The logsumexp over 256 rows of 11 (the max and the sum of exponentials, 16
// rows a lane loop), 1 thread, warm: 8.7-11 us left to gcc, 1.7 us with both, 2.3 us with only unroll-and-jam
// off (the max scalar), 8 us with only the pragma. Lane loops of plain sums (columns_as_lanes' column sums of a
// bias gradient) are left to gcc: fully unrolled, SLP packs their adds, and kept loops they took 1.3-1.8x as
// long (r_128_16_32: 1.4 -> 2.3 us); some kernels without lanes gain from unroll-and-jam (r_96_32_12: 1.6 -> 1.1 us).
static bool lane_loop_for_the_loop_vectorizer(const ir::Kernel& k, size_t range) {
  if (k.insts[range].op != ir::Op::Range || k.insts[range].arg != ir::kLocalLoop) return false;
  const size_t end = end_of_range(k.insts, range);
  for (size_t i = range + 1; i < end; i++) {
    const ir::Inst& in = k.insts[i];
    if ((in.op == ir::Op::Max && is_float(in.dtype)) || in.op == ir::Op::Exp2 || in.op == ir::Op::Log2 ||
        in.op == ir::Op::Sin || in.op == ir::Op::Sqrt)
      return true;
  }
  return false;
}

std::vector<std::string> CRenderer::loop_pragmas(const ir::Kernel& k, ir::ValueId range) const {
  if (!lane_loop_for_the_loop_vectorizer(k, range)) return {};
  return {"#pragma GCC unroll 1"};
}

// The kernel is a static function taking its buffers as restrict parameters, and the entry point the C
// device calls (`void NAME(void** bufs, int ts_core, int ts_cores)`, appended by render) passes bufs[i] as
// data<i>. gcc trusts restrict on parameters; on locals loaded from bufs[] it did not, and versioned each
// loop with run-time alias checks, up to 10 of them: a loop writing three outputs and reading four inputs
// (Adam's update of one parameter in one kernel) needs more and stayed scalar (1.03 ms, 0.16 vectorized).
std::string CRenderer::signature(const ir::Kernel& k) const {
  std::string s;
  if (has_upcast_outputs(k)) {
    const bool overlap = loads_overlap_across_trips(k);
    s += "/* UPCAST kernel: SLP-vectorized by gcc; its loop vectorizer would gather across the reduce loop";
    s += overlap ? ", and its\n   predictive commoning would keep the loads one trip shares with the next in scalar registers */\n"
                 : " */\n";
    s += std::string("__attribute__((optimize(\"no-tree-loop-vectorize\"") + (overlap ? ", \"no-predictive-commoning\"" : "") +
         ")))\n";
  }
  if (is_few_short_rows(k))
    s += "/* a few short rows: kept scalar (6.5 KB of vectorized code took longer to fetch than to run) */\n"
         "__attribute__((optimize(\"no-tree-loop-vectorize\")))\n";
  for (size_t i = 0; i < k.insts.size(); i++)
    if (lane_loop_for_the_loop_vectorizer(k, i)) {
      s += "/* lane loops for the loop vectorizer: no unroll-and-jam of the loops around them (lane_loop_for_the_loop_vectorizer) */\n"
           "__attribute__((optimize(\"no-loop-unroll-and-jam\")))\n";
      break;
    }
  // noinline: inlined into the entry point, its parameters' restrict no longer held for gcc's loop distribution,
  // which turned each short row of a copy into a call of libc's memmove (d128's E_16_512_32: 8,192 calls moving
  // 128 bytes each, 80 us alone); kept a function of its own, the row is a memcpy of a known 128 bytes, which
  // gcc expands into two vector moves (52 us), and a whole-buffer copy stays one call of memcpy. The call is
  // the entry point's tail jump.
  s += "__attribute__((noinline))\nstatic void " + k.name + "_kernel(\n";
  for (size_t i = 0; i < k.globals.size(); i++) {
    std::string t = buffer_type(k.globals[i].dtype);
    std::string cq = k.globals[i].is_output ? "" : "const ";
    s += "    " + cq + t + "* restrict data" + std::to_string(i) + ",  /* " + (k.globals[i].is_output ? "output" : "input") +
         ", " + std::to_string(k.globals[i].numel) + " elements */\n";
  }
  s += "    int ts_core, int ts_cores) {\n";
  return s;
}

SourceListing CRenderer::render(const ir::Kernel& k) const {
  SourceListing out = CStyleRenderer::render(k);
  // The outermost global loop (the first RANGE, if it is global) gets its bounds from the thread's
  // block: contiguous blocks keep each thread's stores in its own cache lines and vectorizable.
  for (size_t i = 0; i < k.insts.size(); i++) {
    if (k.insts[i].op != ir::Op::Range) continue;
    if (k.insts[i].arg != ir::kGlobalLoop) break;
    std::string var = "ridx" + std::to_string(i);
    std::string bound = std::to_string(static_cast<int64_t>(k.insts[k.insts[i].src[0]].value));
    std::string from = var + " = 0; " + var + " < " + bound + ";";
    std::string to = var + " = TS_LO(" + bound + "); " + var + " < TS_HI(" + bound + ");";
    size_t pos = out.code.find(from);
    if (pos != std::string::npos) out.code.replace(pos, from.size(), to);
    break;
  }
  out.code += "/* the entry point the C device calls: bufs[i] is data<i> */\nvoid " + k.name +
              "(void** bufs, int ts_core, int ts_cores) {\n  " + k.name + "_kernel(";
  for (size_t i = 0; i < k.globals.size(); i++) out.code += "bufs[" + std::to_string(i) + "], ";
  out.code += "ts_core, ts_cores);\n}\n";
  return out;
}

// The LOADs a value depends on, within the kernel (a DFS over the operands).
static std::set<ir::ValueId> loads_under(const ir::Kernel& k, ir::ValueId root) {
  std::set<ir::ValueId> loads, seen;
  std::vector<ir::ValueId> todo{root};
  while (!todo.empty()) {
    const ir::ValueId v = todo.back();
    todo.pop_back();
    if (v == ir::kNone || !seen.insert(v).second) continue;
    const ir::Inst& in = k.insts[v];
    if (in.op == ir::Op::Load) loads.insert(v);
    for (int i = 0; i < in.num_src; i++) todo.push_back(in.src[i]);
  }
  return loads;
}

// Whether a WHERE's arm reads a LOAD its condition does not (relu's backward, where(x > 0, grad, 0)): gcc may
// then load it only in the lanes that pick that arm. gcc 12.2's loop vectorizer packs such a conditional load
// as a masked load (vmaskmovps / vblendmps) and, when the loop nest was unrolled into groups that are not a
// whole number of vectors (a 2 x 6 nest: 12 lanes in three vectors of 4), gives every vector the first one's
// mask: wrong values, not a crash (tests/python/test_regressions.py::test_masked_load_of_an_unrolled_nest).
static bool arm_reads_a_load_its_condition_does_not(const ir::Kernel& k, const ir::Inst& where) {
  const std::set<ir::ValueId> in_condition = loads_under(k, where.src[0]);
  for (int arm = 1; arm <= 2; arm++)
    for (ir::ValueId load : loads_under(k, where.src[arm]))
      if (!in_condition.count(load)) return true;
  return false;
}

// Whether `max`, a MAX in an upcast kernel, updates an accumulator (acc = max(acc, x), read only by its ASSIGN)
// that no vector run of vector_accumulators took and that gcc's SLP cannot pair with another: the last of an odd
// number of such updates in its loop. A 2x2 max-pool into rows of 5 or 7 outputs (LeNet-5's second pool, 10x10 ->
// 5x5) upcasts each row as a vector run of 4 lanes and 1 or 3 lanes left over; gcc packs two scalar lanes into a
// vector, but a lone one stays scalar, and in the bit-mask form of ts_fmaxf_lanes its 4 taps were one long chain
// of integer compares and masks (mask from ucomiss/setp/seta per tap): the row's loop took 40 cycles. As the
// branch-free select ts_fmaxf (maxss and a blend) it is short. Measured on Zen 5, the kernel alone in the caches:
// (32, 16, 10, 10) -> (32, 16, 5, 5) 24.9 -> 8.5 us; (32, 16, 14, 14) -> rows of 7, 39 -> 15-19 us (all three
// leftover lanes as selects: 20 us); rows of 14 (8 + 4 + 2: a pair, kept as masks) 18 us either way.
bool CRenderer::unpaired_max_lane(const ir::Kernel& k, ir::ValueId max) const {
  using ir::Op;
  const std::vector<ir::Inst>& insts = k.insts;
  if (insts[max].op != Op::Max || !is_float(insts[max].dtype) ||
      (insts[insts[max].src[0]].op != Op::DefineAcc && insts[insts[max].src[1]].op != Op::DefineAcc))
    return false;
  std::vector<int> users(insts.size(), 0), assigns(insts.size(), 0);  // of each value; ASSIGNs of it to an accumulator
  for (const ir::Inst& in : insts)
    for (int s = 0; s < in.num_src; s++) {
      users[in.src[s]]++;
      if (in.op == Op::Assign && s == 1 && insts[in.src[0]].op == Op::DefineAcc) assigns[in.src[s]]++;
    }
  auto is_accumulator_max = [&](size_t i) {
    const ir::Inst& in = insts[i];
    return in.op == Op::Max && is_float(in.dtype) &&
           (insts[in.src[0]].op == Op::DefineAcc || insts[in.src[1]].op == Op::DefineAcc) && users[i] == 1 && assigns[i] == 1;
  };
  if (!is_accumulator_max(max)) return false;
  // the innermost loop around it
  size_t loop = insts.size();
  for (size_t r = max; r-- > 0;)
    if (insts[r].op == Op::Range && end_of_range(insts, r) > max) {
      loop = r;
      break;
    }
  if (loop == insts.size()) return false;
  std::set<ir::ValueId> in_vectors;
  for (const FusedStatement& f : vector_accumulators(k)) in_vectors.insert(f.members.begin(), f.members.end());
  std::vector<size_t> scalar_lanes;
  const size_t loop_end = end_of_range(insts, loop);
  for (size_t i = loop + 1; i < loop_end; i++)
    if (!in_vectors.count(static_cast<ir::ValueId>(i)) && is_accumulator_max(i)) scalar_lanes.push_back(i);
  return scalar_lanes.size() % 2 == 1 && scalar_lanes.back() == max;
}

// The power-of-two factor of `mul` when it is a row's offset in a lane loop that moves by 2^k elements per lane (k
// >= 1): an int MUL of a value that depends on a local loop's index by such a constant (rows_as_lanes: row = 16·r0 +
// lane, its elements at row·16 + j in the padded logits of a classifier head of 10); 0 otherwise. gcc takes loads
// at lane·2^k as an interleaved group of 2^k elements with gaps, and a lane loop of 16 trips cannot be vectorized
// that way ("loop does not have enough iterations to support peeling for gaps"): it stayed scalar. With the stride
// a variable whose value gcc does not know (set once, in front of the loops: ts_opaque_int is an empty asm, which
// inside a loop would keep that loop scalar), the loads are strided, gathered element by element as for rows of 11
// or 12. The logsumexp of 128 rows of 10 read in rows of 16, 1 thread, warm: 4.4 us with the constant, 0.8 us
// hidden (rows of 11: 0.7 us; strides 2, 4, 8, 32 and 64 alike: 1.8 to 4.5 us as constants, 0.75 us hidden).
static int64_t lane_row_stride(const ir::Kernel& k, const ir::Inst& mul) {
  using ir::Op;
  if (mul.op != Op::Mul || mul.dtype != DType::Int32) return 0;
  const std::vector<ir::Inst>& insts = k.insts;
  for (int c = 0; c < 2; c++) {
    const ir::Inst& factor = insts[mul.src[c]];
    const int64_t v = static_cast<int64_t>(factor.value);
    if (factor.op != Op::Const || v < 2 || (v & (v - 1)) != 0) continue;
    for (size_t r = 0; r < insts.size(); r++) {
      if (insts[r].op != Op::Range || insts[r].arg != ir::kLocalLoop) continue;
      std::vector<int8_t> memo(insts.size(), -1);
      if (depends_on(insts, mul.src[1 - c], static_cast<ir::ValueId>(r), memo)) return v;
    }
  }
  return 0;
}

static std::string lane_row_stride_name(int64_t stride) { return "ts_row_stride_" + std::to_string(stride); }

std::vector<std::string> CRenderer::kernel_prologue(const ir::Kernel& k) const {
  if (std::none_of(k.insts.begin(), k.insts.end(), [](const ir::Inst& in) { return in.op == ir::Op::Range && in.arg == ir::kLocalLoop; }))
    return {};
  std::set<int64_t> strides;
  for (const ir::Inst& in : k.insts)
    if (const int64_t s = lane_row_stride(k, in)) strides.insert(s);
  std::vector<std::string> lines;
  for (int64_t s : strides)
    lines.push_back("const int32_t " + lane_row_stride_name(s) + " = ts_opaque_int(" + std::to_string(s) +
                    ");  /* a lane loop's row stride, its value hidden from gcc (CRenderer::kernel_prologue) */");
  return lines;
}

std::string CRenderer::alu_in(const ir::Kernel& k, const ir::Inst& in, const std::vector<std::string>& s,
                              const std::vector<DType>& src_dtype) const {
  if (const int64_t stride = lane_row_stride(k, in)) {
    const bool constant_first = k.insts[in.src[0]].op == ir::Op::Const;
    return "(" + s[constant_first ? 1 : 0] + " * " + lane_row_stride_name(stride) + ")";
  }
  const bool upcast = has_upcast_outputs(k);
  // An upcast kernel's MAX is the bit-mask form, which gcc's SLP packs; elsewhere the branchy form is
  // faster as scalar code (a max-pool's reduce: 25 us with it, 45 with the mask when left scalar), and so is
  // an upcast kernel's lane that no vector takes (unpaired_max_lane).
  if (upcast && in.op == ir::Op::Max && is_float(in.dtype))
    return (unpaired_max_lane(k, static_cast<ir::ValueId>(&in - k.insts.data())) ? "ts_fmaxf(" : "ts_fmaxf_lanes(") +
           s[0] + ", " + s[1] + ")";
  // The float WHERE's mask form is for gcc's SLP (see alu()); in a kernel left to the loop vectorizer it is a
  // plain select, which that vectorizer always packs: a BatchNorm + ReLU written back from NHWC to NCHW
  // (mask from `0 < x` in the loop) stayed scalar with the mask, 23 -> 2.6 us measured as a select.
  // A WHERE whose arm reads what its condition does not keeps the mask form: as a select gcc would turn that
  // arm's load into a masked load, which gcc 12.2 can vectorize with the wrong mask (see above). float16
  // values are floats in the kernel (converted at their loads and stores) and take the same two forms.
  if (!upcast && in.op == ir::Op::Where && is_float(in.dtype))
    return std::string(arm_reads_a_load_its_condition_does_not(k, in) ? "ts_where_f32(" : "ts_select_f32(") + s[0] +
           ", " + s[1] + ", " + s[2] + ")";
  return alu(in, s, src_dtype);
}

std::string CRenderer::alu(const ir::Inst& in, const std::vector<std::string>& s,
                           const std::vector<DType>& src_dtype) const {
  if (in.op == ir::Op::Where && in.dtype == DType::Bool)
    return "((" + s[0] + " & " + s[1] + ") | (!" + s[0] + " & " + s[2] + "))";
  // WHERE on float32 and int32 selects bits through a mask, -(int)c = all ones or zero: gcc 12's SLP
  // vectorizer (the one that vectorizes UPCAST kernels) packs compares, masks and ANDs into AVX-512
  // but leaves a `c ? a : b` scalar, and one scalar statement in a register tile's epilogue (a fused
  // relu) keeps the whole tile scalar (x @ W.T + b then relu, 128×64×128: 0.29 ms; masked: 0.02 ms).
  // The loop vectorizer packs the select but not always the mask (alu_in writes the select in kernels
  // without upcast outputs). Same bits as the select, NaN payloads included.
  if (in.op == ir::Op::Where && in.dtype == DType::Float32) return "ts_where_f32(" + s[0] + ", " + s[1] + ", " + s[2] + ")";
  if (in.op == ir::Op::Where && in.dtype == DType::Int32)
    return "((" + s[1] + " & -(int32_t)" + s[0] + ") | (" + s[2] + " & ~-(int32_t)" + s[0] + "))";
  return CStyleRenderer::alu(in, s, src_dtype);
}

// A bool loaded once and selected on by several WHEREs is one value shared by the lanes of an upcast group
// (a one-hot row of an embedding's onehot(idx) @ E: every lane j selects E[v, j] by the same onehot[t, v]).
// gcc 12's SLP vectorizer splats a `c ? a : b` on such a scalar, but not the mask -(int32_t)c made from a
// 1-byte load ("not grouped load"), and that one statement kept the whole tile scalar: the transformer
// sample's embedding kernel r_32_12_32_11 ran in 0.057 ms, 0.005 ms as a select. A bool loaded per lane
// (a mask tensor over a matmul's outputs) keeps the mask form, which vectorizes there (0.02 ms; 0.33 ms as a
// select), as do conditions computed in the kernel (alu above). Only upcast kernels, which gcc leaves to its SLP
// vectorizer, take the select: elsewhere the loop vectorizer would load the other arm through a mask (alu_in).
std::string CRenderer::where_on_shared_loaded_condition(const ir::Kernel& k, const ir::Inst& in,
                                                        const std::vector<std::string>& s,
                                                        const std::vector<DType>& src_dtype) const {
  if (!has_upcast_outputs(k)) return alu_in(k, in, s, src_dtype);
  if (in.dtype == DType::Float32) return "(" + s[0] + " ? " + s[1] + " : " + s[2] + ")";
  return alu(in, s, src_dtype);
}

// TRANSPOSE_TILE (transpose_tile.cpp) leaves each 8×8 tile as 64 stores, out[sbase + s0 + j·S + i] =
// in[lbase + l0 + i·T + j] (i: the input's row, j: the element in it), the loads of row i gated alike or not
// at all. Found here by their indices (base + constant, as simplify leaves them) and written as one
// ts_transpose_8x8 call: gcc keeps the 64 copies scalar (a 300×784 weight's whole copy took 90 µs as the C
// code had it before, 35 µs in registers). A group that is not tiles through and through stays element by element.
std::vector<CStyleRenderer::FusedStatement> CRenderer::transpose_tiles(const ir::Kernel& k) const {
  using ir::Op;
  using ir::ValueId;
  if (!has_applied(k, ir::AppliedOpt::TransposeTile)) return {};
  const std::vector<ir::Inst>& insts = k.insts;
  auto split_index = [&](ValueId idx) { return index_base_and_offset(k, idx); };
  std::vector<int> uses(insts.size(), 0);
  for (const ir::Inst& in : insts)
    for (int s = 0; s < in.num_src; s++) uses[in.src[s]]++;
  struct Copy {
    int64_t store_offset, load_offset;
    ValueId gate, store, load;
  };
  // (output, its base, input, its base) -> the copies between them
  std::map<std::tuple<ValueId, ValueId, ValueId, ValueId>, std::vector<Copy>> groups;
  for (size_t i = 0; i < insts.size(); i++) {
    const ir::Inst& st = insts[i];
    if (st.op != Op::Store || st.num_src != 3 || insts[st.src[2]].op != Op::Load || uses[st.src[2]] != 1) continue;
    const ValueId load = st.src[2];
    const ir::Inst& ld = insts[load];
    if (ld.dtype != DType::Float32 || insts[st.src[0]].dtype != DType::Float32 || insts[ld.src[0]].dtype != DType::Float32)
      continue;
    const auto [sbase, soff] = split_index(st.src[1]);
    const auto [lbase, loff] = split_index(ld.src[1]);
    groups[{st.src[0], sbase, ld.src[0], lbase}].push_back(
        {soff, loff, ld.num_src == 3 ? ld.src[2] : ir::kNone, static_cast<ValueId>(i), load});
  }
  // Stores of zero: rows of a tile whose gate simplify found always false (a padded weight's rows past its
  // own, in a kernel whose loop of row blocks has one trip): (output, base) -> offset -> store
  std::map<std::pair<ValueId, ValueId>, std::map<int64_t, ValueId>> zeros;
  for (size_t i = 0; i < insts.size(); i++) {
    const ir::Inst& st = insts[i];
    if (st.op != Op::Store || st.num_src != 3 || insts[st.src[2]].op != Op::Const || insts[st.src[2]].value != 0 ||
        insts[st.src[0]].dtype != DType::Float32)
      continue;
    const auto [sbase, soff] = split_index(st.src[1]);
    zeros[{st.src[0], sbase}][soff] = static_cast<ValueId>(i);
  }
  std::vector<FusedStatement> out;
  for (const auto& [key, copies] : groups) {
    // The tiles of a group, one at a time from the copy at the smallest offsets left (transpose_tile's blocks
    // of 16 hold two tiles side by side, the second 8 elements along a row of the input or of the output on)
    std::map<std::pair<int64_t, int64_t>, const Copy*> left;  // (store offset, load offset) -> copy
    for (const Copy& c : copies) left[{c.store_offset, c.load_offset}] = &c;
    std::vector<FusedStatement> tiles;
    while (!left.empty()) {
      const auto [s0, l0] = left.begin()->first;
      int64_t out_row = 0, in_row = 0;  // S: from element 1 of input row 0; T: from input row 1's element 0
      for (const auto& [at, c] : left) {
        if (at.second == l0 + 1 && out_row == 0) out_row = at.first - s0;
        if (at.first == s0 + 1 && in_row == 0) in_row = at.second - l0;
      }
      if (out_row < 8 || in_row < 8) break;
      std::vector<ValueId> gate(8, ir::kNone), members;
      std::vector<bool> zero_row(8, false);
      std::map<int64_t, ValueId>& zero = zeros[{std::get<0>(key), std::get<1>(key)}];
      bool tile = true;
      for (int i = 0; i < 8 && tile; i++)
        for (int j = 0; j < 8 && tile; j++) {
          const int64_t s = s0 + j * out_row + i;
          auto it = left.find({s, l0 + i * in_row + j});
          auto z = zero.find(s);
          if (j == 0) zero_row[i] = it == left.end() && z != zero.end();
          if (zero_row[i] && z != zero.end()) {
            members.push_back(z->second);
            zero.erase(z);
            continue;
          }
          if (zero_row[i] || it == left.end()) {
            tile = false;
            break;
          }
          if (j == 0) gate[i] = it->second->gate;
          tile = it->second->gate == gate[i];
          members.insert(members.end(), {it->second->store, it->second->load});
          left.erase(it);
        }
      if (!tile) break;
      FusedStatement f;
      f.members = std::move(members);
      const auto [output, sbase, input, lbase] = key;
      f.reads = {sbase, lbase};
      for (ValueId g : gate)
        if (g != ir::kNone) f.reads.push_back(g);
      f.text = [=, output = output, sbase = sbase, input = input, lbase = lbase](const std::vector<std::string>& name) {
        std::string rows;
        int always = 0;
        for (int i = 0; i < 8; i++)
          if (zero_row[i]) continue;
          else if (gate[i] == ir::kNone) always |= 1 << i;
          else rows += " | ((int)" + name[gate[i]] + " << " + std::to_string(i) + ")";
        auto at_offset = [](const std::string& base, int64_t offset) {
          return offset ? "(" + base + " + " + std::to_string(offset) + ")" : base;
        };
        return "ts_transpose_8x8(" + name[input] + " + " + at_offset(name[lbase], l0) + ", " + std::to_string(in_row) +
               ", " + name[output] + " + " + at_offset(name[sbase], s0) + ", " + std::to_string(out_row) + ", " +
               std::to_string(always) + rows + ");";
      };
      tiles.push_back(std::move(f));
    }
    if (!left.empty()) continue;  // not tiles through and through: written element by element
    for (FusedStatement& f : tiles) out.push_back(std::move(f));
  }
  return out;
}

// The transpose tiles, then the vector accumulators (their members never overlap: a tile's are loads and stores
// of a copy, an accumulator run's are MULACCs, ASSIGNs and the loads only they read).
std::vector<CStyleRenderer::FusedStatement> CRenderer::fused_statements(const ir::Kernel& k) const {
  std::vector<FusedStatement> out = transpose_tiles(k);
  for (FusedStatement& f : vector_accumulators(k)) out.push_back(std::move(f));
  return out;
}

// A lane of a row that is never read (see vector_accumulators' Update)
constexpr ir::ValueId kMaskedOff = ir::kNone - 1;
// A lane past a partial vector's run (see lane_run): computed and never stored, so it may read whatever lies
// there. Where every real lane of the row is read unconditionally, the row is one plain load (the lanes past
// it read at most 7 floats past a real lane's element: host_alloc's guard bytes cover a buffer's last row);
// otherwise the lane is masked off like kMaskedOff.
constexpr ir::ValueId kPastRun = ir::kNone - 2;

// The mask of a row read through a pad view, lane j's bit set where its load is not gated off: the lanes read
// unconditionally as one constant, each gate's lanes as one select, `0x7feu | (v225 ? 0x1u : 0u) | ...`
static std::string lane_mask(const std::vector<ir::ValueId>& gates, const std::vector<std::string>& name) {
  auto hex = [](unsigned bits) {
    char text[16];
    std::snprintf(text, sizeof text, "0x%xu", bits);
    return std::string(text);
  };
  unsigned always = 0;
  std::map<ir::ValueId, unsigned> gated;  // gate -> the lanes it guards
  for (size_t j = 0; j < gates.size(); j++)
    if (gates[j] == ir::kNone) always |= 1u << j;
    else if (gates[j] != kMaskedOff && gates[j] != kPastRun) gated[gates[j]] |= 1u << j;
  std::string mask = always || gated.empty() ? hex(always) : "";
  for (const auto& [gate, bits] : gated) mask += (mask.empty() ? "(" : " | (") + name[gate] + " ? " + hex(bits) + " : 0u)";
  return mask;
}

// The one condition that gates every lane of a row that is read at all (the others masked off), or kNone
static ir::ValueId row_condition(const std::vector<ir::ValueId>& gates) {
  ir::ValueId row = ir::kNone;
  for (ir::ValueId g : gates) {
    if (g == kMaskedOff || g == kPastRun) continue;
    if (g == ir::kNone || (row != ir::kNone && g != row)) return ir::kNone;
    row = g;
  }
  return row;
}

// Vector accumulators. An upcast reduce loop (UPCAST_GLOBAL, REGISTER_TILE, UPCAST_REDUCE) updates its
// accumulators lane by lane, acc_j = fma(a_j, b_j, acc_j), each operand either an element of a row (a_j loaded
// from base + c + j) or one value for every lane (a broadcast: x[i, k] of a matmul's row i). gcc's SLP
// vectorizer packs such groups into vector registers, unless two groups load overlapping runs of one row: a
// depthwise convolution's weight gradient tiled over its 3x3 taps reads row y at x + kx + lane for kx = 0, 1,
// 2; gcc loads each element once and builds every tap's vector from scalars (0.49 ms for 32 x 16 x 28 x 28).
// So 16 such accumulators side by side (or 8, or 4: a row of 12 is a vector of 8 and one of 4) are written as
// one vector (GCC's vector extensions; the widest run that starts at each MULACC, in the IR's order):
//   ts_v16 vacc295 = ts_v16_splat(0.0f);                                             (the 16 DEFINE_ACCs)
//   vacc295 = ts_v16_fma(ts_v16_load(data1 + v588), ts_v16_load(data2 + (v588 + 35)), vacc295);  (16 MULACCs)
// and read after the loop as vacc295[0] .. vacc295[15]. Each lane still rounds once (fmaf): the same bits.
// Sums are written the same way, `vacc = vacc + ts_v16_load(..)`, and a sum of rows selected by one condition
// for every lane (acc + (c ? x : 0): an embedding's gradient as onehot(idx)ᵀ @ g, where a row is selected for
// one token in 11) as `if (c) vacc = vacc + ts_v16_load(..);`, which skips the rows not selected (gcc's SLP had
// blended every one of them in: the transformer sample's r_32_11_32_12 5.9 -> 3.0 us, alone, in the caches).
// A sum of values each lane selects by its own bool, a row of a bool buffer (acc_j + (m[k, j] ? x : 0): a mask
// matrix's product, the wide transformer's position-embedding gradient r_128_32_32), is `vacc = vacc +
// ts_v16_select_bytes(m + .., ts_v16_splat(x))`: the 16 bools as a bit mask, a masked move (4.6 -> 3.3 us).
// A max (UPCAST_REDUCE's accumulators of a row max: a softmax's rows of 12) is `vacc = ts_v4_max(vacc, row)`, each
// lane ts_fmaxf's NaN-propagating select in bit masks (the branchy scalar form kept it scalar); the combine of
// the lanes after the loop, assigned to the first accumulator, reads and writes vacc[0].
// A row read through a pad view (each lane's load gated: gate ? x[i] : 0) is one masked load,
// `ts_v16_maskz_load(data2 + (v166 + -1), 0xfffeu | (v212 ? 0x1u : 0u))`, its lanes past the edge not read (AVX-512's
// masked loads; a lane loop elsewhere), and a lane simplify found always masked off (acc + x · 0) is a clear bit of
// the mask: a depthwise convolution reads its input and output gradient in place instead of padded copies
// (depthwise_conv_wide; gcc had kept every gated lane scalar, 0.51 ms against 0.13 for its forward).
// A row read at every other element (lane j at base + 2j: a stride-2 convolution's or pooling's input, which
// upcast_global upcasts on this device, rows_every_other) is `ts_v16_load2(..)` or `ts_v16_maskz_load2(.., mask)`:
// two vector loads and a shuffle of their even elements (MobileNet's depthwise 3x3 at stride 2, 32 x 24 x 28 x 28,
// forward: 0.36 ms as scalar lanes, 0.13 ms).
// A run qualifies when its updates are the only users of their accumulators between the first of them and
// the last ASSIGN, each update only feeds its ASSIGN, no loop begins or ends among them, and at least one
// operand is a row of a float32 buffer (a sum's operand always is).
std::vector<CStyleRenderer::FusedStatement> CRenderer::vector_accumulators(const ir::Kernel& k) const {
  using ir::Op;
  using ir::ValueId;
  const std::vector<ir::Inst>& insts = k.insts;
  std::vector<std::vector<ValueId>> users(insts.size());
  for (size_t i = 0; i < insts.size(); i++)
    for (int s = 0; s < insts[i].num_src; s++) users[insts[i].src[s]].push_back(static_cast<ValueId>(i));
  // An operand of one lane: the row element it loads from a buffer of `dtype` (buffer, base, offset; gate: kNone,
  // or the condition without which it reads 0), or the value itself (buffer kNone)
  struct Operand {
    ValueId buffer = ir::kNone, base = ir::kNone;
    int64_t offset = 0;
    ValueId gate = ir::kNone;
  };
  auto operand = [&](ValueId v, DType dtype = DType::Float32) {
    const ir::Inst& in = insts[v];
    if (in.op == Op::Load && in.dtype == dtype && insts[in.src[0]].op == Op::DefineGlobal && insts[in.src[0]].dtype == dtype) {
      const auto [base, offset] = index_base_and_offset(k, in.src[1]);
      return Operand{in.src[0], base, offset, in.num_src == 3 ? in.src[2] : ir::kNone};
    }
    return Operand{ir::kNone, v, 0, ir::kNone};
  };
  // A lane's update of its accumulator: acc = fma(a, b, acc) (MULACC), acc + x (ADD), or acc + (c ? x : 0) (ADD of
  // a WHERE on a condition; one condition for every lane: a one-hot's rows, onehot(idx)ᵀ @ g, an embedding's
  // gradient), each the only user of its accumulator's value in the loop and read only by its ASSIGN. A
  // multiply-add whose load simplify found always masked off is acc + a · 0 (an ADD of a MUL by +0: a lane of a
  // row read through a pad view that falls wholly in the padding), the same bits as fma(a, 0, acc): a lane of a
  // MULACC run whose row is masked off there.
  struct Update {
    ValueId inst = ir::kNone, acc = ir::kNone, assign = ir::kNone;
    Op kind = Op::MulAcc;
    ValueId src[2] = {ir::kNone, ir::kNone};  // MULACC: a, b; ADD: x
    ValueId where = ir::kNone, cond = ir::kNone;  // ADD of a WHERE: the WHERE and its condition
    ValueId product = ir::kNone;  // acc + a · 0: the MUL (not written when only vector statements read it)
    bool acc_second = false;  // MAX(x, acc) rather than MAX(acc, x) (they differ on NaNs and signed zeros)
    bool may_skip = false;  // acc + (c ? x : 0) from +0: skipping it where c is false gives the same bits
  };
  auto zero_const = [&](ValueId v) {
    return insts[v].op == Op::Const && insts[v].value == 0 && !std::signbit(insts[v].value);
  };
  std::vector<Update> updates;
  for (size_t i = 0; i < insts.size(); i++) {
    const ir::Inst& in = insts[i];
    if (in.dtype != DType::Float32 || (in.op != Op::MulAcc && in.op != Op::Add && in.op != Op::Max)) continue;
    const int acc_at = in.op == Op::MulAcc ? 2 : insts[in.src[0]].op == Op::DefineAcc ? 0 : 1;
    const ValueId acc = in.src[acc_at];
    // its ASSIGN: an UPCAST_REDUCE's first accumulator is assigned again after the loop (the lanes' max or sum)
    if (insts[acc].op != Op::DefineAcc || users[i].size() != 1 || insts[users[i][0]].op != Op::Assign ||
        insts[users[i][0]].src[0] != acc)
      continue;
    Update u;
    u.inst = static_cast<ValueId>(i);
    u.acc = acc;
    u.assign = users[i][0];
    u.kind = in.op;
    const ValueId other = in.op == Op::MulAcc ? ir::kNone : in.src[1 - acc_at];  // ADD, MAX: the other operand
    if (in.op == Op::Add && insts[other].op == Op::Mul && insts[other].dtype == DType::Float32 &&
        (zero_const(insts[other].src[0]) || zero_const(insts[other].src[1]))) {
      u.kind = Op::MulAcc;
      u.product = other;
      u.src[0] = insts[other].src[0];
      u.src[1] = insts[other].src[1];
    } else if (in.op == Op::MulAcc) {
      u.src[0] = in.src[0];
      u.src[1] = in.src[1];
    } else if (in.op == Op::Max) {
      u.src[0] = other;
      u.acc_second = acc_at == 1;
    } else {
      const ValueId x = other;
      const ir::Inst& w = insts[x];
      // skipping the ADD where the condition is false leaves acc as adding +0 would: from +0, a sum of floats is
      // -0 only when both terms are -0, so acc is never -0
      const bool from_plus_zero = insts[acc].value == 0 && !std::signbit(insts[acc].value);
      if (w.op == Op::Where && w.dtype == DType::Float32 && zero_const(w.src[2]) && users[x].size() == 1) {
        u.where = x;
        u.cond = w.src[0];
        u.src[0] = w.src[1];
        u.may_skip = from_plus_zero;
      } else {
        u.src[0] = x;
      }
    }
    updates.push_back(u);
  }
  // An operand computed lane by lane from rows and broadcasts by the same arithmetic in every lane (a LayerNorm's
  // variance sums (x_j - mean)²: acc_j + (x_j + m) · (x_j + m)), as one vector expression: a tree over lane 0's
  // instructions whose leaves are rows (lane j loads base + offset + j, ungated; or + 2j, see below) or one value
  // for every lane (broadcast: the value, or a constant, splat). Its inner nodes are float ADD, MUL, NEG, MAX, RECIP
  // and CAST of a mask, each read only by its lane's parent (once, or twice: a square): lane by lane they round as
  // the scalar statements did (no contraction: the C device compiles with -ffp-contract=off), the same bits.
  // Without it gcc's loop vectorizer took the rows as lanes, gathering each row's elements with permutes (the
  // transformer sample's variance r_32_12_32: 6.8 us alone; as a vector expression 1.8).
  // A WHERE whose condition is computed lane by lane (CMPLT or CMPEQ of float operands, and AND and bool WHEREs
  // of such: x < 0 or x == 0) is a select in bit masks, as ts_where_f32 selects one lane: a ReLU's backward
  // summed over a BatchNorm's batch and pixels, acc_j + g_j · (x_j < 0 ? 0 : x_j), whose products gcc had packed
  // into vectors and then added into eight scalar accumulators one lane at a time (r_128_32_4_4 of (32, 128, 4,
  // 4) alone: 47 -> 13 us).
  struct RowExpr {
    enum class Kind { Row, Broadcast, Alu } kind = Kind::Broadcast;
    Operand row;                 // Row: lane 0's element
    int stride = 1;              // Row: its lanes' elements apart, 1 or 2 (ts_vN_load2)
    ValueId value = ir::kNone;   // Broadcast: the value; Alu: lane 0's instruction
    bool mask = false;           // a bool: a lane mask (-1 where true)
    Op op = Op::Add;             // Alu: its op
    std::vector<RowExpr> src;    // Alu: the operands
  };
  struct Run {
    std::vector<Update> lanes;  // lane j's update; empty: no run
    int width = 0;  // the vector's lanes: lanes.size(), or more (the lanes past them masked off, see lane_run)
    bool continues = false;  // the lanes of an earlier run's vector, updated again (in a loop after its loop)
    bool zero_row = false;  // every lane acc + p for one product p = x · 0 (see lane_run): a[0] is p, written
    Op kind = Op::MulAcc;
    ValueId cond = ir::kNone;  // one condition for every lane
    Operand cond_row;  // or a row of bools, lane j's condition at base + offset + j
    Operand a[2];  // lane 0's operands (ADD: a[0])
    int stride[2] = {1, 1};  // a row's elements apart from lane to lane: 1, or 2 (ts_vN_load2)
    std::vector<ValueId> gates[2];  // a row's lane gates (kNone: read unconditionally); empty: none gated
    std::shared_ptr<const RowExpr> expr[2];  // or an operand computed from rows (see RowExpr)
    std::vector<ValueId> expr_nodes;  // every lane's inner nodes of those trees (not written: the vector is)
  };
  // The tree of the operands xs (lane j's: xs[j]) into `out`, lanes' inner nodes appended to `nodes`
  std::function<bool(const std::vector<ValueId>&, RowExpr&, std::vector<ValueId>&, int)> row_expr =
      [&](const std::vector<ValueId>& xs, RowExpr& out, std::vector<ValueId>& nodes, int depth) {
        const ValueId v0 = xs[0];
        if (std::all_of(xs.begin(), xs.end(), [&](ValueId x) { return x == v0; })) {
          out.kind = RowExpr::Kind::Broadcast;
          out.value = v0;
          out.mask = insts[v0].dtype == DType::Bool;  // (only a mask's operand is a bool)
          return insts[v0].dtype == DType::Float32 || out.mask;
        }
        if (const Operand o0 = operand(v0); o0.buffer != ir::kNone) {
          // lane j at base + offset + j, or + 2j in runs of 8 lanes or more: every other element (a 2x2 max-pool's
          // input row plus the bias the pool's window reads with it, ts_vN_max(acc, ts_vN_load2(row) + b)), read as
          // ts_vN_load2. Caffe's LeNet, (64, 20, 24, 24) + bias pooled into rows of 12 (8 + 4 lanes), alone: 363
          // -> 136 us (gcc had packed the scalar lanes' max with a compare per lane). Runs of 4 stay scalar lanes,
          // which gcc packs well enough: (64, 50, 8, 8) into rows of 4, 48 us, as ts_v4_load2 55 us.
          const int stride = xs.size() >= 8 && operand(xs[1]).offset - o0.offset == 2 ? 2 : 1;
          for (size_t j = 0; j < xs.size(); j++) {
            const Operand o = operand(xs[j]);
            if (o.buffer != o0.buffer || o.base != o0.base || o.offset != o0.offset + stride * static_cast<int64_t>(j) ||
                o.gate != ir::kNone)
              return false;
          }
          out.kind = RowExpr::Kind::Row;
          out.row = o0;
          out.stride = stride;
          return true;
        }
        const ir::Inst& i0 = insts[v0];
        // (a CAST of a bool: 1.0 where the mask is set, 0.0 elsewhere; a max-pool's backward counts the maxima of
        // each window, sum(x + b == m), before it shares the gradient among them)
        const bool float_op =
            i0.dtype == DType::Float32 &&
            (i0.op == Op::Add || i0.op == Op::Mul || i0.op == Op::Neg || i0.op == Op::Max || i0.op == Op::Recip ||
             i0.op == Op::Where || (i0.op == Op::Cast && insts[i0.src[0]].dtype == DType::Bool));
        // a lane mask: a comparison of float operands, both of two masks, or one of two picked by a third (a bool
        // WHERE: where(x < 0, true, x == 0), x <= 0)
        const bool mask_op = i0.dtype == DType::Bool && (((i0.op == Op::CmpLt || i0.op == Op::CmpEq) &&
                                                          insts[i0.src[0]].dtype == DType::Float32) ||
                                                         i0.op == Op::And || i0.op == Op::Where);
        if (depth > 8 || !(float_op || mask_op)) return false;
        for (ValueId x : xs)  // read by one instruction (twice for a square: x · x)
          if (insts[x].op != i0.op || insts[x].dtype != i0.dtype || users[x].empty() ||
              std::any_of(users[x].begin(), users[x].end(), [&](ValueId u) { return u != users[x][0]; }))
            return false;
        out.kind = RowExpr::Kind::Alu;
        out.value = v0;
        out.op = i0.op;
        out.mask = mask_op;
        out.src.resize(static_cast<size_t>(i0.num_src));
        for (int s = 0; s < i0.num_src; s++) {
          std::vector<ValueId> operands;
          for (ValueId x : xs) operands.push_back(insts[x].src[s]);
          if (!row_expr(operands, out.src[static_cast<size_t>(s)], nodes, depth + 1)) return false;
        }
        nodes.insert(nodes.end(), xs.begin(), xs.end());
        return true;
      };
  std::function<bool(const RowExpr&)> reads_a_row = [&](const RowExpr& e) {
    return e.kind == RowExpr::Kind::Row || std::any_of(e.src.begin(), e.src.end(), reads_a_row);
  };
  std::function<void(const RowExpr&, const std::function<void(const RowExpr&)>&)> for_each_leaf =
      [&](const RowExpr& e, const std::function<void(const RowExpr&)>& f) {
        if (e.kind != RowExpr::Kind::Alu) f(e);
        for (const RowExpr& operand : e.src) for_each_leaf(operand, f);
      };
  auto one_scope = [&](ValueId from, ValueId to) {  // no loop begins or ends from `from` to `to`
    for (ValueId x = from; x <= to; x++)
      if (insts[x].op == Op::Range || insts[x].op == Op::EndRange) return false;
    return true;
  };
  // The accumulators the first search found in vectors (filled after it): a run of products by zero over them
  // is a vector too in the second search (a 7x7 depthwise weight gradient's tap rows above and below the image:
  // r_64_9_7_32_7 in the engine's timing, 0.063-0.083 -> 0.035-0.046 ms)
  std::set<ValueId> held;
  bool zero_run_left = false;  // a run of products by zero was left scalar (a second search may take it)
  // The run of `lanes` updates from updates[p] on, if they qualify (see above), in a vector of `width` lanes. A
  // width above `lanes` is a partial vector (the last block of a padded tile, 6 real lanes of a row of 14 in a
  // vector of 8): its lanes past the run are computed and never read (kPastRun: a row whose real lanes are all
  // read is one plain load, else they are masked off). Only for multiply-adds and sums whose rows are plain loads.
  auto lane_run = [&](size_t p, int lanes, int width) {
    Run run;
    run.width = width;
    run.lanes.assign(updates.begin() + static_cast<std::ptrdiff_t>(p), updates.begin() + static_cast<std::ptrdiff_t>(p) + lanes);
    run.kind = run.lanes[0].kind;
    run.cond = run.lanes[0].cond;
    bool ok = true, loads_a_row = false, one_cond = true;
    for (const Update& u : run.lanes) {
      ok = ok && u.kind == run.kind && u.acc_second == run.lanes[0].acc_second && (u.cond == ir::kNone) == (run.cond == ir::kNone);
      one_cond = one_cond && u.cond == run.cond;
    }
    if (ok && !one_cond && operand(run.cond, DType::Bool).buffer == ir::kNone) {
      // each lane's condition computed (a comparison: where(x_j < 0, g_j, 0) summed): the WHEREs are the sums'
      // operands, a vector expression (see RowExpr)
      for (Update& u : run.lanes) {
        u.src[0] = u.where;
        u.where = u.cond = ir::kNone;
        u.may_skip = false;
      }
      run.cond = ir::kNone;
    } else if (ok && !one_cond) {  // a row of bools (a mask matrix's row: where(mask, x, 0) summed), read as one vector
      run.cond_row = operand(run.cond, DType::Bool);
      for (int j = 0; j < lanes && ok; j++) {
        const Operand o = operand(run.lanes[j].cond, DType::Bool);
        ok = o.buffer != ir::kNone && o.gate == ir::kNone && o.buffer == run.cond_row.buffer && o.base == run.cond_row.base &&
             o.offset == run.cond_row.offset + j;
      }
      run.cond = ir::kNone;
    } else if (run.cond != ir::kNone) {  // one condition: the ADD is skipped where it is false
      for (const Update& u : run.lanes) ok = ok && u.may_skip;
    }
    // Every lane acc + p for one product p = w · 0: a row that simplify found wholly masked off (a tap's row above
    // or below the image, in a range of a loop split_index_set split), the same w for every lane: one vector add
    // of p, lane by lane the scalar statements' sums (p is +0, -0 or NaN: not dropped)
    if (ok && run.kind == Op::MulAcc &&
        std::all_of(run.lanes.begin(), run.lanes.end(), [&](const Update& u) { return u.product != ir::kNone && u.product == run.lanes[0].product; })) {
      run.kind = Op::Add;
      run.zero_row = true;
      run.a[0] = Operand{ir::kNone, run.lanes[0].product, 0, ir::kNone};
      loads_a_row = true;  // (it qualifies as the rows' vector it belongs to)
    }
    for (int s = 0; s < (run.kind == Op::MulAcc ? 2 : 1) && ok && !run.zero_row; s++) {
      const ValueId v0 = run.lanes[0].src[s];
      // one value for every lane (a broadcast), even when it is a load: a multiply-add's operand, or the value
      // a row of conditions selects
      bool same = run.kind == Op::MulAcc || run.cond_row.buffer != ir::kNone;
      for (int j = 1; j < lanes; j++) same = same && run.lanes[j].src[s] == v0;
      if (!same && run.cond_row.buffer == ir::kNone && run.lanes[0].product == ir::kNone && operand(v0).buffer == ir::kNone &&
          insts[v0].op != Op::Const) {  // computed lane by lane (see RowExpr)
        std::vector<ValueId> xs;
        for (const Update& u : run.lanes) xs.push_back(u.src[s]);
        auto expr = std::make_shared<RowExpr>();
        ok = row_expr(xs, *expr, run.expr_nodes, 0) && expr->kind == RowExpr::Kind::Alu;
        loads_a_row = loads_a_row || (ok && reads_a_row(*expr));
        run.expr[s] = std::move(expr);
        continue;
      }
      // every lane a · 0 (a product simplify found wholly masked off): left as it was (the transformer's
      // r_16_32_128_11, scalar otherwise: 8.8 -> 13.7 us as vectors), unless other runs hold its accumulators as
      // vectors (see `held` below), which the scalar lanes would take apart and put together again
      if (same && zero_const(v0) && run.lanes[0].product != ir::kNone &&
          !std::all_of(run.lanes.begin(), run.lanes.end(), [&](const Update& u) { return held.count(u.acc) > 0; })) {
        ok = false;
        zero_run_left = true;
      }
      // a row: lane j loads base + offset + stride · j, or is +0 (masked off: a load simplify folded, see
      // Update); the stride is 1, or 2 (a stride-2 convolution's input row, every other element)
      int first_load = 0;
      while (!same && first_load < lanes - 1 && zero_const(run.lanes[first_load].src[s])) first_load++;
      run.a[s] = same ? Operand{ir::kNone, v0, 0} : operand(run.lanes[first_load].src[s]);
      for (int j = first_load + 1; j < lanes && !same && run.a[s].buffer != ir::kNone; j++) {
        if (zero_const(run.lanes[j].src[s])) continue;
        const Operand o = operand(run.lanes[j].src[s]);
        if (o.buffer == run.a[s].buffer && o.base == run.a[s].base && o.offset - run.a[s].offset == 2 * (j - first_load))
          run.stride[s] = 2;
        break;
      }
      run.a[s].offset -= same ? 0 : run.stride[s] * first_load;
      std::vector<ValueId> gates;
      for (int j = 0; j < lanes && ok && !same; j++) {
        if (zero_const(run.lanes[j].src[s])) {
          gates.push_back(kMaskedOff);
          continue;
        }
        const Operand o = operand(run.lanes[j].src[s]);
        ok = o.buffer != ir::kNone && o.buffer == run.a[s].buffer && o.base == run.a[s].base &&
             o.offset == run.a[s].offset + run.stride[s] * j;
        gates.push_back(o.gate);
      }
      if (std::any_of(gates.begin(), gates.end(), [](ValueId g) { return g != ir::kNone; })) run.gates[s] = gates;
      loads_a_row = loads_a_row || run.a[s].buffer != ir::kNone;
    }
    ValueId first = run.lanes[0].inst, last = first;
    for (const Update& u : run.lanes) {
      first = std::min({first, u.inst, u.where});
      last = std::max(last, u.assign);
    }
    ok = ok && one_scope(first, last);
    for (const Update& u : run.lanes) {
      ok = ok && insts[u.acc].value == insts[run.lanes[0].acc].value;
      for (ValueId user : users[u.acc]) ok = ok && (user == u.inst || user == u.assign || user < first || user > last);
    }
    for (int j = 1; j < lanes && ok; j++) ok = run.lanes[j].acc != run.lanes[j - 1].acc;
    // the vector is declared where the last accumulator was: all of them in one scope
    ValueId acc_first = run.lanes[0].acc, acc_last = acc_first;
    for (const Update& u : run.lanes) {
      acc_first = std::min(acc_first, u.acc);
      acc_last = std::max(acc_last, u.acc);
    }
    ok = ok && one_scope(acc_first, acc_last);
    if (ok && width > lanes) {
      ok = run.kind != Op::Max && run.cond_row.buffer == ir::kNone && !run.expr[0] && !run.expr[1];
      // a partial vector whose loading lanes would fit the next narrower one: the lanes masked off (a · 0) after
      // them belong to the next vector (on AVX-512 a stride-2 depthwise tile's rows of 8 became vectors of 9, every
      // later row one lane late and its lanes scalar: 32 x 24 x 28 x 28, forward 0.34 -> 0.15 ms). A row of 28's
      // last block of 12, its last lane masked off for one tap, stays one vector: that lane is its own
      int loading = lanes;
      auto masked_off = [&](int j) {
        for (int s = 0; s < 2; s++)
          if (run.a[s].buffer != ir::kNone && !zero_const(run.lanes[static_cast<size_t>(j)].src[s])) return false;
        return true;
      };
      while (ok && !run.zero_row && loading > 0 && masked_off(loading - 1)) loading--;
      ok = ok && (run.zero_row || loading > width / 2);
      for (int s = 0; s < 2 && ok; s++) {
        if (run.a[s].buffer == ir::kNone) continue;  // a broadcast (or no second operand)
        if (run.gates[s].empty()) run.gates[s].assign(static_cast<size_t>(lanes), ir::kNone);
        run.gates[s].resize(static_cast<size_t>(width), kPastRun);
      }
    }
    if (!ok || !(loads_a_row || run.cond_row.buffer != ir::kNone)) run.lanes.clear();
    return run;
  };
  std::vector<Run> runs;
  // The accumulators a run holds, one vector each. A second loop that updates them (split_index_set splits a
  // convolution's tap loop where its lanes' masks change) continues that vector when it updates the same lanes
  // in the same order; any other run over them stays scalar.
  std::map<ValueId, std::pair<size_t, size_t>> vectorized;  // accumulator -> its run, its lane
  auto fresh = [&](Run& run) {
    size_t holds = 0;
    for (const Update& u : run.lanes) holds += vectorized.count(u.acc);
    if (holds == 0) return true;
    if (holds != run.lanes.size() || run.kind == Op::Max) return false;
    const auto [r0, lane0] = vectorized.at(run.lanes[0].acc);
    if (lane0 != 0 || runs[r0].lanes.size() != run.lanes.size() || runs[r0].width != run.width || runs[r0].kind == Op::Max)
      return false;
    for (size_t j = 0; j < run.lanes.size(); j++)
      if (runs[r0].lanes[j].acc != run.lanes[j].acc) return false;
    run.continues = true;
    return true;
  };
  auto find_runs = [&] {
    runs.clear();
    vectorized.clear();
    for (size_t p = 0; p < updates.size();) {
      Run run;
      // the widest run that starts here, at most one of the target's vector registers (16 floats with AVX-512, 8
      // with AVX2: a wider vector is split into registers by gcc, and a tile of them no longer fits the register
      // file); else a partial vector of 8 or 16 (more than half its lanes real, see lane_run): the last block of a
      // padded tile, 6 lanes of a depthwise convolution's row of 14, is one masked vector instead of a vector of 4
      // and two scalar chains (a depthwise 3x3 of 32 x 32 x 14 x 14, forward: 0.137 -> 0.105 ms; 13 x 13: 0.112 ->
      // 0.086)
      bool found = false;
      for (int width = std::clamp(k.target.vector_floats(), 4, 16); width >= 4 && !found; width /= 2) {
        const int fewest = width >= 8 ? width / 2 + 1 : width;  // a whole vector first, then partial ones
        for (int lanes = width; lanes >= fewest && !found; lanes--)
          found = p + lanes <= updates.size() && (run = lane_run(p, lanes, width), !run.lanes.empty()) && fresh(run);
      }
      if (!found) {
        p++;
        continue;
      }
      if (!run.continues)
        for (size_t j = 0; j < run.lanes.size(); j++) vectorized[run.lanes[j].acc] = {runs.size(), j};
      p += run.lanes.size();
      runs.push_back(std::move(run));
    }
  };
  find_runs();
  for (const auto& [acc, where] : vectorized) held.insert(acc);
  if (zero_run_left && !held.empty()) {
    // again, with the products by zero over those accumulators; kept only if every vector of the first search
    // still is one (a run of them that came first and took other lanes would break a later run up)
    find_runs();
    if (!std::all_of(held.begin(), held.end(), [&](ValueId acc) { return vectorized.count(acc) > 0; })) {
      held.clear();
      find_runs();
    }
  }
  if (runs.empty()) return {};
  // A scalar load that only vectorized lanes read as a row element is not written (each run loads its rows as
  // vectors); one that a run broadcasts, or selects on, is
  std::vector<int> run_of(insts.size(), -1);
  std::vector<bool> broadcast(insts.size(), false);
  for (size_t r = 0; r < runs.size(); r++) {
    for (const Update& u : runs[r].lanes) {
      run_of[u.inst] = static_cast<int>(r);
      if (u.where != ir::kNone) run_of[u.where] = static_cast<int>(r);
    }
    for (const Operand& o : runs[r].a)
      if (o.buffer == ir::kNone && o.base != ir::kNone) broadcast[o.base] = true;
    if (runs[r].cond != ir::kNone) broadcast[runs[r].cond] = true;  // written: the statement reads it
    for (ValueId node : runs[r].expr_nodes) run_of[node] = static_cast<int>(r);
    for (const auto& expr : runs[r].expr)
      if (expr) for_each_leaf(*expr, [&](const RowExpr& leaf) {
          if (leaf.kind == RowExpr::Kind::Broadcast) broadcast[leaf.value] = true;
        });
  }
  // a · 0 (several lanes may share one) is not written when every user is a vectorized lane, nor are its loads
  for (const Run& run : runs)
    for (const Update& u : run.lanes)
      if (u.product != ir::kNone && !run.zero_row &&
          std::all_of(users[u.product].begin(), users[u.product].end(), [&](ValueId user) { return run_of[user] >= 0; }))
        run_of[u.product] = run_of[u.inst];
  std::vector<std::vector<ValueId>> dropped_loads(runs.size());
  for (size_t i = 0; i < insts.size(); i++) {
    if (insts[i].op != Op::Load || users[i].empty() || broadcast[i]) continue;
    bool only_lanes = true;
    for (ValueId u : users[i]) only_lanes = only_lanes && run_of[u] >= 0;
    if (only_lanes) dropped_loads[run_of[users[i][0]]].push_back(static_cast<ValueId>(i));
  }
  // The combine of a max run's lanes after its loop, the tree upcast_reduce writes (MAX(acc0, acc1), MAX(acc2, acc3),
  // then their MAX, ..., ASSIGNed to acc0), inside a local loop (rows side by side: coalesce_short_rows): one
  // ts_vN_hmax, the same tree in vector registers. Written lane by lane as scalar ts_fmaxf, gcc compiled it there
  // with a branch on each comparison, which the data decide: the transformer's softmax rows of 12, 8 rows at a
  // time, took 35 us in a training step, 15 us with ts_v4_hmax (a harness that runs one input again and again
  // lets the branch predictor learn the data: 12 us either way). Where a row's max is used right away (the row's
  // exponentials after it), gcc's scalar form (a NaN test that is never taken, then vmaxss) has the shorter
  // latency: 21 us there against 25 with ts_v4_hmax, so the combine outside local loops stays scalar.
  std::vector<bool> in_local_loop(insts.size(), false);
  if (std::any_of(runs.begin(), runs.end(), [](const Run& run) { return run.kind == Op::Max; })) {
    std::vector<ValueId> open;
    for (size_t i = 0; i < insts.size(); i++) {
      if (insts[i].op == Op::EndRange && !open.empty()) open.pop_back();
      for (ValueId r : open) in_local_loop[i] = in_local_loop[i] || insts[r].arg == ir::kLocalLoop;
      if (insts[i].op == Op::Range) open.push_back(static_cast<ValueId>(i));
    }
  }
  auto max_combine = [&](const Run& run) {
    FusedStatement combine;
    const int lanes = static_cast<int>(run.lanes.size());
    // the tree over lanes [lo, hi) rooted at v: each inner node a float MAX read only by its parent
    std::function<bool(ValueId, int, int)> tree = [&](ValueId v, int lo, int hi) {
      if (hi - lo == 1) return v == run.lanes[lo].acc;
      const ir::Inst& in = insts[v];
      const int mid = (lo + hi) / 2;
      if (in.op != Op::Max || in.dtype != DType::Float32 || users[v].size() != 1) return false;
      combine.members.push_back(v);
      return tree(in.src[0], lo, mid) && tree(in.src[1], mid, hi);
    };
    for (ValueId user : users[run.lanes[0].acc]) {
      const ir::Inst& assign = insts[user];
      if (assign.op != Op::Assign || user == run.lanes[0].assign || assign.src[0] != run.lanes[0].acc || !in_local_loop[user])
        continue;
      combine.members.clear();
      if (!tree(assign.src[1], 0, lanes)) continue;
      combine.members.push_back(user);
      const std::string vec = "vacc" + std::to_string(run.lanes[0].acc), type = "ts_v" + std::to_string(lanes);
      combine.text = [vec, type](const std::vector<std::string>&) { return vec + "[0] = " + type + "_hmax(" + vec + ");"; };
      return combine;
    }
    combine.members.clear();
    return combine;
  };
  std::vector<FusedStatement> out;
  for (size_t r = 0; r < runs.size(); r++) {
    const Run& run = runs[r];
    const std::string vec = "vacc" + std::to_string(run.lanes[0].acc);
    const std::string type = "ts_v" + std::to_string(run.width);
    FusedStatement declare;  // the accumulators' DEFINE_ACCs
    for (size_t j = 0; j < run.lanes.size(); j++) {
      declare.members.push_back(run.lanes[j].acc);
      declare.names.push_back({run.lanes[j].acc, vec + "[" + std::to_string(j) + "]"});
    }
    const std::string init = literal(insts[run.lanes[0].acc].value, DType::Float32);
    declare.text = [vec, type, init](const std::vector<std::string>&) { return type + " " + vec + " = " + type + "_splat(" + init + ");"; };
    if (!run.continues) out.push_back(std::move(declare));  // a continued vector was declared by its first run
    FusedStatement update;  // the updates, their WHEREs and their ASSIGNs
    for (const Update& u : run.lanes) {
      update.members.insert(update.members.end(), {u.inst, u.assign});
      if (u.where != ir::kNone) update.members.push_back(u.where);
    }
    update.members.insert(update.members.end(), dropped_loads[r].begin(), dropped_loads[r].end());
    update.members.insert(update.members.end(), run.expr_nodes.begin(), run.expr_nodes.end());
    const int slots = run.kind == Op::MulAcc ? 2 : 1;
    for (int s = 0; s < slots; s++) {
      if (run.expr[s]) {
        for_each_leaf(*run.expr[s], [&](const RowExpr& leaf) {
          update.reads.push_back(leaf.kind == RowExpr::Kind::Row ? leaf.row.base : leaf.value);
        });
        continue;
      }
      update.reads.push_back(run.a[s].base);
      for (ValueId g : std::set<ValueId>(run.gates[s].begin(), run.gates[s].end()))
        if (g != ir::kNone && g != kMaskedOff && g != kPastRun) update.reads.push_back(g);
    }
    if (run.cond != ir::kNone) update.reads.push_back(run.cond);
    if (run.cond_row.buffer != ir::kNone) update.reads.push_back(run.cond_row.base);
    update.text = [vec, type, kind = run.kind, cond = run.cond, a = run.a[0], b = run.a[1], ga = run.gates[0],
                   gb = run.gates[1], sa = run.stride[0], sb = run.stride[1], acc_second = run.lanes[0].acc_second,
                   cond_row = run.cond_row, ea = run.expr[0], eb = run.expr[1]](const std::vector<std::string>& name) {
      auto lanes = [&](const Operand& o, const std::vector<ValueId>& gates, int stride) {
        if (o.buffer == ir::kNone) return type + "_splat(" + name[o.base] + ")";
        const std::string at = o.offset ? "(" + name[o.base] + " + " + std::to_string(o.offset) + ")" : name[o.base];
        const std::string load = stride == 2 ? "_load2(" : "_load(", maskz_load = stride == 2 ? "_maskz_load2(" : "_maskz_load(";
        // every real lane read unconditionally (the others past the run, see kPastRun): one plain load, not a
        // masked one, which AVX2 cannot fold into the FMA (vmaskmovps): a depthwise 3x3 over 32 x 32 x 14 x 14,
        // whose rows of 14 are a vector of 8 and one of 6 real lanes, forward alone on Zen 3: 0.095 -> 0.076 ms.
        // Rows read at every other element keep the mask (a second vector load past the row did not pay there)
        auto unmasked = [stride](const std::vector<ValueId>& g) {
          auto read = [](ValueId x) { return x == ir::kNone || x == kPastRun; };
          return stride == 1 && std::all_of(g.begin(), g.end(), read);
        };
        if (gates.empty() || unmasked(gates)) return type + load + name[o.buffer] + " + " + at + ")";
        // One condition for the whole row (the row of a tap that may lie outside the image), the lanes' masks
        // constant otherwise: the condition picks the load or zeros, and the mask stays a constant (AVX2
        // builds a mask that is not one at run time, a few instructions per load; gcc splits the loop where
        // the condition changes). The depthwise 3x3's weight gradient, r_16_9_32_32_28 alone on Zen 3: 0.265 ->
        // 0.257 ms; the bench's depthwise row forward and backward 38% -> 40% of the matmul.
        if (const ValueId row = row_condition(gates); row != ir::kNone) {
          std::vector<ValueId> lane_gates(gates);
          for (ValueId& g : lane_gates) g = g == row ? ir::kNone : g;
          auto off = [](ValueId g) { return g == kMaskedOff || g == kPastRun; };
          const bool all = unmasked(lane_gates) || std::none_of(lane_gates.begin(), lane_gates.end(), off);
          return "(" + name[row] + " ? " +
                 (all ? type + load + name[o.buffer] + " + " + at + ")"
                      : type + maskz_load + name[o.buffer] + " + " + at + ", " + lane_mask(lane_gates, name) + ")") +
                 " : " + type + "_splat(0.0f))";
        }
        return type + maskz_load + name[o.buffer] + " + " + at + ", " + lane_mask(gates, name) + ")";
      };
      // a RowExpr in GCC's vector extensions: + and * lane by lane, ts_vN_max as the scalar MAX's ts_fmaxf; a
      // comparison is a lane mask (ts_mN: -1 where true), and a WHERE picks each lane's bits by it
      const std::string mask = "ts_m" + type.substr(4);  // ts_v16 -> ts_m16
      std::function<std::string(const RowExpr&)> vector_expr = [&](const RowExpr& e) -> std::string {
        if (e.kind == RowExpr::Kind::Row) return lanes(e.row, {}, e.stride);
        if (e.kind == RowExpr::Kind::Broadcast && e.mask) return "((" + mask + "){0} - (int32_t)(" + name[e.value] + "))";
        if (e.kind == RowExpr::Kind::Broadcast) return type + "_splat(" + name[e.value] + ")";
        if (e.op == Op::CmpLt || e.op == Op::CmpEq)
          return "((" + mask + ")(" + vector_expr(e.src[0]) + (e.op == Op::CmpLt ? " < " : " == ") + vector_expr(e.src[1]) + "))";
        if (e.op == Op::And) return "(" + vector_expr(e.src[0]) + " & " + vector_expr(e.src[1]) + ")";
        if (e.op == Op::Where && e.mask) {  // of masks: each lane's bits of one or the other
          const std::string m = vector_expr(e.src[0]);
          return "((" + m + " & " + vector_expr(e.src[1]) + ") | (~" + m + " & " + vector_expr(e.src[2]) + "))";
        }
        if (e.op == Op::Where)
          return type + "_where(" + vector_expr(e.src[0]) + ", " + vector_expr(e.src[1]) + ", " + vector_expr(e.src[2]) + ")";
        if (e.op == Op::Neg) return "(-" + vector_expr(e.src[0]) + ")";
        if (e.op == Op::Cast)
          return type + "_where(" + vector_expr(e.src[0]) + ", " + type + "_splat(1.0f), " + type + "_splat(0.0f))";
        if (e.op == Op::Recip) return "(" + type + "_splat(1.0f) / " + vector_expr(e.src[0]) + ")";
        if (e.op == Op::Max) return type + "_max(" + vector_expr(e.src[0]) + ", " + vector_expr(e.src[1]) + ")";
        return "(" + vector_expr(e.src[0]) + (e.op == Op::Mul ? " * " : " + ") + vector_expr(e.src[1]) + ")";
      };
      const std::string a_text = ea ? vector_expr(*ea) : lanes(a, ga, sa);
      if (kind == Op::MulAcc)
        return vec + " = " + type + "_fma(" + a_text + ", " + (eb ? vector_expr(*eb) : lanes(b, gb, sb)) + ", " + vec + ");";
      if (kind == Op::Max)
        return vec + " = " + type + "_max(" + (acc_second ? a_text + ", " + vec : vec + ", " + a_text) + ");";
      if (cond_row.buffer != ir::kNone) {
        const std::string at = cond_row.offset ? "(" + name[cond_row.base] + " + " + std::to_string(cond_row.offset) + ")"
                                               : name[cond_row.base];
        return vec + " = " + vec + " + " + type + "_select_bytes(" + name[cond_row.buffer] + " + " + at + ", " + a_text + ");";
      }
      return (cond == ir::kNone ? "" : "if (" + name[cond] + ") ") + vec + " = " + vec + " + " + a_text + ";";
    };
    out.push_back(std::move(update));
    if (run.kind == Op::Max && !run.lanes[0].acc_second) {
      if (FusedStatement combine = max_combine(run); !combine.members.empty()) out.push_back(std::move(combine));
    }
  }
  return out;
}

// An index as an affine function of the kernel's loops: the sum of coef · loop over its loops (RANGE values)
// plus a constant; nullopt for anything else (a division, a modulo, an index loaded from a buffer).
struct AffineIndex {
  std::map<ir::ValueId, int64_t> coef;
  int64_t constant = 0;
};

static std::optional<AffineIndex> affine_index(const std::vector<ir::Inst>& insts, ir::ValueId v, int depth = 0) {
  using ir::Op;
  const ir::Inst& in = insts[v];
  if (depth > 32) return std::nullopt;
  if (in.op == Op::Const) return AffineIndex{{}, static_cast<int64_t>(in.value)};
  if (in.op == Op::Range) return AffineIndex{{{v, 1}}, 0};
  if (in.op != Op::Add && in.op != Op::Mul && in.op != Op::Neg) return std::nullopt;
  std::optional<AffineIndex> a = affine_index(insts, in.src[0], depth + 1);
  if (!a) return std::nullopt;
  auto scaled = [](AffineIndex x, int64_t by) {
    for (auto& [loop, c] : x.coef) c *= by;
    x.constant *= by;
    return x;
  };
  if (in.op == Op::Neg) return scaled(*a, -1);
  std::optional<AffineIndex> b = affine_index(insts, in.src[1], depth + 1);
  if (!b) return std::nullopt;
  if (in.op == Op::Mul) {
    if (a->coef.empty()) return scaled(*b, a->constant);
    if (b->coef.empty()) return scaled(*a, b->constant);
    return std::nullopt;  // loop × loop
  }
  for (const auto& [loop, c] : b->coef) a->coef[loop] += c;
  a->constant += b->constant;
  return a;
}

// Software prefetch of the next trip's short runs. A loop whose trips read a buffer a page or more apart, each
// trip a short contiguous run (at most 2 KiB: the loops inside it and the lanes), defeats the hardware
// prefetchers: they follow a stream within a 4 KiB page, and each trip starts on another page with a few
// cache lines to read. A depthwise convolution's weight gradient over NCHW activations (MobileNet's
// r_64_9_8_32_8: per channel, for each of 32 images, the channel's 8×8 plane, 256 bytes 16 KiB from the
// previous image's) and BatchNorm's per-channel statistics read like that; inside a training step their
// inputs were written long before (the forward's activations, read by the backward) and come from memory, a
// cache miss at the start of every run. At the top of each trip the lines of the next trip's runs are
// prefetched (__builtin_prefetch: a hint that never faults, so the trip after the last may point past the
// buffer), one loop per buffer and run (328 bytes from data2 + ..., and a line more: the run may start anywhere
// in its first line):
//
//   for (int ridx151 = 0; ridx151 < 32; ridx151++) {
//     for (int ts_b = 0; ts_b < 392; ts_b += 64) __builtin_prefetch((const char*)(data2 + (ridx11 * 64 + (ridx151 + 1) * 4096 + -9)) + ts_b);
//
// Measured on this machine (1 thread; the kernel alone, its 1 MiB of inputs evicted from every cache level by
// touching 64 MiB between runs): r_64_9_8_32_8 0.166 -> 0.078 ms; with the inputs in L2 or L3, the same time
// either way (0.045-0.053 ms). Prefetching the same element one trip ahead from every load inside the innermost
// loop instead came to 0.100-0.125 ms: a trip is too short for the lines to arrive in time.
std::vector<std::string> CRenderer::loop_prologue(const ir::Kernel& k, ir::ValueId range) const {
  using ir::Op;
  constexpr int64_t kPageBytes = 4096, kShortRunBytes = 2048, kLineBytes = 64;
  const std::vector<ir::Inst>& insts = k.insts;
  if (k.target.workgroups() || insts[insts[range].src[0]].op != Op::Const || insts[insts[range].src[0]].value < 2)
    return {};
  const size_t end = end_of_range(insts, range);
  std::map<ir::ValueId, int64_t> inner_trips;  // the loops inside this one: their trip counts (0: not constant)
  for (size_t x = range + 1; x < end; x++)
    if (insts[x].op == Op::Range)
      inner_trips[static_cast<ir::ValueId>(x)] =
          insts[insts[x].src[0]].op == Op::Const ? static_cast<int64_t>(insts[insts[x].src[0]].value) : 0;
  // a run: the elements of one buffer a trip reads at the same offset from the loops around the inner ones
  struct Run {
    int64_t lo = 0, hi = 0;  // the first and last element, past that offset
  };
  std::map<std::pair<ir::ValueId, std::map<ir::ValueId, int64_t>>, Run> runs;
  for (size_t x = range + 1; x < end; x++) {
    const ir::Inst& in = insts[x];
    if (in.op != Op::Load || insts[in.src[0]].op != Op::DefineGlobal) continue;
    const std::optional<AffineIndex> index = affine_index(insts, in.src[1]);
    if (!index) continue;
    const auto stride = index->coef.find(range);
    const int64_t element_bytes = static_cast<int64_t>(dtype_size(insts[in.src[0]].dtype));
    if (stride == index->coef.end() || std::abs(stride->second) * element_bytes < kPageBytes) continue;
    int64_t lo = index->constant, hi = index->constant;
    std::map<ir::ValueId, int64_t> outer;  // this loop and the ones around it: in scope at the top of a trip
    bool known = true;
    for (const auto& [loop, c] : index->coef) {
      const auto inner = inner_trips.find(loop);
      if (inner == inner_trips.end()) {
        if (c != 0) outer[loop] = c;
      } else if (inner->second < 1) {
        known = false;
      } else {
        (c > 0 ? hi : lo) += c * (inner->second - 1);
      }
    }
    if (!known) continue;
    auto [it, added] = runs.try_emplace({in.src[0], outer}, Run{lo, hi});
    if (!added) it->second = {std::min(it->second.lo, lo), std::max(it->second.hi, hi)};
  }
  std::vector<std::string> lines;
  for (const auto& [key, run] : runs) {
    const auto& [buffer, outer] = key;
    const int64_t bytes = (run.hi - run.lo + 1) * static_cast<int64_t>(dtype_size(insts[buffer].dtype));
    if (bytes > kShortRunBytes) continue;  // a long run: the hardware prefetchers follow it
    std::string at;
    for (const auto& [loop, c] : outer) {
      const std::string var = "ridx" + std::to_string(loop);
      at += (at.empty() ? "" : " + ") + (loop == range ? "(" + var + " + 1)" : var) + " * " + std::to_string(c);
    }
    if (run.lo != 0) at += " + " + std::to_string(run.lo);
    // the lines of [start, start + bytes) wherever start falls in its line: at most (bytes + 63) / 64 + 1
    lines.push_back("for (int ts_b = 0; ts_b < " + std::to_string(bytes + kLineBytes) + "; ts_b += " +
                    std::to_string(kLineBytes) + ") __builtin_prefetch((const char*)(data" +
                    std::to_string(insts[buffer].arg) + " + (" + at + ")) + ts_b);");
  }
  if (!lines.empty()) lines.insert(lines.begin(), "/* the next trip's short runs, a page or more away: prefetched */");
  return lines;
}

const CRenderer& c_renderer() {
  static CRenderer r;
  return r;
}

static const bool registered = DeviceRegistry::add_renderer(&c_renderer());

}  // namespace ts
