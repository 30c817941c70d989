# The runner's side of the debugger, driven through its connection as the GUI drives it: node events
# carry the script line of every node, a line breakpoint pauses with the lazy graph holding exactly the
# nodes made above that line, the pause console evaluates Python in the paused frame (its kernels
# stream like the script's), Ctrl+F10 runs to a line, and kernel/op/node breakpoints pause before the
# launch they name. Values are checked against NumPy.
import json
import os
import socket
import struct
import subprocess
import textwrap

import numpy as np
import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.environ.get("TS_BUILD_DIR", os.path.join(REPO, "build"))
CLI = os.path.join(BUILD, "bin", "tensorscope-cli")

pytestmark = pytest.mark.skipif(not os.access(CLI, os.X_OK), reason=f"{CLI} is not built")

SCRIPT = textwrap.dedent("""\
    from tensorscope import Tensor

    a = Tensor([[1.0, 2.0], [3.0, 4.0]])
    b = a * 2 + 1
    c = b.sum(axis=1)
    print("c", c.numpy())
    d = (a @ a).relu()
    print("d", d.numpy())
    """)


class FakeDebugger:
    """The GUI's end of the connection: a local socket server, frames in, JSON commands out."""

    def __init__(self, tmp_path, script, *runner_args):
        """runner_args may say PATH for the script's path (in --breakpoints)."""
        self.path = str(tmp_path / "script.py")
        runner_args = [a.replace("PATH", self.path) for a in runner_args]
        with open(self.path, "w") as f:
            f.write(script)
        sock_path = str(tmp_path / "debugger.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(sock_path)
        self.server.listen(1)
        env = dict(os.environ)
        env.pop("DEBUG", None)
        self.proc = subprocess.Popen(
            [CLI, "runner", "--connect", sock_path, "--source", self.path, "--path", self.path, *runner_args],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.server.settimeout(60)
        self.conn, _ = self.server.accept()
        self.conn.settimeout(60)
        self.buf = bytearray()
        self.at = 0  # where the next frame starts in buf
        self.blobs = {}
        self.last_pause = 0  # the number of the last pause until_pause returned
        self.resumed = 0     # the number of the last pause a command resumed from
        # (kind, payload JSON bytes) in order, parsed when asked (payloads()): a debugger that parsed every
        # event in Python as it came would be slower than the runner, and bench_watch.py times the runner
        self.events = []

    def frame(self):
        while True:
            if len(self.buf) - self.at >= 4:
                n = struct.unpack_from("<I", self.buf, self.at)[0]
                if len(self.buf) - self.at >= 4 + n:
                    body = bytes(self.buf[self.at + 4:self.at + 4 + n])
                    self.at += 4 + n
                    return chr(body[0]), body[1:]
            del self.buf[:self.at]  # the frames read; what is left is part of one frame
            self.at = 0
            chunk = self.conn.recv(1 << 20)
            if not chunk:
                return None, None
            self.buf += chunk

    def until_pause(self):
        """Reads frames up to the next pause ('P', returned) or the end (None)."""
        while True:
            kind, body = self.frame()
            if kind is None or kind == "X":
                return None
            if kind == "B":
                self.blobs[body[:16].decode()] = body[16:].decode()
            elif kind == "E":
                self.events.append((body[16], body[17:]))
            elif kind == "P":
                where = json.loads(body.decode())
                if where["pause"] == self.resumed:
                    continue  # sent again after an evaluation that crossed our resume (as the GUI does)
                self.last_pause = where["pause"]
                return where

    RESUMING = ("continue", "step", "run to line", "stop")

    def send(self, **command):
        self.send_many(command)

    def send_many(self, *commands):
        """Sends commands in one write, so that the runner reads them together."""
        body = b""
        for command in commands:
            text = json.dumps(command).encode()
            body += struct.pack("<I", len(text) + 1) + b"C" + text
            if command["command"] in self.RESUMING:
                self.resumed = self.last_pause
        self.conn.sendall(body)

    def finish(self):
        while self.until_pause() is not None:
            self.send(command="continue")
        return self.proc.wait(timeout=60)

    def payloads(self, kind):
        """The payloads of the events of one kind (1 schedule, 2 launch, 3 output, 4 nodes), parsed."""
        return [json.loads(p) for k, p in self.events if k == kind]

    # node events (kind 4) -> {uid: (op, line)}, and frees
    def nodes(self):
        made, freed = {}, set()
        for p in self.payloads(4):
            batch = json.loads(self.blobs[p["batch"]])
            for i, n in enumerate(batch["nodes"]):
                stack = batch["stacks"][n["stack"]] if n["stack"] >= 0 else None
                line = stack["frames"][stack["user"]][1] if stack and stack["user"] >= 0 else 0
                made[p["first_uid"] + i] = (n["op"], line)
            freed.update(p["freed_uids"])
        return made, freed

    def output(self):
        return "".join(p["text"] for p in self.payloads(3))

    def launches(self):
        return [p["name"] for p in self.payloads(2)]


def test_line_breakpoint_pauses_with_the_lazy_graph_of_the_lines_above(tmp_path):
    dbg = FakeDebugger(tmp_path, SCRIPT, "--breakpoints", json.dumps({"lines": [{"file": "PATH", "line": 6}]}))
    where = dbg.until_pause()
    assert where["stage"] == "line" and where["line"] == 6 and where["file"] == dbg.path
    made, freed = dbg.nodes()
    lines = {line for op, line in made.values()}
    assert lines == {3, 4, 5}, lines  # every node so far was made on lines 3-5, and each knows its line
    ops_at = lambda line: sorted(op for op, l in made.values() if l == line)
    assert "BUFFER" in ops_at(3) and "MUL" in ops_at(4) and "ADD" in ops_at(4) and "SUM" in ops_at(5)
    assert dbg.launches() == []  # nothing realized yet: the graph is lazy
    dbg.send(command="continue")
    assert dbg.finish() == 0
    assert "c [ 8. 16.]" in dbg.output()


def test_console_evaluates_in_the_paused_frame_and_its_kernels_stream(tmp_path):
    dbg = FakeDebugger(tmp_path, SCRIPT, "--breakpoints", json.dumps({"lines": [{"file": "PATH", "line": 7}]}))
    where = dbg.until_pause()
    assert where["line"] == 7
    launched = len(dbg.launches())
    dbg.send(command="evaluate", code="(b * 10).numpy().tolist()")
    again = dbg.until_pause()  # the same pause, sent again once the console's events are out
    assert again["line"] == 7
    expected = ((np.array([[1.0, 2.0], [3.0, 4.0]]) * 2 + 1) * 10).tolist()
    assert repr(expected) in dbg.output()
    assert len(dbg.launches()) > launched  # the console realized a kernel, streamed like the script's
    dbg.send(command="evaluate", code="zz = a.shape\nprint('shape', zz)")
    dbg.until_pause()
    assert "shape (2, 2)" in dbg.output()
    dbg.send(command="evaluate", code="undefined_name + 1")
    dbg.until_pause()
    assert "NameError" in dbg.output()
    dbg.send(command="continue")
    assert dbg.finish() == 0
    assert "d [[ 7. 10.]\n [15. 22.]]" in dbg.output()


def test_run_to_line_and_kernel_breakpoints(tmp_path):
    dbg = FakeDebugger(tmp_path, SCRIPT, "--breakpoints", json.dumps({"ops": ["SUM"]}))
    where = dbg.until_pause()
    # the first kernel with a SUM is c's: paused before its launch
    assert where["stage"] == "before launch" and where["detail"] == "breakpoint on op SUM"
    assert where["kernel"].startswith("r_")
    dbg.send(command="breakpoints")  # clear every breakpoint
    dbg.send(command="run to line", file=dbg.path, line=8)
    where = dbg.until_pause()
    assert where["stage"] == "line" and where["line"] == 8
    dbg.send(command="breakpoints", kernels=["E_*"])
    dbg.send(command="continue")
    assert dbg.finish() == 0  # no elementwise kernel after line 8
    assert "d [[ 7. 10.]" in dbg.output()


def test_node_breakpoint_pauses_before_the_kernel_that_computes_it(tmp_path):
    first = FakeDebugger(tmp_path, SCRIPT, "--breakpoints", json.dumps({"lines": [{"file": "PATH", "line": 6}]}))
    assert first.until_pause()["line"] == 6
    made, _ = first.nodes()
    sum_uid = next(uid for uid, (op, line) in made.items() if op == "SUM")
    first.send(command="breakpoints", nodes=[sum_uid])
    first.send(command="continue")
    where = first.until_pause()
    assert where["stage"] == "before launch" and where["detail"] == f"breakpoint on node #{sum_uid}"
    first.send(command="breakpoints")
    first.send(command="continue")
    assert first.finish() == 0


STEPS = textwrap.dedent("""\
    from tensorscope import Tensor
    x = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    for i in range(3):
        y = (x * 2).sum()
        print("v", y.numpy())
        x = (x + 1).realize()
    """)


def test_op_and_node_breakpoints_pause_in_every_step_of_a_repeated_schedule(tmp_path):
    # from the second step on, the schedule repeats a structure: the engine emits it thin (its structure,
    # uids and kernel ids, ScheduleEvent::thin) and the gate reads the kernels' ops and nodes from the structure
    (tmp_path / "ops").mkdir()
    dbg = FakeDebugger(tmp_path / "ops", STEPS, "--breakpoints", json.dumps({"ops": ["SUM"]}))
    for _ in range(3):
        where = dbg.until_pause()
        assert where["stage"] == "before launch" and where["detail"] == "breakpoint on op SUM", where
        dbg.send(command="continue")
    assert dbg.finish() == 0
    assert dbg.output().count("v ") == 3
    (tmp_path / "nodes").mkdir()
    dbg = FakeDebugger(tmp_path / "nodes", STEPS, "--breakpoints", json.dumps({"lines": [{"file": "PATH", "line": 5}]}))
    assert dbg.until_pause()["line"] == 5  # step 1, before y.numpy()
    dbg.send(command="continue")
    assert dbg.until_pause()["line"] == 5  # step 2: its schedule repeats step 1's
    made, _ = dbg.nodes()
    sum_uid = max(uid for uid, (op, line) in made.items() if op == "SUM")  # step 2's
    dbg.send(command="breakpoints", nodes=[sum_uid])
    dbg.send(command="continue")
    where = dbg.until_pause()
    assert where["stage"] == "before launch" and where["detail"] == f"breakpoint on node #{sum_uid}", where
    dbg.send(command="breakpoints")
    dbg.send(command="continue")
    assert dbg.finish() == 0
    assert "v 42.0" in dbg.output() and "v 66.0" in dbg.output()


def _launch_buffers(path):
    """[(kernel name, [(role, dtype, values or None, note)])] of a recording made with --record-buffers."""
    import sqlite3
    db = sqlite3.connect(path)
    blobs = dict(db.execute("SELECT hash, data FROM blobs"))
    out = []
    for (payload,) in db.execute("SELECT payload FROM events WHERE kind = 'launch' ORDER BY seq"):
        p = json.loads(payload)
        buffers = []
        for b in p.get("buffers", []):
            values = None
            if b["blob"] is not None:
                values = np.frombuffer(bytes(blobs[b["blob"]]), dtype=np.dtype(b["dtype"])).tolist()
                assert len(values) == b["numel"]
            buffers.append((b["role"], b["dtype"], values, b["note"]))
        out.append((p["name"], buffers))
    return out


def test_record_buffers_keeps_each_launchs_output_and_inputs(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    rec = str(tmp_path / "run.tsrec")
    env = dict(os.environ)
    env.pop("DEBUG", None)
    subprocess.run([CLI, "run", str(script), "--record", rec, "--record-buffers=1"], env=env, check=True,
                   capture_output=True)
    launches = _launch_buffers(rec)
    a = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
    outputs = [bufs[0][2] for name, bufs in launches]
    assert ((a * 2 + 1).sum(axis=1)).tolist() in outputs  # c's kernel
    assert np.maximum(a @ a, 0).ravel().tolist() in outputs  # d's kernel
    for name, bufs in launches:
        assert bufs[0][0] == "output" and all(role == "input" for role, *_ in bufs[1:])
        assert [1.0, 2.0, 3.0, 4.0] in [v for role, dtype, v, note in bufs[1:]] or not bufs[1:]

    # a 10-byte budget: c's 8-byte output fits, nothing after it; every buffer not kept says why
    small = str(tmp_path / "small.tsrec")
    subprocess.run([CLI, "run", str(script), "--record", small, "--record-buffers=0.0000095367431640625"], env=env,
                   check=True, capture_output=True)
    kept = [values for name, bufs in _launch_buffers(small) for role, dtype, values, note in bufs if values is not None]
    assert kept == [[8.0, 16.0]]
    for name, bufs in _launch_buffers(small):
        for role, dtype, values, note in bufs:
            assert values is not None or "budget of --record-buffers is used up" in note

    bad = subprocess.run([CLI, "run", str(script), "--record-buffers=lots"], env=env, capture_output=True, text=True)
    assert bad.returncode == 2 and "expected a size in MB" in bad.stderr


BUSY = textwrap.dedent("""\
    import time
    from tensorscope import Tensor
    print("ready", (Tensor([1.0]) + 1).numpy(), flush=True)
    end = time.time() + 30
    n = 0
    while time.time() < end:   # pure Python: no engine stop for a long time
        n += 1
    print("n", n)
    """)


def test_pause_and_a_new_breakpoint_reach_a_script_busy_in_pure_python(tmp_path):
    import time
    dbg = FakeDebugger(tmp_path, BUSY)
    while "ready" not in dbg.output():  # read events until the script is in its loop
        kind, body = dbg.frame()
        assert kind is not None
        if kind == "E":
            dbg.events.append((body[16], body[17:]))
    t0 = time.time()
    dbg.send(command="pause")
    where = dbg.until_pause()
    assert where["stage"] == "line" and where["line"] in (6, 7), where
    assert time.time() - t0 < 5  # not the 30 s the loop would take
    dbg.send(command="evaluate", code="print('n so far', n > 0)")
    dbg.until_pause()
    assert "n so far True" in dbg.output()
    dbg.send(command="breakpoints", lines=[{"file": dbg.path, "line": 8}])
    dbg.send(command="evaluate", code="end = 0")  # ends the loop from the console
    dbg.until_pause()
    dbg.send(command="continue")
    where = dbg.until_pause()
    assert where["stage"] == "line" and where["line"] == 8
    dbg.send(command="breakpoints")
    dbg.send(command="continue")
    assert dbg.finish() == 0
    assert "n " in dbg.output()


LOOP = textwrap.dedent("""\
    from tensorscope import Tensor
    total = 0
    for i in range(100000):
        total += i
    x = Tensor([1.0, 2.0, 3.0])
    y = (x * 2).numpy()
    z = (x + 1).numpy()
    print("done", total)
    """)


def test_stop_while_paused_on_a_line_in_a_loop_ends_the_run(tmp_path):
    dbg = FakeDebugger(tmp_path, LOOP, "--breakpoints", json.dumps({"lines": [{"file": "PATH", "line": 4}]}))
    assert dbg.until_pause()["line"] == 4
    dbg.send(command="stop")
    assert dbg.until_pause() is None  # no pause at the loop's next iteration: the run ends
    assert dbg.proc.wait(timeout=30) == 1
    assert "done" not in dbg.output()


def test_commands_run_in_order_and_do_not_outlive_their_pause(tmp_path):
    dbg = FakeDebugger(tmp_path, LOOP, "--step", "launch")
    first = dbg.until_pause()
    assert first["stage"] == "before launch"
    # "buffers" then "step" in one go: the buffers of this launch come, then the next pause
    dbg.send_many({"command": "buffers"}, {"command": "step", "until": "launch"})
    kind, frame = dbg.frame()
    while kind in ("B", "E"):
        kind, frame = dbg.frame()
    assert kind == "D" and json.loads(frame.split(b"\n", 1)[0])["kernel_id"] == first["kernel_id"]
    second = dbg.until_pause()
    assert second["kernel_id"] != first["kernel_id"]
    # "evaluate" then "continue": the evaluation is answered where it was asked (an engine stop: the
    # console says it works on lines), then the run goes on; nothing is left over for a later pause
    dbg.send(command="breakpoints", lines=[{"file": dbg.path, "line": 8}])
    dbg.send_many({"command": "evaluate", "code": "print('late', total)"}, {"command": "continue"})
    where = dbg.until_pause()  # the 'P' sent again after the evaluation, if it comes, is not a pause: skipped
    assert where["stage"] == "line" and where["line"] == 8
    assert "paused on a line" in dbg.output() and "late" not in dbg.output()
    dbg.send(command="breakpoints")
    dbg.send(command="continue")
    assert dbg.finish() == 0
    assert "late" not in dbg.output()


def test_cli_recordings_hold_the_nodes_with_their_lines(tmp_path):
    import sqlite3
    script = tmp_path / "script.py"
    script.write_text(SCRIPT)
    rec = str(tmp_path / "run.tsrec")
    env = dict(os.environ)
    env.pop("DEBUG", None)
    subprocess.run([CLI, "record", str(script), "-o", rec], env=env, check=True, capture_output=True)
    db = sqlite3.connect(rec)
    blobs = dict(db.execute("SELECT hash, data FROM blobs"))
    lines = set()
    for (payload,) in db.execute("SELECT payload FROM events WHERE kind = 'nodes'"):
        batch = json.loads(bytes(blobs[json.loads(payload)["batch"]]))
        for n in batch["nodes"]:
            if n["stack"] >= 0:
                stack = batch["stacks"][n["stack"]]
                lines.add(stack["frames"][stack["user"]][1])
    assert {3, 4, 5, 7} <= lines
    wheres = {json.loads(p)["where"]["line"] for (p,) in db.execute("SELECT payload FROM events WHERE kind = 'schedule'")}
    assert wheres == {6, 8}  # the .numpy() lines


FORK = """
import os
from tensorscope import Tensor
a = Tensor([1.0, 2.0, 3.0])
(a + 1).realize()
pid = os.fork()
if pid == 0:  # a worker process (multiprocessing forks the same way)
    for i in range(2000):  # 6,000 events: more than the streamer queues before the script waits for it
        (a * 2).realize()
    os._exit(0)
os.waitpid(pid, 0)
print("parent", (a - 1).numpy().tolist())
"""


def test_a_forked_child_neither_hangs_the_run_nor_sends_its_events(tmp_path):
    # the child has the runner's connection but not its encoder thread: its events are dropped (before,
    # the child sent frames on the parent's socket between the parent's)
    dbg = FakeDebugger(tmp_path, FORK)
    assert dbg.finish() == 0
    assert "parent [0.0, 1.0, 2.0]" in dbg.output()
    assert 2 <= len(dbg.launches()) < 10, dbg.launches()
