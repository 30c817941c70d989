"""The CPU's vector registers shape the C device's matmul code (ir::Target::vector_bytes / vector_registers).

C and INTERP detect the host's vector unit (AVX-512: 32 registers of 64 bytes; AVX2: 16 of 32; SSE: 16 of 16);
TENSORSCOPE_VECTOR_BYTES=16/32/64 overrides it, so these tests read every target's kernels on any x86-64 CPU
(a kernel compiled for a wider target than the CPU's still runs: gcc splits its vectors). Each target's
matmul is checked against NumPy, with the plan its register file allows: NR = two vectors of floats, and as many rows
of the register tile as leave 4 registers free (BLIS's micro-kernels: 6x16 on AVX2), rows that 6 does not divide
padded to a multiple of it.
"""
import json
import re
import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from test_conv_backward import run_cli_out

MATMUL = """\
import numpy as np
from tensorscope import Tensor
rng = np.random.default_rng(0)
x = rng.standard_normal((96, 200)).astype(np.float32)
w = rng.standard_normal((200, 64)).astype(np.float32)
got = (Tensor(x) @ Tensor(w)).numpy()
want = x.astype(np.float64) @ w.astype(np.float64)
assert np.allclose(got, want, rtol=1e-4, atol=1e-6 * x.shape[1]), np.abs(got - want).max()  # float32 sums of K terms
"""


def _matmul_kernel(tmp_path, vector_bytes):
    script = tmp_path / f"mm{vector_bytes}.py"
    script.write_text(MATMUL)
    out = run_cli_out(script, tmp_path / f"out{vector_bytes}", env={"TENSORSCOPE_VECTOR_BYTES": str(vector_bytes)})
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    (k,) = [k for k in kernels if k["name"] == "r_96_64_200"]
    (source,) = out.glob("k*_r_96_64_200.c")
    return k["actions"]["applied"], source.read_text()


@pytest.mark.parametrize("vector_bytes, upcast, tile, vector", [
    (64, "UPCAST_GLOBAL(32)", "REGISTER_TILE(8)", "ts_v16 vacc"),  # 8 rows x 2 vectors of 16: 16 of 32 registers
    (32, "UPCAST_GLOBAL(16)", "REGISTER_TILE(6)", "ts_v8 vacc"),   # 6 rows x 2 vectors of 8: 12 of 16 registers
    (16, "UPCAST_GLOBAL(8)", "REGISTER_TILE(6)", "ts_v4 vacc"),    # the same on SSE's 4 floats
])
def test_the_matmul_tile_fits_the_targets_registers(tmp_path, vector_bytes, upcast, tile, vector):
    applied, source = _matmul_kernel(tmp_path, vector_bytes)
    assert upcast in applied and tile in applied, applied
    assert vector in source, source[-2000:]
    wider = {64: [], 32: ["ts_v16 vacc"], 16: ["ts_v16 vacc", "ts_v8 vacc"]}[vector_bytes]
    assert not [v for v in wider if v in source], source[-2000:]  # no vector wider than a register


@pytest.mark.parametrize("shape, upcast, tile", [
    # AVX2, K = 784, w packed in panels of 16 columns (Tensor::matmul_packed): 6 rows of two vectors, 128 rows
    # padded to 132
    (((128, 784), (784, 512)), "UPCAST_GLOBAL(16)", "PADTO(6)"),
    # the same reduce over 32 rows (too few to pack w for): read in place, 32 rows padded to 36
    (((32, 784), (784, 512)), "UPCAST_GLOBAL(16)", "PADTO(6)"),
    # K = 400: two vectors per row; 8 rows would need all 16 registers; 6 do not divide 64, whose rows are padded
    # to 66 (PADTO(6)), the last group's 2 extra rows masked, rather than tiled 4 at a time
    (((64, 400), (400, 128)), "UPCAST_GLOBAL(16)", "PADTO(6)"),
    # a transformer's 512 tokens: 86 groups of 6, the last one with 2 rows
    (((512, 128), (128, 512)), "UPCAST_GLOBAL(16)", "PADTO(6)"),
    # an 11-token vocabulary: 2 groups of 6, the second with 5 rows
    (((11, 512), (512, 128)), "UPCAST_GLOBAL(16)", "PADTO(6)"),
    # 100 rows: 5 divides them (10 accumulators: not padded to 102 for 6)
    (((100, 784), (784, 320)), "UPCAST_GLOBAL(16)", "REGISTER_TILE(5)"),
    # 50 rows summed over 4096: 5 rows (5 divides 50: not padded to 54)
    (((50, 4096), (4096, 64)), "UPCAST_GLOBAL(16)", "REGISTER_TILE(5)"),
])
def test_avx2_tiles_take_the_rows_and_vectors_that_fit_16_registers(tmp_path, shape, upcast, tile):
    (m, k), (_, n) = shape
    script = tmp_path / "mm.py"
    script.write_text(MATMUL.replace("(96, 200)", f"({m}, {k})").replace("(200, 64)", f"({k}, {n})"))
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": "32"})
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    (found,) = [x for x in kernels if x["name"].startswith(f"r_{m}_")]
    applied = found["actions"]["applied"]
    assert upcast in applied and tile in applied, (found["name"], found["actions"])
    if tile == "PADTO(6)":  # the padded rows are the register tile's: its 6 rows, and no other tile
        assert applied.index("PADTO(6)") == applied.index("REGISTER_TILE(6)") - 1, applied
        assert not [a for a in applied if a.startswith("REGISTER_TILE") and a != "REGISTER_TILE(6)"], applied
        # every group but the last unmasked (split_index_set): the source has two loops over the groups
        (source,) = out.glob(f"k*_{found['name']}.c")
        if m // 6 > 1:
            assert source.read_text().count(f"< {m // 6}; ridx") == 1, source.read_text()[-3000:]


