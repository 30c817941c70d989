// pybind11 bindings: the C++ Tensor as `tensorscope._C.Tensor`. The user-facing `tensorscope.Tensor`
// (tensor.py) wraps it and handles Python's argument forms (varargs shapes, scalars, keywords).
// C++ exceptions map to Python ones: std::invalid_argument → ValueError, std::out_of_range →
// IndexError, std::runtime_error / std::logic_error → RuntimeError.
#include <pybind11/numpy.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "runtime/realize.h"
#include "tensorscope/device.h"
#include "tensorscope/jit.h"
#include "tensorscope/tensor.h"

namespace py = pybind11;
using ts::DType;
using ts::Tensor;

namespace {

DType dtype_of(const py::array& a) {
  py::dtype dt = a.dtype();
  if (dt.kind() == 'b') return DType::Bool;
  if (dt.kind() == 'i' || dt.kind() == 'u') return DType::Int32;
  if (dt.kind() == 'f') return dt.itemsize() == 2 ? DType::Float16 : DType::Float32;
  throw std::invalid_argument("Tensor: unsupported numpy dtype '" + std::string(py::str(dt)) +
                              "' (expected a float, int or bool array)");
}

Tensor from_numpy(const py::array& input, const std::string& device, std::optional<std::string> dtype_name) {
  DType dt = dtype_name ? ts::dtype_from_name(*dtype_name) : dtype_of(input);
  py::array a;
  switch (dt) {
    case DType::Float32: a = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(input); break;
    case DType::Int32: a = py::array_t<int32_t, py::array::c_style | py::array::forcecast>::ensure(input); break;
    case DType::Bool: a = py::array_t<bool, py::array::c_style | py::array::forcecast>::ensure(input); break;
    case DType::Float16:  // pybind11 has no C++ half type: numpy converts (round to nearest even) and lays out
      a = py::module_::import("numpy").attr("asarray")(input, "float16", "C");  // (ascontiguousarray makes 0-d 1-d)
      break;
  }
  if (!a) throw std::invalid_argument("Tensor: cannot convert the array to " + std::string(ts::dtype_name(dt)));
  ts::Shape shape(a.shape(), a.shape() + a.ndim());
  return Tensor::from_data(a.data(), dt, shape, device);
}

py::array to_numpy(const Tensor& t) {
  std::vector<py::ssize_t> shape(t.shape().begin(), t.shape().end());
  py::array out;
  switch (t.dtype()) {
    case DType::Float32: out = py::array_t<float>(shape); break;
    case DType::Int32: out = py::array_t<int32_t>(shape); break;
    case DType::Bool: out = py::array_t<bool>(shape); break;
    case DType::Float16: out = py::array(py::dtype("float16"), shape); break;
  }
  t.copy_to_host(out.mutable_data());
  return out;
}

// ---- float16: PyTorch's CPU rule, op by op -------------------------------------------------------
// torch computes an op on float16 tensors in float32 and rounds its result to float16 once (c10::Half
// widens to float in every CPU kernel; sum and matmul accumulate in float32). The engine's ops are
// compositions of primitives, and rounding after each primitive would round, e.g., exp(x) =
// exp2(x·log2 e) twice, losing |x|·2^-11 of relative accuracy. So every computing op bound below goes
// through half_op: float16 operands are widened to float32, the op runs in float32, and its float32
// results are cast to the dtype torch.result_type gives: float16 when the float operands that have
// dimensions are float16 (0-d tensors and python scalars do not promote within a category; if all
// float operands are 0-d, they decide). The casts are graph nodes: the rounding shows in the GUI.
// Movement ops (reshape, permute, ...) only move values and are bound directly.
struct HalfPromotion {
  bool any_half = false;
  bool dim[2] = {false, false}, zero_d[2] = {false, false};  // [0]: float32, [1]: float16 operands seen
  void see(const Tensor& t) {
    if (!t.defined() || !ts::is_float(t.dtype())) return;
    const bool h = t.dtype() == DType::Float16;
    any_half |= h;
    (t.ndim() == 0 ? zero_d : dim)[h] = true;
  }
  void see(const std::optional<Tensor>& t) { if (t) see(*t); }
  void see(const std::vector<Tensor>& v) { for (const Tensor& t : v) see(t); }
  template <typename T> void see(const T&) {}
  bool result_half() const { return dim[0] || dim[1] ? !dim[0] : !zero_d[0]; }
};

Tensor widen(const Tensor& t) { return t.defined() && t.dtype() == DType::Float16 ? t.cast(DType::Float32) : t; }
std::optional<Tensor> widen(const std::optional<Tensor>& t) { return t ? std::optional<Tensor>(widen(*t)) : std::nullopt; }
std::vector<Tensor> widen(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (const Tensor& t : v) out.push_back(widen(t));
  return out;
}
template <typename T> const T& widen(const T& x) { return x; }

Tensor narrow(const Tensor& t) { return t.dtype() == DType::Float32 ? t.cast(DType::Float16) : t; }
std::pair<Tensor, Tensor> narrow(const std::pair<Tensor, Tensor>& p) { return {narrow(p.first), narrow(p.second)}; }
std::vector<Tensor> narrow(const std::vector<Tensor>& v) {
  std::vector<Tensor> out;
  for (const Tensor& t : v) out.push_back(narrow(t));
  return out;
}

template <typename R, typename... A>
auto half_op(R (*fn)(A...)) {
  return [fn](A... a) -> R {
    HalfPromotion p;
    (p.see(a), ...);
    if (!p.any_half) return fn(std::forward<A>(a)...);
    R r = fn(widen(a)...);
    return p.result_half() ? narrow(r) : r;
  };
}
template <typename R, typename... A>
auto half_op(R (Tensor::*method)(A...) const) {
  return [method](const Tensor& self, A... a) -> R {
    HalfPromotion p;
    p.see(self);
    (p.see(a), ...);
    if (!p.any_half) return (self.*method)(std::forward<A>(a)...);
    R r = (widen(self).*method)(widen(a)...);
    return p.result_half() ? narrow(r) : r;
  };
}

py::dict device_properties(const std::string& name) {
  ts::DeviceProperties p = ts::DeviceRegistry::properties(ts::DeviceRegistry::index(name));
  py::dict d;
  d["name"] = p.name, d["backend"] = p.backend, d["description"] = p.description, d["vendor"] = p.vendor;
  d["driver"] = p.driver, d["memory_bytes"] = p.memory_bytes, d["max_workgroup_size"] = p.max_workgroup_size;
  d["local_memory_bytes"] = p.local_memory_bytes, d["subgroup_size"] = p.subgroup_size, d["can_run"] = p.can_run;
  d["float16"] = p.float16, d["note"] = p.note;
  return d;
}

// The operand a python scalar becomes next to `like` (tensor.py's _wrap, in C++ for the hot path
// `x + 1.0`): a 0-d constant of like's dtype on its device; a python float next to a non-float tensor
// is a float32 constant (so int_tensor + 0.5 promotes), and a bool tensor's scalars are float32. Next
// to a float16 tensor it is float16 (torch: a python scalar does not promote within the float category).
Tensor scalar_operand(const Tensor& like, double value, bool is_float) {
  if (is_float && !ts::is_float(like.dtype())) return Tensor::scalar(value, DType::Float32, like.device());
  return like.scalar_like(value);
}

// tensor ∘ python scalar (or scalar ∘ tensor with `reversed`), with half_op's float16 rule: a float16
// tensor and its (float16-rounded) scalar are widened, the op runs in float32 and rounds once.
template <typename Op>
Tensor scalar_op(const Tensor& t, double value, bool is_float, bool reversed, Op op) {
  Tensor s = scalar_operand(t, value, is_float);
  if (t.dtype() != DType::Float16) return reversed ? op(s, t) : op(t, s);
  Tensor a = t.cast(DType::Float32), b = s.cast(DType::Float32);
  return (reversed ? op(b, a) : op(a, b)).cast(DType::Float16);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Tensorscope engine (C++). Use the `tensorscope` package, not this module.";
  py::enum_<DType>(m, "DType").value("float32", DType::Float32).value("int32", DType::Int32).value("bool", DType::Bool).value("float16", DType::Float16);
  py::class_<Tensor>(m, "Tensor")
      .def_static("from_numpy", &from_numpy, py::arg("array"), py::arg("device") = "", py::arg("dtype") = py::none())
      .def_static("full", &Tensor::full, py::arg("shape"), py::arg("value"), py::arg("dtype") = DType::Float32, py::arg("device") = "")
      .def_static("eye", &Tensor::eye, py::arg("n"), py::arg("m") = -1, py::arg("device") = "")
      .def_static("arange", &Tensor::arange)
      .def_static("rand", &Tensor::rand)
      .def_static("randn", &Tensor::randn)
      .def_static("uniform", &Tensor::uniform)
      .def_static("manual_seed", &Tensor::manual_seed)
      .def_static("scalar", &Tensor::scalar)
      .def_static("realize_all", &Tensor::realize_all)
      .def("numpy", &to_numpy)
      .def_property_readonly("shape", [](const Tensor& t) { return py::tuple(py::cast(t.shape())); })
      .def_property_readonly("dtype", [](const Tensor& t) { return std::string(ts::dtype_name(t.dtype())); })
      .def_property_readonly("device", &Tensor::device)
      .def_property_readonly("uid", &Tensor::uid)
      .def_property("requires_grad", &Tensor::requires_grad, &Tensor::set_requires_grad)
      .def_property("grad", [](const Tensor& t) -> std::optional<Tensor> {
            Tensor g = t.grad();
            return g.defined() ? std::optional<Tensor>(g) : std::nullopt;
          },
          [](Tensor& t, std::optional<Tensor> g) { t.set_grad(g ? *g : Tensor()); })
      .def("is_leaf", &Tensor::is_leaf)
      .def("realize", [](Tensor& t) { t.realize(); })
      .def("item", &Tensor::item)
      .def("to", &Tensor::to)
      .def("backward", [](Tensor& t, std::optional<Tensor> g) { t.backward(g ? &*g : nullptr); }, py::arg("gradient") = py::none())
      .def("detach", &Tensor::detach)
      .def("assign", &Tensor::assign)
      .def("add", half_op(py::overload_cast<const Tensor&>(&Tensor::add, py::const_)))
      .def("sub", half_op(py::overload_cast<const Tensor&>(&Tensor::sub, py::const_)))
      .def("mul", half_op(py::overload_cast<const Tensor&>(&Tensor::mul, py::const_)))
      .def("div", half_op(py::overload_cast<const Tensor&>(&Tensor::div, py::const_)))
      // tensor ∘ python scalar and scalar ∘ tensor (is_float: the scalar is a python float)
      .def("add_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, false, [](const Tensor& a, const Tensor& b) { return a.add(b); }); })
      .def("sub_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, false, [](const Tensor& a, const Tensor& b) { return a.sub(b); }); })
      .def("mul_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, false, [](const Tensor& a, const Tensor& b) { return a.mul(b); }); })
      .def("div_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, false, [](const Tensor& a, const Tensor& b) { return a.div(b); }); })
      .def("rsub_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, true, [](const Tensor& a, const Tensor& b) { return a.sub(b); }); })
      .def("rdiv_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, true, [](const Tensor& a, const Tensor& b) { return a.div(b); }); })
      .def("div_mode", half_op(py::overload_cast<const Tensor&, const std::string&>(&Tensor::div, py::const_)))
      .def("mod", half_op(&Tensor::mod))
      .def("fmod", half_op(&Tensor::fmod))
      .def("maximum", half_op(&Tensor::maximum))
      .def("minimum", half_op(&Tensor::minimum))
      .def("pow", half_op(&Tensor::pow))
      .def("copysign", half_op(&Tensor::copysign))
      .def("logaddexp", half_op(&Tensor::logaddexp))
      .def("lerp", half_op(&Tensor::lerp))
      .def("clip", half_op(+[](const Tensor& t, std::optional<Tensor> lo, std::optional<Tensor> hi) {
        return t.clip(lo ? &*lo : nullptr, hi ? &*hi : nullptr);
      }))
      .def("lt", half_op(&Tensor::lt))
      .def("gt", half_op(&Tensor::gt))
      .def("le", half_op(&Tensor::le))
      .def("ge", half_op(&Tensor::ge))
      .def("eq", half_op(&Tensor::eq))
      .def("ne", half_op(&Tensor::ne))
      .def("logical_not", half_op(&Tensor::logical_not))
      .def("logical_and", half_op(&Tensor::logical_and))
      .def("logical_or", half_op(&Tensor::logical_or))
      .def("logical_xor", half_op(&Tensor::logical_xor))
      .def("isnan", half_op(&Tensor::isnan))
      .def("isinf", half_op(&Tensor::isinf))
      .def("isfinite", half_op(&Tensor::isfinite))
      .def("isclose", half_op(&Tensor::isclose))
      .def("where", half_op(&Tensor::where))
      .def("masked_fill", half_op(&Tensor::masked_fill))
      .def("cast", [](const Tensor& t, const std::string& dt) { return t.cast(ts::dtype_from_name(dt)); })
      .def("scalar_like", &Tensor::scalar_like)
      // unary math and activations: no arguments
#define TS_UNARY(name) .def(#name, half_op(&Tensor::name))
      TS_UNARY(neg) TS_UNARY(exp) TS_UNARY(exp2) TS_UNARY(log) TS_UNARY(log2) TS_UNARY(log10) TS_UNARY(sin) TS_UNARY(cos)
      TS_UNARY(tan) TS_UNARY(asin) TS_UNARY(acos) TS_UNARY(atan) TS_UNARY(sinh) TS_UNARY(cosh) TS_UNARY(asinh) TS_UNARY(acosh)
      TS_UNARY(atanh) TS_UNARY(sqrt) TS_UNARY(rsqrt) TS_UNARY(reciprocal) TS_UNARY(relu) TS_UNARY(sigmoid) TS_UNARY(tanh)
      TS_UNARY(abs) TS_UNARY(square) TS_UNARY(sign) TS_UNARY(erf) TS_UNARY(trunc) TS_UNARY(floor) TS_UNARY(ceil) TS_UNARY(round)
      TS_UNARY(relu6) TS_UNARY(logsigmoid) TS_UNARY(hardsigmoid) TS_UNARY(hardswish) TS_UNARY(silu) TS_UNARY(mish)
      TS_UNARY(softsign) TS_UNARY(quick_gelu) TS_UNARY(selu) TS_UNARY(diag)
#undef TS_UNARY
      .def("contiguous", &Tensor::contiguous)
      .def("hardtanh", half_op(&Tensor::hardtanh))
      .def("leaky_relu", half_op(&Tensor::leaky_relu))
      .def("elu", half_op(&Tensor::elu))
      .def("celu", half_op(&Tensor::celu))
      .def("gelu", half_op(&Tensor::gelu))
      .def("softplus", half_op(&Tensor::softplus))
      .def("sum", half_op(&Tensor::sum))
      .def("prod", half_op(&Tensor::prod))
      .def("max", half_op(&Tensor::max))
      .def("min", half_op(&Tensor::min))
      .def("mean", half_op(&Tensor::mean))
      .def("var", half_op(&Tensor::var))
      .def("std", half_op(&Tensor::std))
      .def("var_mean", half_op(&Tensor::var_mean))
      .def("std_mean", half_op(&Tensor::std_mean))
      .def("softmax", half_op(&Tensor::softmax))
      .def("log_softmax", half_op(&Tensor::log_softmax))
      .def("softmin", half_op(&Tensor::softmin))
      .def("logsumexp", half_op(&Tensor::logsumexp))
      .def("argmax", half_op(&Tensor::argmax))
      .def("argmin", half_op(&Tensor::argmin))
      .def("any", half_op(&Tensor::any))
      .def("all", half_op(&Tensor::all))
      .def("normalize", half_op(&Tensor::normalize))
      .def("cumsum", half_op(&Tensor::cumsum))
      .def("cumprod", half_op(&Tensor::cumprod))
      .def("cummax", half_op(&Tensor::cummax))
      .def("cummin", half_op(&Tensor::cummin))
      .def("logcumsumexp", half_op(&Tensor::logcumsumexp))
      .def("sort", half_op(&Tensor::sort))
      .def("argsort", half_op(&Tensor::argsort))
      .def("topk", half_op(&Tensor::topk))
      .def("reshape", &Tensor::reshape)
      .def("permute", &Tensor::permute)
      .def("transpose", &Tensor::transpose)
      .def("expand", &Tensor::expand)
      .def("pad", py::overload_cast<const std::vector<std::pair<int64_t, int64_t>>&, const std::string&, double>(&Tensor::pad, py::const_))
      .def("shrink", &Tensor::shrink)
      .def("flip", &Tensor::flip)
      .def("flatten", &Tensor::flatten)
      .def("unflatten", &Tensor::unflatten)
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("squeeze", &Tensor::squeeze)
      .def_static("cat", half_op(&Tensor::cat_all))
      .def_static("stack", half_op(&Tensor::stack))
      .def("repeat", half_op(&Tensor::repeat))
      .def("repeat_interleave", half_op(&Tensor::repeat_interleave))
      .def("roll", half_op(&Tensor::roll))
      .def("split", py::overload_cast<const std::vector<int64_t>&, int64_t>(&Tensor::split, py::const_))
      .def("chunk", &Tensor::chunk)
      .def("tril", half_op(&Tensor::tril))
      .def("triu", half_op(&Tensor::triu))
      .def("diagonal", half_op(&Tensor::diagonal))
      .def("unfold", half_op(&Tensor::unfold))
      .def_static("meshgrid", half_op(&Tensor::meshgrid))
      .def("getitem", half_op(+[](const Tensor& t, const py::list& items) {
        std::vector<Tensor::Index> idx;
        for (py::handle h : items) {
          Tensor::Index ix;
          if (h.is_none()) {
            ix.kind = Tensor::Index::NewAxis;
          } else if (h.is(py::ellipsis())) {
            ix.kind = Tensor::Index::Ellipsis;
          } else if (py::isinstance<py::slice>(h)) {
            ix.kind = Tensor::Index::Slice;
            auto part = [&](const char* name) -> std::optional<int64_t> {
              py::object v = h.attr(name);
              return v.is_none() ? std::nullopt : std::optional<int64_t>(v.cast<int64_t>());
            };
            ix.start = part("start");
            ix.stop = part("stop");
            ix.step = part("step");
          } else if (py::isinstance<Tensor>(h)) {
            ix.kind = Tensor::Index::Tensor_;
            ix.tensor = h.cast<Tensor>().impl();
          } else {
            ix.kind = Tensor::Index::Int;
            ix.i = h.cast<int64_t>();
          }
          idx.push_back(ix);
        }
        return t.getitem(idx);
      }))
      .def("gather", half_op(&Tensor::gather))
      .def("scatter", half_op(&Tensor::scatter))
      .def("scatter_reduce", half_op(&Tensor::scatter_reduce))
      .def("one_hot", half_op(&Tensor::one_hot))
      .def("matmul", half_op(&Tensor::matmul))
      .def_static("einsum", half_op(&Tensor::einsum))
      .def("conv2d", half_op(+[](const Tensor& x, const Tensor& w, std::optional<Tensor> b, int64_t groups, std::vector<int64_t> stride,
                        std::vector<int64_t> dilation, std::vector<int64_t> padding) {
        return x.conv2d(w, b ? &*b : nullptr, groups, stride, dilation, padding);
      }))
      .def("conv_transpose2d", half_op(+[](const Tensor& x, const Tensor& w, std::optional<Tensor> b, int64_t groups, std::vector<int64_t> stride,
                                  std::vector<int64_t> dilation, std::vector<int64_t> padding, std::vector<int64_t> output_padding) {
        return x.conv_transpose2d(w, b ? &*b : nullptr, groups, stride, dilation, padding, output_padding);
      }))
      .def("max_pool2d", half_op(&Tensor::max_pool2d))
      .def("max_pool2d_with_indices", half_op(&Tensor::max_pool2d_with_indices))
      .def("avg_pool2d", half_op(&Tensor::avg_pool2d))
      .def("max_unpool2d", half_op(&Tensor::max_unpool2d))
      .def("interpolate", half_op(&Tensor::interpolate))
      .def("layernorm", half_op(&Tensor::layernorm))
      .def("dropout", half_op(&Tensor::dropout))
      .def("scaled_dot_product_attention", half_op(+[](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> mask,
                                              double dropout_p, bool is_causal) {
        return q.scaled_dot_product_attention(k, v, mask ? &*mask : nullptr, dropout_p, is_causal);
      }))
      .def("binary_crossentropy", half_op(&Tensor::binary_crossentropy))
      .def("binary_crossentropy_logits", half_op(+[](const Tensor& x, const Tensor& y, const std::string& reduction, std::optional<Tensor> pw) {
        return x.binary_crossentropy_logits(y, reduction, pw ? &*pw : nullptr);
      }))
      .def("cross_entropy", half_op(&Tensor::cross_entropy))
      .def("sparse_categorical_crossentropy", half_op(&Tensor::sparse_categorical_crossentropy))
      .def("nll_loss", half_op(+[](const Tensor& x, const Tensor& y, std::optional<Tensor> w, std::optional<int64_t> ignore_index,
                          const std::string& reduction) { return x.nll_loss(y, w ? &*w : nullptr, ignore_index, reduction); }))
      .def("normalize_axis", &Tensor::normalize_axis);

  m.def("kernel_count", &ts::kernel_count);
  m.def("reset_kernel_count", &ts::reset_kernel_count);
  m.def("counters", [] {
    using C = ts::GlobalCounters;
    py::dict d;
    d["kernel_count"] = C::kernel_count;
    d["time_ms"] = C::time_ms;
    d["schedule_count"] = C::schedule_count;
    d["schedule_cache_hits"] = C::schedule_cache_hits;
    d["replayed_kernels"] = C::replayed_kernels;
    return d;
  });
  m.def("clear_schedule_cache", &ts::clear_schedule_cache);

  // The engine side of @tensorscope.jit (tensorscope/tinyjit.py); semantics in tensorscope/jit.h.
  py::class_<ts::CapturedJit>(m, "CapturedJit")
      .def_static("capture", [](const std::vector<Tensor>& inputs, const std::function<std::vector<Tensor>()>& fn) {
        std::vector<Tensor> outputs;
        ts::CapturedJit jit = ts::CapturedJit::capture(inputs, fn, &outputs);
        return std::make_pair(std::move(jit), std::move(outputs));
      })
      .def("replay", &ts::CapturedJit::replay)
      .def_property_readonly("launch_count", &ts::CapturedJit::launch_count)
      .def_property_readonly("input_count", &ts::CapturedJit::input_count)
      .def_property_readonly("state_count", &ts::CapturedJit::state_count)
      .def_property_readonly("fresh_buffer_count", &ts::CapturedJit::fresh_buffer_count)
      .def_property_readonly("baked_buffer_count", &ts::CapturedJit::baked_buffer_count)
      .def_property_readonly("input_signature", &ts::CapturedJit::input_signature);
  m.def("live_graph_nodes", &ts::live_graph_nodes);
  m.def("device_names", &ts::device_names);
  m.def("device_properties", &device_properties, "The registry's DeviceProperties of a device, as a dict");
  m.def("default_device", &ts::default_device);
  m.def("set_default_device", &ts::set_default_device);
}
