#include "debugger_gate.h"

#include <fnmatch.h>
#include <frameobject.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <thread>

#include "runner.h"
#include "tensorscope/device.h"
#include "tensorscope/dtype.h"
#include "tensorscope/recording.h"

namespace ts {
namespace {

DebuggerGate* g_gate = nullptr;  // the trace function's and the pending call's gate (one per process)

int update_tracing_soon(void*) {
  if (g_gate) g_gate->update_line_tracing();
  return 0;
}

// Asks for the GIL from a short-lived thread: the main thread's bytecode loop then stops to hand it over,
// and runs what is pending (a queued call, a KeyboardInterrupt). Python 3.11 does not interrupt the main
// thread for a pending call queued by another thread.
void poke_main_thread() {
  try {
    std::thread([] {
      PyGILState_STATE gil = PyGILState_Ensure();
      PyGILState_Release(gil);
    }).detach();
  } catch (const std::exception&) {  // no thread (an address-space limit): the switch waits for the next stop
  }
}

void say(ScriptOutputEvent::Stream stream, const std::string& text) {
  Session& s = Session::get();
  if (s.observed()) s.emit(ScriptOutputEvent{stream, text});
}

}  // namespace

DebuggerGate::DebuggerGate(int fd, const std::string& step, const std::string& script)
    : fd_(fd),
      mode_(step == "launch" ? Mode::NextLaunch : step == "stage" ? Mode::NextStop : Mode::Run),
      script_(script),
      main_thread_(std::this_thread::get_id()) {
  g_gate = this;
}

// ---- the engine's stops ---------------------------------------------------------------------------

void DebuggerGate::at_gate(const GateStop& stop) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (gone_ || stopping_ || evaluating_) return;  // the console's own realizes run through
  if (tracing_update_pending_) {  // the engine's thread holds the GIL here: a good place to switch
    lock.unlock();
    update_line_tracing();
    lock.lock();
  }
  const std::string breakpoint = stop.stage == GateStop::BeforeLaunch ? kernel_breakpoint(stop) : "";
  const bool pause = mode_ == Mode::NextStop || stop.stage == GateStop::NonFinite || !breakpoint.empty() ||
                     (mode_ == Mode::NextLaunch && stop.stage == GateStop::BeforeLaunch) ||
                     (mode_ == Mode::EndOfSchedule && stop.stage == GateStop::AfterSchedule);
  if (!pause) return;
  if (pause_line_) {  // Pause stopped here first: no line stop left to make
    pause_line_ = false;
    tracing_update_pending_ = true;
  }
  lock.unlock();
  Session::get().flush_nodes();  // the lazy graph as it is now, before the debugger looks at it
  lock.lock();
  const nlohmann::json where = {{"stage", gate_stage_name(stop.stage)}, {"kernel_id", stop.kernel_id},
                                {"kernel", stop.kernel},
                                {"detail", breakpoint.empty() ? stop.detail : breakpoint},
                                {"file", ""}, {"line", 0}};
  wait_here(lock, where, nullptr, &stop);
}

std::string DebuggerGate::kernel_breakpoint(const GateStop& stop) {
  for (const std::string& pattern : kernel_patterns_)
    if (fnmatch(pattern.c_str(), stop.kernel.c_str(), 0) == 0) return "breakpoint on kernels " + pattern;
  if (ops_.empty() && nodes_.empty()) return "";
  auto it = kernel_index_.find(stop.kernel_id);
  if (it == kernel_index_.end()) return "";
  // a thin schedule's kernels are its structure's, whose node uids are positions in position_uids
  const bool thin = schedule_.thin();
  const KernelInfo& k = thin ? schedule_.structure->kernels[it->second] : schedule_.kernels[it->second];
  for (const std::string& op : k.ops)
    if (ops_.count(op)) return "breakpoint on op " + op;
  for (uint64_t u : k.node_uids) {
    const uint64_t uid = thin ? (u < schedule_.position_uids.size() ? schedule_.position_uids[u] : u) : u;
    if (nodes_.count(uid)) return "breakpoint on node #" + std::to_string(uid);
  }
  return "";
}