LINEAR_STEP = """\
import numpy as np
import torch
from tensorscope import Tensor, nn
rng = np.random.default_rng(0)
x = rng.standard_normal(X_SHAPE).astype(np.float32)
layer = nn.Linear(IN, OUT)
t = torch.nn.Linear(IN, OUT)
with torch.no_grad():
    t.weight.copy_(torch.from_numpy(layer.weight.numpy())); t.bias.copy_(torch.from_numpy(layer.bias.numpy()))
layer(Tensor(x)).relu().sum().backward()
t(torch.from_numpy(x)).relu().sum().backward()
got, want = layer.weight.grad.numpy(), t.weight.grad.numpy()
assert np.allclose(got, want, rtol=1e-4, atol=1e-4), np.abs(got - want).max()
"""


def _linear_step_kernels(tmp_path, x_shape, n_in, n_out, vector_bytes="32"):
    script = tmp_path / "step.py"
    script.write_text(LINEAR_STEP.replace("X_SHAPE", str(tuple(x_shape))).replace("IN", str(n_in)).replace("OUT", str(n_out)))
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": vector_bytes} if vector_bytes else {})
    return json.loads((out / "kernels.json").read_text())["kernels"]


def test_avx2_weight_gradient_reads_a_contiguous_copy_of_the_transposed_output_gradient(tmp_path):
    # Tensor::matmul_packed: the weight gradient gᵀ @ x of Linear(784, 512) over a batch of 128 reads gᵀ, whose
    # rows are columns of g (128, 512): a register tile's step of K reads a line 2 KiB after the last one, all of
    # them in 2 of L1's 64 sets. On AVX2 (no 8-row panels of x there) gᵀ is copied contiguous first, (512, 128),
    # and the tiled matmul reads that copy (84 -> 99 GFLOP/s, hand-written kernels on Zen 3). Values against PyTorch.
    kernels = _linear_step_kernels(tmp_path, (128, 784), 784, 512)
    (grad,) = [k for k in kernels if k["name"].startswith("r_") and k["outputs"][0]["shape"] == [512, 784]]
    copies = [k for k in kernels if k["name"].startswith("E_") and k["outputs"][0]["shape"] == [512, 128]]
    assert len(copies) == 1, [k["name"] for k in kernels]
    assert [512, 128] in [i["shape"] for i in grad["inputs"]], grad["inputs"]
    assert "REGISTER_TILE(6)" in grad["actions"]["applied"], grad["actions"]


@pytest.mark.parametrize("vector_bytes", [None, "32"])
def test_weight_gradient_reads_a_transposed_output_gradient_in_place_when_its_rows_spread_over_l1(tmp_path, vector_bytes):
    # copies_transposed_x: gᵀ is copied contiguous only where its rows fall into 2 of L1's 64 sets (M a multiple of
    # 512). d128's qkv Linear(128, 384) over 16 x 32 tokens: gᵀ (384, 512), rows 1536 bytes apart, spread over 8
    # sets; the copy cost more in the step than the register tile gained from it (0.10-0.17 ms for 0.49 ms on Zen 4),
    # so the weight gradient reads g through its transposed view, on AVX-512 and on AVX2 (matmul_packed's case).
    # Values against PyTorch (the script asserts them).
    kernels = _linear_step_kernels(tmp_path, (16, 32, 128), 128, 384, vector_bytes)
    (grad,) = [k for k in kernels if k["name"].startswith("r_") and k["outputs"][0]["shape"] == [384, 128]]
    copies = [k for k in kernels if k["name"].startswith("E_") and k["outputs"][0]["shape"] == [384, 512]]
    assert not copies, [(k["name"], k["outputs"][0]["shape"]) for k in kernels]
    assert [384, 512] not in [i["shape"] for i in grad["inputs"]], grad["inputs"]
    assert any(a.startswith("REGISTER_TILE") for a in grad["actions"]["applied"]), grad["actions"]


