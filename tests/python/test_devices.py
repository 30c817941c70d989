# Devices: every runnable device (C, INTERP, OPENCL:n, VULKAN:n, CUDA:n where a GPU exists) computes
# the same forward values and gradients as PyTorch; a graph may span two devices through .to(); the
# digits MLP sample trains to the same accuracy on each device; a compile-only device (CUDA without a
# GPU) refuses to run with a clear error, yet every kernel of the op suite compiles to PTX with NVRTC.
import functools
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import tensorscope
from tensorscope import Device, Tensor

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
# the CLI of the build whose Python package is under test: <build>/python/tensorscope → <build>/bin
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(tensorscope.__file__))))
CLI = os.path.join(os.environ.get("TS_BUILD_DIR", BUILD), "bin", "tensorscope-cli")


def _runnable(name):
    """Compile-only devices raise on their first allocation (there is nothing to run kernels on)."""
    try:
        Tensor([0.0], device=name).numpy()
        return True
    except RuntimeError:
        return False


ALL = Device.names()
RUNNABLE = [d for d in ALL if _runnable(d)]
COMPILE_ONLY = [d for d in ALL if d not in RUNNABLE]
GPU = [d for d in RUNNABLE if d not in ("C", "INTERP")]
devices = pytest.mark.parametrize("dev", RUNNABLE)


def test_registry_lists_the_cpu_devices_first():
    assert ALL[:2] == ["C", "INTERP"]
    assert len(set(ALL)) == len(ALL)


@pytest.mark.parametrize("dev", [d for d in ALL if ":" in d])
def test_device_names_are_case_insensitive_and_default_to_device_zero(dev):
    backend, index = dev.split(":")
    if index != "0" or dev in COMPILE_ONLY:
        pytest.skip("only device 0 answers to its backend's name; compile-only devices hold no tensors")
    assert Tensor([1.0], device=backend.lower()).device == dev
    assert Tensor([1.0], device=dev.lower()).device == dev


def _check(dev, shapes, torch_fn, ts_fn, seed=0, rtol=1e-5, atol=1e-5):
    """Forward value and every input's gradient (of a random-weighted sum) against PyTorch."""
    rng = np.random.default_rng(seed)
    vals = [rng.uniform(-2, 2, size=s).astype(np.float32) for s in shapes]
    tt = [torch.tensor(v, requires_grad=True) for v in vals]
    st = [Tensor(v, requires_grad=True, device=dev) for v in vals]
    t_out, s_out = torch_fn(*tt), ts_fn(*st)
    assert s_out.device == dev
    np.testing.assert_allclose(s_out.numpy(), t_out.detach().numpy(), rtol=rtol, atol=atol, err_msg="forward")
    w = rng.uniform(-1, 1, size=t_out.shape).astype(np.float32)
    (t_out * torch.tensor(w)).sum().backward()
    (s_out * Tensor(w, device=dev)).sum().backward()
    for i, (s, t) in enumerate(zip(st, tt)):
        assert s.grad.device == dev
        np.testing.assert_allclose(s.grad.numpy(), t.grad.numpy(), rtol=rtol, atol=atol, err_msg=f"gradient {i}")


@devices
def test_matmul_relu_with_backward(dev):
    _check(dev, [(7, 9), (9, 5), (5,)], lambda a, b, c: (a @ b + c).relu(), lambda a, b, c: (a @ b + c).relu())


@devices
def test_softmax_and_log_with_backward(dev):
    _check(dev, [(4, 13)], lambda x: torch.log_softmax(x * 3, dim=1), lambda x: (x * 3).log_softmax(1), rtol=1e-4)


@devices
def test_transcendentals_with_backward(dev):
    _check(dev, [(33, 3)], lambda x: x.exp() * x.sin() + (x * x + 1).log() + (x.abs() + 0.1).sqrt(),
           lambda x: x.exp() * x.sin() + (x * x + 1).log() + (x.abs() + 0.1).sqrt(), rtol=1e-4, atol=1e-4)


@devices
def test_reductions_and_movement_with_backward(dev):
    _check(dev, [(5, 6, 7)], lambda x: x.permute(2, 0, 1).flip(0).amax(2)[1:5] + x.sum(1).T[1:5],
           lambda x: x.permute(2, 0, 1).flip(0).max(2).shrink(((1, 5), None)) + x.sum(1).transpose().shrink(((1, 5), None)))
    _check(dev, [(3, 4)], lambda x: torch.nn.functional.pad(x, (2, 1, 0, 3)).exp().mean(0),
           lambda x: x.pad(((0, 3), (2, 1))).exp().mean(0))


@devices
def test_int_and_bool_tensors(dev):
    a = np.array([-7, -3, 0, 4, 9, 12], dtype=np.int32)
    t = Tensor(a, device=dev)
    np.testing.assert_array_equal(((t * 3 + 1) < 10).numpy(), (a * 3 + 1) < 10)
    np.testing.assert_array_equal((t == 0).where(t, -t).numpy(), np.where(a == 0, a, -a))
    np.testing.assert_array_equal(t.maximum(Tensor(2, device=dev)).numpy(), np.maximum(a, 2))