void DebuggerGate::on_event(uint64_t, const Event& event) {
  const auto* schedule = std::get_if<ScheduleEvent>(&event);
  if (!schedule) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // kept also without breakpoints: one set while paused inside this schedule applies to it
  schedule_ = *schedule;
  kernel_index_.clear();
  size_t position = 0;
  for_each_kernel(schedule_, [&](int id, const KernelInfo&) { kernel_index_[id] = position++; });
}

// ---- script lines ---------------------------------------------------------------------------------

bool DebuggerGate::has_line_breakpoints(const std::string& file) {
  return lines_.count(file) || run_to_file_ == file || (pause_line_ && file == script_);
}

bool DebuggerGate::wants_tracing() const { return !lines_.empty() || !run_to_file_.empty() || pause_line_; }

bool DebuggerGate::line_breakpoint(const std::string& file, int line) {
  if (pause_line_ && file == script_) {
    pause_line_ = false;
    tracing_update_pending_ = true;
    return true;
  }
  if (run_to_line_ == line && run_to_file_ == file) {
    run_to_file_.clear();
    run_to_line_ = 0;
    tracing_update_pending_ = true;  // wait_here switches tracing off when no breakpoint is left
    return true;
  }
  auto it = lines_.find(file);
  return it != lines_.end() && it->second.count(line);
}

// The C trace function (PyEval_SetTrace), on the main thread with the GIL. A frame of a file without
// line breakpoints stops producing line events at its call (f_trace_lines = False).
int DebuggerGate::trace(PyObject*, PyFrameObject* frame, int what, PyObject*) {
  DebuggerGate* gate = g_gate;
  if (!gate || gate->evaluating_ || (what != PyTrace_CALL && what != PyTrace_LINE)) return 0;
  PyCodeObject* code = PyFrame_GetCode(frame);
  const char* name = PyUnicode_AsUTF8(code->co_filename);
  Py_DECREF(code);
  if (!name) {
    PyErr_Clear();
    return 0;
  }
  const std::string file = name;
  std::unique_lock<std::mutex> lock(gate->mutex_);
  if (what == PyTrace_CALL) {
    const bool wanted = gate->has_line_breakpoints(file);
    lock.unlock();
    if (!wanted && PyObject_SetAttrString(reinterpret_cast<PyObject*>(frame), "f_trace_lines", Py_False) != 0)
      PyErr_Clear();
    return 0;
  }
  const int line = PyFrame_GetLineNumber(frame);
  if (gate->gone_ || gate->stopping_ || !gate->line_breakpoint(file, line)) return 0;
  lock.unlock();
  Session::get().flush_nodes();
  lock.lock();
  gate->mode_ = Mode::Run;
  const nlohmann::json where = {{"stage", "line"}, {"kernel_id", -1}, {"kernel", ""}, {"detail", ""},
                                {"file", file}, {"line", line}};
  gate->waiting_at_line_ = true;
  gate->wait_here(lock, where, frame);
  gate->waiting_at_line_ = false;
  if (gate->stopping_) {  // Stop while paused on this line: the script stops here
    PyErr_SetNone(PyExc_KeyboardInterrupt);
    return -1;
  }
  return 0;
}

void DebuggerGate::update_line_tracing() {
  if (std::this_thread::get_id() != main_thread_) return;  // a script's own thread: the main one switches later
  bool want;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tracing_update_pending_ = false;
    want = wants_tracing();
  }
  if (want == tracing_) return;
  PyEval_SetTrace(want ? &DebuggerGate::trace : nullptr, nullptr);
  tracing_ = want;
}

// ---- pausing --------------------------------------------------------------------------------------