def test_avx2_batched_rows_of_a_linear_are_counted_for_panel_packing(tmp_path):
    # packs_panels counts x's rows with its batch dims folded in: a transformer's (16, 32, 128) @ Wᵀ (128 -> 512)
    # reads w 512 times (W's panels of 16 columns: (32, 128, 16)), not 32 (it ran unpacked at 75 GFLOP/s, its
    # rows of w 2 KiB apart). Values against PyTorch.
    kernels = _linear_step_kernels(tmp_path, (16, 32, 128), 128, 512)
    panels = [k for k in kernels if k["outputs"][0]["shape"] == [32, 128, 16]]
    assert len(panels) == 1, [(k["name"], k["outputs"][0]["shape"]) for k in kernels]
    forward = [k for k in kernels if k["name"].startswith("r_16_32_") and [32, 128, 16] in [i["shape"] for i in k["inputs"]]]
    assert forward, [k["name"] for k in kernels]


def _cli():
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    cli = os.path.join(os.environ.get("TS_BUILD_DIR", os.path.join(repo, "build")), "bin", "tensorscope-cli")
    if not os.path.exists(cli):
        pytest.skip("tensorscope-cli is not built")
    return cli


def test_the_target_is_recorded_with_the_run_and_each_kernel(tmp_path):
    script = tmp_path / "mm.py"
    script.write_text(MATMUL)
    rec = tmp_path / "run.tsrec"
    env = {**os.environ, "TENSORSCOPE_VECTOR_BYTES": "32", "TENSORSCOPE_DEVICE": "C"}
    subprocess.run([_cli(), "record", str(script), "-o", str(rec)], env=env, check=True, capture_output=True, timeout=300)
    db = sqlite3.connect(rec)
    (props,) = db.execute("SELECT device_properties FROM run").fetchone()
    assert json.loads(props)["vector_bytes"] == 32 and json.loads(props)["vector_registers"] == 16, props
    blobs = [bytes(b) for (b,) in db.execute("SELECT data FROM blobs")]
    irs = [b for b in blobs if b"vector_registers" in b and b"r_96_64_200" in b]
    assert irs and all(b'"vector_bytes":32' in b for b in irs), len(blobs)
    devices = subprocess.run([_cli(), "devices"], env=env, capture_output=True, text=True, timeout=120).stdout
    assert "vector registers: 16 x 32 bytes" in devices, devices


def test_a_bad_vector_width_is_a_clear_error(tmp_path):
    r = subprocess.run([sys.executable, "-c", "from tensorscope import Tensor; (Tensor([1.0]) + 1).numpy()"],
                       capture_output=True, text=True, timeout=120,
                       env={**os.environ, "TENSORSCOPE_VECTOR_BYTES": "48", "TENSORSCOPE_DEVICE": "C"})
    assert r.returncode != 0
    assert "TENSORSCOPE_VECTOR_BYTES='48': expected 16, 32 or 64" in r.stderr, r.stderr[-2000:]


