// The C++ Tensor API (tinygrad's semantics, C++ spelling). A Tensor is a cheap handle to a node of the
// lazy graph plus autograd state; operations build graph nodes and compute nothing until realize().
//
// Every high-level operation is a composition of the primitive graph ops (as in tinygrad), so the GUI
// shows how, say, softmax or matmul decompose. Shapes are in elements; axes may be negative.
// float16 follows PyTorch's CPU rule: an op on float16 tensors computes in float32 and rounds its result
// to float16 once (sum, mean and matmul accumulate in float32); its gradients are float16 too.
// Errors: std::invalid_argument (bad shapes/arguments: maps to ValueError/RuntimeError in Python),
// std::out_of_range (bad axis: IndexError), std::runtime_error (device / compile failures).
#pragma once
#include <cstdint>
#include <memory>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tensorscope/dtype.h"

namespace ts {

using Shape = std::vector<int64_t>;
using Axes = std::optional<std::vector<int64_t>>;  // nullopt: every axis
struct TensorImpl;

class Tensor {
 public:
  Tensor() = default;

  // ---- construction -------------------------------------------------------------------------
  // Copies `data` (row-major, `shape`, element type `dtype`) to a new buffer on `device`
  // ("" = the default device, see DeviceRegistry::default_index).
  static Tensor from_data(const void* data, DType dtype, const Shape& shape, const std::string& device = "");
  static Tensor full(const Shape& shape, double value, DType dtype = DType::Float32, const std::string& device = "");
  static Tensor zeros(const Shape& shape, DType dtype = DType::Float32, const std::string& device = "");
  static Tensor ones(const Shape& shape, DType dtype = DType::Float32, const std::string& device = "");
  // n×m identity (torch.eye), built lazily from movement ops as in tinygrad: ones(k,1).pad → flatten → shrink
  // → reshape (k = max(n, m)), then the n×m corner. m < 0 means m = n; std::invalid_argument for n < 0.
  static Tensor eye(int64_t n, int64_t m = -1, const std::string& device = "");
  static Tensor arange(double start, double stop, double step = 1, const std::string& device = "");
  // Uniform [0, 1) and standard normal samples from the seeded generator (manual_seed).
  static Tensor rand(const Shape& shape, const std::string& device = "");
  static Tensor randn(const Shape& shape, const std::string& device = "");
  static Tensor uniform(const Shape& shape, double low, double high, const std::string& device = "");
  static void manual_seed(uint64_t seed);

  // ---- properties ---------------------------------------------------------------------------
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int64_t ndim() const { return static_cast<int64_t>(shape().size()); }
  int64_t numel() const;
  DType dtype() const;
  std::string device() const;
  uint64_t uid() const;  // the graph node's uid (changes when assign() replaces the value)
  bool requires_grad() const;
  void set_requires_grad(bool value);
  Tensor grad() const;   // undefined Tensor when no gradient yet
  void set_grad(const Tensor& grad);
  bool is_leaf() const;

  // ---- realization --------------------------------------------------------------------------
  Tensor& realize();
  static void realize_all(const std::vector<Tensor>& tensors);  // one schedule for several tensors
  // Realizes this tensor together with whatever the next realize_all (or realize, or a read) realizes, in
  // its schedule: backward() defers its loss so, and the optimizer's step() computes the forward, the
  // backward and the update in one schedule.
  void realize_with_next();
  // Realizes and copies the data (row-major) to `dst`, numel()*dtype_size bytes.
  void copy_to_host(void* dst) const;
  // Writes numel()*dtype_size bytes (row-major) from `src` into this tensor's buffer, in place: the graph does
  // not change, so the kernels that read the buffer (compiled, cached, captured by a jit) read the new values
  // at their next launch. An optimizer's learning rate is such a buffer, so a learning-rate schedule compiles
  // nothing (tinygrad keeps lr as a Tensor for the same reason). The tensor must be realized, with a buffer
  // of exactly its elements (not a lazy value, not a view): std::invalid_argument otherwise; inside a jit
  // capture the capture fails (a replay runs no python code, so it could not repeat the write).
  void copy_from_host(const void* src);
  double item() const;  // for a 1-element tensor, as double
  Tensor to(const std::string& device) const;

