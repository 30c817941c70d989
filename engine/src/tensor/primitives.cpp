// The primitive layer and the Tensor basics: construction, properties, realization.
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>

#include "ir/ts_math.h"
#include "runtime/capture.h"
#include "runtime/realize.h"
#include "tensor/tensor_impl.h"

namespace ts {

namespace {
thread_local bool g_grad_enabled = true;
std::mt19937_64& rng() {
  static std::mt19937_64 r(0);
  return r;
}
int device_index(const std::string& device) {
  return device.empty() ? DeviceRegistry::default_index() : DeviceRegistry::index(device);
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool enabled) { g_grad_enabled = enabled; }
size_t live_graph_nodes() { return Graph::get().live_nodes(); }
int64_t kernel_count() { return GlobalCounters::kernel_count; }
void reset_kernel_count() { GlobalCounters::reset(); }
std::vector<std::string> device_names() { return DeviceRegistry::names(); }
std::string default_device() { return DeviceRegistry::at(DeviceRegistry::default_index()).name(); }
void set_default_device(const std::string& name) { DeviceRegistry::set_default(name); }

Tensor tensor_from_node(NodeId id) {
  auto impl = std::allocate_shared<TensorImpl>(RecyclingAllocator<TensorImpl>());
  impl->node = NodeRef(id);
  return Tensor(std::move(impl));
}
NodeId node_of(const Tensor& t) { return t.impl()->node.id(); }
const Node& node(const Tensor& t) { return t.impl()->node.node(); }

Tensor primitive(Op op, std::span<const Tensor> srcs, const Shape& shape, DType dtype, const std::vector<int64_t>& arg,
                 int device_override) {
  if (srcs.empty() || srcs.size() > 3)
    throw std::invalid_argument(std::string(op_name(op)) + ": a node takes 1 to 3 sources, got " + std::to_string(srcs.size()));
  Graph& g = Graph::get();
  // (the graph is a deque: adding a node moves no other, so these references stay valid)
  const Node& first_node = node(srcs[0]);
  const int device = first_node.device;
  const Shape& first_shape = first_node.shape;
  const bool first_is_const = first_node.op == Op::Const;
  const double first_value = first_node.value;
  for (const Tensor& s : srcs)
    if (node(s).device != device)
      throw std::invalid_argument(std::string(op_name(op)) + ": operands live on different devices (" +
                                  DeviceRegistry::at(device).name() + " and " +
                                  DeviceRegistry::at(node(s).device).name() + "): use .to(device)");
  NodeId id;
  if (is_movement(op) && op != Op::Pad && first_is_const) {
    // a moved constant is still a constant: keeps graphs (and the GUI) free of broadcast noise
    id = g.add(Op::Const, dtype, shape, nullptr, 0, {}, first_value, device);
  } else if (is_reduce(op) && first_is_const) {
    // a reduction of a broadcast constant is known without reading anything (tinygrad folds it too):
    // sum = value * count (0 over no elements), max = value. Tensor.ones(2**20, 2**20).sum() then needs
    // no 4 TiB buffer. The gradient rules see an ordinary reduce.
    double count = 1;
    for (int64_t a : arg) count *= static_cast<double>(first_shape.at(static_cast<size_t>(a)));
    double value = op == Op::ReduceSum ? (count == 0 ? 0.0 : first_value * count) : first_value;
    if (op == Op::ReduceMax && count == 0) {
      const NodeId src = node_of(srcs[0]);
      id = g.add(op, dtype, shape, &src, 1, arg, 0, device);
    } else {
      id = g.add(Op::Const, dtype, shape, nullptr, 0, {}, value, device);
    }
  } else {
    NodeId ids[3];
    for (size_t i = 0; i < srcs.size(); i++) ids[i] = node_of(srcs[i]);
    id = g.add(op, dtype, shape, ids, static_cast<int>(srcs.size()), arg, 0, device_override >= 0 ? device_override : device);
  }
  Tensor out = tensor_from_node(id);
  if (g_grad_enabled) {
    bool needs = false;
    for (const Tensor& s : srcs) needs = needs || s.requires_grad();
    if (needs) {
      auto fn = std::allocate_shared<Function>(RecyclingAllocator<Function>());
      fn->op = op;
      for (const Tensor& s : srcs) fn->parents.push_back(s.impl());
      fn->arg = arg;
      if (is_movement(op) || is_reduce(op)) fn->in_shape = first_shape;  // the only rules that read it
      // what the rules need: the inputs for most ops, the output for exp2/sqrt/recip/max-reduce
      for (const Tensor& s : srcs) fn->saved.emplace_back(node_of(s));
      fn->saved.emplace_back(id);
      out.impl()->ctx = std::move(fn);
      out.impl()->requires_grad = true;
    }
  }
  return out;
}

// ---- construction ------------------------------------------------------------------------------

Tensor Tensor::from_data(const void* data, DType dtype, const Shape& shape, const std::string& device) {
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("Tensor: negative dimension in shape (" + shape_str(shape) + ")");
  int dev = device_index(device);
  auto buf = allocate_buffer(dev, dtype, shape_numel(shape), &shape);
  write_buffer(*buf, data);
  return tensor_from_node(Graph::get().add_buffer(buf, shape));
}

Tensor Tensor::scalar(double value, DType dtype, const std::string& device) {
  int dev = device_index(device);
  require_dtype(dev, dtype);
  return tensor_from_node(Graph::get().add(Op::Const, dtype, {}, {}, {}, value, dev));
}

Tensor Tensor::scalar_like(double value) const {
  DType dt = dtype() == DType::Bool ? DType::Float32 : dtype();
  return tensor_from_node(Graph::get().add(Op::Const, dt, {}, {}, {}, value, node(*this).device));
}

Tensor Tensor::const_like(double value) const {
  DType dt = dtype() == DType::Bool ? DType::Float32 : dtype();
  return tensor_from_node(Graph::get().add(Op::Const, dt, shape(), {}, {}, value, node(*this).device));
}

Tensor Tensor::full(const Shape& shape, double value, DType dtype, const std::string& device) {
  for (int64_t d : shape)
    if (d < 0) throw std::invalid_argument("full: negative dimension in shape (" + shape_str(shape) + ")");
  int dev = device_index(device);
  require_dtype(dev, dtype);
  return tensor_from_node(Graph::get().add(Op::Const, dtype, shape, {}, {}, value, dev));
}
Tensor Tensor::zeros(const Shape& shape, DType dtype, const std::string& device) { return full(shape, 0, dtype, device); }
Tensor Tensor::ones(const Shape& shape, DType dtype, const std::string& device) { return full(shape, 1, dtype, device); }

Tensor Tensor::eye(int64_t n, int64_t m, const std::string& device) {
  if (m < 0) m = n;
  if (n < 0) throw std::invalid_argument("eye: n must be >= 0, got " + std::to_string(n));
  if (n == 0 || m == 0) return zeros({n, m}, DType::Float32, device);
  // a column of k ones padded with k zeros, read row-major as k×k, puts a 1 every k+1 elements: the
  // diagonal of the square k×k identity (tinygrad's construction); n×m is its top-left corner. (With k = m < n
  // the pattern wraps and row m+1 gets a 1 again.)
  const int64_t k = std::max(n, m);
  Tensor square = ones({k, 1}, DType::Float32, device).pad({{0, 0}, {0, k}}).flatten().shrink({{0, k * k}}).reshape({k, k});
  return n == k && m == k ? square : square.shrink({{0, n}, {0, m}});
}

Tensor Tensor::arange(double start, double stop, double step, const std::string& device) {
  if (step == 0) throw std::invalid_argument("arange: step must not be 0");
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((stop - start) / step)));
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; i++) v[i] = static_cast<float>(start + i * step);
  return from_data(v.data(), DType::Float32, {n}, device);
}

