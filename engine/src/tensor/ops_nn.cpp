// Neural-network ops (NCHW) as compositions, following tinygrad: convolution and pooling are a PAD and
// a _pool (windows from movement ops), then MUL + SUM (conv), MAX (max pool) or SUM / count (avg pool);
// transposed convolution is a conv over a zero-stuffed input with a flipped kernel; interpolation is a
// per-axis weighted selection (host-computed weights, as torch's upsample kernels compute them).
// Semantics: torch.nn.functional. Shapes: input (N, C, *spatial) with 1-3 spatial dims.
#include <cmath>
#include <limits>
#include <optional>

#include "tensor/ops_common.h"

namespace ts {

using namespace detail;

namespace {
const double kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> make_tuple(const std::vector<int64_t>& v, size_t n, const char* what) {
  if (v.size() == 1) return std::vector<int64_t>(n, v[0]);
  if (v.size() != n)
    throw std::invalid_argument(std::string(what) + ": expected 1 or " + std::to_string(n) + " values, got " + std::to_string(v.size()));
  return v;
}

// padding: {p} for every side, one value per spatial dim, or flat torch order (last dim first) → (before, after) per spatial dim
Pairs resolve_pads(const std::vector<int64_t>& padding, size_t n) {
  Pairs out(n);
  if (padding.empty()) return Pairs(n, {0, 0});
  if (padding.size() == 1) return Pairs(n, {padding[0], padding[0]});
  if (padding.size() == n) {
    for (size_t i = 0; i < n; i++) out[i] = {padding[i], padding[i]};
    return out;
  }
  if (padding.size() == 2 * n) {
    for (size_t i = 0; i < n; i++) out[n - 1 - i] = {padding[2 * i], padding[2 * i + 1]};
    return out;
  }
  throw std::invalid_argument("padding must have 1, " + std::to_string(n) + " or " + std::to_string(2 * n) + " values, got " +
                              std::to_string(padding.size()));
}

// the pads of the spatial dims, (0, 0) for N and C
Pairs full_pads(const Tensor& x, const Pairs& spatial) {
  Pairs p(x.ndim() - spatial.size(), {0, 0});
  p.insert(p.end(), spatial.begin(), spatial.end());
  return p;
}

// ceil_mode: extra padding after each dim so that a last partial window exists, but never a window that
// starts in the padding (arXiv:1603.07285 §5.1, tinygrad's _apply_ceil_mode)
Pairs ceil_pads(const Pairs& pads, const Shape& in, const std::vector<int64_t>& k, const std::vector<int64_t>& s,
                const std::vector<int64_t>& d) {
  Pairs out = pads;
  for (size_t i = 0; i < k.size(); i++) {
    int64_t span = d[i] * (k[i] - 1) + 1, total = in[i] + pads[i].first + pads[i].second;
    int64_t o = (total - span + s[i] - 1) / s[i] + 1;
    out[i].second += s[i] * (o - 1) + span - total - std::max<int64_t>(s[i] * (o - 1) - (pads[i].first + in[i] - 1), 0);
  }
  return out;
}

Shape spatial_of(const Tensor& x, size_t n) { return Shape(x.shape().end() - n, x.shape().end()); }
std::vector<int64_t> last_axes(size_t n) {
  std::vector<int64_t> ax;
  for (size_t i = 0; i < n; i++) ax.push_back(-static_cast<int64_t>(n - i));
  return ax;
}
void check_pool_input(const Tensor& x, size_t n, const char* what) {
  if (n < 1 || n > 3) throw std::invalid_argument(std::string(what) + ": kernel must have 1 to 3 dims, got " + std::to_string(n));
  if (static_cast<size_t>(x.ndim()) < n + 1)
    throw std::invalid_argument(std::string(what) + ": input " + shape_text(x.shape()) + " has too few dims for a " +
                                std::to_string(n) + "-d kernel");
}

// The convolution as a composition (tinygrad's): the windows of the padded input as a view (pool), times
// the weight broadcast over them, summed over (C_in/groups, *kernel). Its autograd through the primitives
// works, but the gradient of pool's movement ops sums, for every input element, over every window
// position with most terms masked off; conv() below gives it PyTorch's backward instead.
// im2col (Chellapilla et al. 2006, "High Performance Convolutional Neural Networks for Document
// Processing"; PyTorch's CPU convolutions do the same): the windows of pool()'s (N, C_in, *o, *k) view
// copied once into a (N·O, C_in·K) matrix — or (C_in·K, N·O) when `transposed` — so that a convolution and
// its weight gradient are matmuls and get the register-tiled, vectorized matmul code. Read in place, the
// window view costs a div/mod per element and its output axes are too short to vectorize.
//
// kIm2colPanelRows: the rows register_tile upcasts (kPanelRows in ops.cpp); kIm2colPackMinBytes: from this size
// (beyond a core's L2) the matrix is written in row panels, see below.
constexpr int64_t kIm2colPanelRows = 8, kIm2colPackMinBytes = int64_t{1} << 20;
//
// With groups G > 1 each group is a matmul of its own: the windows' channels split into (G, C_in/G) and the
// result is (G, N·O, C_in/G·K) — or (G, C_in/G·K, N·O) — for a batched matmul over the groups.
//
// `column_panels` (transposed only): written as (G, N·O/NR, C_in/G·K, NR) and read back as (G, C_in/G·K, N·O), see
// below; NR is matmul's panel width (panel_width(): the outputs upcast_global takes per trip, 32 on AVX-512, 16
// on AVX2), and N·O must be a multiple of it.
constexpr int64_t kPageBytes = 4096;         // from this row length every row of a matrix is in a page of its own
Tensor im2col(const Tensor& windows, size_t spatial_dims, bool transposed = false, int64_t groups = 1,
              bool column_panels = false) {
  Shape s = windows.shape();  // (N, C_in, *o, *k)
  int64_t positions = s[0], taps = s[1] / groups;
  for (size_t i = 0; i < spatial_dims; i++) {
    positions *= s[2 + i];
    taps *= s[2 + spatial_dims + i];
  }
  // (N, G, C_in/G, *o, *k): axis 1 is the group, 2 the channel within it
  Shape split{s[0], groups, s[1] / groups};
  split.insert(split.end(), s.begin() + 2, s.end());
  std::vector<int64_t> position_axes{0}, tap_axes{2};  // (N, *o) and (C_in/G, *k)
  for (size_t i = 0; i < spatial_dims; i++) {
    position_axes.push_back(static_cast<int64_t>(3 + i));
    tap_axes.push_back(static_cast<int64_t>(3 + spatial_dims + i));
  }
  std::vector<int64_t> order{1};
  const std::vector<int64_t>& first = transposed ? tap_axes : position_axes;
  const std::vector<int64_t>& second = transposed ? position_axes : tap_axes;
  order.insert(order.end(), first.begin(), first.end());
  order.insert(order.end(), second.begin(), second.end());
  Shape matrix = transposed ? Shape{taps, positions} : Shape{positions, taps};
  if (groups > 1) matrix.insert(matrix.begin(), groups);
  const Tensor view = windows.reshape(split).permute(order);
  if (transposed && column_panels) {
    // The transposed matrix as the right operand of (C_out, C_in·K) @ (C_in·K, N·O) (a convolution into a
    // channel count 16 does not divide): each register tile reads 32 neighbouring columns of every row, and
    // rows N·O floats apart are each in a page of their own, which no hardware prefetcher crosses (Caffe's
    // LeNet's second layer, (50, 500) @ (500, 4096): 54 GFLOP/s). Written in column panels, the 500 × 32
    // floats one tile reads lie one after another: 98 GFLOP/s. (The packing of ops.cpp's matmul_packed, made
    // by the im2col's own copy.) The tap axes stay apart in the copy's loops, as for the row panels below.
    const int64_t nr = panel_width();
    Shape split_columns{groups, s[1] / groups};  // (G, C_in/G, *k, N·O/NR, NR)
    split_columns.insert(split_columns.end(), s.end() - spatial_dims, s.end());
    split_columns.push_back(positions / nr);
    split_columns.push_back(nr);
    const int64_t last = static_cast<int64_t>(split_columns.size()) - 1;
    std::vector<int64_t> to_panels{0, last - 1};  // (G, N·O/NR, C_in/G, *k, NR)
    for (int64_t i = 1; i < last - 1; i++) to_panels.push_back(i);
    to_panels.push_back(last);
    const Tensor panels = view.reshape(split_columns).permute(to_panels).contiguous();
    return panels.reshape({groups, positions / nr, taps, nr})
        .permute({0, 2, 1, 3})
        .reshape(matrix);
  }
  if (transposed || positions % kIm2colPanelRows || positions * taps * 4 < kIm2colPackMinBytes)
    return view.contiguous().reshape(matrix);
  // Written in the matmul's row panels (G, N·O/8, C_in/G·K, 8) and read back as (G, N·O, C_in/G·K) through a
  // view: the 8 rows that one register tile reads then lie next to each other, so its loads walk memory in
  // order (the rows of a plain row-major im2col are C_in·K apart, 8 short interleaved streams that the
  // hardware prefetchers do not follow once the matrix is larger than the caches: a (4, 8192, 144) batched
  // matmul ran at 40 GFLOP/s from memory against 110 from cache). The same copy, another layout.
  // The tap axes (C_in/G, *k) stay apart in the copy's loops: merged into one, each of its trips would
  // split its index back with a div and a mod.
  Shape split_rows{groups, positions / kIm2colPanelRows, kIm2colPanelRows};
  split_rows.push_back(s[1] / groups);
  split_rows.insert(split_rows.end(), s.end() - spatial_dims, s.end());
  std::vector<int64_t> to_panels{0, 1};  // (G, N·O/8, C_in/G, *k, 8)
  for (size_t i = 3; i < split_rows.size(); i++) to_panels.push_back(static_cast<int64_t>(i));
  to_panels.push_back(2);
  const Tensor panels = view.reshape(split_rows).permute(to_panels).contiguous();
  return panels.reshape({groups, positions / kIm2colPanelRows, taps, kIm2colPanelRows})
      .permute({0, 1, 3, 2})
      .reshape(matrix);
}

// The im2col (N·O, C_in·K) as the right operand of a matmul whose columns are the taps (groups 1): the taps
// padded with zero columns to a multiple of NR (panel_width) and written in column panels (C_in·K/NR,
// N, *o, NR), read back as (N·O, padded C_in·K) through a view. A register tile then reads its NR taps of every
// position one after another. Each panel's NR lanes split their tap into channel and kernel position with div/mods
// that do not change along the positions (upcast_divided_index makes them loop-invariant).
Tensor im2col_tap_panels(const Tensor& windows, size_t spatial_dims) {
  const Shape s = windows.shape();  // (N, C_in, *o, *k)
  int64_t positions = s[0], taps = s[1];
  for (size_t i = 0; i < spatial_dims; i++) {
    positions *= s[2 + i];
    taps *= s[2 + spatial_dims + i];
  }
  const int64_t nr = panel_width(), padded = (taps + nr - 1) / nr * nr;
  std::vector<int64_t> order{0};  // (N, *o, C_in, *k)
  for (size_t i = 0; i < spatial_dims; i++) order.push_back(static_cast<int64_t>(2 + i));
  order.push_back(1);
  for (size_t i = 0; i < spatial_dims; i++) order.push_back(static_cast<int64_t>(2 + spatial_dims + i));
  Shape by_position(s.begin(), s.begin() + 1);  // (N, *o, padded C_in·K / NR, NR)
  by_position.insert(by_position.end(), s.begin() + 2, s.begin() + 2 + static_cast<int64_t>(spatial_dims));
  Shape rows = by_position;
  rows.push_back(taps);
  by_position.push_back(padded / nr);
  by_position.push_back(nr);
  Pairs pad_taps;
  for (size_t i = 0; i + 1 < rows.size(); i++) pad_taps.push_back({0, 0});
  pad_taps.push_back({0, padded - taps});
  const int64_t last = static_cast<int64_t>(by_position.size()) - 1;
  std::vector<int64_t> to_panels{last - 1};  // (padded/NR, N, *o, NR)
  for (int64_t i = 0; i < last - 1; i++) to_panels.push_back(i);
  to_panels.push_back(last);
  const Tensor panels = windows.permute(order).reshape(rows).pad(pad_taps).reshape(by_position).permute(to_panels).contiguous();
  return panels.reshape({padded / nr, positions, nr}).permute({1, 0, 2}).reshape({positions, padded});
}

// A convolution is computed as a matmul over im2col when the matmul is big enough to gain from it: one
// group, at least kIm2colMinReduce input values per output (C_in·K), an output axis of at least
// kIm2colMinWidth to vectorize (the output channels, or else the batch × output positions), and at least
// kIm2colMinFlops of work (below, the copy and the extra kernels cost more than the direct loop nest).
// (cnn_digits' first layer, C_in·K = 9 and 0.6 MFLOP, is one: 0.055 ms direct, 0.03 ms with its copy)
constexpr int64_t kIm2colMinReduce = 8, kIm2colMinWidth = 16, kIm2colMinFlops = 1 << 18;
// the output channels an implicit GEMM needs (see conv_direct): a register tile's 8 rows
constexpr int64_t kImplicitMinChannels = 8;
// The most of a flat-row convolution's positions that may be cropped away (see flat_row_pitch): 2 of each row of
// 16 + 2 (3x3 on 16x16), 6 of 16 (5x5 on 14x14: LeNet-5's second layer), 4 of 12 (Caffe's LeNet's second layer)
constexpr double kFlatRowMaxCropped = 0.4;
// The shortest output rows conv_weight_grad keeps as the vector axis of its partial sums (see there)
constexpr int64_t kRowPartialMinWidth = 4;
// The weight gradient gains from it sooner: read in place, its loop nest reduces over the batch and the
// output positions with the input's window loads (and their padding masks) in the innermost loop, and its
// few outputs (C_out·C_in·K) leave nothing to vectorize (a first layer's 8x1x3x3 gradient: 2 GFLOP/s).
constexpr int64_t kIm2colWeightGradMinFlops = 1 << 16;

// 2·N·O·C_out·C_in·K: the multiply-adds of a convolution (and of its weight gradient)
int64_t conv_flops(int64_t batch, const Shape& out_positions, int64_t cout, int64_t cin, const Shape& kernel) {
  int64_t f = 2 * batch * cout * cin;
  for (int64_t d : out_positions) f *= d;
  for (int64_t d : kernel) f *= d;
  return f;
}

// The windows pool() takes for an im2col. With padding, the padded input is stored first (one small kernel over
// the input): im2col's copy then reads every window element from memory without a bounds check. Read
// through the pad's view, each of the K·C_in·N·O loads carries a mask, which keeps gcc from vectorizing the
// copy (a 16-channel 3×3 im2col of 32×32 images: 2.0 ms; 0.35 ms to pad + 0.72 ms to copy).
Tensor padded_windows(const Tensor& x, const Pairs& pads, const std::vector<int64_t>& k, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& dilation) {
  bool padded = false;
  for (const auto& [lo, hi] : pads) padded = padded || lo != 0 || hi != 0;
  const Tensor xp = x.pad(full_pads(x, pads));
  return pool(padded ? xp.contiguous() : xp, k, stride, dilation);
}

// The windows a direct convolution (or an implicit GEMM) reads: the input stored (x.contiguous(): x itself when it
// is a realized buffer already, a script's input or a layer's output of an earlier step), then read
// through the pad's view. The C renderer loads each row's lanes as one masked vector load
// (CRenderer::vector_accumulators), so no padded copy is needed; the input must be stored, since a producer
// fused into the convolution would run again in every tap's masked load (a transposed convolution over an
// output gradient 2·y read through the pad: 59 ms, against 2.4 ms). Read through the pad before the C renderer
// wrote masked vector loads, every load of the unrolled row was a masked select that gcc left scalar (a
// depthwise 3x3 of 32 x 16 x 28 x 28, padding 1: 0.58 ms; stored padded, 0.23 ms). 16 -> 16 channels 3x3 on 32 x
// 32 images, padding 1 (the implicit GEMM), alone: 0.21 ms padded copy + 1.91 ms, 1.72 ms through the pad.
Tensor stored_then_padded_windows(const Tensor& x, const Pairs& pads, const std::vector<int64_t>& k,
                                  const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation) {
  return pool(x.contiguous().pad(full_pads(x, pads)), k, stride, dilation);
}

// What a convolution's forward tells its weight gradient (conv_direct → conv_weight_grad).
struct ForwardIm2col {
  // the weight gradient is a channel-major matmul, g (C_out, N·O) @ the windows: the forward computed (C_out, N·O)
  // (few output channels, or a count 16 does not divide), so the output gradient arrives in that order too; or a
  // flat-row forward into a count 16 does not divide (g is copied to that order, a plane at a time)
  bool channel_major = false;
  // its transposed im2col (C_in·K, N·O), for the weight gradient to read instead of copying the windows again
  std::optional<Tensor> cols;
  // cols is a view of column panels (N·O/NR, C_in·K, NR) (see im2col)
  bool cols_in_panels = false;
  // the forward computed rows widened to kWideRow positions (widened_row): its stored input, padded on the
  // right, which the weight gradient reads in place too
  std::optional<Tensor> widened_input;
  // the forward computed flat rows (flat_row_pitch): its stored input, padded, with rows `pitch` apart and a row
  // more at the bottom, which the weight gradient reads in place too (its windows cut to the output positions)
  std::optional<Tensor> flat_input;
};

// Rows widened to 32 positions (an implicit GEMM for rows that 32 does not divide; C device, 2-D, one group,
// stride and dilation 1, output rows of 28 to 31 positions): the input is
// stored padded on the right so that each output row has 32 positions, the last few computed from the
// padding and cropped away, and no im2col is written. The forward is then a register tile of C_out rows ×
// 32 positions reading the input row shifted by each tap; the weight gradient keeps the 32 positions as an
// output axis (C_in, K, C_out, 32) summed over the batch and the rows (a register tile again, with the
// output gradient stored as (N, OH, C_out, 32) so that a tile's C_out × 32 loads are contiguous: in the
// layout (N, C_out, OH, 32) gcc assembled them from scalars, 1.9 ms instead of 0.6), then over the 32.
// LeNet-5's first layer (3 -> 6 channels 5x5 on 32x32 images, batch 32), each alone: forward 0.68 -> 0.28
// ms (its 7.5 MB im2col was 0.43 ms of it), weight gradient 0.55 -> 0.59 ms without needing the im2col.
// With a non-finite input value, a padded position multiplies it by a zero of the padded gradient: the
// weight gradient may be NaN where PyTorch's is infinite.
// From 16 output channels on, too (the thirty-ninth session; before, those took the im2col, K times the input
// written and read again, for the forward and for the input gradient's transposed convolution): the tile is
// then C_out/6 groups of 6 channels × 16 positions, and the weight gradient stays the matmul form over the windows
// (conv_weight_grad, weight_grad_over_windows; the widened form's tile of 4 ran 3x slower there). Each alone on
// Zen 3, 1 thread, forward / with both gradients: 32 × 16 × 28 × 28 → 32, 5x5, padding 2: 11.9 -> 8.4 / 38.3 -> 27.8
// ms (25.3 with the weight gradient over the windows in place); → 16, 3x3:
// 2.39 -> 1.55 / 6.45 -> 6.05 ms; 32 × 32 × 30 × 30 → 64, 3x3: 14.8 -> 12.0 / 46.4 -> 40.5 ms; 32 × 32 × 28 × 28 →
// 128: 26.7 -> 24.5 / 83.9 -> 77.1 ms; 3 input channels → 32 about the same (1.31 -> 1.50 ms with the gradients,
// within the noise of a 1.6 ms run: kernel by kernel 1.57 -> 1.64).
constexpr int64_t kWideRow = 32;
// The most bytes of g and x one chunk of images of the widened weight gradient reads (about two L1 data caches)
constexpr int64_t kWeightGradChunkBytes = int64_t{64} << 10;
// The most bytes of g and x one chunk of images of a weight gradient over the windows (weight_grad_over_windows)
// reads: half of a Zen 4 core's L2 (a quarter of this Xeon's), so that the chunk stays in L2 while every register
// tile of taps × output channels runs over it. Summed over the whole batch at once, each tile read all of g (8192
// positions × 64 channels, 2 MB for 32 × 64 × 16 × 16) again from L3: r_576_64_32_16_16 7.2-10.5 ms; in chunks of
// 4 images, 4.1-5.9 ms plus 0.03-0.07 ms to sum the chunks (the forty-fourth session, on the Xeon).
constexpr int64_t kWeightGradL2ChunkBytes = int64_t{512} << 10;
// The most bytes of one channel's g and x planes a chunk of images of the per-channel weight gradient (below,
// conv_weight_grad's row partial sums) reads: half an L1 data cache of 32 KiB, so that they stay in it while
// the register tile's tap rows run over them.
constexpr int64_t kWeightGradPlaneChunkBytes = int64_t{16} << 10;
// The images per chunk of a weight gradient split along the batch (split-K): the most whose bytes fit in
// `budget`, at least 1, and a divisor of the batch `bs`.
int64_t batch_chunk(int64_t bs, int64_t bytes_per_image, int64_t budget) {
  int64_t chunk = std::max<int64_t>(bs, 1);
  if (bs * bytes_per_image > budget)
    for (chunk = std::max<int64_t>(1, budget / bytes_per_image); bs % chunk != 0;) chunk--;
  return chunk;
}
int64_t widened_row(const Tensor& x, const Shape& o, int64_t groups, bool unit_stride, int64_t flops) {
  if (x.device() != "C" || o.size() != 2 || groups != 1 || !unit_stride) return 0;
  if (o.back() < kWideRow - 4 || o.back() >= kWideRow || flops < kIm2colMinFlops) return 0;
  return kWideRow;
}

// Flat rows (an implicit GEMM for rows that 32 does not divide, the forty-fourth session): the padded input is
// stored with its rows `pitch` floats apart and read as one flat axis per image, and output position q of that
// axis (row q / pitch, column q % pitch) sums the inputs q + kh·pitch + kw over the taps. The positions of a
// row past its OW outputs (pitch - OW of them) read the start of the next input row and are cropped away, so
// the positions of all rows are one axis of OH·pitch, whose lanes the register tile takes 32 at a time as it
// does a row of 32 (two vector loads of the flat input at every tap, no mask, no im2col): the wrap-around
// positions are computed and thrown away instead of masked.
// pitch: the padded input's width or a little more, so that 32 divides OH·pitch; 0 (not taken) where that
// pitch would crop more than kFlatRowMaxCropped of the positions. Measured alone on this session's Xeon (1
// thread, the old build and the new alternating): 4 groups of 16 -> 16 channels 3x3 on 16x16, batch 32 (pitch
// 18, 11% cropped), forward 3.9-4.3 -> 2.1-2.3 ms (the im2col it replaces was 9 times the input), with both
// gradients 8.9-9.4 -> 7.3-8.0; 32 -> 32 channels 2.2-2.7 -> 1.9-2.0 ms forward; 64 -> 64 about the same;
// 6 -> 16 channels 5x5 on 14x14 without padding (pitch 16, 37.5% cropped) 0.31-0.36 -> 0.23 ms forward.
// C device, 2-D, stride and dilation 1 (`eligible`), at least kImplicitMinChannels output channels a group.
int64_t flat_row_pitch(const Tensor& x, const Shape& o, const Shape& k, const Pairs& pads, int64_t groups, int64_t cout,
                       bool eligible) {
  if (!eligible || x.device() != "C" || o.size() != 2 || k.size() != 2 || cout / groups < kImplicitMinChannels) return 0;
  const int64_t width = x.shape()[3] + pads[1].first + pads[1].second;  // the padded input's
  for (int64_t pitch = width; pitch < width + 32; pitch++)
    if ((o[0] * pitch) % 32 == 0) return (pitch - o[1]) <= kFlatRowMaxCropped * pitch ? pitch : 0;
  return 0;
}

// The direct form of a convolution: every output sums its window's products. p: the windows (N, C_in, *o, *k),
// weight (C_out, C_in/groups, *k); returns (N, groups, C_out/groups, *o) (stored in that shape, the groups and their
// channels stay two loops: the register tile's rows are a group's channels, which share the input's loads). On C
// the passes give it a register tile of output channels x positions along the last output axis (the implicit
// GEMM, see conv_direct).
Tensor direct_form(const Tensor& p, const Tensor& weight, int64_t groups, const Shape& o, const Shape& HW) {
  const size_t n = o.size();
  const int64_t bs = p.shape()[0], cout = weight.shape()[0], cin = weight.shape()[1], rcout = cout / groups;
  Shape s1{bs, groups, cin, 1}, e1{bs, groups, cin, rcout};
  s1.insert(s1.end(), o.begin(), o.end());
  e1.insert(e1.end(), o.begin(), o.end());
  s1.insert(s1.end(), HW.begin(), HW.end());
  e1.insert(e1.end(), HW.begin(), HW.end());
  std::vector<int64_t> order{0, 1, 3};
  for (size_t i = 0; i < n; i++) order.push_back(static_cast<int64_t>(4 + i));
  order.push_back(2);
  for (size_t i = 0; i < HW.size(); i++) order.push_back(static_cast<int64_t>(4 + n + i));
  Tensor xs = p.reshape(s1).expand(e1).permute(order);  // (bs, groups, rcout, *o, cin, *HW)
  Shape ws{1, groups, rcout};
  for (size_t i = 0; i < n; i++) ws.push_back(1);
  ws.push_back(cin);
  ws.insert(ws.end(), HW.begin(), HW.end());
  std::vector<int64_t> red;
  for (size_t i = 0; i <= HW.size(); i++) red.push_back(-1 - static_cast<int64_t>(i));
  return xs.mul(weight.reshape(ws)).sum(red);
}

// Whether a convolution computed as a matmul (one group) has its output channels as the matmul's vector axis,
// (N·O, C_in·K) @ (C_in·K, C_out): from 16 channels when 16 divides them, or when the positions do not fill whole
// vectors; else channel-major, (C_out, C_in·K) @ (C_in·K, N·O) (see conv_direct), and so is its weight gradient.
bool channels_last_matmul(int64_t cout, int64_t positions) {
  return cout >= kIm2colMinWidth && (cout % 16 == 0 || positions % 32 != 0);
}

// The im2col form's choice (conv_direct): channels_last_matmul, except that a reduce shorter than
// kChannelsLastMinReduce (an RGB image's 3x3 taps, C_in·K = 27) takes the channel-major form whenever the
// positions fill whole vectors. Its channels-last im2col (N·O, 27) has rows of 27 floats gathered from nine
// 3-float runs of the input (with a stride, from every other column): no axis of the copy vectorizes, while the
// transposed im2col (27, N·O) is copied along rows of positions. The product's output (C_out, N·O) is then what
// NCHW consumers (BatchNorm) read along rows, and the weight gradient reads the same copy instead of making its
// own (conv_weight_grad). MobileNet's stem (32 × 3 × 32 × 32 → 16, 3x3, stride 2) in its step on the forty-sixth
// session's Xeon, medians over 23 steps (two runs of the new code): the im2col 0.20 -> 0.08-0.12 ms, the product
// 0.10 -> 0.08-0.12, the weight gradient with its copies of g 0.26 -> 0.13-0.18, two launches fewer; 16 × 3 × 64 ×
// 64 → 32 at stride 2 alone, forward and its weight gradient, 2.08 -> 1.75 ms.
constexpr int64_t kChannelsLastMinReduce = 32;
bool channels_last_im2col(int64_t cout, int64_t positions, int64_t reduce) {
  if (reduce < kChannelsLastMinReduce && positions % 32 == 0) return false;
  return channels_last_matmul(cout, positions);
}

// `forward`, when given, receives what the weight gradient can reuse (ForwardIm2col).
Tensor conv_direct(const Tensor& x, const Tensor& weight, int64_t groups, const std::vector<int64_t>& stride_,
                   const std::vector<int64_t>& dilation_, const Pairs& pads, ForwardIm2col* forward = nullptr) {
  size_t n = weight.ndim() - 2;
  if (weight.ndim() < 3 || x.ndim() != weight.ndim())
    throw std::runtime_error("conv2d: input " + shape_text(x.shape()) + " and weight " + shape_text(weight.shape()) +
                             " must both be (N, C, *spatial) and (C_out, C_in/groups, *kernel) with 1-3 spatial dims");
  int64_t bs = x.shape()[0], cin_ = x.shape()[1], cout = weight.shape()[0], cin = weight.shape()[1];
  if (groups <= 0 || groups * cin != cin_ || cout % groups)
    throw std::runtime_error("conv2d: input " + shape_text(x.shape()) + " does not match the weight " + shape_text(weight.shape()) +
                             " with groups=" + std::to_string(groups) + " (" + std::to_string(groups * cin) + " != " +
                             std::to_string(cin_) + " input channels)");
  auto stride = make_tuple(stride_, n, "conv2d stride"), dilation = make_tuple(dilation_, n, "conv2d dilation");
  std::vector<int64_t> HW(weight.shape().begin() + 2, weight.shape().end());
  Tensor p = pool(x.pad(full_pads(x, pads)), HW, stride, dilation);  // (bs, cin_, *o, *HW)
  Shape o(p.shape().begin() + 2, p.shape().begin() + 2 + n);
  int64_t k_size = 1;
  for (int64_t d : HW) k_size *= d;
  int64_t o_size = 1;
  for (int64_t d : o) o_size *= d;
  // Implicit GEMM (the im2col never stored): with stride and dilation 1, the windows of one output row are the
  // input row shifted by each tap, so a register tile over 8 output channels × 32 positions of a row reads
  // its 32 lanes of the stored input, through the pad (stored_then_padded_windows: masked vector loads), as two
  // vectors at every tap, exactly as it would read an im2col's row. Where the rows hold 32 positions (a 1×1
  // convolution without padding: all H·W of an image,
  // one loop after lowering merges them), that saves the im2col's copy, K times the input: 16 -> 16 channels
  // 3x3 on 32x32 images, forward 2.7 -> 1.5 ms, forward and backward 8.5 -> 6.3 ms (its input gradient is such
  // a convolution too); 64 -> 64 1x1 on 16x16: 0.9 -> 0.6 ms. Rows of 16 (16x16 images, 3x3) got slower this way
  // (1.8 -> 2.4 ms for 32 channels: a tile of 8 × 16 lanes has too few accumulators); they take flat rows instead
  // (flat_row_pitch: the rows of an image one axis, 32 lanes a tile), or the im2col where those would crop too much.
  bool unit_stride = true, padded = false;
  for (size_t i = 0; i < n; i++) {
    unit_stride = unit_stride && stride[i] == 1 && dilation[i] == 1;
    padded = padded || pads[i].first || pads[i].second;
  }
  if (const int64_t wide = widened_row(x, o, groups, unit_stride, conv_flops(bs, o, cout, cin, HW));
      wide && cin * k_size >= kIm2colMinReduce) {
    // (see widened_row) the input padded by its own padding plus (wide - OW) on the right, stored
    Pairs wpads = pads;
    wpads.back().second += wide - o.back();
    const Tensor xp = x.pad(full_pads(x, wpads)).contiguous();
    if (forward) forward->widened_input = xp;
    const int64_t oh = o[0];
    // windows (N, C_in, OH, 32, KH, KW) -> (N, 1, OH, 32, C_in·K), times w (1, C_out, 1, 1, C_in·K), summed
    const Tensor win = pool(xp, HW, stride, dilation).permute({0, 2, 3, 1, 4, 5}).reshape({bs, 1, oh, wide, cin * k_size});
    const Tensor y = win.mul(weight.reshape({1, cout, 1, 1, cin * k_size})).sum(std::vector<int64_t>{-1}).contiguous();
    return y.shrink({{0, bs}, {0, cout}, {0, oh}, {0, o.back()}});  // stored whole-width, read through the crop
  }
  const bool rows_of_32 = o.back() % 32 == 0 || (k_size == 1 && !padded && o_size % 32 == 0);
  if (const int64_t pitch = flat_row_pitch(x, o, HW, pads, groups, cout, unit_stride && !rows_of_32);
      pitch && cin * k_size >= kIm2colMinReduce && conv_flops(bs, o, cout, cin, HW) >= kIm2colMinFlops) {
    // (see flat_row_pitch) the input padded by its own padding, plus (pitch - its padded width) on the right
    // and a row at the bottom, stored, read as one axis of (H' + 1)·pitch positions
    const int64_t oh = o[0], q_size = oh * pitch, kh = HW[0], kw = HW[1];
    Pairs fpads = pads;
    fpads[0].second += 1;
    fpads[1].second += pitch - (x.shape()[3] + pads[1].first + pads[1].second);
    const Tensor xp = x.pad(full_pads(x, fpads)).contiguous();
    if (forward) {
      forward->flat_input = xp;
      // the weight gradient as after an im2col forward: a matmul channel-major when 16 does not divide C_out (it
      // copies g to (C_out, N·O), one plane at a time; channels-last, Caffe's LeNet's first layer's g (64, 20, 24,
      // 24) transposed to (N·O, 20) took 1.6 ms in its step, and its product over the windows 1.5 ms, against
      // 0.3 + 0.3 + 0.7 ms with the tap panels)
      forward->channel_major = groups == 1 && !channels_last_matmul(cout, bs * o_size);
    }
    const Tensor flat = xp.reshape({bs, cin_, xp.shape()[2] * pitch});
    // windows (N, C_in, Q, KH, KW) of the flat axis, q + kh·pitch + kw: the rows' taps (dilation pitch), then
    // the columns' (taps next to each other) of each
    const Tensor rows = pool(flat, {kh}, {1}, {pitch}).permute({0, 1, 3, 2});  // (N, C_in, KH, L)
    const Tensor win = pool(rows, {kw}, {1}, {1}).permute({0, 1, 3, 2, 4});    // (N, C_in, L', KH, KW)
    const Tensor w = win.shrink({{0, bs}, {0, cin_}, {0, q_size}, {0, kh}, {0, kw}}).reshape({bs, cin_, q_size, k_size});
    const Tensor y = direct_form(w, weight.reshape({cout, cin, k_size}), groups, {q_size}, {k_size}).contiguous();  // (N, G, C_out/G, Q)
    return y.reshape({bs, cout, oh, pitch}).shrink({{0, bs}, {0, cout}, {0, oh}, {0, o[1]}});  // read through the crop
  }
  const bool implicit = unit_stride && rows_of_32 && cin * k_size >= kIm2colMinReduce && cout / groups >= kImplicitMinChannels &&
                        conv_flops(bs, o, cout, cin, HW) >= kIm2colMinFlops;
  if (implicit) p = stored_then_padded_windows(x, pads, HW, stride, dilation);
  if (!implicit && groups > 1 && cin * k_size >= kIm2colMinReduce && cout / groups >= kIm2colMinWidth &&
      conv_flops(bs, o, cout, cin, HW) >= kIm2colMinFlops) {
    // a batched matmul over the groups: (G, N·O, C_in/G·K) @ (G, C_in/G·K, C_out/G), stored as
    // (G, N·O, C_out/G) and read as (N, C_out, *o)
    p = padded_windows(x, pads, HW, stride, dilation);
    const int64_t rcout = cout / groups;
    const Tensor w3 = weight.reshape({groups, rcout, cin * k_size}).transpose(1, 2).contiguous();  // (tiny) copied
    // so that each group's C_out/G outputs are contiguous in w: the register tile reads its rows
    Tensor y = im2col(p, n, /*transposed=*/false, groups).matmul(w3).contiguous();
    Shape ys{groups, bs};
    ys.insert(ys.end(), o.begin(), o.end());
    ys.push_back(rcout);
    std::vector<int64_t> order{1, 0, static_cast<int64_t>(n + 2)};  // (N, G, C_out/G, *o)
    for (size_t i = 0; i < n; i++) order.push_back(static_cast<int64_t>(2 + i));
    Shape out{bs, cout};
    out.insert(out.end(), o.begin(), o.end());
    return y.reshape(ys).permute(order).reshape(out);
  }
  if (!implicit && groups == 1 && cin * k_size >= kIm2colMinReduce && std::max(cout, bs * o_size) >= kIm2colMinWidth &&
      conv_flops(bs, o, cout, cin, HW) >= kIm2colMinFlops) {
    p = padded_windows(x, pads, HW, stride, dilation);
    const Tensor w2 = weight.reshape({cout, cin * k_size});
    std::vector<int64_t> order;
    Shape ys;
    Tensor y;
    // A channel count 16 does not divide (Caffe's LeNet: 20, 50) takes the channel-major form below when the
    // positions fill whole vectors: the channels-last form padded 20 channels to 32 (a third of its work
    // wasted), and a max-pool reading channels-last through the (N, C_out, *o) view loads every element 20
    // floats from the last (1.6 ms for 64 × 20 × 24 × 24, against 0.1 ms along contiguous rows).
    if (channels_last_im2col(cout, bs * o_size, cin * k_size)) {
      // (N·O, C_in·K) @ (C_in·K, C_out), stored as (N·O, C_out) and read as (N, C_out, *o)
      y = im2col(p, n).matmul(w2.transpose()).contiguous();
      ys = {bs};
      ys.insert(ys.end(), o.begin(), o.end());
      ys.push_back(cout);
      order = {0, static_cast<int64_t>(n + 1)};
      for (size_t i = 0; i < n; i++) order.push_back(static_cast<int64_t>(1 + i));
    } else {
      // few output channels (a convolution's input gradient into 8 channels), a count 16 does not divide, or a short
      // reduce (see channels_last_im2col):
      // (C_out, C_in·K) @ (C_in·K, N·O), vectorized along the positions, stored as (C_out, N·O), read as
      // (N, C_out, *o)
      // Beyond a core's L2, in column panels (LeNet-5's first layer, (6, 75) @ (75, 25088): 1.2 -> 0.4 ms from
      // cold caches). The weight gradient reads the same copy when C_out is under 16 (its dot products sum
      // chunks of whole panels); from 16 on it copies the windows for itself with the taps as the vector
      // axis (im2col_tap_panels; read as dWᵀ = cols @ gᵀ, 8 or 10 rows of taps at a time along N·O, these
      // panels jumped a panel every 32 steps: Caffe's (500, 4096) @ (4096, 64) 2.5 -> 5.4 ms).
      const bool panels = (bs * o_size) % panel_width() == 0 && bs * o_size * cin * k_size * 4 >= kIm2colPackMinBytes;
      const Tensor cols = im2col(p, n, /*transposed=*/true, 1, panels);
      if (forward) {
        forward->channel_major = true;
        forward->cols = cols;
        forward->cols_in_panels = panels;
      }
      y = w2.matmul(cols).contiguous();
      ys = {cout, bs};
      ys.insert(ys.end(), o.begin(), o.end());
      order = {1, 0};
      for (size_t i = 0; i < n; i++) order.push_back(static_cast<int64_t>(2 + i));
    }
    return y.reshape(ys).permute(order);
  }
  // The direct form: every output sums its window's products. On C a padded input is read through the pad
  // from a stored input (stored_then_padded_windows). Small convolutions keep one kernel: storing the input
  // would cost a launch more than the masks.
  if (padded && x.device() == "C" && conv_flops(bs, o, cout, cin, HW) >= kIm2colMinFlops)
    p = stored_then_padded_windows(x, pads, HW, stride, dilation);
  Shape out{bs, cout};
  out.insert(out.end(), o.begin(), o.end());
  return direct_form(p, weight, groups, o, HW).reshape(out);
}

// The chunk of positions the weight gradient's dot products are split into (split-K, see conv_weight_grad)
// when its im2col (taps × positions floats) is beyond a core's L2: the smallest multiple of 16 (or of
// `multiple_of`) from 256 to 2048 that divides `positions`, so that a chunk's rows of the im2col (taps × chunk
// floats) stay in cache; 0 for no split. (LeNet-5's first layer, alone: chunks of 128 positions 851 µs, 256
// 587, 512 691, 1568 801 — shorter chunks more partial sums, longer ones fewer cache hits.)
int64_t split_k_chunk(int64_t taps, int64_t positions, int64_t multiple_of = 16) {
  if (taps * positions * 4 < kIm2colPackMinBytes) return 0;
  for (int64_t c = 256; c <= 2048 && c < positions; c += multiple_of)
    if (positions % c == 0) return c;
  return 0;
}

// The output gradient g (N, C_out, *o) stored channel-major, as (C_out, N·O): what the col2im input gradient's
// matmul and a channel-major weight gradient read. conv() makes it once for both (two copies of a max-pool's
// backward into the same layout cost 0.2-0.5 ms in Caffe's LeNet's step).
Tensor channel_major_gradient(const Tensor& g) {
  std::vector<int64_t> channels_first{1, 0};  // (C_out, N, *o)
  for (int64_t i = 2; i < g.ndim(); i++) channels_first.push_back(i);
  return g.permute(channels_first).contiguous().reshape({g.shape()[1], g.numel() / g.shape()[1]});
}

// A weight gradient as an implicit GEMM (a matmul whose left operand is read through the windows' view, never
// copied): dWᵀ (G, C_in/G·K, C_out/G) = Σ over (N, *o) of cols (G, C_in/G·K, N, *o) · g (G, N, *o, C_out/G), from
// the windows p (N, C_in, *o, *k) and the output gradient g_cl (G, N·O, C_out/G), channels last. The sum runs over
// the batch and the output axes as nested reduce loops, so each index is affine in them; the register tile's rows
// are taps (C_in/G, *k folded into one axis, their divisions and modulos outside the reduce loops), each a
// broadcast of one input value per position, its vector the output channels: what the tile read from a stored
// transposed im2col (K times the input, written and read again: 3.0 ms of the 29 a 16 -> 32 channel 5x5 layer on
// 28x28 maps took with its gradients). Read through one merged reduce over N·O, the view had put a division per
// element in the inner loop (3 GFLOP/s).
// (2, 0, 1, 3, 4, ...): axis 2 (the chunks) first
std::vector<int64_t> chunks_first(size_t ndim) {
  std::vector<int64_t> order{2, 0, 1};
  for (size_t i = 3; i < ndim; i++) order.push_back(static_cast<int64_t>(i));
  return order;
}

Tensor weight_grad_over_windows(const Tensor& p, const Tensor& g_cl, int64_t groups) {
  const size_t n = (p.shape().size() - 2) / 2;
  const int64_t bs = p.shape()[0], cin = p.shape()[1] / groups, rcout = g_cl.shape()[2];
  const Shape o(p.shape().begin() + 2, p.shape().begin() + 2 + static_cast<std::ptrdiff_t>(n));
  const Shape k(p.shape().begin() + 2 + static_cast<std::ptrdiff_t>(n), p.shape().end());
  Shape split{bs, groups, cin};  // (N, G, C_in/G, *o, *k) -> (G, C_in/G, *k, N, *o), a view
  split.insert(split.end(), p.shape().begin() + 2, p.shape().end());
  std::vector<int64_t> cols_order{1, 2};
  for (size_t i = 0; i < n; i++) cols_order.push_back(static_cast<int64_t>(3 + n + i));
  cols_order.push_back(0);
  for (size_t i = 0; i < n; i++) cols_order.push_back(static_cast<int64_t>(3 + i));
  // split-K along the batch (see kWeightGradL2ChunkBytes): (chunks, G, C_in/G·K, chunk, *o, 1) and (chunks, G, 1,
  // chunk, *o, C_out/G), summed over the chunk and the output axes, then over the chunks
  int64_t image_bytes = (static_cast<int64_t>(groups) * rcout + p.shape()[1]) * 4;  // one image's g and x, roughly
  for (int64_t d : o) image_bytes *= d;
  const int64_t chunk = batch_chunk(bs, image_bytes, kWeightGradL2ChunkBytes), chunks = bs / chunk;
  Shape cols_shape{groups, cin * shape_numel(k), chunks, chunk}, g_shape{groups, 1, chunks, chunk};
  cols_shape.insert(cols_shape.end(), o.begin(), o.end());
  g_shape.insert(g_shape.end(), o.begin(), o.end());
  cols_shape.push_back(1);
  g_shape.push_back(rcout);
  std::vector<int64_t> summed;  // the chunk and the output axes
  for (size_t i = 0; i <= n; i++) summed.push_back(static_cast<int64_t>(3 + i));
  const Tensor cols = p.reshape(split).permute(cols_order).reshape(cols_shape).permute(chunks_first(cols_shape.size()));
  const Tensor partial = cols.mul(g_cl.reshape(g_shape).permute(chunks_first(g_shape.size()))).sum(summed).contiguous();
  return chunks == 1 ? partial.reshape({groups, cin * shape_numel(k), rcout}) : partial.sum(std::vector<int64_t>{0}).contiguous();
}

// dL/dweight of conv_direct(x, weight): for each weight element, the sum over the batch and the output
// positions of the output gradient times the input element that weight element met (PyTorch's
// convolution_backward for the weight). g: (N, C_out, *o); returns the weight's shape (C_out, C_in/groups, *k).
// `forward`: what conv_direct's forward left (its order, its transposed im2col of x), else null.
// `g_cm`: channel_major_gradient(g) when the caller has it, else null; `g_cm_stored`: the caller's other
// gradients read g_cm too, so it is stored whichever layout this one picks.
// `dbias`, when given, receives dL/dbias (C_out): the sum of g over the batch and the output positions, read
// from the copy of g the weight gradient stores (contiguous per channel) where it makes one. Summed
// through g's own view, the reduction recomputed g's producers (a ReLU's and a max-pool's backward) in a
// loop nest over 6 channels with 28-wide rows: 0.8 ms for LeNet-5's first layer, 0.02 ms from the copy.
Tensor conv_weight_grad(const Tensor& x, const Tensor& g, const Shape& wshape, int64_t groups, const std::vector<int64_t>& stride,
                        const std::vector<int64_t>& dilation, const Pairs& pads, const ForwardIm2col* forward = nullptr,
                        const Tensor* g_cm = nullptr, bool g_cm_stored = false, Tensor* dbias = nullptr) {
  const size_t n = wshape.size() - 2;
  const std::vector<int64_t> HW(wshape.begin() + 2, wshape.end());
  const int64_t bs = x.shape()[0], cin = wshape[1], rcout = wshape[0] / groups;
  Tensor p = pool(x.pad(full_pads(x, pads)), HW, stride, dilation);  // (N, C_in, *o, *k)
  const Shape o(p.shape().begin() + 2, p.shape().begin() + 2 + n);
  // The windows of the input the forward stored padded (its rows widened on the right, or flat rows), cut to the
  // output's positions: no second padded copy of x. Else a padded copy of its own.
  auto stored_windows = [&]() -> Tensor {
    const std::optional<Tensor>* stored = nullptr;
    if (forward) stored = forward->widened_input ? &forward->widened_input : &forward->flat_input;
    if (!stored || !*stored) return padded_windows(x, pads, HW, stride, dilation);
    Pairs cut;
    for (int64_t d : p.shape()) cut.push_back({0, d});
    return pool(**stored, HW, stride, dilation).shrink(cut);
  };
  if (forward && forward->widened_input && wshape[0] < kIm2colMinWidth) {
    // rows widened to 32 (see widened_row), fewer than 16 output channels (from 16 on the matmul form below,
    // over the windows read in place, is faster): g padded to (N, C_out, OH, 32), stored as (N, OH, C_out, 32)
    const Tensor& xp = *forward->widened_input;
    const int64_t cout = wshape[0], oh = o[0], ow = o[1], kh = HW[0], kw = HW[1];
    const int64_t wide = xp.shape()[3] - (kw - 1);
    const Tensor gp = g.pad({{0, 0}, {0, 0}, {0, 0}, {0, wide - ow}}).permute({0, 2, 1, 3}).contiguous().permute({0, 2, 1, 3});
    if (dbias) *dbias = gp.sum(std::vector<int64_t>{0, 2, 3});
    // Split along the batch (split-K) when g and x are beyond kWeightGradChunkBytes: each of the C_in·K taps'
    // sums reads all of it, and a chunk of images small enough keeps its rows of g and x in cache while the
    // taps run over them; a second kernel sums the chunks' partial results. (LeNet-5's first layer on Zen 3,
    // L2 512 KiB, 1 thread: g's 688 KiB read 75 times from L3, 1.3-1.8 ms (14 GFLOP/s); in chunks of 4 images or of
    // 2, 0.77 ms; one image a chunk (35 KiB), 0.40 ms (65 GFLOP/s), its partial sums' kernel under 0.07.)
    const int64_t image_bytes = (oh * cout * wide + cin * xp.shape()[2] * xp.shape()[3]) * 4;
    const int64_t chunk = batch_chunk(bs, image_bytes, kWeightGradChunkBytes);  // (an empty batch has no FLOPs)
    const int64_t chunks = bs / chunk;
    // windows (N, C_in, OH, 32, KH, KW) -> (chunks, chunk, C_in, KH, KW, 1, OH, 32); g -> (chunks, chunk, 1, 1, 1,
    // C_out, OH, 32)
    const Tensor win = pool(xp, HW, stride, dilation).permute({0, 1, 4, 5, 2, 3}).reshape({chunks, chunk, cin, kh, kw, 1, oh, wide});
    const Tensor partial =
        gp.reshape({chunks, chunk, 1, 1, 1, cout, oh, wide}).mul(win).sum(std::vector<int64_t>{1, 6}).contiguous();
    // (chunks, C_in, KH, KW, C_out, 32): the chunks and the 32 positions summed, then (C_out, C_in, KH, KW)
    return partial.sum(std::vector<int64_t>{0, -1}).permute({3, 0, 1, 2});
  }
  if (groups == 1 && conv_flops(bs, o, wshape[0], cin, HW) >= kIm2colWeightGradMinFlops) {
    // As a matmul over the transposed im2col: cols (C_in·K, N·O) holds, for every tap, its input values
    // at every output position, and dW (C_out, C_in·K) sums the output gradient times them over those
    // positions. Which operand is the matmul's "w" decides which axis gets the vector registers:
    //  * C_out >= kIm2colMinWidth: dWᵀ = cols @ g_nhwc, g copied to (N·O, C_out) (channels last), so the
    //    C_out outputs of a tap are contiguous (upcast_global) and the taps are the register tile's rows;
    //    cols is then the windows' view itself, not a copy (see below);
    //    after a channel-major forward (C_out 16 does not divide), dW = g (C_out, N·O) @ im2col (N·O, C_in·K)
    //    instead, the taps the vector axis and C_out the tile's rows (see below);
    //  * fewer output channels (a first layer with 8): every output is a dot product of two rows that
    //    are contiguous over N·O, summed with a vector of partial sums (upcast_reduce).
    // The result is stored by its own kernel: fused into the optimizer's update, the kernel would loop
    // over the weight's short axes and lose the matmul's loop structure.
    p = stored_windows();
    int64_t o_size = 1;
    for (int64_t d : o) o_size *= d;
    const int64_t cout = wshape[0], taps = shape_numel(wshape) / cout, positions = bs * o_size;
    // (C_in·K, N·O): the forward's when it made one with the same windows (few output channels)
    const bool reuses_forward_cols = forward && forward->cols && forward->cols->shape() == Shape{taps, positions} &&
                                     (!forward->cols_in_panels || cout < kIm2colMinWidth);
    const bool panels = reuses_forward_cols && forward->cols_in_panels;
    // not built where a branch below makes a copy of its own (im2col_tap_panels): the graph's nodes are host work
    auto transposed_cols = [&] { return reuses_forward_cols ? *forward->cols : im2col(p, n, /*transposed=*/true); };
    // g as (N·O, C_out): a 2-D transpose of the channel-major g when the input gradient stores that anyway; g's
    // producers (a max-pool's backward) computed channels-last read their inputs C_out·… apart in every trip
    // (LeNet-5's second layer, 32 × 16 × 10 × 10: 0.10-0.14 ms, a few µs as a transpose)
    auto channels_last_g = [&] {
      std::vector<int64_t> nhwc{0};  // (N, *o, C_out)
      for (size_t i = 0; i < n; i++) nhwc.push_back(static_cast<int64_t>(2 + i));
      nhwc.push_back(1);
      return g_cm && g_cm_stored ? g_cm->transpose(0, 1).contiguous() : g.permute(nhwc).contiguous().reshape({positions, cout});
    };
    if (cout >= kIm2colMinWidth) {
      // (reuses_forward_cols: the forward was channel-major, and from 16 output channels its cols are not in panels)
      if (reuses_forward_cols && taps < kChannelsLastMinReduce) {
        // A short reduce's channel-major forward (channels_last_im2col) left its im2col (C_in·K, N·O) unpacked:
        // dWᵀ (C_in·K, C_out) = cols @ g (N·O, C_out) reads it, where the form below copies the windows again
        // as tap panels (whose taps, 27 padded to 32, are most of what it reads). MobileNet's stem (16 channels,
        // 3x3 on RGB, stride 2) in its step, kernel by kernel: g stored channel-major, the tap copy and the
        // product, 0.05 + 0.11 + 0.14 ms -> g stored channels-last and the product, 0.03-0.05 + 0.08 ms. Forward
        // and weight gradient alone, 3x3 at stride 2 into 16 / 20 / 48 channels (3 or 2 input channels) and into
        // 24 from 1: 0.68 / 0.51 / 0.74 / 0.45 -> 0.51 / 0.47 / 0.67 / 0.34 ms (the same sums in the same order).
        const Tensor g_nhwc = channels_last_g();
        if (dbias) *dbias = g_nhwc.sum(std::vector<int64_t>{0});
        return forward->cols->matmul(g_nhwc).contiguous().transpose(0, 1).reshape(wshape);
      }
      if (forward && forward->channel_major) {
        // The forward was channel-major (conv_direct), and so is g: stored in its own order (computed
        // straight into (N, *o, C_out), the ops that produce g, a max-pool's backward, read their inputs
        // C_out·… apart in every trip: 0.56 ms for Caffe's LeNet's 64 × 50 × 8 × 8).
        const Tensor gm = g_cm ? *g_cm : channel_major_gradient(g);
        if (dbias) *dbias = gm.sum(std::vector<int64_t>{1});
        // dW (C_out, C_in·K) = g (C_out, N·O) @ the im2col (N·O, C_in·K) with its taps in padded column panels:
        // C_out is the register tile's rows (10 of Caffe's 50), the taps its vector axis, padded from 500 to
        // 512 (2% more work). As dWᵀ = cols @ gᵀ, C_out was the vector axis, padded from 50 to 64 (28% more),
        // and g took three copies (transposed, padded, packed): Caffe's LeNet's second layer 3.8-4.2 -> 2.9-3.0 ms
        // from cold caches, its copies included.
        Pairs keep{{0, cout}, {0, taps}};
        return gm.matmul(im2col_tap_panels(p, n)).contiguous().shrink(keep).reshape(wshape);
      }
      const Tensor g_nhwc = channels_last_g();
      if (dbias) *dbias = g_nhwc.sum(std::vector<int64_t>{0});
      // dWᵀ (C_in·K, C_out) with cols the windows' view read in place (weight_grad_over_windows): 32 × 16 × 28 × 28
      // → 32, 5x5, forward and both gradients alone on Zen 3: 29.4 -> 25.9 ms (its im2col was 3.0 ms, the product the
      // same 8.2); 32 × 16 × 32 × 32 → 16, 3x3: 8.9 -> 7.2 ms; 64 → 64 on 16x16: 25.8 -> 24.8 ms
      const Tensor dwt = weight_grad_over_windows(p, g_nhwc.reshape({1, positions, cout}), 1);  // (1, C_in·K, C_out)
      return dwt.reshape({taps, cout}).transpose(0, 1).reshape(wshape);
    }
    Tensor gm = (g_cm ? *g_cm : channel_major_gradient(g)).reshape({cout, 1, positions});
    if (dbias) *dbias = gm.reshape({cout, positions}).sum(std::vector<int64_t>{1});
    const Tensor cols = transposed_cols();
    const int64_t chunk = split_k_chunk(taps, positions, panels ? panel_width() : 16);
    if (panels) {
      // The forward's im2col in column panels (N·O/NR, C_in·K, NR): a chunk of positions (all of them when
      // there is no split) is chunk/NR runs of NR in neighbouring panels, summed over two reduce axes (the
      // runs, the 32 in each), every index affine.
      const int64_t nr = panel_width(), chunks = chunk ? positions / chunk : 1, runs = (chunk ? chunk : positions) / nr;
      const Tensor g_runs = gm.reshape({cout, chunks, runs, nr}).permute({1, 0, 2, 3}).reshape({chunks, cout, 1, runs, nr});
      const Tensor c_runs = cols.reshape({taps, chunks, runs, nr}).permute({1, 0, 2, 3}).reshape({chunks, 1, taps, runs, nr});
      const Tensor partial = g_runs.mul(c_runs).sum(std::vector<int64_t>{-2, -1}).contiguous();  // (chunks, C_out, C_in·K)
      return chunks == 1 ? partial.reshape(wshape) : partial.sum(std::vector<int64_t>{0}).contiguous().reshape(wshape);
    }
    if (chunk) {
      // Beyond a core's L2 each dot product streams its im2col row from memory again for every output
      // channel (LeNet-5's first layer: 6 passes over 7.5 MB, 1.1-1.8 ms). Split along the positions
      // (split-K): per chunk of positions, the channels' and the taps' slices stay in cache while all
      // C_out × C_in·K dot products run over them, and a second kernel sums the chunks' partial results.
      const int64_t chunks = positions / chunk;
      const Tensor g_chunks = gm.reshape({cout, chunks, chunk}).permute({1, 0, 2}).reshape({chunks, cout, 1, chunk});
      const Tensor c_chunks = cols.reshape({taps, chunks, chunk}).permute({1, 0, 2}).reshape({chunks, 1, taps, chunk});
      const Tensor partial = g_chunks.mul(c_chunks).sum(std::vector<int64_t>{-1}).contiguous();  // (chunks, C_out, C_in·K)
      return partial.sum(std::vector<int64_t>{0}).contiguous().reshape(wshape);
    }
    return gm.mul(cols.reshape({1, taps, positions})).sum(std::vector<int64_t>{-1}).contiguous().reshape(wshape);
  }
  if (groups > 1 && rcout >= kIm2colMinWidth && conv_flops(bs, o, wshape[0], cin, HW) >= kIm2colWeightGradMinFlops) {
    // per group as above: dWᵀ (G, C_in/G·K, C_out/G) = cols (G, C_in/G·K, N·O) @ g (G, N·O, C_out/G), cols the
    // windows' view read in place (weight_grad_over_windows; a 4-group 3x3 layer, 32 × 64 × 16 × 16 → 64, forward
    // and both gradients alone: 9.5 -> 8.6 ms; 2 groups on 28x28 maps 32.4 -> 29.3 ms)
    int64_t positions = bs;
    for (int64_t d : o) positions *= d;
    p = stored_windows();
    std::vector<int64_t> order{1, 0};  // g (N, G, C_out/G, *o) → (G, N, *o, C_out/G)
    for (size_t i = 0; i < n; i++) order.push_back(static_cast<int64_t>(3 + i));
    order.push_back(2);
    Shape gsplit{bs, groups, rcout};
    gsplit.insert(gsplit.end(), o.begin(), o.end());
    Tensor g_cl = g.reshape(gsplit).permute(order).contiguous().reshape({groups, positions, rcout});
    if (dbias) *dbias = g_cl.sum(std::vector<int64_t>{1}).reshape({wshape[0]});  // (G, C_out/G): channel g·C_out/G + c
    return weight_grad_over_windows(p, g_cl, groups).transpose(1, 2).reshape(wshape);
  }
  Shape ps{bs, groups, 1, cin}, gs{bs, groups, rcout, 1}, full{bs, groups, rcout, cin};
  ps.insert(ps.end(), o.begin(), o.end());
  gs.insert(gs.end(), o.begin(), o.end());
  full.insert(full.end(), o.begin(), o.end());
  ps.insert(ps.end(), HW.begin(), HW.end());
  full.insert(full.end(), HW.begin(), HW.end());
  for (size_t i = 0; i < n; i++) gs.push_back(1);
  std::vector<int64_t> axes{0};  // the batch and the output positions
  for (size_t i = 0; i < n; i++) axes.push_back(static_cast<int64_t>(4 + i));
  if (dbias) {
    std::vector<int64_t> batch_and_positions{0};  // g (N, C_out, *o)
    for (size_t i = 0; i < n; i++) batch_and_positions.push_back(static_cast<int64_t>(2 + i));
    *dbias = g.sum(batch_and_positions);
  }
  const Tensor products = p.reshape(ps).expand(full).mul(g.reshape(gs).expand(full));
  if (x.device() == "C" && n >= 1 && o.back() >= kRowPartialMinWidth && conv_flops(bs, o, wshape[0], cin, HW) >= kIm2colMinFlops) {
    // Partial sums that keep the last output axis (a row of positions), then the sum along it: summed at once,
    // every tap's dot product ran over the whole batch by itself, 4 lanes wide (a depthwise 3x3 of 32 x 16 x 28
    // x 28: 1.7-1.9 ms); with the row as the output's vector axis and the taps as a register tile, 0.84 ms
    // (the same split as widened_row's weight gradient; reading a padded copy of x instead of masked loads
    // gave 0.82 ms plus the copy's 0.12). Rows from kRowPartialMinWidth positions: below 16 the row is a
    // partly masked vector, and still far faster than the whole sum's one chain of scalar multiply-adds
    // (depthwise 3x3, 32 x 16 x 14 x 14: forward and both gradients 1.24 -> 0.20 ms; 32 x 24 x 28 x 28 at
    // stride 2, rows of 14: 2.37 -> 0.96 ms).
    // The batch is split into chunks whose planes of one channel stay in L1 while the tile's tap rows run
    // over them (split-K, as widened_row's): read once per tap row over the whole batch, they came from L2
    // (depthwise 3x3, 32 x 32 x 20 x 20: forward and both gradients 0.61 -> 0.53-0.56 ms).
    int64_t g_plane = 1, x_plane = 1;  // one image's g and x planes of one channel
    for (size_t i = 0; i < n; i++) g_plane *= o[i], x_plane *= x.shape()[2 + i];
    const int64_t plane_bytes = (g_plane + x_plane) * 4;
    const int64_t chunk = batch_chunk(bs, plane_bytes, kWeightGradPlaneChunkBytes), chunks = bs / chunk;
    Shape split{chunks, chunk};
    split.insert(split.end(), full.begin() + 1, full.end());
    std::vector<int64_t> order{0, 1, 2, 3, 4};  // (chunks, chunk, G, C_out/G, C_in/G, *k, *o)
    for (size_t i = 0; i < n; i++) order.push_back(static_cast<int64_t>(5 + n + i));
    for (size_t i = 0; i < n; i++) order.push_back(static_cast<int64_t>(5 + i));
    // The taps as one axis (chunks, chunk, G, C_out/G, C_in/G, K, *o): the register tile takes all K of them as
    // its rows (its loads of a tap's row are then constants apart, the tap's kh and kw folded), so every row of g
    // is loaded once for all taps, and K accumulators chain their multiply-adds side by side. With kh and kw
    // apart, the tile took the kw taps of one kh (3 accumulators, a chain of 4-cycle multiply-adds each) and the
    // kh loop read g again: a depthwise 3x3's weight gradient on 7x7 maps (32 x 64), alone on Zen 3, 0.057 ->
    // 0.032 ms; at stride 2 (32 x 24 x 28 x 28) 0.139 -> 0.118.
    Shape merged{chunks, chunk, groups, rcout, cin, shape_numel(HW)};
    merged.insert(merged.end(), o.begin(), o.end());
    std::vector<int64_t> outer{1};  // the images of a chunk and every output axis but the last
    for (size_t i = 0; i + 1 < n; i++) outer.push_back(static_cast<int64_t>(6 + i));
    // (chunks, G, C_out/G, C_in/G, K, o_last), then summed over the chunks and the last axis
    const Tensor partial = products.reshape(split).permute(order).reshape(merged).sum(outer).contiguous();
    return partial.sum(std::vector<int64_t>{0, -1}).reshape(wshape);
  }
  return products.sum(axes).reshape(wshape);
}

// dL/dx of a strided convolution, or of one whose output is much smaller than its input, as a matmul and a
// col2im (PyTorch's slow_conv2d backward does the same; Caffe's col2im): dcols (C_in·K, N·O) =
// Wᵀ (C_in·K, C_out) @ g (C_out, N·O), then each input element sums the
// entries of dcols that its windows put it in. The transposed convolution of the stride-s gradient would
// instead insert s−1 zeros between its elements and convolve that: s² times the multiply-adds (most with a
// zero) and an im2col s² times larger (a stride-2 3×3 input gradient, 32×64×8×8 → 32×32×16×16: 10 ms to copy,
// 3.1 ms of matmul; this way 0.7 ms of matmul).
// The col2im is one elementwise kernel, written by stride phase: the input positions h = q·s + a with the same
// phase a receive from the same taps (those with tap·dilation − padding ≡ a mod s), each tap's slice of dcols
// shifted by a constant. So the result is built as (C_in, N, Q_1, s_1, Q_2, s_2, ...): every phase a sum of
// shifted slices, padded into its place on the phase axes, all phases summed (they do not overlap), then
// merged to (C_in, N, Q·s, ...), cut to the input's size and read as (N, C_in, *in). No index in it needs
// more than a shift. Channel-major, its loads of a tap's slice run along the batch of one channel, and it is
// stored in the order the previous layer's weight gradient reads its output gradient in (Caffe's LeNet's
// 50 -> 20 channels: 0.65 -> 0.57 ms alone against (N, C_in, ...)).
// Groups 1; x: (N, C_in, *in), g_cm: channel_major_gradient(g) of g (N, C_out, *o), o: g's output positions,
// weight (C_out, C_in, *k).
Tensor conv_input_grad_col2im(const Shape& xshape, const Tensor& g_cm, const Tensor& weight, const std::vector<int64_t>& stride,
                              const std::vector<int64_t>& dilation, const Pairs& pads, const Shape& o) {
  const size_t n = weight.ndim() - 2;
  const int64_t bs = xshape[0], cin = xshape[1], cout = weight.shape()[0];
  const Shape k(weight.shape().begin() + 2, weight.shape().end());
  int64_t positions = bs, taps = 1;
  for (int64_t d : o) positions *= d;
  for (int64_t d : k) taps *= d;
  // dcols laid out (C_in, *k, N, *o): a tap's slice is then contiguous along the last output axis, the axis
  // the col2im's loop runs along (laid out (N, *o, C_in, *k) its loads were C_in·K apart: a gather per
  // element, 2.7 ms for Caffe's LeNet's second layer). Computed as Wᵀ (C_in·K, C_out) @ g (C_out, N·O).
  Tensor g_right = g_cm;
  if (positions % panel_width() == 0 && positions * 4 >= kPageBytes) {
    // g as the matmul's right operand, copied into column panels (N·O/NR, C_out, NR) for the reason im2col's
    // column_panels gives: its rows, N·O floats apart, are each in a page of their own. From the stored
    // g_cm, not from g's producers: a max-pool's backward written straight into panels splits every
    // 32-position run into image rows with a div and a mod (LeNet-5: 0.05 -> 0.46 ms). (Caffe's LeNet's
    // second layer, (500, 50) @ (50, 4096): 2.6 -> 2.3 ms from cold caches, with register_tile's order.)
    g_right = g_cm.reshape({cout, positions / panel_width(), panel_width()})
                  .permute({1, 0, 2})
                  .contiguous()
                  .permute({1, 0, 2})
                  .reshape({cout, positions});
  }
  Shape cols_shape{cin};  // (C_in, *k, N, *o)
  cols_shape.insert(cols_shape.end(), k.begin(), k.end());
  cols_shape.push_back(bs);
  cols_shape.insert(cols_shape.end(), o.begin(), o.end());
  const Tensor dcols = weight.reshape({cout, cin * taps}).transpose(0, 1).matmul(g_right).contiguous().reshape(cols_shape);
  std::vector<int64_t> q(n);  // input positions per phase, rounded up: the input is cut to size at the end
  for (size_t i = 0; i < n; i++) q[i] = (xshape[2 + i] + stride[i] - 1) / stride[i];
  auto floor_div = [](int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); };
  Tensor dx;
  for (int64_t t = 0; t < taps; t++) {
    std::vector<int64_t> tap(n);  // the tap's position in the kernel, last dim fastest
    for (int64_t r = t, i = static_cast<int64_t>(n) - 1; i >= 0; i--) {
      tap[i] = r % k[i];
      r /= k[i];
    }
    Pairs at;
    for (int64_t d : cols_shape) at.push_back({0, d});
    for (size_t i = 0; i < n; i++) at[1 + i] = {tap[i], tap[i] + 1};
    Shape slice_shape{cin, bs};  // (C_in, N, *o)
    slice_shape.insert(slice_shape.end(), o.begin(), o.end());
    Tensor slice = dcols.shrink(at).reshape(slice_shape);
    // output position j of this tap reads input position h = j·s + off, off = tap·dilation − padding: phase
    // a = off mod s, and within the phase, position q = j + floor(off / s). Shift the slice there (pad/cut
    // to Q), then give it its place on the phase axis: (.., Q, 1) padded to (.., Q, s) at a.
    Pairs shift{{0, 0}, {0, 0}}, cut{{0, cin}, {0, bs}};
    Shape with_phase{cin, bs};
    Pairs place{{0, 0}, {0, 0}};
    for (size_t i = 0; i < n; i++) {
      const int64_t off = tap[i] * dilation[i] - pads[i].first, a = off - stride[i] * floor_div(off, stride[i]);
      const int64_t lead = floor_div(off, stride[i]);  // q = j + lead
      shift.push_back({std::max<int64_t>(0, lead), std::max<int64_t>(0, q[i] - lead - o[i])});
      cut.push_back({std::max<int64_t>(0, -lead), std::max<int64_t>(0, -lead) + q[i]});
      with_phase.push_back(q[i]);
      with_phase.push_back(1);
      place.push_back({0, 0});
      place.push_back({a, stride[i] - 1 - a});
    }
    slice = slice.pad(shift).shrink(cut).reshape(with_phase).pad(place);  // (C_in, N, Q_1, s_1, ...)
    dx = t == 0 ? slice : dx.add(slice);
  }
  Shape merged{cin, bs};
  Pairs to_input{{0, cin}, {0, bs}};
  std::vector<int64_t> to_nchw{1, 0};  // (C_in, N, *in) → (N, C_in, *in)
  for (size_t i = 0; i < n; i++) {
    merged.push_back(q[i] * stride[i]);
    to_input.push_back({0, xshape[2 + i]});
    to_nchw.push_back(static_cast<int64_t>(2 + i));
  }
  return dx.contiguous().reshape(merged).shrink(to_input).permute(to_nchw);
}

// A depthwise convolution (groups = C_in = C_out, one filter per channel: MobileNet's 3x3) on C, 2-D, stride and
// dilation 1, whose output rows fill vectors of 16 with at most a quarter of padding (rows of 28 -> 32, of 13 to
// 15 -> 16): the row width `depthwise_wide_row` returns, else 0. Nothing is stored padded: all three convolutions
// read the input and the output gradient (stored once, unpadded) through pad views, padded for the forward and for the transposed
// convolution and widened on the right to that width, the lanes of a row past an edge masked off (masked vector
// loads, CRenderer::vector_accumulators):
//  * forward: every output sums its window (the direct form); its rows of 28 are a vector of 16 and one of 12
//    (split_index_set's split_padded_tile). 32 x 16 x 28 x 28, 3x3: 0.13 ms, against 0.18 ms for a stored padded
//    copy and the direct form over it (alone, in a C harness);
//  * input gradient: the transposed convolution (the flipped filter over the padded gradient), the same way (the
//    gradient stored first: read through the pad, its producers ran in every tap's masked load, 5 ms);
//  * weight gradient: dW[c, ky, kx] = sum over n, y, x of g[n, c, y, x] · x_pad[n, c, y + ky, x + kx] keeps
//    the row's positions as an output axis, (C, KH·KW, wide), summed over the batch and the rows, then over the
//    positions. The gradient's widened columns read as zeros, so every position of a widened row counts
//    exactly once; the row is whole vectors (upcast_global), the KH·KW taps the register tile's rows (one
//    loop of taps: 3x3 = 9 rows of 2 vectors), and each tap's lanes one (masked) vector load of the shifted
//    input row (CRenderer::vector_accumulators: the taps overlap, x + kx for kx = 0, 1, 2; a lane that reads
//    only padding, folded to x · 0 by simplify, is a masked-off lane).
// 32 x 16 x 28 x 28, 3x3, padding 1, forward and both gradients (1 thread): 0.61 ms as the direct forms and
// conv_weight_grad's partial sums had it (the weight gradient read x through masked loads: 0.27 ms of it), 0.49 ms
// with padded copies (weight gradient 0.14 ms; 0.45 ms before the C renderer wrote the taps' overlapping loads as
// vectors); without them the forward is one kernel. Rows of 13 to 15 (a 14x14 map): forward and both gradients
// 0.25 -> 0.23 ms for 32 x 32 x 13 x 13, 0.32 -> 0.30 for 14 x 14, against conv_weight_grad's partial sums (its
// rows kept as they are). With a non-finite input value, a widened position multiplies it by a zero of the padded
// gradient: the weight gradient may be NaN where PyTorch's is infinite (as widened_row's).
int64_t depthwise_wide_row(const Tensor& x, const Tensor& weight, int64_t groups, const std::vector<int64_t>& stride,
                           const std::vector<int64_t>& dilation, const Pairs& pads) {
  if (x.device() != "C" || weight.ndim() != 4 || x.ndim() != 4 || pads.size() != 2) return 0;
  const int64_t c = x.shape()[1];
  if (groups != c || weight.shape()[0] != c || weight.shape()[1] != 1) return 0;
  for (size_t i = 0; i < 2; i++)
    if (stride[i] != 1 || dilation[i] != 1 || pads[i].first > weight.shape()[2 + i] - 1 || pads[i].second > weight.shape()[2 + i] - 1)
      return 0;
  const int64_t oh = x.shape()[2] + pads[0].first + pads[0].second - weight.shape()[2] + 1;
  const int64_t ow = x.shape()[3] + pads[1].first + pads[1].second - weight.shape()[3] + 1;
  if (oh <= 0 || ow <= 0) return 0;
  const int64_t wide = (ow + kIm2colMinWidth - 1) / kIm2colMinWidth * kIm2colMinWidth;
  if (4 * (wide - ow) > ow || conv_flops(x.shape()[0], {oh, ow}, c, 1, {weight.shape()[2], weight.shape()[3]}) < kIm2colMinFlops)
    return 0;
  return wide;
}

// x (N, C, H, W), weight (C, 1, KH, KW), bias (C) or null; `wide`: depthwise_wide_row's. PyTorch's conv2d with
// groups = C, and its gradients.
Tensor depthwise_conv_wide(const Tensor& x, const Tensor& weight, const Tensor* bias, const Pairs& pads, int64_t wide) {
  const int64_t bs = x.shape()[0], c = x.shape()[1], h = x.shape()[2], w = x.shape()[3];
  const int64_t kh = weight.shape()[2], kw = weight.shape()[3];
  const int64_t oh = h + pads[0].first + pads[0].second - kh + 1, ow = w + pads[1].first + pads[1].second - kw + 1;
  Pairs wpads = pads;  // (N, C, OH + KH - 1, wide + KW - 1)
  wpads[1].second += wide - ow;
  const Tensor xp = x.contiguous().pad(full_pads(x, wpads));  // a view: read through masked loads
  // the first `rows` rows and `cols` columns of a padded, widened (N, C, rows', cols') tensor
  auto crop = [bs, c](const Tensor& t, int64_t rows, int64_t cols) { return t.shrink({{0, bs}, {0, c}, {0, rows}, {0, cols}}); };
  auto add_bias = [&](const Tensor& r) { return bias ? r.add(bias->reshape({1, c, 1, 1})) : r; };
  const Pairs none{{0, 0}, {0, 0}};
  std::vector<Tensor> inputs{x, weight};
  if (bias) inputs.push_back(*bias);
  return with_custom_backward(
      inputs, [&] { return add_bias(conv_direct(crop(xp, oh + kh - 1, ow + kw - 1), weight, c, {1, 1}, {1, 1}, none)); },
      [xp, weight, pads, wide, bs, c, h, w, kh, kw, oh, ow, has_bias = bias != nullptr, crop, none](const Tensor&, const Tensor& g) {
        // the transposed convolution's padding: KH - 1 - p before and after (PyTorch's conv_transpose2d),
        // the row widened like the input's
        const int64_t top = kh - 1 - pads[0].first, left = kw - 1 - pads[1].first;
        const Tensor gw = g.contiguous().pad({{0, 0}, {0, 0}, {top, kh - 1 - pads[0].second}, {left, kw - 1 - pads[1].second + wide - ow}});
        const Tensor dx = conv_direct(crop(gw, h + kh - 1, w + kw - 1), weight.flip({2, 3}), c, {1, 1}, {1, 1}, none);
        // (N, C, OH, wide) · windows (N, C, OH, wide, KH·KW) summed over N and OH: (C, KH·KW, wide), the
        // batch split into chunks whose planes of one channel stay in L1 while the register tile's tap rows
        // run over them (split-K): (chunks, chunk, C, OH, wide, KH·KW) summed over the chunk and OH, then
        // over the chunks and the row. (32 x 16 x 28 x 28: 0.27 ms summed over the whole batch at once, its
        // planes read from L2 once per tap row; 0.19 ms in chunks of 2 images.)
        const int64_t plane_bytes = (oh * wide + (oh + kh - 1) * (wide + kw - 1)) * 4;
        const int64_t chunk = batch_chunk(bs, plane_bytes, kWeightGradPlaneChunkBytes), chunks = bs / chunk;
        const Tensor g_rows = gw.shrink({{0, bs}, {0, c}, {top, top + oh}, {left, left + wide}}).reshape({chunks, chunk, c, oh, wide, 1});
        const Tensor win = pool(xp, {kh, kw}, {1, 1}, {1, 1}).reshape({chunks, chunk, c, oh, wide, kh * kw});
        const Tensor partial = g_rows.mul(win).permute({0, 2, 5, 4, 1, 3}).sum(std::vector<int64_t>{4, 5}).contiguous();
        std::vector<Tensor> grads{dx, partial.sum(std::vector<int64_t>{0, -1}).reshape(weight.shape())};
        if (has_bias) grads.push_back(g.sum(std::vector<int64_t>{0, 2, 3}));
        return grads;
      });
}

// The input gradient of a strided depthwise convolution (x (N, C, *spatial), weight (C, 1, *k), groups = C; g the
// output gradient (N, C, *o)) by phases, the sub-pixel decomposition of a transposed convolution (Shi et al., "Is
// the deconvolution layer the same as a convolutional layer?", 2016). An input position h = q·s + r (phase r of
// the stride s) is reached by the taps k with r + p − k·d ≡ 0 (mod s), from the output position q + δ, δ = (r + p
// − k·d) / s (p the padding before, d the dilation):
//
//   dx[q·s + r] = Σ over those k of g[q + δ] · w[k]      (g read as 0 outside [0, o))
//
// per phase a sum of shifted views of g, every tap in exactly one phase: a 3x3 with stride 2 does 9 multiply-adds
// for 4 input positions. The transposed convolution over g with zeros inserted (conv_transpose2d) does 9 for every
// position and first writes the zero-inserted copy. The phases are placed side by side in (N, C, Q, s, ...) and
// reshaped to the input's positions: one elementwise kernel, whose loops over the phases and the views' edges
// split_index_set takes apart (no mask left inside them). Measured on C (1 thread, Zen 3), 32 x 24 x 28 x 28 with
// stride 2, padding 1: 0.13 ms (zero insertion) + 0.24 ms (its convolution) -> 0.12 ms. `leaf`: x is a leaf tensor
// (see the end).
Tensor depthwise_input_grad_by_phases(const Tensor& g, const Tensor& weight, const Shape& xshape,
                                      const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                                      const Pairs& pads, bool leaf) {
  const size_t n = xshape.size() - 2;
  const int64_t bs = xshape[0], c = xshape[1];
  std::vector<int64_t> q(n);  // positions per phase (the last phase's may reach past the input: cropped)
  int64_t phases = 1;
  for (size_t i = 0; i < n; i++) {
    q[i] = (xshape[2 + i] + stride[i] - 1) / stride[i];
    phases *= stride[i];
  }
  Tensor dx;
  for (int64_t ph = 0; ph < phases; ph++) {
    std::vector<int64_t> r(n);
    for (size_t i = n, rest = static_cast<size_t>(ph); i-- > 0;) {
      r[i] = static_cast<int64_t>(rest) % stride[i];
      rest /= static_cast<size_t>(stride[i]);
    }
    // each dimension's taps in this phase, with their shifts δ
    std::vector<std::vector<std::pair<int64_t, int64_t>>> taps(n);
    int64_t terms = 1;
    for (size_t i = 0; i < n; i++) {
      for (int64_t k = 0; k < weight.shape()[2 + i]; k++) {
        const int64_t t = r[i] + pads[i].first - k * dilation[i];
        if (((t % stride[i]) + stride[i]) % stride[i] == 0) taps[i].push_back({k, t / stride[i]});
      }
      terms *= static_cast<int64_t>(taps[i].size());
    }
    if (terms == 0) continue;  // no tap reaches this phase (a stride above the kernel's span): its gradient is 0
    Tensor sum;
    for (int64_t term = 0; term < terms; term++) {
      Pairs pad{{0, 0}, {0, 0}}, view{{0, bs}, {0, c}}, tap{{0, c}, {0, 1}};
      for (size_t i = n, rest = static_cast<size_t>(term); i-- > 0;) {
        const auto [k, delta] = taps[i][rest % taps[i].size()];
        rest /= taps[i].size();
        const int64_t o = g.shape()[2 + i];
        const int64_t before = std::max<int64_t>(0, -delta), after = std::max<int64_t>(0, q[i] + delta - o);
        pad.insert(pad.begin() + 2, {before, after});  // dimensions filled from the last one
        view.insert(view.begin() + 2, {delta + before, delta + before + q[i]});
        tap.insert(tap.begin() + 2, {k, k + 1});
      }
      Shape wshape{1, c};
      wshape.resize(n + 2, 1);
      const Tensor product = g.pad(pad).shrink(view).mul(weight.shrink(tap).reshape(wshape));
      sum = sum.defined() ? sum.add(product) : product;
    }
    // (N, C, Q1, 1, Q2, 1, ...) padded to (N, C, Q1, s1, Q2, s2, ...) at the phase's place
    Shape placed{bs, c};
    Pairs at{{0, 0}, {0, 0}};
    for (size_t i = 0; i < n; i++) {
      placed.insert(placed.end(), {q[i], 1});
      at.insert(at.end(), {{0, 0}, {r[i], stride[i] - 1 - r[i]}});
    }
    const Tensor phase = sum.reshape(placed).pad(at);
    dx = dx.defined() ? dx.add(phase) : phase;
  }
  Shape whole{bs, c};
  Pairs crop{{0, bs}, {0, c}};
  for (size_t i = 0; i < n; i++) {
    whole.push_back(q[i] * stride[i]);
    crop.push_back({0, xshape[2 + i]});
  }
  // Stored in that layout when another gradient consumes it: fused into its consumer (a ReLU's or BatchNorm's
  // gradient, which reads it as (N, C, H, W)) the phase axes merge with the rows into loops of 2·Q whose gates flip
  // at every position, which no pass takes apart (MobileNet's 32 x 32 x 16 x 16 with the ReLU's gradient: 0.42 ms;
  // stored, 0.05 ms and the consumer's read). A leaf's gradient is realized as it is: its kernel's loops are the
  // phases' (schedule.cpp's loop_root), and stored first it would be copied into the leaf's shape.
  return (leaf ? dx : dx.contiguous()).reshape(whole).shrink(crop);
}

// conv_direct with PyTorch's backward, plus the bias (C_out, or null) broadcast over the batch and the output
// positions: the input gradient is the transposed convolution of the output gradient (one direct
// convolution, as the forward), the weight gradient conv_weight_grad, and the bias gradient comes from the
// copy of the output gradient the weight gradient stores. Shapes whose transposed convolution would need
// negative padding (padding > dilation·(k − 1)) keep the autograd of the composition.
Tensor conv(const Tensor& x, const Tensor& weight, const Tensor* bias, int64_t groups, const std::vector<int64_t>& stride_,
            const std::vector<int64_t>& dilation_, const Pairs& pads) {
  auto add_bias = [&](const Tensor& r) {
    if (!bias) return r;
    Shape bsh{1, weight.shape()[0]};
    for (int64_t i = 2; i < weight.ndim(); i++) bsh.push_back(1);
    return r.add(bias->reshape(bsh));
  };
  const bool needs_grad = x.requires_grad() || weight.requires_grad() || (bias && bias->requires_grad());
  if (!grad_enabled() || !needs_grad || weight.ndim() < 3 || x.ndim() != weight.ndim())
    return add_bias(conv_direct(x, weight, groups, stride_, dilation_, pads));
  const size_t n = weight.ndim() - 2;
  const auto stride = make_tuple(stride_, n, "conv2d stride"), dilation = make_tuple(dilation_, n, "conv2d dilation");
  std::vector<int64_t> padding(2 * n), output_padding(n);
  bool transposable = pads.size() == n;
  for (size_t i = 0; i < n && transposable; i++) {
    const int64_t k = weight.shape()[2 + i], span = dilation[i] * (k - 1);
    const int64_t o = (x.shape()[2 + i] + pads[i].first + pads[i].second - span - 1) / stride[i] + 1;  // output size
    if (o <= 0) transposable = false;
    output_padding[i] = x.shape()[2 + i] + pads[i].first + pads[i].second - ((o - 1) * stride[i] + span + 1);
    padding[2 * (n - 1 - i)] = pads[i].first;  // resolve_pads' order: the last dim first
    padding[2 * (n - 1 - i) + 1] = pads[i].second;
    transposable = transposable && pads[i].first <= span && pads[i].second <= span + output_padding[i] && output_padding[i] >= 0;
  }
  if (!transposable) return add_bias(conv_direct(x, weight, groups, stride, dilation, pads));
  if (const int64_t wide = depthwise_wide_row(x, weight, groups, stride, dilation, pads))
    return depthwise_conv_wide(x, weight, bias, pads, wide);
  std::vector<Tensor> inputs{x, weight};
  if (bias) inputs.push_back(*bias);
  auto forward = std::make_shared<ForwardIm2col>();
  return with_custom_backward(
      inputs, [&] { return add_bias(conv_direct(x, weight, groups, stride, dilation, pads, forward.get())); },
      [x, weight, has_bias = bias != nullptr, groups, stride, dilation, pads, padding, output_padding,
       forward](const Tensor&, const Tensor& g) {
        bool strided = false;
        for (int64_t s : stride) strided = strided || s > 1;
        const Shape k(weight.shape().begin() + 2, weight.shape().end());
        const Shape o(g.shape().begin() + 2, g.shape().end());
        const Tensor g_cm = channel_major_gradient(g);  // lazy: stored only if one of the gradients reads it
        // Without padding the output is smaller than the input, and the transposed convolution pads the
        // gradient back to the input's size plus the kernel's: its multiply-adds and its im2col grow with the
        // input (Caffe's LeNet, 20 -> 50 channels 5x5 on 12x12: 2.25x the work of the forward, a 46 MB
        // im2col; 11 ms), while the col2im's matmul does the forward's work (3 ms with its sums).
        int64_t in_positions = 1, out_positions = 1;
        for (size_t i = 0; i < o.size(); i++) {
          in_positions *= x.shape()[2 + i];
          out_positions *= o[i];
        }
        const bool shrinks = 2 * in_positions >= 3 * out_positions;  // the input at least 1.5x the output
        const bool col2im = (strided || shrinks) && groups == 1 &&
                            conv_flops(x.shape()[0], o, weight.shape()[0], x.shape()[1], k) >= kIm2colMinFlops;
        const bool depthwise = groups == x.shape()[1] && weight.shape()[0] == groups && weight.shape()[1] == 1;
        Tensor dx;
        if (col2im)
          dx = conv_input_grad_col2im(x.shape(), g_cm, weight, stride, dilation, pads, o);
        else if (strided && depthwise)
          dx = depthwise_input_grad_by_phases(g, weight, x.shape(), stride, dilation, pads, x.is_leaf());
        else
          dx = g.conv_transpose2d(weight, nullptr, groups, stride, dilation, padding, output_padding);
        Tensor db;
        Tensor dw = conv_weight_grad(x, g, weight.shape(), groups, stride, dilation, pads, forward.get(), &g_cm,
                                     /*g_cm_stored=*/col2im && x.requires_grad(), has_bias ? &db : nullptr);
        std::vector<Tensor> grads{dx, dw};
        if (has_bias) grads.push_back(db);
        return grads;
      });
}
}  // namespace