def test_avx2_depthwise_rows_are_split_where_every_tap_row_is_in_the_image(tmp_path):
    # split_index_set (split_padded_tile): a depthwise 3x3's forward on AVX2 tiles 4 output rows of 28 (7 groups),
    # each reading rows 4·group + ky - 1 through the pad view. Every tap row is in the image from the second
    # group to the sixth: the groups' loop runs as 1 + 5 + 1, and the 5 middle groups load their rows with masks
    # that fold to constants (0.18-0.19 -> 0.16 ms on Zen 3). The weight gradient's rows of x, each gated as a
    # whole by its tap row being in the image, are read as (c ? load : 0) with constant lane masks (the C
    # renderer; AVX2 builds a variable mask at run time). Values and gradients against PyTorch.
    script = tmp_path / "dw.py"
    script.write_text("import numpy as np\nimport torch\nfrom tensorscope import Tensor\n"
                      "rng = np.random.default_rng(0)\n"
                      "x = rng.standard_normal((32, 16, 28, 28)).astype(np.float32)\n"
                      "w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)\n"
                      "g = rng.standard_normal((32, 16, 28, 28)).astype(np.float32)\n"
                      "tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)\n"
                      "y = tx.conv2d(tw, padding=1, groups=16)\n"
                      "y.backward(Tensor(g))\n"
                      "px, pw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()\n"
                      "py = torch.nn.functional.conv2d(px, pw, padding=1, groups=16)\n"
                      "py.backward(torch.from_numpy(g))\n"
                      "for got, want in ((y, py), (tx.grad, px.grad), (tw.grad, pw.grad)):\n"
                      "    got, want = got.numpy(), want.detach().numpy()\n"
                      "    assert np.allclose(got, want, rtol=1e-4, atol=1e-3), np.abs(got - want).max()\n")
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": "32"})
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    forward = [k for k in kernels if k["name"] == "r_32_16_28_28_3_3"]
    assert len(forward) == 2, [k["name"] for k in kernels]  # the forward and the input gradient (the same form)
    assert all("REGISTER_TILE(4)" in k["actions"]["applied"] for k in forward), [k["actions"] for k in forward]
    sources = list(out.glob("k*_r_32_16_28_28_3_3.c"))
    assert len(sources) == 2, sources
    for source in sources:
        trips = [int(t) for t in re.findall(r"for \(int ridx\d+ = 0; ridx\d+ < (\d+); ridx\d+\+\+\)", source.read_text())]
        assert 7 not in trips and 5 in trips, trips  # not one loop over the 7 groups: the 5 middle ones
    # (16 chunks of 2 images, 16 channels, 9 taps, rows of 32) summed over a chunk's images and rows
    (weight_grad,) = [k for k in kernels if k["name"] == "r_16_16_9_32_2_28"]
    (source,) = out.glob(f"k*_{weight_grad['name']}.c")
    assert re.search(r"\(v\d+ \? ts_v8_load\(data\d", source.read_text()), source.read_text()[-3000:]


@pytest.mark.parametrize("vector_bytes, tile", [("32", "REGISTER_TILE(4)"), ("64", "REGISTER_TILE(8)")])
def test_a_row_scale_between_the_loops_does_not_keep_a_matmul_from_its_register_tile(tmp_path, vector_bytes, tile):
    # (P * s) @ V with s one value per row of P (attention's P @ V with the softmax's 1 / sum fused in, as in the
    # d128 transformer's training step): the load of s[i] sits between the rows' loop and the columns' loop once
    # LICM has hoisted it, and register_tile took only index arithmetic there, so the kernel kept one row of 16
    # columns, 2 accumulators (114 -> 86 us on Zen 3 with the tile). The load moves into the rows' loop with the
    # index arithmetic. Values against NumPy.
    script = tmp_path / "pv.py"
    script.write_text("import numpy as np\nfrom tensorscope import Tensor\n"
                      "rng = np.random.default_rng(0)\n"
                      "p = rng.random((16, 4, 32, 32)).astype(np.float32)\n"
                      "s = (1 / p.sum(-1, keepdims=True)).astype(np.float32)\n"
                      "v = rng.standard_normal((16, 4, 32, 32)).astype(np.float32)\n"
                      "got = ((Tensor(p) * Tensor(s)) @ Tensor(v)).numpy()\n"
                      "want = (p.astype(np.float64) * s) @ v\n"
                      "assert np.allclose(got, want, rtol=1e-5, atol=1e-5), np.abs(got - want).max()\n")
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": vector_bytes})
    (kernel,) = json.loads((out / "kernels.json").read_text())["kernels"]
    assert [16, 4, 32, 1] in [i["shape"] for i in kernel["inputs"]], kernel["inputs"]  # s is read in the matmul
    assert tile in kernel["actions"]["applied"], kernel["actions"]


def test_a_sum_of_arithmetic_on_rows_is_one_vector_expression(tmp_path):
    # CRenderer::vector_accumulators (RowExpr): a LayerNorm's variance sums (x_j - mean)² over rows of 32, upcast
    # by 8 accumulators that each add (x_j + m) · (x_j + m); the accumulators are one vector and the operand one
    # vector expression, `vacc = vacc + ((ts_v8_load(..) + ts_v8_splat(m)) * (..))`, where gcc's loop vectorizer had
    # taken the rows as lanes and gathered each row with permutes (the transformer sample's r_32_12_32: 6.8 ->
    # 1.8 us alone on Zen 3). Lane by lane the same roundings: the normalized values against PyTorch.
    script = tmp_path / "ln.py"
    script.write_text("import numpy as np\nimport torch\nfrom tensorscope import Tensor\n"
                      "rng = np.random.default_rng(0)\n"
                      "x = rng.standard_normal((32, 12, 32)).astype(np.float32)\n"
                      "got = Tensor(x).layernorm().numpy()\n"
                      "want = torch.nn.functional.layer_norm(torch.from_numpy(x), (32,), eps=1e-5).numpy()\n"
                      "assert np.allclose(got, want, rtol=1e-4, atol=1e-5), np.abs(got - want).max()\n")
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": "32"})
    sources = [p.read_text() for p in out.glob("k*.c")]
    assert any(re.search(r"vacc\d+ = vacc\d+ \+ \(\(ts_v8_load\(data\d \+ v\d+\) \+ ts_v8_splat\(v\d+\)\) \* "
                         r"\(ts_v8_load\(data\d \+ v\d+\) \+ ts_v8_splat\(v\d+\)\)\);", s) for s in sources), sources