  // ---- autograd -----------------------------------------------------------------------------
  // Builds the gradient graph (lazy tensors) from this tensor back to every leaf with requires_grad and
  // accumulates into their .grad (lazy tensors, realized when read). This tensor is realized with the next
  // realize (realize_with_next): the forward, the backward and an optimizer's update are one schedule.
  // Without `gradient` the tensor must have one element. Gradient conventions follow PyTorch (relu'(0)=0,
  // ties share). A tensor's gradients from several matmuls (a weight read once per time step) are summed as one
  // matmul over the rows of all of them (autograd.cpp, sum_gradients; equal to PyTorch's sum up to rounding). Unless `retain_graph`, the history is freed as PyTorch frees its graph: the values the
  // backward rules saved and the history's hold on the forward's tensors are dropped (a forward
  // intermediate nothing else holds is then released by the schedule after its last reader), and a second
  // backward() through that history throws std::runtime_error.
  void backward(const Tensor* gradient = nullptr, bool retain_graph = false);
  Tensor detach() const;
  // Makes this tensor hold `value`'s data (same shape and dtype) — the in-place update of optimizers.
  Tensor& assign(const Tensor& value);

  // ---- elementwise (NumPy broadcasting; ops_elementwise.cpp) -------------------------------------
  // Binary ops promote bool < int32 < float16 < float32 as torch.result_type (a 0-d float32 operand
  // leaves a float16 one float16); results have the broadcast shape. Shapes that do not broadcast throw
  // std::invalid_argument naming both shapes.
  Tensor add(const Tensor& x) const;
  Tensor sub(const Tensor& x) const;
  Tensor mul(const Tensor& x) const;
  Tensor div(const Tensor& x) const;  // true division (float result), as torch
  // rounding_mode: "" (true division), "trunc" or "floor" (torch.div); int operands stay int32.
  Tensor div(const Tensor& x, const std::string& rounding_mode) const;
  Tensor mod(const Tensor& x) const;   // Python/torch sign convention: result has the divisor's sign
  Tensor fmod(const Tensor& x) const;  // C convention: result has the dividend's sign
  Tensor maximum(const Tensor& x) const;  // NaN propagates; ties share the gradient
  Tensor minimum(const Tensor& x) const;
  // x^y with torch's rules: negative bases with integral exponents keep their sign, 0^0 = 1.
  Tensor pow(const Tensor& x) const;
  Tensor copysign(const Tensor& x) const;   // |self| with x's sign bit (-0.0 counts as negative)
  Tensor logaddexp(const Tensor& x) const;  // log(e^self + e^x), stable for large inputs
  Tensor lerp(const Tensor& end, const Tensor& weight) const;  // self + weight·(end − self)
  Tensor add(double x) const { return add(const_like(x)); }
  Tensor sub(double x) const { return sub(const_like(x)); }
  Tensor mul(double x) const { return mul(const_like(x)); }
  Tensor div(double x) const { return div(const_like(x)); }
  Tensor neg() const;
  Tensor exp() const;
  Tensor exp2() const;
  Tensor log() const;
  Tensor log2() const;
  Tensor log10() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tan() const;
  // asin/acos: Abramowitz–Stegun 4.4.46 polynomial (|error| < 2e-8); atan via asin. Exact-derivative backward.
  Tensor asin() const;
  Tensor acos() const;
  Tensor atan() const;
  Tensor sinh() const;
  Tensor cosh() const;
  Tensor asinh() const;
  Tensor acosh() const;
  Tensor atanh() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor reciprocal() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor abs() const;
  Tensor square() const;
  Tensor sign() const;   // -1, 0, 1 (NaN gives 0, as torch 1.13); zero gradient
  Tensor erf() const;    // Abramowitz–Stegun 7.1.26 (|error| < 1.5e-7); exact-derivative backward
  // Rounding (zero gradient, as torch). round is half-to-even. |x| >= 2^23 (and inf/NaN) pass through.
  Tensor trunc() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  // torch.clamp: min(max(x, lo), hi); the gradient passes where lo <= x <= hi (boundaries included).
  Tensor clip(std::optional<double> min_value, std::optional<double> max_value) const;
  Tensor clip(const Tensor* min_value, const Tensor* max_value) const;
  Tensor lt(const Tensor& x) const;  // bool results
  Tensor gt(const Tensor& x) const;
  Tensor le(const Tensor& x) const;
  Tensor ge(const Tensor& x) const;
  Tensor eq(const Tensor& x) const;
  Tensor ne(const Tensor& x) const;
  Tensor logical_not() const;
  Tensor logical_and(const Tensor& x) const;
  Tensor logical_or(const Tensor& x) const;
  Tensor logical_xor(const Tensor& x) const;
  Tensor isnan() const;
  Tensor isinf(bool detect_positive = true, bool detect_negative = true) const;
  Tensor isfinite() const;
  // torch.isclose: |self − x| <= atol + rtol·|x|, equal infinities are close, NaN only with equal_nan.
  Tensor isclose(const Tensor& x, double rtol = 1e-5, double atol = 1e-8, bool equal_nan = false) const;
  // Called on a bool condition: where(cond, a, b) (tinygrad spelling: cond.where(a, b)).
  Tensor where(const Tensor& a, const Tensor& b) const;
  Tensor masked_fill(const Tensor& mask, const Tensor& value) const;  // value where mask, else self
  Tensor cast(DType dtype) const;
  // A 0-d constant of this tensor's dtype (float for bool) on its device.
  Tensor scalar_like(double value) const;
  // scalar_like(value) broadcast to this tensor's shape: the one constant node that `*this ∘ scalar` reads
  // (binary ops fold a broadcast constant into it anyway; this skips making the 0-d node first).
  Tensor const_like(double value) const;
  static Tensor scalar(double value, DType dtype, const std::string& device);