Tensor Tensor::conv2d(const Tensor& weight, const Tensor* bias, int64_t groups, const std::vector<int64_t>& stride,
                      const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding) const {
  if (auto r = float16_rule(&Tensor::conv2d, *this, weight, bias, groups, stride, dilation, padding)) return *r;
  if (weight.ndim() < 3) throw std::runtime_error("conv2d: weight " + shape_text(weight.shape()) + " needs at least 3 dims");
  return conv(*this, weight, bias, groups, stride, dilation, resolve_pads(padding, weight.ndim() - 2));
}

// weight (C_in, C_out/groups, *kernel) as torch. Stride s: each input element is followed by s−1 zeros
// (reshape (k,1) → pad (k,s) → reshape → shrink); then a stride-1 conv with the flipped, group-transposed
// kernel and padding (k−1)·d − p before, (k−1)·d − p + output_padding after.
Tensor Tensor::conv_transpose2d(const Tensor& weight, const Tensor* bias, int64_t groups, const std::vector<int64_t>& stride_,
                                const std::vector<int64_t>& dilation_, const std::vector<int64_t>& padding,
                                const std::vector<int64_t>& output_padding) const {
  if (auto r = float16_rule(&Tensor::conv_transpose2d, *this, weight, bias, groups, stride_, dilation_, padding, output_padding))
    return *r;
  if (weight.ndim() < 3 || ndim() != weight.ndim())
    throw std::runtime_error("conv_transpose2d: input " + shape_text(shape()) + " and weight " + shape_text(weight.shape()) +
                             " must both have 1-3 spatial dims");
  size_t n = weight.ndim() - 2;
  if (groups <= 0 || weight.shape()[0] != shape()[1] || weight.shape()[0] % groups)
    throw std::runtime_error("conv_transpose2d: input " + shape_text(shape()) + " does not match the weight " +
                             shape_text(weight.shape()) + " with groups=" + std::to_string(groups));
  auto stride = make_tuple(stride_, n, "conv_transpose2d stride"), dilation = make_tuple(dilation_, n, "conv_transpose2d dilation");
  auto op = make_tuple(output_padding, n, "conv_transpose2d output_padding");
  Pairs pads = resolve_pads(padding, n);
  std::vector<int64_t> HW(weight.shape().begin() + 2, weight.shape().end());
  // (C_in, C_out/g, *k) → (g, C_in/g, C_out/g, *k) → (g, C_out/g, C_in/g, *k), flipped, → (C_out, C_in/g, *k)
  std::vector<int64_t> flips;
  for (size_t i = 0; i < n; i++) flips.push_back(static_cast<int64_t>(3 + i));
  Tensor w = weight.unflatten(0, {groups, -1}).transpose(1, 2).flip(flips).flatten(0, 1);
  Tensor x = *this;
  bool strided = false;
  for (int64_t s : stride) strided = strided || s > 1;
  if (strided) {
    Shape s1(x.shape().begin(), x.shape().begin() + 2), s2 = s1;
    Pairs p{{0, 0}, {0, 0}};
    for (size_t i = 0; i < n; i++) {
      int64_t k = x.shape()[2 + i];
      s1.push_back(k);
      s1.push_back(1);
      p.push_back({0, 0});
      p.push_back({0, stride[i] - 1});
      s2.push_back(k * stride[i]);
    }
    x = x.reshape(s1).pad(p).reshape(s2);
    Pairs b{{0, x.shape()[0]}, {0, x.shape()[1]}};
    for (size_t i = 0; i < n; i++) b.push_back({0, x.shape()[2 + i] - (stride[i] - 1)});
    x = x.shrink(b);
  }
  Pairs cp;
  for (size_t i = 0; i < n; i++) {
    int64_t e = (HW[i] - 1) * dilation[i];
    cp.push_back({e - pads[i].first, e - pads[i].second + op[i]});
  }
  return conv(x, w, bias, groups, {1}, dilation, cp);
}

