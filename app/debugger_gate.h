// The runner's side of the debugger (issue 12): where a script run pauses and what it does meanwhile.
//
// DebuggerGate is the engine's GateHandler in `tensorscope-cli runner`. It pauses the script
//   - at the engine's stops (tensorscope/session.h): at the next launch (F10), at the next stop of any
//     stage (F11, Pause), at the end of the schedule (Shift+F11), and always at a non-finite output
//     (break on NaN/Inf);
//   - before the launch of a kernel that a breakpoint names: by kernel name pattern ("r_*", fnmatch),
//     by op fused into it ("SUM"), or by graph node ("when node #41 is realized");
//   - at a line of the script (line breakpoints, and run to the cursor's line). Python's line tracing
//     (PyEval_SetTrace, a C trace function) is on only while line breakpoints exist, and only for
//     frames of files that have some: a run without line breakpoints pays nothing for them.
// When it pauses it first emits the pending NodesEvents (so the debugger sees the lazy graph as it is),
// then sends a 'P' frame {"pause", "stage", "kernel_id", "kernel", "detail", "file", "line"} and waits on
// the engine's thread for a command. Paused on a script line, the pause console's "evaluate" commands run
// Python in the paused frame (its globals and locals), on that same thread; what they print and
// realize streams to the debugger like the script's own output and kernels. After each evaluation the
// same 'P' frame comes again. "pause" numbers the pauses (1, 2, ...; a frame sent again keeps its
// number): the debugger ignores a 'P' whose pause it already resumed from, since "evaluate" then
// "continue" may cross the evaluation's 'P' on the connection.
//
// Commands (JSON, on the command thread; see runner_command.h for the connection):
//   {"command": "continue"}                 F5
//   {"command": "step", "until": "launch" | "stage" | "schedule end"}   F10, F11, Shift+F11
//   {"command": "pause"}                    pause at the next stop of any stage, or at the script's next
//                                           line, whichever comes first
//   {"command": "stop"}                     KeyboardInterrupt in the script
//   {"command": "breakpoints", "lines": [{"file": F, "line": N}], "kernels": ["r_*"], "ops": ["SUM"],
//    "nodes": [uid]}                        replaces every breakpoint
//   {"command": "run to line", "file": F, "line": N}   Ctrl+F10: continue until that line
//   {"command": "evaluate", "code": "x.shape"}         the pause console
//   {"command": "buffers"}                  paused before or after a launch: sends the launch's buffers
//                                           as a 'D' frame (see read_buffers)
#pragma once
#include <Python.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tensorscope/session.h"

namespace ts {

class DebuggerGate : public GateHandler, public SessionObserver {
 public:
  // `fd`: the debugger's connection. `step`: "" runs; "launch" pauses before the first launch, "stage"
  // at the first stop of any stage. `script`: the script's file name as Python knows it (Pause stops at
  // its next line).
  DebuggerGate(int fd, const std::string& step, const std::string& script);

  // The engine's stops (engine thread).
  void at_gate(const GateStop& stop) override;
  // Remembers the kernels of the latest schedule (their ops and nodes), for op and node breakpoints.
  void on_event(uint64_t seq, const Event& event) override;

  // A command from the debugger (command thread).
  void command(const nlohmann::json& command);
  // The debugger went away: nothing waits any more.
  void gone();

  // Called (under the gate's lock) before each frame the gate sends: the runner sends the events it has
  // queued (EventStreamer::flush), so that the debugger gets every event before the pause. Null: none.
  void set_before_send(std::function<void()> before_send);

  // Turns Python's line tracing on or off to match the line breakpoints (main thread, GIL held). The
  // runner calls it before the script starts; later changes arrive through Py_AddPendingCall.
  void update_line_tracing();

 private:
  enum class Mode { Run, NextLaunch, NextStop, EndOfSchedule };
  static int trace(PyObject* self, PyFrameObject* frame, int what, PyObject* arg);
  bool has_line_breakpoints(const std::string& file);   // mutex_ held
  bool wants_tracing() const;                           // mutex_ held: line breakpoints, run to line, Pause
  void request_tracing_update();                        // mutex_ held: from the command thread
  bool line_breakpoint(const std::string& file, int line);  // mutex_ held; clears a hit run-to-line
  std::string kernel_breakpoint(const GateStop& stop);  // mutex_ held; "" or why it breaks there
  // Sends the 'P' frame and waits for a command (mutex_ held through `lock`). `frame`: the paused
  // Python frame, where "evaluate" commands run (null at the engine's stops).
  void wait_here(std::unique_lock<std::mutex>& lock, const nlohmann::json& where, PyFrameObject* frame,
                 const GateStop* stop = nullptr);
  void send_all(const std::string& bytes);  // to the debugger, all of it (a short send is retried)
  void evaluate(PyFrameObject* frame, const std::string& code);  // GIL held, mutex_ not held
  // The 'D' frame of a launch's buffers: a JSON line {"kernel_id", "stage", "buffers": [{"role": "output" |
  // "input", "index", "dtype", "numel", "bytes", "note"}]}, then each buffer's bytes (host byte order) in
  // that order (outputs numbered from 0, inputs from 0). Paused before the launch, the outputs are not computed
  // yet: they have no bytes and say so.
  // A buffer over kMaxBufferBytes is not sent (its note says so).
  std::string read_buffers(const GateStop& stop);
  static constexpr size_t kMaxBufferBytes = size_t{64} << 20;
  static constexpr size_t kMaxFrameBytes = size_t{512} << 20;  // all of them: under FrameParser::kMaxFrame
  void set_breakpoints(const nlohmann::json& c);  // mutex_ held
  void resume();

  int fd_;
  std::function<void()> before_send_;
  Mode mode_;
  std::string script_;
  bool pause_line_ = false;  // Pause: stop at the script's next line too
  bool waiting_ = false;     // the engine's thread waits in wait_here
  uint64_t pauses_ = 0;      // pauses so far: the number of the current (or last) pause
  std::mutex mutex_;
  std::condition_variable wake_;
  bool resumed_ = false, gone_ = false;
  std::atomic<bool> evaluating_{false};  // set by the engine's thread, read by the command thread
  bool stopping_ = false;          // "stop" came: no more pauses, and a line pause raises KeyboardInterrupt
  bool waiting_at_line_ = false;   // the engine's thread waits in the trace function
  std::thread::id main_thread_;    // where PyEval_SetTrace must run (it traces the calling thread)
  std::vector<nlohmann::json> requests_;  // "evaluate" and "buffers", for the paused engine thread

  std::map<std::string, std::set<int>> lines_;  // file -> line breakpoints
  std::string run_to_file_;                     // Ctrl+F10's target ("" none)
  int run_to_line_ = 0;
  std::vector<std::string> kernel_patterns_;
  std::set<std::string> ops_;
  std::set<uint64_t> nodes_;
  // The latest schedule, as emitted (a thin one shares its structure: no per-step copy of its kernels), and
  // its kernels' positions by id; read at a launch only when an op or node breakpoint is set.
  ScheduleEvent schedule_;
  std::unordered_map<int, size_t> kernel_index_;
  bool tracing_ = false;                          // main thread only
  bool tracing_update_pending_ = false;
};

}  // namespace ts
