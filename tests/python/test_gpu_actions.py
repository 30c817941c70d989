# Issue 14: the GPU actions through the whole pipeline. realize tells the passes what the target device
# can do (ir::Kernel::target), so TENSORSCOPE_OPTS="GROUP=64" splits reductions across workgroups on OPENCL
# and VULKAN (local memory and barriers) and does nothing on C; GROUPTOP likewise with contiguous chunks;
# LOCAL sets the workgroup size; TILE computes a matmul in tiles staged in local memory. Results
# equal NumPy's; the applied actions are in the IR the CLI writes. Subprocesses: TENSORSCOPE_OPTS is read
# once per process.
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tensorscope
from tensorscope import Device, Tensor

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(tensorscope.__file__)))


def _runnable(name):
    try:
        Tensor([0.0], device=name).numpy()
        return True
    except RuntimeError:
        return False


GPU = [d for d in Device.names() if d.split(":")[0] in ("OPENCL", "VULKAN") and _runnable(d)]

_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from tensorscope import Tensor
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4096)).astype(np.float32)
    big = rng.standard_normal(1 << 18).astype(np.float32)
    t = Tensor(x)
    out = {
        "row_sum": t.sum(axis=1).numpy(),
        "row_max": t.max(axis=1).numpy(),
        "softmax": t.softmax(axis=1).numpy(),
        "full_sum": Tensor(big).sum().numpy(),
        "odd_sum": Tensor(x[:, :4093].copy()).sum(axis=1).numpy(),  # 4093 is prime: GROUP cannot apply
        "scaled": (t * 2 + 1).numpy(),
        "matmul": (Tensor(x[:, :96].reshape(16, 36)[:, :32].copy()) @ Tensor(x[:4, :256].reshape(32, 32))).relu().numpy(),
    }
    np.savez("out.npz", **out)
""")


def _run(tmp_path, device, opts):
    env = dict(os.environ, PYTHONPATH=_PKG, TENSORSCOPE_DEVICE=device, TENSORSCOPE_OPTS=opts, DEBUG="0",
               TENSORSCOPE_CACHE=str(tmp_path / "cache"))
    env.pop("TENSORSCOPE_RANDOM_PASSES", None)
    env.pop("TENSORSCOPE_BEAM", None)
    (tmp_path / "script.py").write_text(_SCRIPT)
    p = subprocess.run([sys.executable, "script.py"], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return dict(np.load(tmp_path / "out.npz"))


def _expected():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4096)).astype(np.float32)
    big = rng.standard_normal(1 << 18).astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return {"row_sum": x.sum(axis=1), "row_max": x.max(axis=1), "softmax": e / e.sum(axis=1, keepdims=True),
            "full_sum": big.astype(np.float64).sum(), "odd_sum": x[:, :4093].sum(axis=1), "scaled": x * 2 + 1,
            "matmul": np.maximum(x[:, :96].reshape(16, 36)[:, :32] @ x[:4, :256].reshape(32, 32), 0)}


@pytest.mark.skipif(not GPU, reason="no OpenCL or Vulkan device here")
@pytest.mark.parametrize("dev", GPU)
@pytest.mark.parametrize("opts", ["GROUP=64", "GROUPTOP=16,UPCAST_REDUCE=0", "LOCAL=256", "LOCAL=16,GROUP=16", "TILE=16"])
def test_group_and_local_agree_with_numpy(tmp_path, dev, opts):
    got = _run(tmp_path, dev, opts)
    for name, want in _expected().items():
        np.testing.assert_allclose(got[name], want, rtol=1e-4, atol=1e-3, err_msg=f"{name} on {dev} with {opts}")


@pytest.mark.skipif(not GPU, reason="no OpenCL or Vulkan device here")
def test_group_is_applied_on_gpu_devices_only(tmp_path):
    """kernels.json lists the actions the passes applied: GROUP on a GPU device, nothing of it on C."""
    cli = os.path.join(os.path.dirname(_PKG), "bin", "tensorscope-cli")
    (tmp_path / "s.py").write_text("from tensorscope import Tensor\nimport numpy as np\n"
                                   "Tensor(np.ones((4, 2048), np.float32)).sum(axis=1).numpy()\n")
    applied = {}
    for dev in ("C", GPU[0]):
        out = tmp_path / dev.replace(":", "_")
        env = dict(os.environ, TENSORSCOPE_OPTS="GROUP=64", TENSORSCOPE_DEVICE=dev, TENSORSCOPE_CACHE=str(tmp_path / "c"))
        env.pop("TENSORSCOPE_BEAM", None)
        p = subprocess.run([cli, "run", str(tmp_path / "s.py"), "--out", str(out)], env=env, capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stdout + p.stderr
        kernels = json.loads((out / "kernels.json").read_text())
        text = json.dumps(kernels)
        applied[dev] = "GROUP(64)" in text
    assert applied == {"C": False, GPU[0]: True}, applied