namespace {
struct PoolArgs {
  size_t n;
  std::vector<int64_t> k, s, d;
  Pairs pads;       // as given
  Pairs eff_pads;   // with ceil_mode's extra padding
};
PoolArgs pool_args(const Tensor& x, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                   const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding, bool ceil_mode, const char* what) {
  PoolArgs a;
  a.n = kernel.size();
  check_pool_input(x, a.n, what);
  a.k = kernel;
  a.s = stride.empty() ? kernel : make_tuple(stride, a.n, what);
  a.d = make_tuple(dilation, a.n, what);
  a.pads = resolve_pads(padding, a.n);
  a.eff_pads = ceil_mode ? ceil_pads(a.pads, spatial_of(x, a.n), a.k, a.s, a.d) : a.pads;
  return a;
}
}  // namespace

// padded with −inf (so padding never wins), windows, MAX over the kernel axes
Tensor Tensor::max_pool2d(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                          const std::vector<int64_t>& padding, bool ceil_mode) const {
  if (auto r = float16_rule(&Tensor::max_pool2d, *this, kernel, stride, dilation, padding, ceil_mode)) return *r;
  PoolArgs a = pool_args(*this, kernel, stride, dilation, padding, ceil_mode, "max_pool2d");
  double lowest = dtype() == DType::Float32 ? -kInf : -2147483648.0;
  return pool(pad(full_pads(*this, a.eff_pads), lowest), a.k, a.s, a.d).max(last_axes(a.n));
}

