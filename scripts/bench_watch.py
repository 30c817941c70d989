"""What watching costs: a sample run plain, recorded, and inside the debugger, side by side in one run.

Rows (medians of alternating rounds, wall-clock seconds of the whole process, so start-up counts):
- `samples/transformer_tiny.py` with /usr/bin/python3 (plain), with TENSORSCOPE_RECORD (recorded), and in
  the debugger (`tensorscope SCRIPT --screenshot`: start-up, the runner process, every event, the graph
  layout and a screenshot) on one X server started for the whole benchmark (Xvfb), as on a desktop whose
  display is already there: an X server's own start-up (about 0.07 s) is not the debugger's. Bars
  (issue 11): recorded <= 1.2x plain, debugger <= 1.5x plain.
- the size of a recording of 1000 steps of a jitted training loop (bar: <= 10 MB);
- opening a recording of 150,000 events (50,000 realizes) in the debugger (`tensorscope FILE.tsrec --screenshot`, whole
  process: Qt start-up, reading, the kernel list and the graph) and the reading alone (`tensorscope-cli info`).
- the gate (issue 12): 10,000 tiny launches with no gate handler, with one that never pauses (the
  engine's side of an attached debugger), in a runner streaming to a debugger that does not pause (the
  test's FakeDebugger, which parses payloads only when asked), and recorded to a file;
- a step (F10) round trip on samples/transformer_tiny.py through the runner's connection: the command
  sent to the 'P' frame of the next launch received (the GUI's repaint is not in it).
Kernel caches are warmed first (one run of each), so compile time is not in the ratios.
Run: scripts/bench.sh (after the op benchmarks), or PYTHONPATH=build/python /usr/bin/python3 scripts/bench_watch.py
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")
ENV = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "build", "python"))
QUICK = "--quick" in sys.argv
ROUNDS = 2 if QUICK else 3


def start_display():
    """An X server for the debugger's runs (Xvfb, its display number picked by itself), or None."""
    if not shutil.which("Xvfb"):
        return None
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        return None
    ENV["DISPLAY"] = ":" + number
    return proc


def wall(cmd, env=None):
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env or ENV, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def race(cmds):
    """Median wall time of each command, run in alternating rounds (drift falls on all alike)."""
    for c in cmds.values():
        wall(*c)  # warm-up: kernel caches, page cache
    times = {k: [] for k in cmds}
    for _ in range(ROUNDS):
        for k, c in cmds.items():
            times[k].append(wall(*c))
    return {k: statistics.median(v) for k, v in times.items()}


JIT_LOOP = """
import numpy as np
import tensorscope
from tensorscope import Tensor, nn
from tensorscope.nn import optim
Tensor.manual_seed(0)
l1, l2 = nn.Linear(64, 128), nn.Linear(128, 10)
opt = optim.SGD([l1.weight, l1.bias, l2.weight, l2.bias], lr=0.01)
@tensorscope.jit
def step(x, y):
    opt.zero_grad()
    loss = l2(l1(x).relu()).sparse_categorical_crossentropy(y)
    loss.backward()
    opt.step()
    return loss
rng = np.random.default_rng(0)
for i in range(1000):
    step(Tensor(rng.standard_normal((32, 64), dtype=np.float32)), Tensor(rng.integers(0, 10, 32).astype(np.int32)))
"""

MANY_EVENTS = """
from tensorscope import Tensor
a = Tensor([1.0, 2.0, 3.0])
for i in range(50000):  # a nodes event, a schedule and a launch each (one structure: cached): 150,000 events
    (a + 1).realize()
"""


GATE = """
import sys, time
import tensorscope
from tensorscope import Tensor
if "--idle-gate" in sys.argv:
    tensorscope._C._set_idle_gate(True)
a = Tensor([1.0, 2.0, 3.0])
for i in range(1000):
    (a + 1).realize()
t = time.perf_counter()
for i in range(10000):
    (a + 1).realize()
print(f"us_per_launch {(time.perf_counter() - t) / 10000 * 1e6:.3f}")
"""


def gate_rows(tmp):
    script = os.path.join(tmp, "gate.py")
    with open(script, "w") as f:
        f.write(GATE)
    def per_launch(*args, env=ENV):
        out = subprocess.run(["/usr/bin/python3", script, *args], env=env, cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout
        return float(out.split("us_per_launch")[1])
    plain, idle, recorded = [], [], []
    for _ in range(ROUNDS + 2):
        plain.append(per_launch())
        idle.append(per_launch("--idle-gate"))
        recorded.append(per_launch(env=dict(ENV, TENSORSCOPE_RECORD=os.path.join(tmp, "gate.tsrec"))))
    p, i, rec = statistics.median(plain), statistics.median(idle), statistics.median(recorded)
    print(f"{'10,000 tiny launches (us per launch, median)':52} {'no gate':>8} {'idle gate':>9} {'runner':>9} "
          f"{'recorded':>9}")
    sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))  # the test's client of the runner's connection
    from test_runner_debugging import FakeDebugger
    import pathlib
    runner = []
    for _ in range(ROUNDS):
        d = pathlib.Path(tempfile.mkdtemp(dir=tmp))
        dbg = FakeDebugger(d, GATE)
        dbg.finish()
        runner.append(float(dbg.output().split("us_per_launch")[1]))
    r = statistics.median(runner)
    print(f"{'':52} {p:8.2f} {i:9.2f} {r:9.2f} {rec:9.2f}")
    print(f"{'gate cost per launch, idle gate - no gate (us, bar 1)':52} {i - p:8.2f}")
    return FakeDebugger