void Tensor::manual_seed(uint64_t seed) { rng().seed(seed); }

Tensor Tensor::rand(const Shape& shape, const std::string& device) {
  capture_note_random();
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(shape_numel(shape));
  for (float& x : v) x = dist(rng());
  return from_data(v.data(), DType::Float32, shape, device);
}

Tensor Tensor::randn(const Shape& shape, const std::string& device) {
  capture_note_random();
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(shape_numel(shape));
  for (float& x : v) x = dist(rng());
  return from_data(v.data(), DType::Float32, shape, device);
}

Tensor Tensor::uniform(const Shape& shape, double low, double high, const std::string& device) {
  capture_note_random();
  std::uniform_real_distribution<float> dist(static_cast<float>(low), static_cast<float>(high));
  std::vector<float> v(shape_numel(shape));
  for (float& x : v) x = dist(rng());
  return from_data(v.data(), DType::Float32, shape, device);
}

// ---- properties ---------------------------------------------------------------------------------

static const std::shared_ptr<TensorImpl>& checked(const std::shared_ptr<TensorImpl>& impl) {
  if (!impl) throw std::invalid_argument("use of an undefined Tensor");
  return impl;
}
const Shape& Tensor::shape() const { return checked(impl_)->node.node().shape; }
int64_t Tensor::numel() const { return shape_numel(shape()); }
DType Tensor::dtype() const { return checked(impl_)->node.node().dtype; }
std::string Tensor::device() const { return DeviceRegistry::at(checked(impl_)->node.node().device).name(); }
uint64_t Tensor::uid() const { return checked(impl_)->node.node().uid; }
bool Tensor::requires_grad() const { return checked(impl_)->requires_grad; }
void Tensor::set_requires_grad(bool value) {
  if (value && !is_float(dtype())) throw std::invalid_argument("only float tensors can require gradients");
  checked(impl_)->requires_grad = value;
}
Tensor Tensor::grad() const { return Tensor(checked(impl_)->grad); }
void Tensor::set_grad(const Tensor& grad) { checked(impl_)->grad = grad.impl(); }
bool Tensor::is_leaf() const { return checked(impl_)->ctx == nullptr; }