// indices: the first maximum of each window, as a flat index into the (unpadded) spatial plane —
// windows of (size − position) compared against the max, as tinygrad
std::pair<Tensor, Tensor> Tensor::max_pool2d_with_indices(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                                                          const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding,
                                                          bool ceil_mode) const {
  if (auto r = float16_rule(&Tensor::max_pool2d_with_indices, *this, kernel, stride, dilation, padding, ceil_mode))
    return *r;
  PoolArgs a = pool_args(*this, kernel, stride, dilation, padding, ceil_mode, "max_pool2d");
  double lowest = dtype() == DType::Float32 ? -kInf : -2147483648.0;
  Tensor pooled = pool(pad(full_pads(*this, a.eff_pads), lowest), a.k, a.s, a.d);
  auto ax = last_axes(a.n);
  Tensor values = pooled.max(ax);
  Shape sp = spatial_of(*this, a.n);
  int64_t size = shape_numel(sp);
  Tensor rev = iconst(*this, static_cast<double>(size)).sub(arange_int(size, device())).reshape(sp);  // size, ..., 1
  Tensor rev_pooled = pool(rev.pad(a.eff_pads), a.k, a.s, a.d);
  Tensor hit = pooled.eq(pooled.max(ax, true).detach());
  Tensor best = hit.where(rev_pooled, iconst(*this, 0)).max(ax);
  return {values, iconst(*this, static_cast<double>(size)).sub(best)};
}

