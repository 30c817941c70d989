// Where in the script a graph node is made (Session::StackLocator), for the Python module.
//
// Walks the Python stack from the innermost frame: the tensorscope package's frames, then the first
// frame outside the package (the user's line, also when the node is made inside nn.Linear called from
// it) and up to two user frames above it. The walk reads only (code object, instruction offset) pairs;
// a stack seen before is found in a table by those, so the file names, line numbers and function names
// are worked out once per distinct stack (a training loop's nodes cost a short walk and a lookup).
#pragma once
#include <string>

namespace tsbind {

// Files under `dir` (".../tensorscope/") belong to the package; installs the locator in the session.
void install_stack_locator(const std::string& package_dir);

}  // namespace tsbind
