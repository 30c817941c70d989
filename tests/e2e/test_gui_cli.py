# `tensorscope` (the debugger) on a terminal without a display: --help, --version and a bad option are
# answered before the window system is needed (an ssh session, a CI job, a package's smoke test).
import os
import subprocess

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("TS_BUILD_DIR", os.path.join(REPO, "build"))
GUI = os.path.join(BUILD, "bin", "tensorscope")

pytestmark = pytest.mark.skipif(not os.access(GUI, os.X_OK), reason=f"{GUI} is not built")


def run_without_display(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    return subprocess.run([GUI, *args], capture_output=True, text=True, env=env, timeout=60, cwd=REPO)


def test_help_works_without_a_display():
    r = run_without_display("--help")
    assert r.returncode == 0, r.stderr
    assert "Usage:" in r.stdout and "--screenshot" in r.stdout and "--device" in r.stdout


def test_version_works_without_a_display():
    r = run_without_display("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("Tensorscope ") and any(c.isdigit() for c in r.stdout)


def test_an_unknown_option_is_a_clear_error_without_a_display():
    r = run_without_display("--no-such-option")
    assert r.returncode != 0
    assert "no-such-option" in r.stderr