  // ---- activations (ops_activation.cpp; PyTorch definitions and gradient conventions) -------------
  Tensor relu6() const;
  Tensor hardtanh(double min_val = -1, double max_val = 1) const;  // gradient 0 at and beyond the bounds
  Tensor logsigmoid() const;
  Tensor hardsigmoid() const;
  Tensor hardswish() const;
  Tensor silu() const;  // x·σ(x), also "swish"
  Tensor mish() const;
  Tensor softsign() const;
  Tensor quick_gelu() const;  // x·σ(1.702 x)
  Tensor leaky_relu(double neg_slope = 0.01) const;
  Tensor elu(double alpha = 1.0) const;
  Tensor celu(double alpha = 1.0) const;
  Tensor selu() const;
  Tensor gelu(const std::string& approximate = "tanh") const;  // "tanh" (tinygrad default) or "none" (erf)
  Tensor softplus(double beta = 1.0) const;  // log(1 + e^(βx))/β, stable; backward σ(βx)

  // ---- reductions and scans (keepdim keeps reduced axes as size 1; ops_reduce.cpp, ops_scan.cpp) --
  Tensor sum(const Axes& axes = std::nullopt, bool keepdim = false) const;
  Tensor prod(const Axes& axes = std::nullopt, bool keepdim = false) const;
  Tensor max(const Axes& axes = std::nullopt, bool keepdim = false) const;
  Tensor min(const Axes& axes = std::nullopt, bool keepdim = false) const;
  Tensor mean(const Axes& axes = std::nullopt, bool keepdim = false) const;
  // Σ(x − mean)² / max(0, N − correction) (torch.var); std = sqrt(var).
  Tensor var(const Axes& axes = std::nullopt, bool keepdim = false, double correction = 1) const;
  Tensor std(const Axes& axes = std::nullopt, bool keepdim = false, double correction = 1) const;
  std::pair<Tensor, Tensor> var_mean(const Axes& axes = std::nullopt, bool keepdim = false, double correction = 1) const;
  std::pair<Tensor, Tensor> std_mean(const Axes& axes = std::nullopt, bool keepdim = false, double correction = 1) const;
  Tensor softmax(int64_t axis = -1) const;
  Tensor log_softmax(int64_t axis = -1) const;
  Tensor softmin(int64_t axis = -1) const;
  Tensor logsumexp(const Axes& axes = std::nullopt, bool keepdim = false) const;
  // int32 index of the first maximum (minimum); nullopt axis: over the flattened tensor.
  Tensor argmax(std::optional<int64_t> axis = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> axis = std::nullopt, bool keepdim = false) const;
  Tensor any(const Axes& axes = std::nullopt, bool keepdim = false) const;  // bool results
  Tensor all(const Axes& axes = std::nullopt, bool keepdim = false) const;
  // x / max(‖x‖_p over dim, eps) (torch.nn.functional.normalize).
  Tensor normalize(double p = 2.0, int64_t dim = 1, double eps = 1e-12) const;
  // Scans along one axis: a window sum/max/product over a padded _pool (tinygrad's _cumalu) for n <= 64,
  // else a blocked multi-level scan (tinygrad's _split_cumalu): O(n·√n) work, a few kernels (ops_scan.cpp).
  Tensor cumsum(int64_t axis = 0) const;
  Tensor cumprod(int64_t axis) const;
  // (values, int32 indices); the index is the last position of the running max/min, as torch.
  std::pair<Tensor, Tensor> cummax(int64_t axis = 0) const;
  std::pair<Tensor, Tensor> cummin(int64_t axis = 0) const;
  Tensor logcumsumexp(int64_t axis = 0) const;
  // Stable sort (ties keep their order); NaN sorts as the largest value. n <= 512: comparison counting
  // (O(n²)); longer: Batcher's bitonic network, O(n log² n), one kernel per stage (ops_scan.cpp).
  std::pair<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  // k > size of dim throws std::invalid_argument.
  std::pair<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true, bool sorted = true) const;