// count_include_pad: divide by the window size (padding counted, ceil_mode's extra padding not);
// otherwise by the number of real elements (a pooled ones-tensor), as torch
Tensor Tensor::avg_pool2d(const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride, const std::vector<int64_t>& dilation,
                          const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad) const {
  if (auto r = float16_rule(&Tensor::avg_pool2d, *this, kernel, stride, dilation, padding, ceil_mode, count_include_pad))
    return *r;
  PoolArgs a = pool_args(*this, kernel, stride, dilation, padding, ceil_mode, "avg_pool2d");
  auto ax = last_axes(a.n);
  Tensor x = as_float(*this);
  Tensor sums = pool(x.pad(full_pads(x, a.eff_pads)), a.k, a.s, a.d).sum(ax);
  Shape sp = spatial_of(x, a.n);
  Tensor ones = Tensor::ones(sp, DType::Float32, device());
  Tensor counts;
  if (count_include_pad) {
    Pairs extra;
    for (size_t i = 0; i < a.n; i++) extra.push_back({0, a.eff_pads[i].second - a.pads[i].second});
    counts = pool(ones.pad(a.pads, 1.0).pad(extra), a.k, a.s, a.d).sum(ax);
  } else {
    counts = pool(ones.pad(a.eff_pads), a.k, a.s, a.d).sum(ax);
  }
  return sums.div(counts);
}