void DebuggerGate::wait_here(std::unique_lock<std::mutex>& lock, const nlohmann::json& where, PyFrameObject* frame,
                             const GateStop* stop) {
  if (gone_ || stopping_) return;
  requests_.clear();  // asked for while running: they were for a pause that is over
  nlohmann::json numbered = where;
  numbered["pause"] = ++pauses_;
  const std::string bytes = frame_bytes('P', numbered.dump());
  send_all(bytes);
  resumed_ = false;
  waiting_ = true;
  while (true) {
    // requests first, in the order they came: "evaluate" then "continue" evaluates, then continues
    wake_.wait(lock, [&] { return resumed_ || gone_ || stopping_ || !requests_.empty(); });
    if (gone_ || stopping_) break;
    if (requests_.empty()) break;  // resumed
    const nlohmann::json request = requests_.front();
    requests_.erase(requests_.begin());
    lock.unlock();
    if (request.value("command", "") == "buffers") {
      const std::string reply =
          frame_bytes('D', stop && stop->buffers ? read_buffers(*stop) : R"({"kernel_id":-1,"buffers":[]})"
                                                                         "\n");
      lock.lock();
      if (!gone_) send_all(reply);
      continue;
    }
    if (frame) {
      evaluate(frame, request.value("code", ""));
    } else {
      say(ScriptOutputEvent::Stderr,
          "The console evaluates Python while the script is paused on a line (a line breakpoint, F9, or "
          "Ctrl+F10); it is paused inside the engine now (" + where.value("stage", std::string()) + ").\n");
    }
    Session::get().flush_nodes();
    lock.lock();
    // paused again at the same place: the debugger takes the console's events as done
    if (!resumed_ && !gone_ && !stopping_) send_all(bytes);
  }
  waiting_ = false;
  if (tracing_update_pending_) {  // breakpoints changed while paused: switch tracing before going on
    lock.unlock();
    update_line_tracing();
    lock.lock();
  }
}

void DebuggerGate::set_before_send(std::function<void()> before_send) {
  std::lock_guard<std::mutex> lock(mutex_);
  before_send_ = std::move(before_send);
}

void DebuggerGate::send_all(const std::string& bytes) {
  if (before_send_) before_send_();
  std::string_view rest = bytes;
  while (!rest.empty()) {
    const ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the debugger is gone: the command thread will say so
    rest.remove_prefix(static_cast<size_t>(n));
  }
}

std::string DebuggerGate::read_buffers(const GateStop& stop) {
  nlohmann::json list = nlohmann::json::array();
  std::string data;
  const auto& buffers = *stop.buffers;
  for (size_t i = 0; i < buffers.size(); i++) {
    const Buffer& b = *buffers[i];
    const size_t outputs = static_cast<size_t>(stop.outputs);
    const bool output = i < outputs;
    nlohmann::json entry = {{"role", output ? "output" : "input"}, {"index", output ? i : i - outputs},
                            {"dtype", dtype_name(b.dtype)}, {"numel", b.numel}, {"bytes", 0}, {"note", ""}};
    if (output && stop.stage == GateStop::BeforeLaunch) {
      entry["note"] = "not computed yet: paused before the launch (F11 steps to after it)";
    } else if (b.nbytes() > kMaxBufferBytes) {
      entry["note"] = "not read: " + std::to_string(b.nbytes() >> 20) + " MiB is over the inspector's " +
                      std::to_string(kMaxBufferBytes >> 20) + " MiB";
    } else if (data.size() + b.nbytes() > kMaxFrameBytes) {
      entry["note"] = "not read: the launch's buffers together are over " + std::to_string(kMaxFrameBytes >> 20) + " MiB";
    } else if (std::string lost = DeviceRegistry::lost_reason(b.device_index); !lost.empty()) {
      entry["note"] = "not read: the device was lost (" + lost + ")";
    } else {
      const size_t at = data.size();
      data.resize(at + b.nbytes());
      read_buffer(b, data.data() + at);
      entry["bytes"] = b.nbytes();
    }
    list.push_back(std::move(entry));
  }
  const nlohmann::json head = {{"kernel_id", stop.kernel_id}, {"stage", gate_stage_name(stop.stage)}, {"buffers", list}};
  return head.dump() + "\n" + data;
}

// Runs `source` in the paused frame like Python's interactive console (an expression's value is
// printed by sys.displayhook), falling back to a whole block of statements. Output and tracebacks go
// to the script's sys.stdout / sys.stderr, which stream to the debugger.
void DebuggerGate::evaluate(PyFrameObject* frame, const std::string& source) {
  evaluating_ = true;
  PyObject* globals = PyFrame_GetGlobals(frame);
  PyObject* locals = PyFrame_GetLocals(frame);
  PyObject* code = Py_CompileString(source.c_str(), "<console>", Py_single_input);
  if (!code && PyErr_ExceptionMatches(PyExc_SyntaxError)) {
    PyErr_Clear();
    code = Py_CompileString(source.c_str(), "<console>", Py_file_input);
  }
  PyObject* result = code ? PyEval_EvalCode(code, globals, locals) : nullptr;
  if (!result) {
    if (stopping_ && PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) {
      PyErr_Clear();  // Stop during the evaluation: the script stops when the pause ends
    } else if (PyErr_ExceptionMatches(PyExc_SystemExit)) {
      PyErr_Clear();
      say(ScriptOutputEvent::Stderr, "SystemExit in the console is ignored: Shift+F5 stops the script.\n");
    } else {
      PyErr_PrintEx(0);  // the traceback, to the script's sys.stderr (not kept in sys.last_traceback)
    }
  } else if (locals != globals) {
    PyFrame_LocalsToFast(frame, 0);  // assignments in a function's frame reach its variables
  }
  Py_XDECREF(result);
  Py_XDECREF(code);
  Py_XDECREF(globals);
  Py_XDECREF(locals);
  if (PyErr_Occurred()) PyErr_Clear();
  evaluating_ = false;
}