  // ---- movement (zero-copy views; ops.cpp, ops_movement.cpp) ---------------------------------------
  // One -1 is inferred. A second -1 or another negative size throws std::runtime_error ("only one dimension
  // can be inferred", torch's and tinygrad's RuntimeError); a size mismatch throws std::invalid_argument.
  Tensor reshape(const Shape& shape) const;
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor transpose(int64_t dim0 = 1, int64_t dim1 = 0) const;
  Tensor expand(const Shape& shape) const;   // -1 keeps a dim; new leading dims allowed
  // (before, after) per dim; negative values crop. mode: "constant", "reflect", "replicate", "circular".
  Tensor pad(const std::vector<std::pair<int64_t, int64_t>>& padding, double value = 0) const;
  Tensor pad(const std::vector<std::pair<int64_t, int64_t>>& padding, const std::string& mode, double value = 0) const;
  Tensor shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds) const;                 // per dim
  Tensor flip(const std::vector<int64_t>& axes) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, const Shape& sizes) const;  // one -1 allowed in sizes (more: std::runtime_error)
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(std::optional<int64_t> dim = std::nullopt) const;
  // The tensor's value in a contiguous buffer of its own shape: the tensor itself when it is already a realized
  // buffer (torch.Tensor.contiguous returns self when contiguous; tinygrad drops a CONTIGUOUS of a buffer), else
  // a kernel boundary: its producers are computed once into a new buffer ("explicit contiguous()"). A view of a
  // realized buffer made contiguous again before the next realize, where no autograd is recorded, is the same
  // copy (an RNN's W.T, once a time step: one kernel; ops.cpp, view_copies).
  Tensor contiguous() const;
  // Always a new buffer holding the value (torch.Tensor.clone): a copy kernel even for a realized buffer.
  Tensor clone() const;
  // Concatenation as a sum of padded pieces (tinygrad); every piece's other dims must match.
  Tensor cat(const std::vector<Tensor>& others, int64_t dim = 0) const;
  static Tensor cat_all(const std::vector<Tensor>& tensors, int64_t dim = 0);
  static Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
  Tensor repeat(const Shape& repeats) const;  // torch.Tensor.repeat (tile)
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt) const;
  // torch.roll; empty dims: the tensor is rolled as if flattened.
  Tensor roll(const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {}) const;
  std::vector<Tensor> split(const std::vector<int64_t>& sizes, int64_t dim = 0) const;
  std::vector<Tensor> split(int64_t size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  Tensor diag() const;  // 1-D: the diagonal matrix; 2-D: the main diagonal
  Tensor diagonal(int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1) const;
  // torch.Tensor.unfold: windows of `size` every `step` along dim → (..., n_windows, ..., size).
  Tensor unfold(int64_t dim, int64_t size, int64_t step) const;
  static std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing = "ij");

  // ---- indexing (ops_index.cpp) -------------------------------------------------------------------
  // One item of a subscript: an int, a slice, None (new axis), Ellipsis or an integer tensor.
  struct Index {
    enum Kind { Int, Slice, NewAxis, Ellipsis, Tensor_ } kind = Int;
    int64_t i = 0;
    std::optional<int64_t> start, stop, step;
    std::shared_ptr<TensorImpl> tensor;
  };
  // NumPy/torch basic and advanced indexing; out-of-range ints throw std::out_of_range. Integer tensors
  // select through one-hot masks (gradients accumulate over repeated indices).
  Tensor getitem(const std::vector<Index>& indices) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  // reduce: "sum", "prod", "mean", "amax", "amin" (torch.Tensor.scatter_reduce).
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src, const std::string& reduce,
                        bool include_self = true) const;
  Tensor one_hot(int64_t num_classes) const;  // int32 result, as tinygrad (int input)

  // ---- linear algebra (ops.cpp, ops_linalg.cpp) ----------------------------------------------------
  // (..., n, k) @ (..., k, m) with broadcast batch dims; 1-D operands as in NumPy.
  // Lowered as reshape + expand + mul + sum: the expand is never materialized. On the C device a large
  // 2-D w (at least 1 MiB, N a multiple of 32, x with 64 rows or more) is first copied into 32-column
  // panels, and a transposed w (x @ W.T, N and the rows of x at least 16) into a contiguous (K, N):
  // one extra kernel each (ops.cpp: packs_panels, copies_transposed_w). The gradients are matmuls again
  // (PyTorch's rule: dx = g @ wᵀ, dw = xᵀ @ g) for a 2-D w or equal batch dims; other shapes (1-D,
  // broadcast batches) differentiate the composition.
  Tensor matmul(const Tensor& w) const;
  Tensor dot(const Tensor& w) const { return matmul(w); }
  Tensor linear(const Tensor& weight, const Tensor* bias = nullptr) const;  // weight (in, out)
  // "ij,jk->ik"; implicit output, "...", repeated indices (diagonals) supported.
  static Tensor einsum(const std::string& formula, const std::vector<Tensor>& operands);

  // ---- neural-network ops, NCHW (ops_nn.cpp) -------------------------------------------------------
  // padding: {} = 0, {p} for every side, one per spatial dim, or flat torch order (left, right, top, bottom, ...).
  // stride/dilation: one value or one per spatial dim. The weight rank selects 1-3 spatial dims.
  // Backward as PyTorch's convolution_backward: the input gradient is conv_transpose2d of the output
  // gradient, the weight gradient one reduction over batch and output positions (ops_nn.cpp).
  Tensor conv2d(const Tensor& weight, const Tensor* bias = nullptr, int64_t groups = 1, const std::vector<int64_t>& stride = {1},
                const std::vector<int64_t>& dilation = {1}, const std::vector<int64_t>& padding = {0}) const;
  Tensor conv_transpose2d(const Tensor& weight, const Tensor* bias = nullptr, int64_t groups = 1,
                          const std::vector<int64_t>& stride = {1}, const std::vector<int64_t>& dilation = {1},
                          const std::vector<int64_t>& padding = {0}, const std::vector<int64_t>& output_padding = {0}) const;
  // The kernel's length selects 1-3 spatial dims; empty stride = kernel.
  Tensor max_pool2d(const std::vector<int64_t>& kernel = {2, 2}, const std::vector<int64_t>& stride = {},
                    const std::vector<int64_t>& dilation = {1}, const std::vector<int64_t>& padding = {0},
                    bool ceil_mode = false) const;
  // (values, int32 flat spatial indices), as torch's return_indices=True.
  std::pair<Tensor, Tensor> max_pool2d_with_indices(const std::vector<int64_t>& kernel = {2, 2}, const std::vector<int64_t>& stride = {},
                                                    const std::vector<int64_t>& dilation = {1}, const std::vector<int64_t>& padding = {0},
                                                    bool ceil_mode = false) const;
  Tensor avg_pool2d(const std::vector<int64_t>& kernel = {2, 2}, const std::vector<int64_t>& stride = {},
                    const std::vector<int64_t>& dilation = {1}, const std::vector<int64_t>& padding = {0},
                    bool ceil_mode = false, bool count_include_pad = true) const;
  Tensor max_unpool2d(const Tensor& indices, const std::vector<int64_t>& kernel = {2, 2}, const std::vector<int64_t>& stride = {},
                      const std::vector<int64_t>& dilation = {1}, const std::vector<int64_t>& padding = {0},
                      const Shape& output_size = {}) const;
  // mode: "linear" (bi/trilinear by len(size)), "nearest", "nearest-exact"; the last len(size) dims.
  Tensor interpolate(const Shape& size, const std::string& mode = "linear", bool align_corners = false) const;
  Tensor layernorm(int64_t axis = -1, double eps = 1e-5) const;
  Tensor dropout(double p) const;  // always drops (the Python layer checks Tensor.training)
  // softmax(q kᵀ / √d + mask) v; bool masks select, float masks add.
  Tensor scaled_dot_product_attention(const Tensor& key, const Tensor& value, const Tensor* attn_mask = nullptr,
                                      double dropout_p = 0.0, bool is_causal = false) const;

  // ---- losses (ops_loss.cpp); reduction: "mean" | "sum" | "none", else std::invalid_argument ------
  Tensor binary_crossentropy(const Tensor& y, const std::string& reduction = "mean") const;
  Tensor binary_crossentropy_logits(const Tensor& y, const std::string& reduction = "mean", const Tensor* pos_weight = nullptr) const;
  // Class axis 1 (0 for 1-D input); y: class probabilities (input's shape) or integer class indices.
  Tensor cross_entropy(const Tensor& y, const std::string& reduction = "mean", double label_smoothing = 0.0) const;
  // Logits with the class axis last, integer labels `y`.
  Tensor sparse_categorical_crossentropy(const Tensor& y, const std::string& reduction = "mean",
                                         int64_t ignore_index = -1, double label_smoothing = 0.0) const;
  // Log-probabilities, class axis 1; weighted "mean" divides by the summed weights (torch).
  Tensor nll_loss(const Tensor& y, const Tensor* weight = nullptr, std::optional<int64_t> ignore_index = std::nullopt,
                  const std::string& reduction = "mean") const;

  // Normalizes an axis (negative counts from the end); throws std::out_of_range naming the axis.
  int64_t normalize_axis(int64_t axis) const;
  // Implementation access for the engine and the bindings.
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
  Tensor matmul_packed(const Tensor& w) const;  // matmul through w's panels (ops.cpp)
  std::shared_ptr<TensorImpl> impl_;
};

// Number of live nodes in the lazy graph (for leak tests).
size_t live_graph_nodes();
// Kernels launched since the last reset (tinygrad's GlobalCounters.kernel_count).
int64_t kernel_count();
void reset_kernel_count();
// Whether operations record autograd history (off while building gradients).
bool grad_enabled();
void set_grad_enabled(bool enabled);
std::vector<std::string> device_names();
std::string default_device();
void set_default_device(const std::string& name);

}  // namespace ts
