// The embedded-interpreter script runner of `tensorscope-cli` (`run`, `record`, and `runner`, the process
// the debugger runs each script in: the debugger itself runs no Python).
//
// One CPython interpreter per process (pybind11 embed). `initialize` is called once from the main
// thread; it then releases the GIL, and `run` takes it again on whichever thread calls it. Scripts import
// the same `tensorscope` module as `/usr/bin/python3` does, and so report to the same ts::Session as the
// host program.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "tensorscope/recording.h"

namespace ts {

struct ScriptResult {
  bool ok = true;
  std::string error;      // exception type and message, e.g. "ValueError: ..."; empty when ok
  std::string traceback;  // the formatted Python traceback; empty when ok
  int error_line = 0;     // line in the script where the error was raised (0: unknown)
};

// How a run of `path` ended, as a recording says it (RunInfo::ended and the fields after it):
// "finished"; "stopped"; "error" with "ValueError: boom (line 4)"; a NonFiniteError (break on NaN/Inf)
// as "NaN/Inf: kernel #1 E_3 produced -inf ... (line 6)", the line that made the op.
RunInfo how_it_ended(const ScriptResult& result, const std::string& path);

class ScriptRunner {
 public:
  // Starts the interpreter. `python_path` is prepended to sys.path (the directory holding the
  // `tensorscope` package). Idempotent. Must be called on the main thread before any `run`.
  // `signal_handlers`: install Python's (SIGINT raises KeyboardInterrupt), for a process that runs
  // scripts on its main thread and nothing else (the runner); a host with its own event loop says no.
  static void initialize(const std::vector<std::string>& python_path, bool signal_handlers = false);
  static bool initialized();

  // Runs `source` as the `__main__` module of a file named `path` (used in tracebacks and as
  // sys.argv[0]). `device` ("C", "INTERP", ...) becomes the default device; empty keeps the
  // current default. Script output goes to `on_output(is_stderr, text)` and to the session as
  // ScriptOutputEvents. Blocks until the script ends; never throws for errors in the script
  // (SystemExit with code 0 or None counts as success).
  static ScriptResult run(const std::string& path, const std::string& source, const std::string& device,
                          std::function<void(bool is_stderr, std::string_view text)> on_output = {});

  // Asks the running script to stop: KeyboardInterrupt at its next bytecode boundary (PyErr_SetInterrupt),
  // for a script on the main thread of a process initialized with signal_handlers. Safe from any thread
  // and async-signal-safe; never blocks, also while the script is inside a long engine call.
  static void interrupt_main();

  // Makes the script's os._exit(n), which skips every cleanup (no atexit, no destructors), call
  // `before_exit` first: the runner sends its queued events there, so a script that realizes and then
  // calls os._exit still shows what it realized. Call after initialize; empty restores os._exit.
  static void on_os_exit(std::function<void()> before_exit);

  // Directory of the `tensorscope` Python package next to the running executable
  // (<exe>/../python), or empty when not found.
  static std::string default_python_path();
};

}  // namespace ts