// values at the flat spatial indices of a max_pool2d(return_indices=True): one-hot masks over the
// output plane, WHERE + SUM (tinygrad's max_unpool2d)
Tensor Tensor::max_unpool2d(const Tensor& indices, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                            const std::vector<int64_t>& dilation, const std::vector<int64_t>& padding, const Shape& output_size) const {
  if (auto r = float16_rule(&Tensor::max_unpool2d, *this, indices, kernel, stride, dilation, padding, output_size))
    return *r;
  size_t n = kernel.size();
  check_pool_input(*this, n, "max_unpool2d");
  if (indices.shape() != shape())
    throw std::invalid_argument("max_unpool2d: indices " + shape_text(indices.shape()) + " must have the shape of the values " +
                                shape_text(shape()));
  Shape out;
  if (output_size.empty()) {
    auto s = stride.empty() ? kernel : make_tuple(stride, n, "max_unpool2d stride");
    auto d = make_tuple(dilation, n, "max_unpool2d dilation");
    Pairs p = resolve_pads(padding, n);
    Shape in = spatial_of(*this, n);
    for (size_t i = 0; i < n; i++) out.push_back((in[i] - 1) * s[i] - (p[i].first + p[i].second) + d[i] * (kernel[i] - 1) + 1);
  } else {
    if (output_size.size() < n) throw std::invalid_argument("max_unpool2d: output_size " + shape_text(output_size) + " is too short");
    out.assign(output_size.end() - n, output_size.end());
  }
  Shape lead(shape().begin(), shape().end() - n);
  int64_t plane = shape_numel(out);
  Shape flat = lead;
  flat.push_back(-1);
  Shape full = lead;
  full.insert(full.end(), out.begin(), out.end());
  Tensor idx = indices.reshape(flat), vals = reshape(flat);
  // overlapping windows can name one position twice (with the same value): divide by the count; the
  // backward reads the output gradient at each index, as torch's max_unpool (a gather)
  return with_custom_backward(
      {vals},
      [&] {
        Tensor mask = one_hot_mask(idx, plane);  // (..., L, plane)
        std::vector<int64_t> ax{-2};
        Tensor sum = mask.where(vals.unsqueeze(-1), vals.scalar_like(0)).sum(ax);
        Tensor count = mask.sum(ax).maximum(iconst(vals, 1));
        return sum.div(count).reshape(full);
      },
      [idx, flat, plane, self_shape = shape()](const Tensor&, const Tensor& g) {
        Shape gs = flat;
        gs.back() = plane;
        return std::vector<Tensor>{g.reshape(gs).gather(-1, idx).reshape(self_shape)};
      });
}

