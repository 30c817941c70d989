#include "runner_command.h"

#include <Python.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "debugger_gate.h"
#include "runner.h"
#include "tensorscope/recording.h"

namespace ts {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "tensorscope-cli runner: %s\n", message.c_str());
  return 2;
}

int connect_to(const std::string& socket_path) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof addr.sun_path) return -1;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads the debugger's commands. Runs on its own thread so that a command is heard while the script
// holds the main thread (and the GIL) in a long engine call. When the debugger goes away (the socket
// closes), the run is stopped the same way, and the process ends if the script does not stop.
void read_commands(int fd, DebuggerGate* gate, std::atomic<bool>* done) {
  FrameParser parser;
  char buf[4096];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    parser.feed(std::string_view(buf, static_cast<size_t>(n)));
    Frame frame;
    try {
      while (parser.next(frame)) {
        if (frame.type != 'C') continue;
        const auto command = nlohmann::json::parse(frame.body, nullptr, false);
        try {
          if (command.is_object()) gate->command(command);
        } catch (const std::exception& e) {  // a field of the wrong type: that command is dropped, the run goes on
          std::fprintf(stderr, "tensorscope-cli runner: a bad command was ignored: %s\n", e.what());
        }
      }
    } catch (const RecordingError&) {
      break;  // a garbled connection: treat as gone
    }
  }
  gate->gone();
  if (done->load()) return;
  ScriptRunner::interrupt_main();
  for (int i = 0; i < 40 && !done->load(); i++) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (!done->load()) _exit(3);  // nobody is watching and the script does not stop
}

// A script that dies (a segfault in a kernel or in ctypes, abort()) sends the events it queued before
// the signal ends it with its default action, so that the debugger shows what ran up to the crash and
// still reads "ended by signal 11 (SIGSEGV)" from the exit status.
std::atomic<EventStreamer*> g_streamer{nullptr};

void send_events_then_die(int sig) {
  if (EventStreamer* streamer = g_streamer.load()) streamer->flush_on_crash();
  ::raise(sig);  // SA_RESETHAND put back the default action; SA_NODEFER lets it act at once
}

void send_events_on_fatal_signals() {
  struct sigaction action {};
  action.sa_handler = send_events_then_die;
  action.sa_flags = SA_RESETHAND | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &action, nullptr);
}

}  // namespace

int cmd_runner(int argc, char** argv) {
  std::string socket_path, source_file, path, record, device;
  long memory_mb = 0;
  std::string step, breakpoints;
  for (int i = 0; i < argc; i++) {
    std::string a = argv[i];
    if (i + 1 >= argc) return fail("option " + a + " needs a value");
    std::string v = argv[++i];
    if (a == "--connect") socket_path = v;
    else if (a == "--source") source_file = v;
    else if (a == "--path") path = v;
    else if (a == "--record") record = v;
    else if (a == "--device") device = v;
    else if (a == "--memory-limit") memory_mb = std::atol(v.c_str());
    else if (a == "--step" && (v == "launch" || v == "stage")) step = v;
    else if (a == "--breakpoints") breakpoints = v;
    else return fail("unknown option " + a);
  }
  if (socket_path.empty() || source_file.empty()) return fail("usage: runner --connect SOCKET --source FILE [...]");
  if (path.empty()) path = source_file;
  std::ifstream in(source_file);
  if (!in) return fail("cannot read " + source_file + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  if (memory_mb > 0) {  // a script that eats memory fails here, not on the whole machine
    rlimit limit{static_cast<rlim_t>(memory_mb) << 20, static_cast<rlim_t>(memory_mb) << 20};
    setrlimit(RLIMIT_AS, &limit);
  }
  const int fd = connect_to(socket_path);
  if (fd < 0) return fail("cannot connect to the debugger at " + socket_path + ": " + std::strerror(errno));

  unsetenv("TENSORSCOPE_RECORD");  // this process records through its own streamer
  ScriptRunner::initialize({ScriptRunner::default_python_path()}, /*signal_handlers=*/true);
  RunInfo info;
  try {
    info = new_run_info(path, text.str(), {path}, device);
  } catch (const std::exception& e) {
    return fail(std::string("--device: ") + e.what());
  }
  info.python_version = Py_GetVersion();
  // Both outlive this function: the detached command thread may still look at them while the process exits.
  static std::atomic<bool> done{false};
  auto* gate = new DebuggerGate(fd, step, path);
  if (!breakpoints.empty()) {
    auto c = nlohmann::json::parse(breakpoints, nullptr, false);
    if (!c.is_object()) return fail("--breakpoints: not a JSON object");
    c["command"] = "breakpoints";
    gate->command(c);
    if (c.contains("run_to") && c["run_to"].is_object())  // Ctrl+F10 on a script that is not running
      gate->command({{"command", "run to line"}, {"file", c["run_to"].value("file", "")}, {"line", c["run_to"].value("line", 0)}});
  }
  {
    PyGILState_STATE gil = PyGILState_Ensure();  // line tracing goes on before the script's first line
    gate->update_line_tracing();
    PyGILState_Release(gil);
  }
  Session::get().set_gate(gate);
  Session::get().subscribe(gate);
  std::thread commands(read_commands, fd, gate, &done);
  commands.detach();

  ScriptResult result;
  {
    EventStreamer streamer(info, record, fd);
    gate->set_before_send([&streamer] { streamer.flush(); });  // the events before a pause arrive before it
    Session::get().subscribe(&streamer);
    g_streamer = &streamer;
    send_events_on_fatal_signals();
    ScriptRunner::on_os_exit([&streamer] { streamer.flush(); });
    // Script output travels as events (ScriptOutputEvent); nothing is echoed to this process's stdout.
    result = ScriptRunner::run(path, info.script_text, device, {});
    ScriptRunner::on_os_exit(nullptr);
    g_streamer = nullptr;
    Session::get().unsubscribe(&streamer);
    gate->set_before_send(nullptr);
    streamer.finish(how_it_ended(result, path));
  }
  done = true;
  ::shutdown(fd, SHUT_RDWR);
  return result.ok ? 0 : 1;
}

}  // namespace ts
