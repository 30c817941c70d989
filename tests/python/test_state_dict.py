# State dicts and safetensors: names match torch's, values load both ways, errors name the key,
# and the files are byte-for-byte the layout of the safetensors spec (built here independently with
# struct + numpy, without tensorscope's writer or reader).
import json
import os
import struct

import numpy as np
import pytest
import torch

from tensorscope import Tensor, nn
from tensorscope.nn import state
from tensorscope.nn.state import get_parameters, get_state_dict, load_state_dict, safe_load, safe_save


class Net:
    def __init__(self):
        self.conv = nn.Conv2d(1, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.norm = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 3)

    def __call__(self, x):
        x = self.bn(self.conv(x)).relu().max_pool2d()  # (N, 4, 2, 2)
        return self.fc(self.norm(x.flatten(1)))


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.norm = torch.nn.LayerNorm(16)
        self.fc = torch.nn.Linear(16, 3)

    def forward(self, x):
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.conv(x))), 2)
        return self.fc(self.norm(x.flatten(1)))


X = np.random.default_rng(0).uniform(0, 1, size=(2, 1, 4, 4)).astype(np.float32)


def _torch_trained():
    """A torch model whose running statistics and weights are not the defaults."""
    torch.manual_seed(0)
    ref = TorchNet()
    ref.train()
    for i in range(2):
        ref(torch.rand(8, 1, 4, 4) * (i + 1))
    with torch.no_grad():
        ref.norm.weight.uniform_(0.5, 1.5)
    return ref.eval()


# ---- state dicts -------------------------------------------------------------------------------
def test_state_dict_names_are_torchs():
    assert list(get_state_dict(Net())) == list(TorchNet().state_dict())


def test_get_parameters_includes_buffers_once_and_survives_cycles():
    net = Net()
    net.again = net.fc       # the same layer twice
    net.me = net             # a cycle
    net.helper = np.sum      # not entered
    params = get_parameters(net)
    assert len(params) == 11 and sum(p is net.fc.weight for p in params) == 1
    assert [p.requires_grad for p in params].count(False) == 3  # running_mean, running_var, num_batches_tracked


