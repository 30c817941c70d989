// `tensorscope-cli runner`: the process the debugger starts for each run (RenderDoc's model: the program
// under study runs in its own process, so that a crash, a hang or a memory blow-up never takes the window).
//
//   tensorscope-cli runner --connect SOCKET --source FILE [--path PATH] [--record FILE] [--device NAME]
//                          [--memory-limit MB] [--step launch|stage] [--breakpoints JSON]
//
// It connects to the debugger's local socket SOCKET, runs the Python in FILE as the script PATH (the
// editor's text, saved or not), and streams the session's events there (and to the recording FILE)
// through one EventStreamer. Commands come back on the same socket: {"command":"stop"} raises
// KeyboardInterrupt in the script; "step" (until "launch" or "stage"), "continue" and "pause" drive the
// engine's gate, where the runner sends a 'P' frame ({"stage", "kernel_id", "kernel"}) and waits.
// --step launch starts paused before the first launch, --step stage at the first stop of any stage.
// --breakpoints takes the breakpoints the run starts with: the JSON of the "breakpoints" command, plus
// "run_to": {"file", "line"} for Ctrl+F10 on a script that is not running. More commands (breakpoints,
// the pause console, buffers) are in debugger_gate.h. The frames are described in tensorscope/recording.h and
// docs/recording.md. Exit status: 0 finished, 1 the script raised, 2 bad arguments or no connection.
#pragma once

namespace ts {
int cmd_runner(int argc, char** argv);
}
