// Makes the calling (non-main) thread a proper Python thread for the duration of a script run.
//
// Why: ScriptRunner::run takes the GIL with pybind11's gil_scoped_acquire, which on a thread that
// Python has never seen creates a thread state that CPython's PyGILState API does not recognise
// as current. The first `import tensorscope` then runs the extension's PyInit, whose
// PyGILState_Ensure waits for the GIL this very thread holds: a deadlock (seen with pybind11 2.10
// and CPython 3.11; the CLI does not hit it because it runs scripts on the main thread).
// Taking the GIL through PyGILState_Ensure first gives the thread a state both APIs agree on.
// Harmless once the runner does the same itself.
#pragma once

namespace tsui {

class PythonThreadScope {
 public:
  PythonThreadScope();
  ~PythonThreadScope();
  PythonThreadScope(const PythonThreadScope&) = delete;
  PythonThreadScope& operator=(const PythonThreadScope&) = delete;

 private:
  int state_;  // PyGILState_STATE, kept opaque so that Python.h stays out of this header
};

}  // namespace tsui
