# Every sample runs as a student would run it (a fresh /usr/bin/python3 process on the file) and
# prints what its comments promise: the training lessons reach their accuracy bar, the op lessons
# show their kernel counts. The package comes from the same build as the test run.
import os
import re
import subprocess
import sys

import pytest

import tensorscope

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SAMPLES = os.path.join(ROOT, "samples")
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def _run(name: str, timeout: int) -> str:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(tensorscope.__file__)))
    env.pop("DEBUG", None)
    proc = subprocess.run([PYTHON, os.path.join(SAMPLES, name)], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, f"{name} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _number(output: str, label: str) -> float:
    m = re.search(label + r":\s*([0-9.]+)", output)
    assert m, f"no '{label}' in the output:\n{output[-2000:]}"
    return float(m.group(1))


# (sample, what it prints, the bar, timeout in s). The training samples take seconds to a minute
# here; the timeouts leave room for a loaded machine and a cold compile cache.
TRAINING = [
    ("mlp_digits.py", "test accuracy", 0.97, 300),
    ("cnn_digits.py", "test accuracy", 0.97, 900),
    ("transformer_tiny.py", "token accuracy", 0.95, 900),
]


@pytest.mark.parametrize("name,label,bar,timeout", TRAINING, ids=[t[0] for t in TRAINING])
def test_training_sample_reaches_its_accuracy(name, label, bar, timeout):
    out = _run(name, timeout)
    assert _number(out, label) >= bar, out


def test_quickstart():
    out = _run("quickstart.py", 120)
    assert "[-2. -2. -2.]]" in out and "[[1. 1. 1.]]" in out, out  # x.grad and y.grad


def test_softmax_lesson():
    out = _run("softmax_lesson.py", 120)
    assert _number(out, "softmax of a \\(4, 8\\) tensor") >= 1
    assert "max difference to the built-in one: 0.0e+00" in out
    assert "naive softmax of [1000, 999, 0]: [nan nan" in out
    assert "0.7311 0.2689" in out
    assert "matches log(softmax): True" in out
    assert "gradient: 2 kernel(s)" in out  # the count the lesson's text explains


def test_matmul_lesson():
    out = _run("matmul_lesson.py", 120)
    assert "A @ B: 1 kernel(s), matches numpy: True" in out
    assert "same numbers: True" in out
    assert "dA ok: True, dB ok: True" in out
    assert "gradients of A and B: 3 kernel(s)" in out  # the copy of B transposed and the two gradients
    assert "GFLOP/s" in out


def test_every_sample_is_covered():
    covered = {t[0] for t in TRAINING} | {"quickstart.py", "softmax_lesson.py", "matmul_lesson.py"}
    assert set(f for f in os.listdir(SAMPLES) if f.endswith(".py")) == covered
