#include "runner.h"

#include <pybind11/embed.h>
#include <pybind11/stl.h>
#include <unistd.h>

#include <filesystem>

#include "tensorscope/session.h"

namespace py = pybind11;

namespace ts {
namespace {

PyThreadState* g_main_state = nullptr;

// Installed as sys.stdout / sys.stderr while a script runs.
const char* kWriterSource = R"(
class _TensorscopeWriter:
    def __init__(self, write, stream_name):
        self._write, self.name = write, stream_name
    def write(self, text):
        self._write(text)
        return len(text)
    def flush(self):
        pass
    def isatty(self):
        return False
    @property
    def encoding(self):
        return "utf-8"
)";

}  // namespace

void ScriptRunner::initialize(const std::vector<std::string>& python_path, bool signal_handlers) {
  if (Py_IsInitialized()) return;
  py::initialize_interpreter(signal_handlers);
  {
    py::module_ sys = py::module_::import("sys");
    py::list path = sys.attr("path");
    for (auto it = python_path.rbegin(); it != python_path.rend(); ++it)
      if (!it->empty()) path.insert(0, *it);
    py::exec(kWriterSource, py::module_::import("__main__").attr("__dict__"));
  }
  g_main_state = PyEval_SaveThread();  // release the GIL so worker threads can run scripts
}

bool ScriptRunner::initialized() { return Py_IsInitialized(); }

std::string ScriptRunner::default_python_path() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto dir : {exe.parent_path().parent_path() / "python", exe.parent_path() / "python"})
    if (std::filesystem::exists(dir / "tensorscope" / "__init__.py")) return dir.string();
  return "";
}

ScriptResult ScriptRunner::run(const std::string& path, const std::string& source, const std::string& device,
                               std::function<void(bool, std::string_view)> on_output) {
  ScriptResult result;
  // PyGILState_Ensure, not pybind11's gil_scoped_acquire: on a thread other than the main one the
  // latter makes a thread state that PyGILState does not know, and the first import then deadlocks
  // on the import lock this thread already holds.
  struct GilState {
    PyGILState_STATE state = PyGILState_Ensure();
    ~GilState() { PyGILState_Release(state); }
  } gil;
  py::module_ sys = py::module_::import("sys");
  py::object old_out = sys.attr("stdout"), old_err = sys.attr("stderr"), old_argv = sys.attr("argv");
  py::list path_list = sys.attr("path");
  std::string script_dir = std::filesystem::absolute(path).parent_path().string();
  auto writer_for = [&](bool is_stderr) {
    py::object cls = py::module_::import("__main__").attr("_TensorscopeWriter");
    py::cpp_function write([on_output, is_stderr](const std::string& text) {
      if (on_output) on_output(is_stderr, text);
      Session& s = Session::get();
      if (s.observed()) s.emit(ScriptOutputEvent{is_stderr ? ScriptOutputEvent::Stderr : ScriptOutputEvent::Stdout, text});
    });
    return cls(write, is_stderr ? "<stderr>" : "<stdout>");
  };
  try {
    sys.attr("stdout") = writer_for(false);
    sys.attr("stderr") = writer_for(true);
    sys.attr("argv") = py::make_tuple(path);
    sys.attr("argv") = py::list(sys.attr("argv"));
    path_list.insert(0, script_dir);
    if (!device.empty()) py::module_::import("tensorscope").attr("_C").attr("set_default_device")(device);
    py::dict globals;
    globals["__name__"] = "__main__";
    globals["__file__"] = path;
    globals["__builtins__"] = py::module_::import("builtins");
    py::object code = py::module_::import("builtins").attr("compile")(source, path, "exec");
    py::module_::import("builtins").attr("exec")(code, globals);
  } catch (py::error_already_set& e) {
    bool clean_exit = false;
    if (e.matches(PyExc_SystemExit)) {
      py::object code = e.value().attr("code");
      clean_exit = code.is_none() || (py::isinstance<py::int_>(code) && code.cast<int>() == 0);
    }
    if (!clean_exit) {
      result.ok = false;
      py::module_ tb = py::module_::import("traceback");
      py::list lines = tb.attr("format_exception")(e.type(), e.value(), e.trace());
      for (auto& l : lines) result.traceback += l.cast<std::string>();
      py::list only = tb.attr("format_exception_only")(e.type(), e.value());
      if (!only.empty()) result.error = py::str(only[py::len(only) - 1]).cast<std::string>();
      while (!result.error.empty() && result.error.back() == '\n') result.error.pop_back();
      if (e.matches(PyExc_SyntaxError) && py::hasattr(e.value(), "lineno") && !e.value().attr("lineno").is_none()) {
        result.error_line = e.value().attr("lineno").cast<int>();
      } else if (e.trace()) {
        for (py::handle frame : tb.attr("extract_tb")(e.trace()))
          if (frame.attr("filename").cast<std::string>() == path) result.error_line = frame.attr("lineno").cast<int>();
      }
      if (on_output) on_output(true, result.traceback);
      Session& s = Session::get();
      if (s.observed()) s.emit(ScriptOutputEvent{ScriptOutputEvent::Stderr, result.traceback});
    }
  }
  sys.attr("stdout") = old_out;
  sys.attr("stderr") = old_err;
  sys.attr("argv") = old_argv;
  if (py::len(path_list) && py::str(path_list[0]).cast<std::string>() == script_dir) path_list.attr("pop")(0);
  return result;
}

void ScriptRunner::interrupt_main() { PyErr_SetInterrupt(); }

void ScriptRunner::on_os_exit(std::function<void()> before_exit) {
  struct GilState {  // as in run()
    PyGILState_STATE state = PyGILState_Ensure();
    ~GilState() { PyGILState_Release(state); }
  } gil;
  py::module_ os = py::module_::import("os");
  static py::object* real_exit = new py::object(os.attr("_exit"));  // never freed: outlives the interpreter
  if (!before_exit) {
    os.attr("_exit") = *real_exit;
    return;
  }
  os.attr("_exit") = py::cpp_function(
      [before_exit](int status) {
        before_exit();
        (*real_exit)(status);
      },
      py::arg("status"), "os._exit, after the runner sent its queued events (tensorscope runner)");
}

RunInfo how_it_ended(const ScriptResult& result, const std::string& path) {
  RunInfo end;
  end.end_time_ns = wall_clock_ns();
  if (result.ok) {
    end.ended = "finished";
  } else if (result.error.rfind("KeyboardInterrupt", 0) == 0) {
    end.ended = "stopped";
    end.end_message = "stopped (KeyboardInterrupt)";
  } else {
    end.ended = "error";
    end.exit_status = 1;
    int line = result.error_line;
    end.end_message = result.error;
    // break on NaN/Inf: the line to show is the one that made the op, not the one that realized it
    if (size_t at = result.error.find("NonFiniteError: "); at != std::string::npos) {
      end.end_message = "NaN/Inf: " + result.error.substr(at + 16);
      const std::string made_at = " made at " + path + ":";
      if (size_t m = result.error.rfind(made_at); m != std::string::npos)
        line = std::atoi(result.error.c_str() + m + made_at.size());
    }
    if (line) end.end_message += " (line " + std::to_string(line) + ")";
  }
  return end;
}

}  // namespace ts
