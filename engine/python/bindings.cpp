// pybind11 bindings: the C++ Tensor as `tensorscope._C.Tensor`. The user-facing `tensorscope.Tensor`
// (tensor.py) wraps it and handles Python's argument forms (varargs shapes, scalars, keywords).
// C++ exceptions map to Python ones: std::invalid_argument → ValueError, std::out_of_range →
// IndexError, std::runtime_error / std::logic_error → RuntimeError.
#include <pybind11/numpy.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "runtime/buffer_pool.h"
#include "runtime/realize.h"
#include "stack_locator.h"
#include "tensorscope/device.h"
#include "tensorscope/jit.h"
#include "tensorscope/optim.h"
#include "tensorscope/recording.h"
#include "tensorscope/session.h"
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

// `input` converted to a C-contiguous array of `dt` (numpy's casting rules)
py::array as_dtype(const py::array& input, DType dt) {
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
  return a;
}

Tensor from_numpy(const py::array& input, const std::string& device, std::optional<std::string> dtype_name) {
  DType dt = dtype_name ? ts::dtype_from_name(*dtype_name) : dtype_of(input);
  py::array a = as_dtype(input, dt);
  ts::Shape shape(a.shape(), a.shape() + a.ndim());
  return Tensor::from_data(a.data(), dt, shape, device);
}