def step_round_trip(tmp, FakeDebugger):
    import pathlib
    with open(os.path.join(ROOT, "samples", "transformer_tiny.py")) as f:
        text = f.read()
    dbg = FakeDebugger(pathlib.Path(tmp), text, "--step", "launch")
    times = []
    assert dbg.until_pause() is not None
    for _ in range(200):
        t0 = time.perf_counter()
        dbg.send(command="step", until="launch")
        if dbg.until_pause() is None:
            break
        times.append((time.perf_counter() - t0) * 1000)
    dbg.send(command="stop")
    dbg.proc.kill()
    dbg.proc.wait()
    print(f"{'F10 round trip, runner side (ms: median, max)':52} {statistics.median(times):8.2f} "
          f"{max(times):9.2f}")
    if "DISPLAY" in ENV:
        out = subprocess.run([os.path.join(BIN, "tensorscope"),
                              os.path.join(ROOT, "samples", "transformer_tiny.py"), "--bench-steps", "100"],
                             env=ENV, cwd=ROOT, capture_output=True, text=True).stdout
        line = next((l for l in out.splitlines() if l.startswith("step round trip ms")), "")
        parts = line.split()
        if len(parts) >= 17:
            print(f"{'F10 round trip, key to repainted panels (ms: median, max; bar 100)':52} {float(parts[5]):8.2f} "
                  f"{float(parts[7]):9.2f}")
            print(f"{'F10 round trip, key to graph laid out (ms: median, max)':52} {float(parts[13]):8.2f} "
                  f"{float(parts[15]):9.2f}")


def main():
    tmp = tempfile.mkdtemp(prefix="bench_watch_")
    display = start_display()
    try:
        FakeDebugger = gate_rows(tmp)
        step_round_trip(tmp, FakeDebugger)
        sample = os.path.join(ROOT, "samples", "transformer_tiny.py")
        rec = os.path.join(tmp, "tt.tsrec")
        png = os.path.join(tmp, "tt.png")
        cmds = {
            "plain": (["/usr/bin/python3", sample],),
            "recorded": (["/usr/bin/python3", sample], dict(ENV, TENSORSCOPE_RECORD=rec)),
        }
        have_xvfb = "DISPLAY" in ENV
        if have_xvfb:
            cmds["debugger"] = ([os.path.join(BIN, "tensorscope"), sample, "--screenshot", png],)
        t = race(cmds)
        print(f"{'samples/transformer_tiny.py (whole process, s)':52} {'plain':>8} {'recorded':>9} {'debugger':>9}")
        dbg = t.get("debugger", float("nan"))
        print(f"{'':52} {t['plain']:8.2f} {t['recorded']:9.2f} {dbg:9.2f}")
        print(f"{'ratio to plain (bars: 1.2x recorded, 1.5x debugger)':52} {1:8.2f} {t['recorded'] / t['plain']:9.2f} "
              f"{dbg / t['plain']:9.2f}")
        print(f"{'recording size (MB)':52} {os.path.getsize(rec) / 1e6:8.1f}")

        jit_script = os.path.join(tmp, "jit_loop.py")
        with open(jit_script, "w") as f:
            f.write(JIT_LOOP)
        jit_rec = os.path.join(tmp, "jit.tsrec")
        wall(["/usr/bin/python3", jit_script], dict(ENV, TENSORSCOPE_RECORD=jit_rec))
        print(f"{'1000 jitted MLP training steps: recording size (MB, bar 10)':52} {os.path.getsize(jit_rec) / 1e6:8.2f}")

        many_script = os.path.join(tmp, "many.py")
        with open(many_script, "w") as f:
            f.write(MANY_EVENTS)
        many_rec = os.path.join(tmp, "many.tsrec")
        wall(["/usr/bin/python3", many_script], dict(ENV, TENSORSCOPE_RECORD=many_rec))
        info = race({"info": ([os.path.join(BIN, "tensorscope-cli"), "info", many_rec],)})["info"]
        print(f"{'150,000 events: tensorscope-cli info (s)':52} {info:8.2f}")
        if have_xvfb:
            gui = race({"gui": ([os.path.join(BIN, "tensorscope"), many_rec, "--screenshot", png],)})
            print(f"{'150,000 events: debugger opens it, whole process (s)':52} {gui['gui']:8.2f}")
            out = subprocess.run([os.path.join(BIN, "tensorscope"), many_rec, "--screenshot", png],
                                 env=ENV, cwd=ROOT, check=True, capture_output=True, text=True).stdout
            opened = [line for line in out.splitlines() if " events of " in line]
            seconds = float(opened[0].split(" in ")[-1].rstrip(" s")) if opened else float("nan")
            print(f"{'150,000 events: File > Open to every panel filled (s)':52} {seconds:8.2f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if display:
            display.kill()


if __name__ == "__main__":
    main()