def _vector_sums(script, tmp_path):
    """Runs `script` with 8-float vectors (TENSORSCOPE_VECTOR_BYTES=32) and returns the C sources' vector
    accumulator sums, `vacc = vacc + ...;`, stripped."""
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": "32"})
    return [line.strip() for p in out.glob("k*.c") for line in p.read_text().splitlines()
            if re.match(r"\s*vacc\d+ = vacc\d+ \+ ", line)]


def test_vector_expressions_give_the_interpreters_bits(tmp_path):
    # RowExpr (CRenderer::vector_accumulators): max, negation, reciprocal, products and sums of rows and
    # broadcasts written as one vector expression round lane by lane as the scalar statements did, so the C
    # device's sums are the interpreter's bits, NaN, ±inf and -0 in the rows included.
    script = tmp_path / "rx.py"
    script.write_text(
        "import numpy as np\nfrom tensorscope import Tensor\n"
        "rng = np.random.default_rng(0)\n"
        "x = rng.standard_normal((384, 32)).astype(np.float32)\n"
        "y = rng.standard_normal((384, 32)).astype(np.float32)\n"
        "x[3, 5], x[7, 0], y[9, 31], x[11, 4] = np.nan, np.inf, -np.inf, -0.0\n"
        "s = rng.standard_normal((384, 1)).astype(np.float32)\n"
        "exprs = {\n"
        "    'max': lambda d: (Tensor(x, device=d).maximum(Tensor(y, device=d)) * 2).sum(-1),\n"
        "    'neg_recip': lambda d: (-(Tensor(x, device=d) + 3.0)).reciprocal().sum(-1),\n"
        "    'shifted_square': lambda d: (lambda t: (t * t).sum(-1))(Tensor(x, device=d) + Tensor(s, device=d)),\n"
        "    'product': lambda d: (Tensor(x, device=d) * Tensor(y, device=d) + Tensor(s, device=d)).sum(-1),\n"
        "}\n"
        "for name, f in exprs.items():\n"
        "    c, i = f('C').numpy(), f('INTERP').numpy()\n"
        "    assert np.array_equal(c, i, equal_nan=True), (name, c[:12], i[:12])\n"
        "    assert np.isnan(c[3]) and np.isnan(i[3]), name\n")
    statements = _vector_sums(script, tmp_path)
    assert any("ts_v8_max(ts_v8_load(" in t for t in statements), statements
    assert any("ts_v8_splat(1.0f) / (-(ts_v8_load(" in t for t in statements), statements
    assert any(re.search(r"\(ts_v8_load\(data\d \+ v\d+\) \* ts_v8_load\(data\d \+ v\d+\)\) \+ ts_v8_splat", t) for t in statements), statements
    square = r"\(ts_v8_load\(data\d \+ v\d+\) \+ ts_v8_splat\(v\d+\)\)"
    assert any(re.search(square + r" \* " + square, t) for t in statements), statements  # t · t: one node read twice


