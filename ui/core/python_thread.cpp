#include "core/python_thread.h"

#include <Python.h>

namespace tsui {

PythonThreadScope::PythonThreadScope() : state_(static_cast<int>(PyGILState_Ensure())) {}

PythonThreadScope::~PythonThreadScope() { PyGILState_Release(static_cast<PyGILState_STATE>(state_)); }

}  // namespace tsui
