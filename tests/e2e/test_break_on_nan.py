# Break on NaN/Inf: the first kernel whose output holds a NaN or an infinity stops the run, naming the
# kernel, the output element and the script line that made the op. Expected values come from PyTorch.
import os
import subprocess
import sys
import textwrap

import pytest
import torch

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("TS_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "bin", "tensorscope-cli")

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"{CLI} is not built")

# line 6 makes the first non-finite value: log(0) = -inf in every element. (Were `y - y` computed
# before realizing, it would fuse into y's kernel, and the first stored non-finite value would be its
# nan: the break names the kernel that stores a value, and the line that made that value.)
SCRIPT = textwrap.dedent("""\
    from tensorscope import Tensor

    x = Tensor([1.0, 2.0, 3.0])
    ok = (x * 2).numpy()         # finite: no break here
    print("finite", ok)
    y = (x - x).log()
    print(y.numpy())
    """)


def write(tmp_path, text):
    path = tmp_path / "nan_script.py"
    path.write_text(text)
    return str(path)


def run(*args, env=None):
    full = dict(os.environ)
    full.pop("DEBUG", None)
    full.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, env=full, timeout=300, cwd=REPO)


def test_cli_stops_at_the_first_non_finite_kernel(tmp_path):
    script = write(tmp_path, SCRIPT)
    r = run(CLI, "run", script, "--break-on-nan")
    assert r.returncode == 3, r.stderr
    assert "finite [2. 4. 6.]" in r.stdout  # what ran before the break ran
    last = [l for l in r.stderr.splitlines() if l.startswith("tensorscope-cli: break on NaN/Inf: ")]
    assert len(last) == 1, r.stderr
    # what PyTorch says the first element of the first non-finite result is
    want = torch.log(torch.tensor([1.0, 2.0, 3.0]) - torch.tensor([1.0, 2.0, 3.0]))[0].item()
    assert want == float("-inf")
    assert "produced -inf at output element 0 of 3 (index (0,))" in last[0]
    assert f"made at {script}:6" in last[0]  # the line of the op, not of the .numpy() that realized it
    assert " E_3 " in last[0]


def test_without_the_flag_the_script_runs_on(tmp_path):
    r = run(CLI, "run", write(tmp_path, SCRIPT))
    assert r.returncode == 0, r.stderr
    want = torch.log(torch.zeros(3)).numpy()
    assert str(want) in r.stdout  # [-inf -inf -inf]


def test_nan_inside_a_larger_tensor_names_its_index(tmp_path):
    script = write(tmp_path, textwrap.dedent("""\
        import numpy as np
        from tensorscope import Tensor
        a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
        b = (a - 6).sqrt()   # negative below element (1, 2): sqrt gives nan at (0, 0) first
        b.numpy()
        """))
    r = run(CLI, "run", script, "--break-on-nan")
    assert r.returncode == 3, r.stderr
    assert "produced nan at output element 0 of 12 (index (0, 0))" in r.stderr
    assert f"{script}:4" in r.stderr


def test_environment_variable_raises_a_floating_point_error_in_python(tmp_path):
    script = write(tmp_path, SCRIPT)
    probe = tmp_path / "probe.py"
    probe.write_text(textwrap.dedent(f"""\
        import runpy, sys, tensorscope
        try:
            runpy.run_path({script!r}, run_name="__main__")
        except FloatingPointError as e:
            assert isinstance(e, tensorscope.NonFiniteError)
            print("caught:", e)
            sys.exit(0)
        sys.exit("no NonFiniteError")
        """))
    r = run(sys.executable if sys.executable.startswith("/usr/bin/") else "/usr/bin/python3", str(probe),
            env={"TENSORSCOPE_BREAK_ON_NAN": "1", "PYTHONPATH": os.path.join(BUILD, "python")})
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"made at {script}:6" in r.stdout
