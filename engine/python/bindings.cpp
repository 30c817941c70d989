// pybind11 bindings: the C++ Tensor as `tensorscope._C.Tensor`. The user-facing `tensorscope.Tensor`
// (tensor.py) wraps it and handles Python's argument forms (varargs shapes, scalars, keywords).
// C++ exceptions map to Python ones: std::invalid_argument → ValueError, std::out_of_range →
// IndexError, std::runtime_error / std::logic_error → RuntimeError.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "tensorscope/tensor.h"

namespace py = pybind11;
using ts::DType;
using ts::Tensor;

namespace {

DType dtype_of(const py::array& a) {
  py::dtype dt = a.dtype();
  if (dt.kind() == 'b') return DType::Bool;
  if (dt.kind() == 'i' || dt.kind() == 'u') return DType::Int32;
  if (dt.kind() == 'f') return DType::Float32;
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
  }
  t.copy_to_host(out.mutable_data());
  return out;
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "Tensorscope engine (C++). Use the `tensorscope` package, not this module.";
  py::enum_<DType>(m, "DType").value("float32", DType::Float32).value("int32", DType::Int32).value("bool", DType::Bool);
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
      .def("add", py::overload_cast<const Tensor&>(&Tensor::add, py::const_))
      .def("sub", py::overload_cast<const Tensor&>(&Tensor::sub, py::const_))
      .def("mul", py::overload_cast<const Tensor&>(&Tensor::mul, py::const_))
      .def("div", py::overload_cast<const Tensor&>(&Tensor::div, py::const_))
      .def("maximum", &Tensor::maximum)
      .def("minimum", &Tensor::minimum)
      .def("pow", &Tensor::pow)
      .def("neg", &Tensor::neg)
      .def("exp", &Tensor::exp)
      .def("exp2", &Tensor::exp2)
      .def("log", &Tensor::log)
      .def("log2", &Tensor::log2)
      .def("sin", &Tensor::sin)
      .def("cos", &Tensor::cos)
      .def("sqrt", &Tensor::sqrt)
      .def("reciprocal", &Tensor::reciprocal)
      .def("relu", &Tensor::relu)
      .def("sigmoid", &Tensor::sigmoid)
      .def("tanh", &Tensor::tanh)
      .def("abs", &Tensor::abs)
      .def("square", &Tensor::square)
      .def("lt", &Tensor::lt)
      .def("gt", &Tensor::gt)
      .def("le", &Tensor::le)
      .def("ge", &Tensor::ge)
      .def("eq", &Tensor::eq)
      .def("ne", &Tensor::ne)
      .def("logical_not", &Tensor::logical_not)
      .def("where", &Tensor::where)
      .def("cast", [](const Tensor& t, const std::string& dt) { return t.cast(ts::dtype_from_name(dt)); })
      .def("scalar_like", &Tensor::scalar_like)
      .def("sum", &Tensor::sum)
      .def("max", &Tensor::max)
      .def("min", &Tensor::min)
      .def("mean", &Tensor::mean)
      .def("softmax", &Tensor::softmax)
      .def("log_softmax", &Tensor::log_softmax)
      .def("logsumexp", &Tensor::logsumexp)
      .def("reshape", &Tensor::reshape)
      .def("permute", &Tensor::permute)
      .def("transpose", &Tensor::transpose)
      .def("expand", &Tensor::expand)
      .def("pad", &Tensor::pad)
      .def("shrink", &Tensor::shrink)
      .def("flip", &Tensor::flip)
      .def("flatten", &Tensor::flatten)
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("squeeze", &Tensor::squeeze)
      .def("contiguous", &Tensor::contiguous)
      .def("matmul", &Tensor::matmul)
      .def("one_hot", &Tensor::one_hot)
      .def("sparse_categorical_crossentropy", &Tensor::sparse_categorical_crossentropy)
      .def("normalize_axis", &Tensor::normalize_axis);

  m.def("kernel_count", &ts::kernel_count);
  m.def("reset_kernel_count", &ts::reset_kernel_count);
  m.def("live_graph_nodes", &ts::live_graph_nodes);
  m.def("device_names", &ts::device_names);
  m.def("default_device", &ts::default_device);
  m.def("set_default_device", &ts::set_default_device);
}