// Separable: one axis at a time, from the last, each a (out, in) selection with torch's source-index
// arithmetic (area_pixel_compute_source_index, nearest_idx), computed on the host in float32.
Tensor Tensor::interpolate(const Shape& size, const std::string& mode, bool align_corners) const {
  if (auto r = float16_rule(&Tensor::interpolate, *this, size, mode, align_corners)) return *r;
  if (mode != "linear" && mode != "nearest" && mode != "nearest-exact")
    throw std::invalid_argument("interpolate: mode must be 'linear', 'nearest' or 'nearest-exact', got '" + mode + "'");
  if (align_corners && mode != "linear")
    throw std::invalid_argument("interpolate: align_corners can only be set with mode 'linear'");
  if (size.empty() || static_cast<int64_t>(size.size()) > ndim())
    throw std::invalid_argument("interpolate: size " + shape_text(size) + " does not fit the input " + shape_text(shape()));
  Tensor x = as_float(*this);
  for (int64_t i = -1; i >= -static_cast<int64_t>(size.size()); i--) {
    int64_t in = x.shape()[x.ndim() + i], outn = size[size.size() + i];
    std::vector<float> w(outn * in, 0.0f);
    for (int64_t o = 0; o < outn; o++) {
      if (mode == "linear") {
        float scale = align_corners ? (outn > 1 ? static_cast<float>(in - 1) / static_cast<float>(outn - 1) : 0.0f)
                                    : static_cast<float>(in) / static_cast<float>(outn);
        float src = align_corners ? scale * static_cast<float>(o) : std::max(scale * (static_cast<float>(o) + 0.5f) - 0.5f, 0.0f);
        int64_t i0 = static_cast<int64_t>(src);
        int64_t i1 = i0 < in - 1 ? i0 + 1 : i0;
        float l1 = src - static_cast<float>(i0), l0 = 1.0f - l1;
        w[o * in + i0] += l0;
        w[o * in + i1] += l1;
      } else {
        float scale = static_cast<float>(in) / static_cast<float>(outn);
        float src = mode == "nearest" ? static_cast<float>(o) * scale : (static_cast<float>(o) + 0.5f) * scale;
        int64_t i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(src)), in - 1);
        w[o * in + i0] = 1.0f;
      }
    }
    Tensor wt = Tensor::from_data(w.data(), DType::Float32, {outn, in}, device());
    Tensor xl = move_axis_last(x, x.ndim() + i).unsqueeze(-2);  // (..., 1, in)
    Tensor r = mode == "linear" ? xl.mul(wt).sum(std::vector<int64_t>{-1})
                                : wt.ne(fconst(wt, 0)).where(xl, fconst(xl, 0)).sum(std::vector<int64_t>{-1});
    x = move_last_to(r, x.ndim() + i);
  }
  return x;
}

