"""TENSORSCOPE_RECORD=run.tsrec: any program that imports tensorscope records itself.

The recording (docs/recording.md) holds the script's text and argv, every schedule, kernel launch
and line the program printed, and how it ended: "finished", "error" (an uncaught exception, with its
message), "stopped" (KeyboardInterrupt). A program that dies without running its atexit handlers
(os._exit, a crash, SIGKILL) leaves a readable recording whose end is empty, "cut off"; at most its
last 100 ms of events are missing. Open it with `tensorscope run.tsrec` or `tensorscope-cli info`.
"""
import atexit
import os
import sys

from tensorscope import _C

_end = {"ended": "finished", "status": 0, "message": ""}


class _Tee:
    """Writes to the original stream and records the text as script output."""

    def __init__(self, stream, is_stderr):
        self._stream, self._is_stderr = stream, is_stderr

    def write(self, text):
        _C.record_output(self._is_stderr, text)
        return self._stream.write(text)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _excepthook(kind, value, tb):
    if issubclass(kind, KeyboardInterrupt):
        _end.update(ended="stopped", status=1, message="stopped (KeyboardInterrupt)")
    else:
        line = ""
        while tb is not None:  # the innermost frame in the script itself
            if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(sys.argv[0] or ""):
                line = f" (line {tb.tb_lineno})"
            tb = tb.tb_next
        _end.update(ended="error", status=1, message=f"{kind.__name__}: {value}{line}")
    _previous_hook(kind, value, sys.exc_info()[2] if tb is None else tb)


def _finish():
    _C.finish_recording(_end["ended"], _end["status"], _end["message"])


_previous_hook = sys.excepthook


def start(path):
    """Starts recording this process to `path` (replacing that file). Raises RuntimeError when the
    file cannot be created (the message names it and the reason)."""
    script = sys.argv[0] if sys.argv and sys.argv[0] else "<stdin>"
    try:
        with open(script, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        text = ""
    _C.start_recording(path, script, text, list(sys.argv), sys.version)
    sys.stdout = _Tee(sys.stdout, False)
    sys.stderr = _Tee(sys.stderr, True)
    sys.excepthook = _excepthook
    atexit.register(_finish)