def test_load_torch_state_dict_gives_torchs_outputs():
    ref = _torch_trained()
    net = Net()
    loaded = load_state_dict(net, ref.state_dict())  # torch tensors, int64 num_batches_tracked included
    assert len(loaded) == 11
    assert net.bn.num_batches_tracked.item() == 2 and net.bn.num_batches_tracked.dtype == "int32"
    out = net(Tensor(X)).numpy()
    np.testing.assert_allclose(out, ref(torch.tensor(X)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_torch_loads_our_state_dict():
    Tensor.manual_seed(3)
    net = Net()
    ref = TorchNet().eval()
    ref.load_state_dict({k: torch.from_numpy(v.numpy().copy()) for k, v in get_state_dict(net).items()})
    np.testing.assert_allclose(net(Tensor(X)).numpy(), ref(torch.tensor(X)).detach().numpy(), rtol=1e-4, atol=1e-5)


def test_load_state_dict_errors_name_the_key():
    net = Net()
    good = {k: v.numpy() for k, v in get_state_dict(Net()).items()}
    with pytest.raises(KeyError, match="fc.bias"):
        load_state_dict(net, {k: v for k, v in good.items() if k != "fc.bias"})
    with pytest.raises(ValueError, match=r"fc\.weight.*\(3, 16\).*\(16, 3\)"):
        load_state_dict(net, {**good, "fc.weight": good["fc.weight"].T})
    with pytest.raises(ValueError, match=r"dtype mismatch for 'bn\.num_batches_tracked'"):
        load_state_dict(net, {**good, "bn.num_batches_tracked": np.float32(1.0)})
    with pytest.raises(ValueError, match=r"dtype mismatch for 'conv\.bias'"):
        load_state_dict(net, {**good, "conv.bias": np.zeros(4, dtype=np.int32)})


def test_failed_load_changes_nothing():
    net = Net()
    before = {k: v.numpy() for k, v in get_state_dict(net).items()}
    bad = {k: np.full(v.shape, 7, dtype=v.dtype) for k, v in before.items()}
    bad["norm.bias"] = np.zeros(5, dtype=np.float32)  # the only wrong entry, late in the order
    with pytest.raises(ValueError, match="norm.bias"):
        load_state_dict(net, bad)
    for k, v in get_state_dict(net).items():
        np.testing.assert_array_equal(v.numpy(), before[k], err_msg=k)


def test_load_state_dict_strict_false_unused_and_scalar_shapes():
    net = Net()
    keep = net.fc.bias.numpy()
    with pytest.warns(UserWarning, match="extra.thing"):
        load_state_dict(net, {"fc.weight": np.ones((3, 16), np.float32), "extra.thing": np.zeros(2, np.float32),
                              "bn.num_batches_tracked": np.array([5], dtype=np.int64)}, strict=False)
    np.testing.assert_array_equal(net.fc.weight.numpy(), np.ones((3, 16), np.float32))
    np.testing.assert_array_equal(net.fc.bias.numpy(), keep)
    assert net.bn.num_batches_tracked.shape == () and net.bn.num_batches_tracked.item() == 5  # tinygrad's (1,)


def test_load_state_dict_copies_and_keeps_requires_grad():
    a, b = Net(), Net()
    load_state_dict(b, get_state_dict(a))
    assert b.fc.weight.requires_grad and not b.bn.running_mean.requires_grad
    np.testing.assert_array_equal(b(Tensor(X)).numpy(), a(Tensor(X)).numpy())


# ---- safetensors: the byte layout ------------------------------------------------------------------
def _build_safetensors(entries, metadata=None, order=None, pad=True):
    """An independent safetensors writer: entries = {name: (dtype code, ndarray)}; returns bytes."""
    header, blobs, offset = {}, [], 0
    for name in (order or list(entries)):
        code, arr = entries[name]
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": code, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata is not None:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def _parse_safetensors(data):
    """An independent reader: (header dict, data start)."""
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), 8 + n


def test_safe_save_layout(tmp_path):
    w = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    i = np.array([[1, -2], [3, 2**31 - 1]], dtype=np.int32)
    b = np.array([True, False, True])
    s = np.float32(3.25)
    path = tmp_path / "m.safetensors"
    safe_save({"w": Tensor(w), "i": Tensor(i), "b": Tensor(b), "s": Tensor(np.array(s))}, str(path),
              metadata={"format": "pt"})
    data = path.read_bytes()
    header, start = _parse_safetensors(data)
    assert start % 8 == 0
    assert header["__metadata__"] == {"format": "pt"}
    expected = {"w": ("F32", w, "<f4"), "i": ("I32", i, "<i4"), "b": ("BOOL", b, "|b1"), "s": ("F32", np.array(s), "<f4")}
    assert set(header) == set(expected) | {"__metadata__"}
    spans = []
    for name, (code, arr, np_dtype) in expected.items():
        info = header[name]
        assert info["dtype"] == code and info["shape"] == list(arr.shape)
        begin, end = info["data_offsets"]
        assert data[start + begin:start + end] == arr.astype(np_dtype).tobytes(), name  # row-major, little-endian
        spans.append((begin, end))
    # the tensors tile the data block exactly, and the file ends with it
    spans.sort()
    assert spans[0][0] == 0 and all(a[1] == b_[0] for a, b_ in zip(spans, spans[1:]))
    assert start + spans[-1][1] == len(data)


def test_safe_load_reads_an_independently_built_file(tmp_path):
    rng = np.random.default_rng(0)
    entries = {
        "f32": ("F32", rng.standard_normal((3, 4)).astype("<f4")),
        "i32": ("I32", rng.integers(-100, 100, (5,)).astype("<i4")),
        "bool": ("BOOL", rng.integers(0, 2, (2, 2)).astype(bool)),
        "scalar": ("F32", np.array(1.5, dtype="<f4")),
        "empty": ("F32", np.zeros((0, 3), dtype="<f4")),
        "i64": ("I64", np.array([7, -8, 2**40 // 2**20], dtype="<i8")),  # torch's integer type
        "f64": ("F64", np.array([0.1, -2.0], dtype="<f8")),
        "f16": ("F16", np.array([[0.5, -1.25]], dtype="<f2")),
    }
    path = tmp_path / "x.safetensors"
    # data in a different order than the header, no padding: both are allowed by the format
    path.write_bytes(_build_safetensors(entries, metadata={"who": "test"}, order=list(entries)[::-1], pad=False))
    loaded = safe_load(str(path))
    assert set(loaded) == set(entries)
    for name, (code, arr) in entries.items():
        t = loaded[name]
        assert t.shape == arr.shape, name
        want_dtype = {"I32": "int32", "I64": "int32", "BOOL": "bool"}.get(code, "float32")
        assert t.dtype == want_dtype, name
        np.testing.assert_array_equal(t.numpy(), arr.astype(t.numpy().dtype), err_msg=name)
    assert state.safe_load_metadata(str(path)) == {"who": "test"}


def test_safetensors_round_trip_with_torch(tmp_path):
    """torch weights → file (independent writer) → tensorscope model → safe_save → torch model: same outputs."""
    ref = _torch_trained()
    entries = {}
    for k, v in ref.state_dict().items():
        arr = v.numpy()
        entries[k] = ("I64" if arr.dtype == np.int64 else "F32", arr)
    src = tmp_path / "torch.safetensors"
    src.write_bytes(_build_safetensors(entries))
    net = Net()
    load_state_dict(net, safe_load(str(src)))
    torch_out = ref(torch.tensor(X)).detach().numpy()
    np.testing.assert_allclose(net(Tensor(X)).numpy(), torch_out, rtol=1e-4, atol=1e-5)

    dst = tmp_path / "ours.safetensors"
    safe_save(get_state_dict(net), str(dst))
    data = dst.read_bytes()
    header, start = _parse_safetensors(data)
    back = TorchNet().eval()
    sd = {}
    for k, info in header.items():
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[start + b:start + e], dtype={"F32": "<f4", "I32": "<i4"}[info["dtype"]])
        sd[k] = torch.from_numpy(arr.reshape(info["shape"]).copy())
    back.load_state_dict(sd)
    np.testing.assert_allclose(back(torch.tensor(X)).detach().numpy(), torch_out, rtol=1e-5, atol=1e-6)


def test_safe_save_load_round_trip(tmp_path):
    Tensor.manual_seed(1)
    a = Net()
    path = str(tmp_path / "net.safetensors")
    safe_save(get_state_dict(a), path)
    Tensor.manual_seed(2)
    b = Net()
    load_state_dict(b, safe_load(path))
    for k, v in get_state_dict(b).items():
        np.testing.assert_array_equal(v.numpy(), get_state_dict(a)[k].numpy(), err_msg=k)


# ---- safetensors: errors and atomic writes ------------------------------------------------------
@pytest.mark.parametrize("mutate,match", [
    (lambda d: d[:5], "shorter than 8"),
    (lambda d: struct.pack("<Q", 10**6) + d[8:], "header length"),
    (lambda d: struct.pack("<Q", 4) + b"{xx}" + d[12:], "not valid JSON"),
    (lambda d: d[:-4], "'w'"),  # the data of w is cut short
], ids=["short", "huge-header", "bad-json", "truncated-data"])
def test_safe_load_rejects_malformed_files(tmp_path, mutate, match):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(mutate(_build_safetensors({"w": ("F32", np.ones((2, 2), np.float32))})))
    with pytest.raises(ValueError, match=match):
        safe_load(str(path))


def test_safe_load_rejects_unknown_dtype_and_bad_offsets(tmp_path):
    path = tmp_path / "bad.safetensors"
    path.write_bytes(_build_safetensors({"c": ("C64", np.ones(2, np.complex64))}))
    with pytest.raises(ValueError, match="'c'.*C64"):
        safe_load(str(path))
    header = json.dumps({"w": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 12)
    with pytest.raises(ValueError, match="'w'.*data_offsets"):
        safe_load(str(path))


def test_safe_save_rejects_bad_values(tmp_path):
    with pytest.raises(TypeError, match="'w'"):
        safe_save({"w": np.ones(2)}, str(tmp_path / "x.safetensors"))
    with pytest.raises(ValueError):
        safe_save({"__metadata__": Tensor([1.0])}, str(tmp_path / "x.safetensors"))
    assert os.listdir(tmp_path) == []


def test_interrupted_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "w.safetensors"
    safe_save({"w": Tensor([1.0, 2.0])}, str(path))
    old = path.read_bytes()

    def crash(fd):
        raise KeyboardInterrupt  # as if the user hit Ctrl-C after part of the file was written
    monkeypatch.setattr(state.os, "fsync", crash)
    with pytest.raises(KeyboardInterrupt):
        safe_save({"w": Tensor(np.zeros(1000, np.float32))}, str(path))
    assert path.read_bytes() == old
    assert os.listdir(tmp_path) == ["w.safetensors"]  # no temporary file left behind