def test_a_sum_of_rows_selected_lane_by_lane_is_one_vector_expression(tmp_path):
    # RowExpr's WHERE: a ReLU's backward summed over a BatchNorm's batch and pixels, g · (x < 0 ? 0 : x),
    # (x == 0 ? g : 0) and (x <= 0 ? 0 : g) (its condition a bool WHERE: x < 0 or x == 0) summed over (0, 2, 3) of
    # (32, 128, 4, 4): UPCAST_REDUCE's eight accumulators are one vector and each lane's select a bit-mask select on
    # a vector compare (ts_v8_where), where gcc had packed the products into a vector and then added them into eight
    # scalar accumulators one lane at a time (r_128_32_4_4 alone: 47 -> 13 us). Lane by lane the same bits as the
    # interpreter, NaN, ±inf and -0 in the rows included; the sums against PyTorch.
    script = tmp_path / "relu_sum.py"
    script.write_text(
        "import numpy as np\nimport torch\nfrom tensorscope import Tensor\n"
        "rng = np.random.default_rng(0)\n"
        "g = rng.standard_normal((32, 128, 4, 4)).astype(np.float32)\n"
        "x = rng.standard_normal((32, 128, 4, 4)).astype(np.float32)\n"
        "x[0, 5, 1, 1], x[3, 7, 0, 0], g[9, 31, 2, 3], x[11, 4, 3, 3], x[12, 6, 0, 1] = np.nan, np.inf, -np.inf, -0.0, 0.0\n"
        "exprs = {\n"
        "    'relu_product': lambda d: (Tensor(g, device=d) * (Tensor(x, device=d) < 0).where(0, Tensor(x, device=d))).sum((0, 2, 3)),\n"
        "    'selected_at_zero': lambda d: (Tensor(x, device=d) == 0).where(Tensor(g, device=d), 0).sum((0, 2, 3)),\n"
        "    'at_most_zero': lambda d: ((Tensor(x, device=d) < 0) | (Tensor(x, device=d) == 0)).where(0, Tensor(g, device=d)).sum((0, 2, 3)),\n"
        "}\n"
        "tg, tx = torch.from_numpy(g).double(), torch.from_numpy(x).double()\n"
        "want = {'relu_product': (tg * torch.where(tx < 0, 0.0, tx)).sum((0, 2, 3)).numpy(),\n"
        "        'selected_at_zero': torch.where(tx == 0, tg, 0.0).sum((0, 2, 3)).numpy(),\n"
        "        'at_most_zero': torch.where(tx <= 0, 0.0, tg).sum((0, 2, 3)).numpy()}\n"
        "for name, f in exprs.items():\n"
        "    c, i = f('C').numpy(), f('INTERP').numpy()\n"
        "    assert np.array_equal(c, i, equal_nan=True), (name, c[:12], i[:12])\n"
        "    assert np.allclose(c, want[name], rtol=1e-4, atol=1e-4, equal_nan=True), (name, c[:12], want[name][:12])\n")
    statements = _vector_sums(script, tmp_path)
    row = r"ts_v8_load\(data\d \+ v\d+\)"
    assert any(re.fullmatch(rf"vacc\d+ = vacc\d+ \+ \({row} \* ts_v8_where\(\(\(ts_m8\)\({row} < ts_v8_splat\(0\.0f\)\)\), "
                            rf"ts_v8_splat\(0\.0f\), {row}\)\);", t) for t in statements), statements
    assert any(re.fullmatch(rf"vacc\d+ = vacc\d+ \+ ts_v8_where\(\(\(ts_m8\)\({row} == ts_v8_splat\(0\.0f\)\)\), {row}, "
                            rf"ts_v8_splat\(0\.0f\)\);", t) for t in statements), statements
    # a bool WHERE (x < 0 | x == 0) as the bits of one mask or the other
    assert any(t.startswith("vacc") and "_where(((((ts_m8)(" in t and " & ((ts_m8){0} - (int32_t)(1))) | (~((ts_m8)(" in t
               for t in statements), statements


