// The C++ Tensor API (tinygrad's semantics, C++ spelling). A Tensor is a cheap handle to a node of the
// lazy graph plus autograd state; operations build graph nodes and compute nothing until realize().
//
// Every high-level operation is a composition of the primitive graph ops (as in tinygrad), so the GUI
// shows how, say, softmax or matmul decompose. Shapes are in elements; axes may be negative.
// Errors: std::invalid_argument (bad shapes/arguments: maps to ValueError/RuntimeError in Python),
// std::out_of_range (bad axis: IndexError), std::runtime_error (device / compile failures).
#pragma once
#include <cstdint>
#include <memory>
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
  // n×m identity, built lazily from movement ops as in tinygrad: ones(n,1).pad → flatten → shrink → reshape.
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
  // Realizes and copies the data (row-major) to `dst`, numel()*dtype_size bytes.
  void copy_to_host(void* dst) const;
  double item() const;  // for a 1-element tensor, as double
  Tensor to(const std::string& device) const;

  // ---- autograd -----------------------------------------------------------------------------
  // Realizes this tensor, builds the gradient graph (lazy tensors) from it back to every leaf with
  // requires_grad and accumulates into their .grad (lazy tensors, realized when read). Without `gradient`
  // the tensor must have one element. Gradient conventions follow PyTorch (relu'(0)=0, ties share).
  void backward(const Tensor* gradient = nullptr);
  Tensor detach() const;
  // Makes this tensor hold `value`'s data (same shape and dtype) — the in-place update of optimizers.
  Tensor& assign(const Tensor& value);

  // ---- elementwise (NumPy broadcasting) -----------------------------------------------------
  Tensor add(const Tensor& x) const;
  Tensor sub(const Tensor& x) const;
  Tensor mul(const Tensor& x) const;
  Tensor div(const Tensor& x) const;
  Tensor maximum(const Tensor& x) const;
  Tensor minimum(const Tensor& x) const;
  Tensor pow(const Tensor& x) const;
  Tensor add(double x) const { return add(scalar_like(x)); }
  Tensor sub(double x) const { return sub(scalar_like(x)); }
  Tensor mul(double x) const { return mul(scalar_like(x)); }
  Tensor div(double x) const { return div(scalar_like(x)); }
  Tensor neg() const;
  Tensor exp() const;
  Tensor exp2() const;
  Tensor log() const;
  Tensor log2() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor sqrt() const;
  Tensor reciprocal() const;
  Tensor relu() const;
  Tensor sigmoid() const;
  Tensor tanh() const;
  Tensor abs() const;
  Tensor square() const;
  Tensor lt(const Tensor& x) const;  // bool results
  Tensor gt(const Tensor& x) const;
  Tensor le(const Tensor& x) const;
  Tensor ge(const Tensor& x) const;
  Tensor eq(const Tensor& x) const;
  Tensor ne(const Tensor& x) const;
  Tensor logical_not() const;
  // Called on a bool condition: where(cond, a, b) (tinygrad spelling: cond.where(a, b)).
  Tensor where(const Tensor& a, const Tensor& b) const;
  Tensor cast(DType dtype) const;
  // A 0-d constant of this tensor's dtype (float for bool) on its device.
  Tensor scalar_like(double value) const;
  static Tensor scalar(double value, DType dtype, const std::string& device);

  // ---- reductions (keepdim keeps reduced axes as size 1) ------------------------------------
  Tensor sum(const Axes& axes = std::nullopt, bool keepdim = false) const;
  Tensor max(const Axes& axes = std::nullopt, bool keepdim = false) const;
  Tensor min(const Axes& axes = std::nullopt, bool keepdim = false) const;
  Tensor mean(const Axes& axes = std::nullopt, bool keepdim = false) const;
  Tensor softmax(int64_t axis = -1) const;
  Tensor log_softmax(int64_t axis = -1) const;
  Tensor logsumexp(const Axes& axes = std::nullopt, bool keepdim = false) const;

  // ---- movement (zero-copy views) -----------------------------------------------------------
  Tensor reshape(const Shape& shape) const;  // one -1 allowed
  Tensor permute(const std::vector<int64_t>& order) const;
  Tensor transpose(int64_t dim0 = 1, int64_t dim1 = 0) const;
  Tensor expand(const Shape& shape) const;   // -1 keeps a dim; new leading dims allowed
  Tensor pad(const std::vector<std::pair<int64_t, int64_t>>& padding, double value = 0) const;  // per dim
  Tensor shrink(const std::vector<std::pair<int64_t, int64_t>>& bounds) const;                 // per dim
  Tensor flip(const std::vector<int64_t>& axes) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(std::optional<int64_t> dim = std::nullopt) const;
  Tensor contiguous() const;

  // ---- linear algebra and nn -----------------------------------------------------------------
  // (..., n, k) @ (..., k, m) with broadcast batch dims; 1-D operands as in NumPy.
  // Lowered as reshape + expand + mul + sum: the expand is never materialized.
  Tensor matmul(const Tensor& w) const;
  Tensor linear(const Tensor& weight, const Tensor* bias = nullptr) const;  // weight (in, out)
  // Logits with the class axis last, integer labels `y`. reduction: "mean" | "sum" | "none".
  Tensor sparse_categorical_crossentropy(const Tensor& y, const std::string& reduction = "mean",
                                         int64_t ignore_index = -1) const;
  Tensor one_hot(int64_t num_classes) const;

  // Normalizes an axis (negative counts from the end); throws std::out_of_range naming the axis.
  int64_t normalize_axis(int64_t axis) const;
  // Implementation access for the engine and the bindings.
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

 private:
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