// Tensor::copy_from_host from an array of as many elements (any shape, converted to the tensor's dtype)
void copy_from_numpy(Tensor& t, const py::array& values) {
  py::array a = as_dtype(values, t.dtype());
  if (a.size() != t.numel())
    throw std::invalid_argument("copy_from_numpy: " + std::to_string(a.size()) + " values for a tensor of " +
                                std::to_string(t.numel()) + " elements");
  t.copy_from_host(a.data());
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

py::dict device_properties(const std::string& name) {
  ts::DeviceProperties p = ts::DeviceRegistry::properties(ts::DeviceRegistry::index(name));
  py::dict d;
  d["name"] = p.name, d["backend"] = p.backend, d["description"] = p.description, d["vendor"] = p.vendor;
  d["driver"] = p.driver, d["memory_bytes"] = p.memory_bytes, d["max_workgroup_size"] = p.max_workgroup_size;
  d["local_memory_bytes"] = p.local_memory_bytes, d["subgroup_size"] = p.subgroup_size, d["can_run"] = p.can_run;
  d["float16"] = p.float16, d["note"] = p.note, d["max_kernel_buffers"] = p.max_kernel_buffers;
  d["vector_bytes"] = p.vector_bytes, d["vector_registers"] = p.vector_registers;
  return d;
}

// The operand a python scalar becomes next to `like` (tensor.py's _wrap, in C++ for the hot path
// `x + 1.0`): a constant of like's dtype and shape on its device (what the 0-d constant broadcasts to);
// a python float next to a non-float tensor is a 0-d float32 constant (so int_tensor + 0.5 promotes), and
// a bool tensor's scalars are float32. Next
// to a float16 tensor it is float16 (torch: a python scalar does not promote within the float category).
Tensor scalar_operand(const Tensor& like, double value, bool is_float) {
  if (is_float && !ts::is_float(like.dtype())) return Tensor::scalar(value, DType::Float32, like.device());
  return like.const_like(value);
}

// tensor ∘ python scalar (or scalar ∘ tensor with `reversed`). float16 follows PyTorch's CPU rule in
// the engine (tensor/ops_common.h): next to a float16 tensor the scalar is float16-rounded, as torch 1.13.
template <typename Op>
Tensor scalar_op(const Tensor& t, double value, bool is_float, bool reversed, Op op) {
  Tensor s = scalar_operand(t, value, is_float);
  return reversed ? op(s, t) : op(t, s);
}

// One item of a basic index: None, ..., an exact Python int, or a slice whose fields are ints or None
// (CPython's PySlice_Unpack: ValueError for a zero step; a missing start or stop becomes the extreme
// Py_ssize_t in the step's direction, which Tensor::getitem's clamping maps to the dim's end). False for
// anything else, leaving `ix` unset.
bool basic_index(py::handle h, Tensor::Index& ix) {
  PyObject* o = h.ptr();
  if (o == Py_None) {
    ix.kind = Tensor::Index::NewAxis;
  } else if (o == Py_Ellipsis) {
    ix.kind = Tensor::Index::Ellipsis;
  } else if (PyLong_CheckExact(o)) {
    ix.kind = Tensor::Index::Int;
    ix.i = h.cast<int64_t>();
  } else if (PySlice_Check(o)) {
    auto* sl = reinterpret_cast<PySliceObject*>(o);
    for (PyObject* f : {sl->start, sl->stop, sl->step})
      if (f != Py_None && !PyLong_CheckExact(f)) return false;
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(o, &start, &stop, &step) < 0) throw py::error_already_set();
    ix.kind = Tensor::Index::Slice;
    ix.start = start;
    ix.stop = stop;
    if (step != 1) ix.step = step;
  } else {
    return false;
  }
  return true;
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
      .def("realize_with_next", &Tensor::realize_with_next)
      .def("numpy", &to_numpy)
      .def("copy_from_numpy", &copy_from_numpy)
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
      .def("backward", [](Tensor& t, std::optional<Tensor> g, bool retain_graph) { t.backward(g ? &*g : nullptr, retain_graph); },
           py::arg("gradient") = py::none(), py::arg("retain_graph") = false)
      .def("detach", &Tensor::detach)
      .def("assign", &Tensor::assign)
      .def("add", py::overload_cast<const Tensor&>(&Tensor::add, py::const_))
      .def("sub", py::overload_cast<const Tensor&>(&Tensor::sub, py::const_))
      .def("mul", py::overload_cast<const Tensor&>(&Tensor::mul, py::const_))
      .def("div", py::overload_cast<const Tensor&>(&Tensor::div, py::const_))
      // tensor ∘ python scalar and scalar ∘ tensor (is_float: the scalar is a python float)
      .def("add_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, false, [](const Tensor& a, const Tensor& b) { return a.add(b); }); })
      .def("sub_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, false, [](const Tensor& a, const Tensor& b) { return a.sub(b); }); })
      .def("mul_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, false, [](const Tensor& a, const Tensor& b) { return a.mul(b); }); })
      .def("div_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, false, [](const Tensor& a, const Tensor& b) { return a.div(b); }); })
      .def("rsub_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, true, [](const Tensor& a, const Tensor& b) { return a.sub(b); }); })
      .def("rdiv_scalar", [](const Tensor& t, double v, bool f) { return scalar_op(t, v, f, true, [](const Tensor& a, const Tensor& b) { return a.div(b); }); })
      .def("div_mode", py::overload_cast<const Tensor&, const std::string&>(&Tensor::div, py::const_))
      .def("mod", &Tensor::mod)
      .def("fmod", &Tensor::fmod)
      .def("maximum", &Tensor::maximum)
      .def("minimum", &Tensor::minimum)
      .def("pow", &Tensor::pow)
      .def("copysign", &Tensor::copysign)
      .def("logaddexp", &Tensor::logaddexp)
      .def("lerp", &Tensor::lerp)
      .def("clip", [](const Tensor& t, std::optional<Tensor> lo, std::optional<Tensor> hi) {
        return t.clip(lo ? &*lo : nullptr, hi ? &*hi : nullptr);
      })
      .def("lt", &Tensor::lt)
      .def("gt", &Tensor::gt)
      .def("le", &Tensor::le)
      .def("ge", &Tensor::ge)
      .def("eq", &Tensor::eq)
      .def("ne", &Tensor::ne)
      .def("logical_not", &Tensor::logical_not)
      .def("logical_and", &Tensor::logical_and)
      .def("logical_or", &Tensor::logical_or)
      .def("logical_xor", &Tensor::logical_xor)
      .def("isnan", &Tensor::isnan)
      .def("isinf", &Tensor::isinf)
      .def("isfinite", &Tensor::isfinite)
      .def("isclose", &Tensor::isclose)
      .def("where", &Tensor::where)
      .def("masked_fill", &Tensor::masked_fill)
      .def("cast", [](const Tensor& t, const std::string& dt) { return t.cast(ts::dtype_from_name(dt)); })
      .def("scalar_like", &Tensor::scalar_like)
      // unary math and activations: no arguments
#define TS_UNARY(name) .def(#name, &Tensor::name)
      TS_UNARY(neg) TS_UNARY(exp) TS_UNARY(exp2) TS_UNARY(log) TS_UNARY(log2) TS_UNARY(log10) TS_UNARY(sin) TS_UNARY(cos)
      TS_UNARY(tan) TS_UNARY(asin) TS_UNARY(acos) TS_UNARY(atan) TS_UNARY(sinh) TS_UNARY(cosh) TS_UNARY(asinh) TS_UNARY(acosh)
      TS_UNARY(atanh) TS_UNARY(sqrt) TS_UNARY(rsqrt) TS_UNARY(reciprocal) TS_UNARY(relu) TS_UNARY(sigmoid) TS_UNARY(tanh)
      TS_UNARY(abs) TS_UNARY(square) TS_UNARY(sign) TS_UNARY(erf) TS_UNARY(trunc) TS_UNARY(floor) TS_UNARY(ceil) TS_UNARY(round)
      TS_UNARY(relu6) TS_UNARY(logsigmoid) TS_UNARY(hardsigmoid) TS_UNARY(hardswish) TS_UNARY(silu) TS_UNARY(mish)
      TS_UNARY(softsign) TS_UNARY(quick_gelu) TS_UNARY(selu) TS_UNARY(diag)
#undef TS_UNARY
      .def("contiguous", &Tensor::contiguous)
      .def("clone", &Tensor::clone)
      .def("hardtanh", &Tensor::hardtanh)
      .def("leaky_relu", &Tensor::leaky_relu)
      .def("elu", &Tensor::elu)
      .def("celu", &Tensor::celu)
      .def("gelu", &Tensor::gelu)
      .def("softplus", &Tensor::softplus)
      .def("sum", &Tensor::sum)
      .def("prod", &Tensor::prod)
      .def("max", &Tensor::max)
      .def("min", &Tensor::min)
      .def("mean", &Tensor::mean)
      .def("var", &Tensor::var)
      .def("std", &Tensor::std)
      .def("var_mean", &Tensor::var_mean)
      .def("std_mean", &Tensor::std_mean)
      .def("softmax", &Tensor::softmax)
      .def("log_softmax", &Tensor::log_softmax)
      .def("softmin", &Tensor::softmin)
      .def("logsumexp", &Tensor::logsumexp)
      .def("argmax", &Tensor::argmax)
      .def("argmin", &Tensor::argmin)
      .def("any", &Tensor::any)
      .def("all", &Tensor::all)
      .def("normalize", &Tensor::normalize)
      .def("cumsum", &Tensor::cumsum)
      .def("cumprod", &Tensor::cumprod)
      .def("cummax", &Tensor::cummax)
      .def("cummin", &Tensor::cummin)
      .def("logcumsumexp", &Tensor::logcumsumexp)
      .def("sort", &Tensor::sort)
      .def("argsort", &Tensor::argsort)
      .def("topk", &Tensor::topk)
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
      .def_static("cat", &Tensor::cat_all)
      .def_static("stack", &Tensor::stack)
      .def("repeat", &Tensor::repeat)
      .def("repeat_interleave", &Tensor::repeat_interleave)
      .def("roll", &Tensor::roll)
      .def("split", py::overload_cast<const std::vector<int64_t>&, int64_t>(&Tensor::split, py::const_))
      .def("chunk", &Tensor::chunk)
      .def("tril", &Tensor::tril)
      .def("triu", &Tensor::triu)
      .def("diagonal", &Tensor::diagonal)
      .def("unfold", &Tensor::unfold)
      .def_static("meshgrid", &Tensor::meshgrid)
      .def("getitem", [](const Tensor& t, const py::list& items) {
        std::vector<Tensor::Index> idx;
        for (py::handle h : items) {
          Tensor::Index ix;
          if (!basic_index(h, ix)) {
            if (py::isinstance<Tensor>(h)) {
              ix.kind = Tensor::Index::Tensor_;
              ix.tensor = h.cast<Tensor>().impl();
            } else {
              ix.kind = Tensor::Index::Int;
              ix.i = h.cast<int64_t>();
            }
          }
          idx.push_back(ix);
        }
        return t.getitem(idx);
      })
      // x[key] straight from the Python key when it is an int, a slice of ints, None, ... or a tuple of
      // them (x[:, t], x[:, :H]: the hot path of a recurrent loop); None for anything else (lists, arrays,
      // Tensors, NumPy ints), which tensor.py converts and passes to getitem.
      .def("getitem_basic", [](const Tensor& t, py::handle key) -> std::optional<Tensor> {
        std::vector<Tensor::Index> idx;
        auto add = [&](py::handle h) {
          Tensor::Index ix;
          if (!basic_index(h, ix)) return false;
          idx.push_back(ix);
          return true;
        };
        if (PyTuple_Check(key.ptr())) {
          idx.reserve(static_cast<size_t>(PyTuple_GET_SIZE(key.ptr())));
          for (py::handle h : py::reinterpret_borrow<py::tuple>(key))
            if (!add(h)) return std::nullopt;
        } else if (!add(key)) {
          return std::nullopt;
        }
        return t.getitem(idx);
      })
      .def("gather", &Tensor::gather)
      .def("scatter", &Tensor::scatter)
      .def("scatter_reduce", &Tensor::scatter_reduce)
      .def("one_hot", &Tensor::one_hot)
      .def("matmul", &Tensor::matmul)
      .def_static("einsum", &Tensor::einsum)
      .def("conv2d", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, int64_t groups, std::vector<int64_t> stride,
                        std::vector<int64_t> dilation, std::vector<int64_t> padding) {
        return x.conv2d(w, b ? &*b : nullptr, groups, stride, dilation, padding);
      })
      .def("conv_transpose2d", [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, int64_t groups, std::vector<int64_t> stride,
                                  std::vector<int64_t> dilation, std::vector<int64_t> padding, std::vector<int64_t> output_padding) {
        return x.conv_transpose2d(w, b ? &*b : nullptr, groups, stride, dilation, padding, output_padding);
      })
      .def("max_pool2d", &Tensor::max_pool2d)
      .def("max_pool2d_with_indices", &Tensor::max_pool2d_with_indices)
      .def("avg_pool2d", &Tensor::avg_pool2d)
      .def("max_unpool2d", &Tensor::max_unpool2d)
      .def("interpolate", &Tensor::interpolate)
      .def("layernorm", &Tensor::layernorm)
      .def("dropout", &Tensor::dropout)
      .def("scaled_dot_product_attention", [](const Tensor& q, const Tensor& k, const Tensor& v, std::optional<Tensor> mask,
                                              double dropout_p, bool is_causal) {
        return q.scaled_dot_product_attention(k, v, mask ? &*mask : nullptr, dropout_p, is_causal);
      })
      .def("binary_crossentropy", &Tensor::binary_crossentropy)
      .def("binary_crossentropy_logits", [](const Tensor& x, const Tensor& y, const std::string& reduction, std::optional<Tensor> pw) {
        return x.binary_crossentropy_logits(y, reduction, pw ? &*pw : nullptr);
      })
      .def("cross_entropy", &Tensor::cross_entropy)
      .def("sparse_categorical_crossentropy", &Tensor::sparse_categorical_crossentropy)
      .def("nll_loss", [](const Tensor& x, const Tensor& y, std::optional<Tensor> w, std::optional<int64_t> ignore_index,
                          const std::string& reduction) { return x.nll_loss(y, w ? &*w : nullptr, ignore_index, reduction); })
      .def("normalize_axis", &Tensor::normalize_axis);

  // the optimizers' updates of all parameters in one call (tensorscope/optim.h; nn/optim.py calls them)
  m.def("sgd_update", &ts::optim::sgd_update, py::arg("params"), py::arg("grads"), py::arg("momentum_buffers"),
        py::arg("lr"), py::arg("momentum"), py::arg("weight_decay"), py::arg("nesterov"));
  m.def("lamb_update", &ts::optim::lamb_update, py::arg("params"), py::arg("grads"), py::arg("m"), py::arg("v"),
        py::arg("b1_t"), py::arg("b2_t"), py::arg("lr"), py::arg("b1"), py::arg("b2"), py::arg("eps"),
        py::arg("weight_decay"), py::arg("adam"));
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
    d["in_place_outputs"] = C::in_place_outputs;
    // the buffer pool (runtime/buffer_pool.h): buffers in use and buffers held free for reuse
    ts::BufferPoolStats pool = ts::buffer_pool_stats();
    d["pool_hits"] = pool.hits;
    d["pool_misses"] = pool.misses;
    d["pool_cached_bytes"] = pool.cached_bytes;
    d["pool_cached_buffers"] = pool.cached_buffers;
    d["live_buffers"] = pool.live_buffers;
    d["live_buffer_bytes"] = pool.live_bytes;
    d["peak_live_buffer_bytes"] = pool.peak_live_bytes;  // since reset_peak_live_buffer_bytes()
    return d;
  });
  m.def("reset_peak_live_buffer_bytes", &ts::buffer_pool_reset_peak);
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
      .def_property_readonly("in_place_output_count", &ts::CapturedJit::in_place_output_count)
      .def_property_readonly("baked_buffer_count", &ts::CapturedJit::baked_buffer_count)
      .def_property_readonly("input_signature", &ts::CapturedJit::input_signature);
  m.def("live_graph_nodes", &ts::live_graph_nodes);
  m.def("device_names", &ts::device_names);
  m.def("device_properties", &device_properties, "The registry's DeviceProperties of a device, as a dict");
  m.def("default_device", &ts::default_device);
  m.def("set_default_device", &ts::set_default_device);

  // Script lines and break on NaN/Inf (Session::set_break_on_nan; TENSORSCOPE_BREAK_ON_NAN=1).
  py::register_exception<ts::NonFiniteError>(m, "NonFiniteError", PyExc_FloatingPointError);
  m.def("set_package_dir", &tsbind::install_stack_locator);
  m.def("set_break_on_nan", [](bool on) { ts::Session::get().set_break_on_nan(on); });
  // For scripts/bench_watch.py: installs a gate handler that never pauses (what the engine pays for
  // the gate's stops when a debugger is attached but not stepping), or removes it.
  m.def("_set_idle_gate", [](bool on) {
    struct Idle : ts::GateHandler {
      void at_gate(const ts::GateStop&) override {}
    };
    static Idle idle;
    ts::Session::get().set_gate(on ? &idle : nullptr);
  });
  m.def("break_on_nan", [] { return ts::Session::get().break_on_nan(); });

  // TENSORSCOPE_RECORD (tensorscope/_recording.py): the process records itself, no GUI or CLI involved.
  static std::unique_ptr<ts::EventStreamer> recording;
  m.def("start_recording", [](const std::string& path, const std::string& script_path, const std::string& script_text,
                              const std::vector<std::string>& argv, const std::string& python_version) {
    if (recording) throw std::runtime_error("this process is already recording");
    ts::RunInfo info = ts::new_run_info(script_path, script_text, argv, "");
    info.python_version = python_version;
    try {
      recording = std::make_unique<ts::EventStreamer>(info, path, -1);
    } catch (const ts::RecordingError& e) {
      throw std::runtime_error(std::string("TENSORSCOPE_RECORD: ") + e.what());
    }
    ts::Session::get().subscribe(recording.get());
  });
  m.def("finish_recording", [](const std::string& ended, int exit_status, const std::string& message) {
    if (!recording) return;
    ts::Session::get().unsubscribe(recording.get());
    ts::RunInfo end;
    end.ended = ended;
    end.exit_status = exit_status;
    end.end_message = message;
    end.end_time_ns = ts::wall_clock_ns();
    recording->finish(end);
    recording.reset();
  });
  m.def("record_output", [](bool is_stderr, const std::string& text) {
    ts::Session& s = ts::Session::get();
    if (s.observed()) s.emit(ts::ScriptOutputEvent{is_stderr ? ts::ScriptOutputEvent::Stderr : ts::ScriptOutputEvent::Stdout, text});
  });
}