// ---- realization --------------------------------------------------------------------------------

Tensor& Tensor::realize() {
  realize_all({*this});
  return *this;
}

namespace {
// Tensors whose realization waits for the next realize (Tensor::realize_with_next): backward() puts its loss
// here, so that the forward and the backward are one schedule (see autograd.cpp).
std::vector<Tensor>& pending_realize() {
  static std::vector<Tensor> pending;
  return pending;
}
}  // namespace

void Tensor::realize_with_next() { pending_realize().push_back(*this); }

void Tensor::realize_all(const std::vector<Tensor>& tensors) {
  forget_view_copies();
  std::vector<NodeId> ids;
  std::vector<Tensor> pending = std::move(pending_realize());  // kept alive until they are realized
  pending_realize().clear();
  for (const Tensor& t : pending) ids.push_back(node_of(t));
  for (const Tensor& t : tensors) ids.push_back(node_of(t));
  ts::realize(ids);
}

void Tensor::copy_to_host(void* dst) const {
  capture_note_host_read();
  Tensor t = *this;
  const Node& n = node(t);
  if (!n.realized() || n.buffer->numel != numel()) t.realize();
  const Node& r = node(t);
  read_buffer(*r.buffer, dst);
}

void Tensor::copy_from_host(const void* src) {
  capture_note_host_write();
  const Node& n = node(*this);
  if (!n.realized() || n.buffer->numel != numel() || n.buffer->dtype != dtype())
    throw std::invalid_argument("copy_from_host: the tensor of shape (" + shape_str(shape()) +
                                ") holds no buffer of its own (a lazy value or a view); realize() a contiguous tensor "
                                "first");
  write_buffer(*n.buffer, src);
}

double Tensor::item() const {
  if (numel() != 1)
    throw std::invalid_argument("item(): the tensor has " + std::to_string(numel()) + " elements, expected 1");
  switch (dtype()) {
    case DType::Float32: { float f; copy_to_host(&f); return f; }
    case DType::Int32: { int32_t i; copy_to_host(&i); return i; }
    case DType::Bool: { uint8_t b; copy_to_host(&b); return b; }
    case DType::Float16: { uint16_t h; copy_to_host(&h); return ts_half_to_float(h); }
  }
  return 0;
}

Tensor Tensor::to(const std::string& dev) const {
  int target = DeviceRegistry::index(dev);
  if (target == node(*this).device) return *this;
  require_dtype(target, dtype());
  // a lazy COPY node: the schedule copies the realized source buffer to the target device
  return primitive(Op::Copy, *this, shape(), dtype(), {node(*this).device}, target);
}

Tensor Tensor::detach() const { return tensor_from_node(node_of(*this)); }

Tensor& Tensor::assign(const Tensor& value) {
  if (value.shape() != shape())
    throw std::invalid_argument("assign: shape (" + shape_str(value.shape()) + ") does not match (" + shape_str(shape()) + ")");
  if (value.dtype() != dtype())
    throw std::invalid_argument(std::string("assign: dtype ") + dtype_name(value.dtype()) + " does not match " + dtype_name(dtype()));
  if (node(value).device != node(*this).device) throw std::invalid_argument("assign: value lives on another device");
  capture_note_assign(impl_);  // a jit capture replays the new value into this tensor
  impl_->node = NodeRef(node_of(value));
  impl_->ctx = nullptr;
  return *this;
}

}  // namespace ts