// ---- commands -------------------------------------------------------------------------------------

void DebuggerGate::set_breakpoints(const nlohmann::json& c) {
  lines_.clear();
  kernel_patterns_.clear();
  ops_.clear();
  nodes_.clear();
  for (const auto& l : c.value("lines", nlohmann::json::array()))
    if (l.is_object() && l.value("line", 0) > 0) lines_[l.value("file", std::string())].insert(l.value("line", 0));
  for (const auto& k : c.value("kernels", nlohmann::json::array()))
    if (k.is_string()) kernel_patterns_.push_back(k.get<std::string>());
  for (const auto& o : c.value("ops", nlohmann::json::array()))
    if (o.is_string()) ops_.insert(o.get<std::string>());
  for (const auto& n : c.value("nodes", nlohmann::json::array()))
    if (n.is_number_unsigned()) nodes_.insert(n.get<uint64_t>());
}

void DebuggerGate::command(const nlohmann::json& c) {
  const std::string what = c.value("command", "");
  std::lock_guard<std::mutex> lock(mutex_);
  const bool traced = wants_tracing();
  if (what == "continue") {
    mode_ = Mode::Run;
    resume();
  } else if (what == "step") {
    const std::string until = c.value("until", "launch");
    mode_ = until == "stage" ? Mode::NextStop : until == "schedule end" ? Mode::EndOfSchedule : Mode::NextLaunch;
    resume();
  } else if (what == "pause") {
    mode_ = Mode::NextStop;
    pause_line_ = !script_.empty();
  } else if (what == "stop") {
    // No pause from now on. Paused on a line, the trace function raises KeyboardInterrupt there;
    // elsewhere (running, at an engine stop, evaluating) it comes as SIGINT would.
    stopping_ = true;
    mode_ = Mode::Run;
    if (!waiting_at_line_ || evaluating_) {
      ScriptRunner::interrupt_main();
      poke_main_thread();  // Python 3.11 checks for the interrupt once the main thread's loop is interrupted
    }
    resume();
  } else if (what == "breakpoints") {
    set_breakpoints(c);
  } else if (what == "run to line") {
    run_to_file_ = c.value("file", std::string());
    run_to_line_ = c.value("line", 0);
    mode_ = Mode::Run;
    resume();
  } else if (what == "evaluate" || what == "buffers") {
    requests_.push_back(c);
    wake_.notify_all();
  }
  if (traced != wants_tracing()) request_tracing_update();
}

// PyEval_SetTrace must run on the main thread. It does when the paused script resumes, at the engine's
// next stop, or in a pending call. Python 3.11 runs a pending call queued by another thread only when
// something else interrupts the main thread's bytecode (a signal, a request for the GIL): a short-lived
// thread asks for the GIL, so that a script busy in pure Python hears of a breakpoint or Pause at once.
// (Not while paused: the paused main thread holds the GIL until it resumes, and switches then anyway.)
void DebuggerGate::request_tracing_update() {
  if (tracing_update_pending_) return;
  tracing_update_pending_ = true;
  Py_AddPendingCall(&update_tracing_soon, nullptr);
  if (!waiting_) poke_main_thread();
}

void DebuggerGate::gone() {
  std::lock_guard<std::mutex> lock(mutex_);
  gone_ = true;
  stopping_ = true;
  wake_.notify_all();
}

void DebuggerGate::resume() {
  resumed_ = true;
  wake_.notify_all();
}

}  // namespace ts