@pytest.mark.parametrize("vector_bytes", ["32", "64"])
@pytest.mark.parametrize("hw", [14, 7])
def test_the_last_block_of_a_padded_row_is_one_partial_vector(tmp_path, vector_bytes, hw):
    # A depthwise 3x3's output rows of 14 are padded to 16 (PADTO(8)), the last block with 6 real lanes; rows of 7
    # (a 7x7 map) are padded to 8 (padto.cpp, kShortRowPad: a row of 5 to 7 inside other rows), 7 real lanes. The C
    # renderer writes such a block as one vector of 8 whose lanes past the row are never stored, where it had
    # written a vector of 4 and two scalar chains of multiply-adds, and rows of 7 had stayed scalar. A tap's row
    # whose real lanes are all in the image is one plain load (the lanes past the row read what follows it, up to
    # host_alloc's guard bytes after a buffer's end); one with a lane in the padding is a masked load that reads
    # neither that lane nor those past the row (forward and both gradients of 32 x 32 x 14 x 14 on Zen 3: 0.278 ->
    # 0.244 ms with the plain loads). split_index_set splits the taps' loop along the row where a lane's column
    # leaves the image (kx = 0, then 1..2, or 0..1, then 2), so every mask is a constant (AVX2 had built them at
    # run time) and the vectors continue from one range into the next. 32 x 32 x 14 x 14, forward on Zen 3: 0.137
    # -> 0.105 -> 0.093 ms; 32 x 64 x 7 x 7: 0.39 -> 0.100 -> 0.054 ms, register-tiled 0.043. Values against
    # PyTorch, bit for bit with the interpreter's.
    script = tmp_path / "dw.py"
    script.write_text("import numpy as np\nimport torch\nfrom tensorscope import Tensor\n"
                      "rng = np.random.default_rng(0)\n"
                      f"x = rng.standard_normal((8, 16, {hw}, {hw})).astype(np.float32)\n"
                      "w = rng.standard_normal((16, 1, 3, 3)).astype(np.float32)\n"
                      "got = Tensor(x).conv2d(Tensor(w), padding=1, groups=16).numpy()\n"
                      "interp = Tensor(x, device='INTERP').conv2d(Tensor(w, device='INTERP'), padding=1, groups=16).numpy()\n"
                      "want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding=1, groups=16).numpy()\n"
                      "assert np.allclose(got, want, rtol=1e-5, atol=1e-5), np.abs(got - want).max()\n"
                      "assert np.array_equal(got, interp), np.abs(got - interp).max()\n")
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": vector_bytes})
    name = f"r_8_16_{hw}_{hw}_3_3"
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    (kernel,) = [k for k in kernels if k["name"] == name and k["device"] == "C"]  # (and one on INTERP)
    assert "PADTO(8)" in kernel["actions"]["applied"], kernel["actions"]
    body = (out / kernel["sources"]["C"]).read_text().split(f"static void {name}_kernel(")[1]
    masks = re.findall(r"ts_v(?:8|16)_maskz_load\(data\d \+ [^;]*?, (0x[0-9a-f]+u)\)", body)
    assert masks and all(re.fullmatch(r"0x[0-9a-f]+u", m) for m in masks), body  # constants only
    if hw == 14:
        assert "ts_v8_fma(" in body and "fmaf(" not in body and "ts_v4_" not in body, body
        assert any(int(m[:-1], 16) < 1 << 6 for m in masks), masks  # past the row and the padding: not read
        # the last block's taps with all 6 real lanes in the image (kx = 0, 1 there) are plain loads
        assert not {"0x3fu", "0x3fffu"} & set(masks), masks
    else:
        # a plane of 7 rows of 7, contiguous: register_tile takes the 7 rows (one vector each, their taps'
        # multiply-adds one chain a row before), and the renderer's vectors run along the plane: on AVX2, 6 of 8
        # lanes and one left over in each range of taps; on AVX-512 vectors of 16 (with 16 accumulators as its
        # least, the tile had not applied there: 32 x 64 x 7 x 7 forward 0.078 -> 0.042 ms on an AVX-512 Xeon)
        fma = "ts_v8_fma(" if vector_bytes == "32" else "ts_v16_fma("
        assert fma in body and body.count(fma) >= 3 * body.count("fmaf("), body
        assert "REGISTER_TILE(7)" in kernel["actions"]["applied"], kernel["actions"]


@pytest.mark.parametrize("vector_bytes", ["32", "64"])
def test_stride_2_rows_are_vectors_of_every_other_element(tmp_path, vector_bytes):
    # A stride-2 convolution reads its input row at 2·x + kx: upcast_global upcasts such a row on the C device
    # (rows_every_other), and the C renderer loads it as ts_vN_load2, two vector loads and a shuffle of their even
    # elements (ts_vN_maskz_load2 where lanes fall outside the image or past the row). MobileNet's depthwise 3x3
    # with stride 2, 32 x 24 x 28 x 28, forward on Zen 3: 0.36 ms scalar, 0.13 ms. The max-pool of a 2x2 window
    # reads its rows the same way. Values and gradients against PyTorch, the forward bit for bit with the
    # interpreter's (each lane's multiply-adds in the same order).
    script = tmp_path / "s2.py"
    script.write_text(
        "import numpy as np\nimport torch\nfrom tensorscope import Tensor\n"
        "rng = np.random.default_rng(0)\n"
        "for hw in (28, 15):\n"
        "    x = rng.standard_normal((4, 24, hw, hw)).astype(np.float32)\n"
        "    w = rng.standard_normal((24, 1, 3, 3)).astype(np.float32)\n"
        "    g = rng.standard_normal((4, 24, (hw - 1) // 2 + 1, (hw - 1) // 2 + 1)).astype(np.float32)\n"
        "    tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)\n"
        "    y = tx.conv2d(tw, stride=2, padding=1, groups=24)\n"
        "    y.backward(Tensor(g))\n"
        "    interp = Tensor(x, device='INTERP').conv2d(Tensor(w, device='INTERP'), stride=2, padding=1, groups=24).numpy()\n"
        "    px, pw = torch.from_numpy(x).requires_grad_(), torch.from_numpy(w).requires_grad_()\n"
        "    want = torch.nn.functional.conv2d(px, pw, stride=2, padding=1, groups=24)\n"
        "    want.backward(torch.from_numpy(g))\n"
        "    assert np.allclose(y.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5), hw\n"
        "    assert np.array_equal(y.numpy(), interp), (hw, np.abs(y.numpy() - interp).max())\n"
        "    assert np.allclose(tx.grad.numpy(), px.grad.numpy(), rtol=1e-4, atol=1e-4), hw\n"
        "    assert np.allclose(tw.grad.numpy(), pw.grad.numpy(), rtol=1e-4, atol=1e-3), hw\n"
        "    p = rng.standard_normal((8, 16, hw, hw)).astype(np.float32)\n"
        "    pooled = Tensor(p).max_pool2d((2, 2)).numpy()\n"
        "    assert np.array_equal(pooled, torch.nn.functional.max_pool2d(torch.from_numpy(p), 2).numpy()), hw\n")
    out = run_cli_out(script, tmp_path / "out", env={"TENSORSCOPE_VECTOR_BYTES": vector_bytes})
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    (kernel,) = [k for k in kernels if k["name"] == "r_4_24_14_14_3_3" and k["device"] == "C"]
    assert any(a.startswith("UPCAST_GLOBAL(") for a in kernel["actions"]["applied"]), kernel["actions"]
    body = (out / kernel["sources"]["C"]).read_text().split("static void r_4_24_14_14_3_3_kernel(")[1]
    assert re.search(r"ts_v(8|16)_maskz_load2\(data\d \+ ", body), body
    # rows of 14 padded to 16: two vectors of 8 a row, every lane in one; on AVX-512 too, where the renderer had
    # taken 9 lanes (a row and the next one's first, masked off) as a vector of 16, every later row one lane late
    # and its lanes scalar fmaf chains (32 x 24 x 28 x 28, forward: 0.34 -> 0.15 ms on the forty-second session's
    # Xeon)
    assert re.search(r"ts_v8_load2\(data\d \+ ", body) and "fmaf(" not in body, body