@pytest.mark.skipif(not GPU, reason="no GPU device (OpenCL, Vulkan) here")
@pytest.mark.parametrize("dev", GPU)
def test_a_graph_spanning_two_devices(dev):
    """Part of the graph on C, part on a GPU device: forward values and gradients flow across."""
    rng = np.random.default_rng(3)
    a, b = (rng.uniform(-1, 1, size=s).astype(np.float32) for s in [(6, 8), (8, 4)])
    x = Tensor(a, requires_grad=True, device="C")
    w = Tensor(b, requires_grad=True, device=dev)
    h = x.exp().to(dev)            # computed on C, copied to the GPU device
    out = (h @ w).tanh().to("C")   # computed on the GPU device, copied back
    loss = (out * out).sum()
    loss.backward()

    tx, tw = torch.tensor(a, requires_grad=True), torch.tensor(b, requires_grad=True)
    tloss = ((tx.exp() @ tw).tanh() ** 2).sum()
    tloss.backward()
    assert out.device == "C" and x.grad.device == "C" and w.grad.device == dev
    np.testing.assert_allclose(loss.numpy(), tloss.detach().numpy(), rtol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not COMPILE_ONLY, reason="every device here can run")
@pytest.mark.parametrize("dev", COMPILE_ONLY)
def test_compile_only_device_says_why_it_cannot_run(dev):
    with pytest.raises(RuntimeError, match="compile-only"):
        Tensor([1.0, 2.0], device=dev).numpy()


@functools.lru_cache(maxsize=None)
def _sample_accuracy(dev):
    """Runs samples/mlp_digits.py (500 SGD steps) with `dev` as the default device."""
    env = dict(os.environ, TENSORSCOPE_DEVICE=dev)
    run = subprocess.run([sys.executable, os.path.join(ROOT, "samples", "mlp_digits.py")], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    found = re.search(r"test accuracy: ([0-9.]+)", run.stdout)
    assert found, run.stdout
    return float(found.group(1))


@pytest.mark.parametrize("dev", [d for d in RUNNABLE if d != "C"])
def test_digits_mlp_sample_trains_to_the_same_accuracy_on_every_device(dev):
    if dev == "INTERP":
        pytest.skip("the interpreter is the reference executor, too slow to train on (see test_mlp.py)")
    want = _sample_accuracy("C")
    assert abs(_sample_accuracy(dev) - want) <= 0.02


OP_SUITE_UNDER_CLI = """
import sys
import pytest
sys.path.insert(0, {tests!r})
print("pytest exit code", int(pytest.main(["-q", "-p", "no:cacheprovider", {suite!r}])))
"""


@pytest.mark.skipif(not any(d.startswith("CUDA") for d in ALL), reason="built without CUDA")
@pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"{CLI} is not built")
def test_every_kernel_of_the_op_suite_has_every_listing_and_compiles_with_nvrtc(tmp_path):
    """The op suite on C, run inside `tensorscope-cli run --out`: the CLI writes every kernel in every
    renderer's language, whichever device ran it. A PTX listing is NVRTC's output and a SPIR-V listing
    glslang's; a compile error would become the listing's text instead."""
    tests = os.path.join(ROOT, "tests", "python")
    suite = os.path.join(tests, "test_ops.py")
    if not os.path.exists(suite):
        suite = os.path.join(tests, "test_ops_elementwise.py")
    script = tmp_path / "op_suite.py"
    script.write_text(OP_SUITE_UNDER_CLI.format(tests=tests, suite=suite))
    out = tmp_path / "out"
    env = dict(os.environ, TENSORSCOPE_TEST_DEVICES="C")
    env.pop("DEBUG", None)
    run = subprocess.run([CLI, "run", str(script), "--out", str(out)], env=env, capture_output=True, text=True,
                         timeout=900, cwd=ROOT)
    assert run.returncode == 0 and "pytest exit code 0" in run.stdout, run.stdout[-3000:] + run.stderr[-3000:]
    # kernels.json names each kernel's listing per renderer; identical listings share one file
    with open(out / "kernels.json") as f:
        kernels = [k for k in json.load(f)["kernels"] if k["sources"]]
    assert len(kernels) > 100, f"only {len(kernels)} kernels with sources"
    for k in kernels:
        name = f"#{k['id']} {k['name']}"
        for renderer in ("C", "OpenCL C", "GLSL", "CUDA C"):
            assert (out / k["sources"][renderer]).exists(), f"{name}: its {renderer} listing is missing"
        ptx = (out / k["sources"]["PTX"]).read_text()
        assert ".entry " in ptx, f"{name}: NVRTC did not compile the CUDA C:\n{ptx[:2000]}"
        spirv = (out / k["sources"]["SPIR-V"]).read_text()
        assert "OpEntryPoint" in spirv, f"{name}: glslang did not compile the GLSL:\n{spirv[:2000]}"
