#include "stack_locator.h"

#include <Python.h>

#include <string_view>
#include <unordered_map>
#include <vector>

#include "tensorscope/session.h"

namespace tsbind {
namespace {

constexpr int kMaxPackageFrames = 6;  // nn.Linear -> Tensor.linear -> Tensor.matmul ...: the innermost kept
constexpr int kMaxUserFrames = 3;     // the user's line and two callers

std::string g_package_dir;

struct CodeInfo {
  bool ours = false;   // a frame of the tensorscope package
  bool frozen = false; // "<frozen runpy>" and the like: the interpreter's own, where the walk ends
};

// Code objects seen by the walk. Each holds a reference, so no code object's address is reused while
// the tables below name it.
std::unordered_map<PyCodeObject*, CodeInfo> g_codes;

const CodeInfo& code_info(PyCodeObject* code) {
  auto it = g_codes.find(code);
  if (it != g_codes.end()) return it->second;
  CodeInfo info;
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  if (!file) PyErr_Clear();
  const std::string_view f = file ? file : "";
  info.ours = !file || (!g_package_dir.empty() && f.substr(0, g_package_dir.size()) == g_package_dir);
  info.frozen = f.substr(0, 7) == "<frozen";
  Py_INCREF(code);
  return g_codes.emplace(code, info).first->second;
}

struct KeyHash {
  size_t operator()(const std::vector<std::pair<PyCodeObject*, int>>& key) const {
    size_t h = 1469598103934665603ULL;
    for (auto [code, lasti] : key) h = (h ^ (reinterpret_cast<size_t>(code) * 31 + static_cast<size_t>(lasti))) * 1099511628211ULL;
    return h;
  }
};
// (code, instruction offset) of each frame walked -> the session's stack id
std::unordered_map<std::vector<std::pair<PyCodeObject*, int>>, int, KeyHash> g_stacks;

// Walks the stack; calls visit(frame, code) for each frame kept, innermost first. Returns whether a
// user frame was found.
template <typename Visit>
bool walk(Visit visit) {
  PyFrameObject* frame = PyEval_GetFrame();  // borrowed; null outside Python
  Py_XINCREF(frame);
  int package = 0, user = 0;
  while (frame && user < kMaxUserFrames) {
    PyCodeObject* code = PyFrame_GetCode(frame);
    const CodeInfo& info = code_info(code);
    if (info.frozen) {
      Py_DECREF(code);
      break;
    }
    if (info.ours ? user == 0 && package++ < kMaxPackageFrames : (user++, true)) visit(frame, code, info.ours);
    Py_DECREF(code);
    PyFrameObject* back = PyFrame_GetBack(frame);
    Py_DECREF(frame);
    frame = back;
  }
  Py_XDECREF(frame);
  return user > 0;
}

int locate_stack() {
  static std::vector<std::pair<PyCodeObject*, int>> key;  // reused: called for every node, with the GIL held
  key.clear();
  const bool found = walk([&](PyFrameObject* frame, PyCodeObject* code, bool) { key.emplace_back(code, PyFrame_GetLasti(frame)); });
  if (PyErr_Occurred()) PyErr_Clear();
  if (!found) return -1;
  auto it = g_stacks.find(key);
  if (it != g_stacks.end()) return it->second;
  ts::SourceStack stack;
  walk([&](PyFrameObject* frame, PyCodeObject* code, bool ours) {
    ts::SourceFrame f;
    const char* file = PyUnicode_AsUTF8(code->co_filename);
    const char* function = PyUnicode_AsUTF8(code->co_qualname);
    f.file = file ? file : "?";
    f.function = function ? function : "?";
    f.line = PyFrame_GetLineNumber(frame);
    if (!ours && stack.user < 0) stack.user = static_cast<int>(stack.frames.size());
    stack.frames.push_back(std::move(f));
  });
  if (PyErr_Occurred()) PyErr_Clear();
  const int id = ts::Session::get().add_stack(std::move(stack));
  g_stacks.emplace(key, id);
  return id;
}

}  // namespace

void install_stack_locator(const std::string& package_dir) {
  g_package_dir = package_dir.empty() || package_dir.back() == '/' ? package_dir : package_dir + "/";
  ts::Session::get().set_stack_locator(&locate_stack);
}

}  // namespace tsbind