EMBEDDING = """\
import numpy as np
import torch
from tensorscope import Tensor, nn
rng = np.random.default_rng(0)
table = rng.standard_normal((11, 128)).astype(np.float32)
idx = rng.integers(0, 11, (16, 32)).astype(np.int32)
g = rng.standard_normal((16, 32, 128)).astype(np.float32)
emb = nn.Embedding(11, 128)
emb.weight = Tensor(table, requires_grad=True)
out = emb(Tensor(idx))
(out * Tensor(g)).sum().backward()
want_w = torch.tensor(table, requires_grad=True)
(torch.nn.functional.embedding(torch.tensor(idx).long(), want_w) * torch.tensor(g)).sum().backward()
np.testing.assert_array_equal(out.numpy(), table[idx])
np.testing.assert_allclose(emb.weight.grad.numpy(), want_w.grad.numpy(), rtol=1e-5, atol=1e-5)
"""


@pytest.mark.parametrize("vector_bytes, tiled", [(32, False), (64, True), (16, False)])
def test_a_one_hots_product_is_upcast_by_its_whole_row(tmp_path, vector_bytes, tiled):
    # An embedding (one-hot @ E) and its weight gradient select on a bool loaded once per trip of the reduce; the
    # C renderer branches around the trip's adds. Upcast by the whole row of 128 (16 vectors of AVX2, 8 of AVX-512,
    # 32 of SSE, capped at 16 of them: 64 floats), one branch covers all of its adds (Zen 3, the kernels alone:
    # 23 -> 6.1 us and 31 -> 6.0 us). On AVX2 and SSE the rows are not register-tiled: a second row's
    # accumulators would spill; AVX-512's 32 registers take two rows of 8 vectors.
    script = tmp_path / f"emb{vector_bytes}.py"
    script.write_text(EMBEDDING)
    out = run_cli_out(script, tmp_path / f"out{vector_bytes}", env={"TENSORSCOPE_VECTOR_BYTES": str(vector_bytes)})
    kernels = json.loads((out / "kernels.json").read_text())["kernels"]
    onehot = [k for k in kernels if k["name"].startswith("r_") and "in bool" in (out / k["ir"]).read_text().splitlines()[0]]
    assert sorted(k["name"] for k in onehot) == ["r_11_128_16_32", "r_16_32_128_11"], [k["name"] for k in kernels]
    width = 64 if vector_bytes == 16 else 128
    for k in onehot:
        applied = k["actions"]["applied"]
        assert f"UPCAST_GLOBAL({width})" in applied, (k["name"], applied)
        if k["name"] == "r_11_128_16_32" or not tiled:  # the gradient's rows (11 tokens) have no tile either
            assert "REGISTER_TILE" not in applied, (k["name"], applied)
        else:
            assert "REGISTER_TILE(2)" in applied, (k["name"], applied)
        source = (out / k["sources"]["C"]).read_text().split("static void ")[-1]
        lanes = {64: 16, 32: 8, 16: 4}[vector_bytes]
        # one branch per trip covers the row's vector adds (each `if` of the group tests the same bool)
        assert source.count(f"ts_v{lanes}_load(data") >= width // lanes and "ts_where_f32(" not in source, source[-3000:]
