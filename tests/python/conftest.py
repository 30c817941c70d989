# Makes `import tensorscope` work when the tests run from a checkout: CTest sets PYTHONPATH to
# <build>/python; a bare `python3 -m pytest tests/python` falls back to <repo>/build/python.
import importlib.util
import os
import sys

if importlib.util.find_spec("tensorscope") is None:
    _build_python = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "build", "python")
    sys.path.insert(0, os.path.normpath(_build_python))