// (x − mean) · rsqrt(mean((x − mean)²) + eps), no affine parameters (tinygrad's layernorm)
Tensor Tensor::layernorm(int64_t axis, double eps) const {
  if (auto r = float16_rule(&Tensor::layernorm, *this, axis, eps)) return *r;
  std::vector<int64_t> ax{axis};
  Tensor y = as_float(*this).sub(mean(ax, true));
  return y.mul(y.square().mean(ax, true).add(eps).rsqrt());
}

// inverted dropout: keep with probability 1 − p and scale by 1/(1 − p)
Tensor Tensor::dropout(double p) const {
  if (auto r = float16_rule(&Tensor::dropout, *this, p)) return *r;
  if (p < 0 || p > 1) throw std::invalid_argument("dropout: p must be in [0, 1], got " + std::to_string(p));
  if (p == 0) return *this;
  if (p == 1) return mul(0.0);
  Tensor keep = Tensor::rand(shape(), device()).ge(Tensor::scalar(p, DType::Float32, device()));
  return keep.where(as_float(*this).mul(1.0 / (1.0 - p)), fconst(*this, 0));
}

Tensor Tensor::scaled_dot_product_attention(const Tensor& key, const Tensor& value, const Tensor* attn_mask, double dropout_p,
                                            bool is_causal) const {
  if (auto r = float16_rule(&Tensor::scaled_dot_product_attention, *this, key, value, attn_mask, dropout_p, is_causal))
    return *r;
  if (ndim() < 2 || key.ndim() < 2 || value.ndim() < 2)
    throw std::runtime_error("scaled_dot_product_attention: query " + shape_text(shape()) + ", key " + shape_text(key.shape()) +
                             " and value " + shape_text(value.shape()) + " need at least 2 dims");
  Tensor qk = matmul(key.transpose(-2, -1)).div(std::sqrt(static_cast<double>(shape().back())));
  if (is_causal) {
    // an additive mask, 0 on and below the diagonal and -inf above (as PyTorch's math path builds it for
    // is_causal): the same scores for finite qk as masked_fill(-inf), the backward passes the gradient
    // through unmasked, and no kernel reads a bool mask, whose 1-byte loads kept the softmax gradient's
    // 12-long rows from vectorizing (gcc sizes the vector by the smallest type)
    int64_t L = shape()[ndim() - 2], S = key.shape()[key.ndim() - 2];
    Tensor causal = Tensor::ones({L, S}, DType::Bool, device()).tril(0);
    qk = qk.add(causal.where(fconst(qk, 0.0), fconst(qk, -kInf)));
  }
  if (attn_mask) qk = attn_mask->dtype() == DType::Bool ? attn_mask->where(qk, fconst(qk, -kInf)) : qk.add(*attn_mask);
  Tensor a = qk.softmax(-1);
  if (dropout_p > 0) a = a.dropout(dropout_p);
  return a.matmul(value);
}

}  // namespace ts
