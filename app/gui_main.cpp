// main() of `tensorscope`, the debugger.
//
//   tensorscope [script.py] [--device C|INTERP|OPENCL:0|...] [--run] [--screenshot FILE.png] [--export-svg FILE.svg]
//               [--bench-steps N] [--theme system|light|dark] [--presentation] [--dock NAME] [--help] [--version]
//
// --screenshot and --export-svg make it a batch tool (for docs, CI and teachers' slides): the
// script runs, and once the run and the graph layout are done, the window is saved as a PNG
// and/or the graph as SVG, and the program exits with 0. A failing script still gives its
// screenshot (showing the error); only a timeout or a failed export exits non-zero.
// --bench-steps N (scripts/bench_watch.py) starts the script paused before its first launch, presses F10
// N times and prints the round trips (key to the paused kernel shown in every panel, repainted; and key
// to the graph laid out on its thread and repainted too), then stops the script.
#include <QApplication>
#include <QDockWidget>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "main_window.h"

namespace {

struct BatchTasks {
  QString screenshot, svg;
  int timeoutSeconds = 120;
  bool any() const { return !screenshot.isEmpty() || !svg.isEmpty(); }
};

// Waits (without blocking the event loop) until the window is idle, then does the batch tasks
// and quits. The wait is bounded so that a hung script cannot hang a CI job.
void runBatchTasks(tsui::MainWindow* window, const BatchTasks& tasks) {
  auto* poll = new QTimer(window);
  auto* clock = new QElapsedTimer;
  clock->start();
  QObject::connect(poll, &QTimer::timeout, window, [=] {
    const bool timedOut = clock->elapsed() > tasks.timeoutSeconds * 1000LL;
    if (window->isBusy() && !timedOut) return;
    poll->stop();
    delete clock;
    int code = 0;
    if (timedOut) {
      std::fprintf(stderr, "tensorscope: still busy after %d s (running: %d, laying out: %d); giving up\n",
                   tasks.timeoutSeconds, window->isRunning(), window->isLayoutPending());
      code = 1;
    }
    if (!window->lastRunOk()) std::fprintf(stderr, "tensorscope: the script failed (see the screenshot/console)\n");
    if (!tasks.svg.isEmpty()) {
      QString error;
      if (window->exportSvg(tasks.svg, &error)) {
        std::printf("tensorscope: graph written to %s\n", qPrintable(tasks.svg));
      } else {
        std::fprintf(stderr, "tensorscope: SVG export failed: %s\n", qPrintable(error));
        code = 1;
      }
    }
    if (!tasks.screenshot.isEmpty()) {
      QApplication::processEvents();  // let the last layout paint
      // zlib's fastest level (Qt maps quality 80 to 1): the default (6) took 0.1 s of a 1600×1000 window
      if (window->grab().save(tasks.screenshot, "PNG", 80)) {
        std::printf("tensorscope: screenshot written to %s\n", qPrintable(tasks.screenshot));
      } else {
        std::fprintf(stderr, "tensorscope: cannot write %s\n", qPrintable(tasks.screenshot));
        code = 1;
      }
    }
    if (timedOut) window->stopScript();
    QApplication::exit(code);
  });
  poll->start(10);  // the batch's end follows the run's and the last layout's within 10 ms
}

// F10 round trips: from stepToNextLaunch() to the window paused again with every panel filled, the graph
// laid out and the window repainted.
int stepBenchmark(tsui::MainWindow& window, int steps) {
  auto waitFor = [&](auto done) {
    while (!done()) QCoreApplication::processEvents(QEventLoop::WaitForMoreEvents, 5);
  };
  window.stepToNextLaunch();  // not running: starts paused before the first launch
  waitFor([&] { return window.isPaused() || !window.isRunning(); });
  std::vector<double> panels, graph;  // paused with the panels repainted; and the graph laid out too
  for (int i = 0; i < steps && window.isPaused(); ++i) {
    QElapsedTimer clock;
    clock.start();
    window.stepToNextLaunch();
    waitFor([&] { return window.isPaused() || !window.isRunning(); });
    if (!window.isPaused()) break;
    window.repaint();  // paints now, synchronously
    panels.push_back(clock.nsecsElapsed() / 1e6);
    waitFor([&] { return !window.isLayoutPending(); });
    window.repaint();
    graph.push_back(clock.nsecsElapsed() / 1e6);
  }
  window.stopScript();
  waitFor([&] { return !window.isRunning(); });
  if (panels.empty()) {
    std::fprintf(stderr, "tensorscope: --bench-steps: the script launched no kernel\n");
    return 1;
  }
  for (auto* ms : {&panels, &graph}) std::sort(ms->begin(), ms->end());
  std::printf("step round trip ms: median %.2f max %.2f over %zu steps (panels); median %.2f max %.2f (graph laid out)\n",
              panels[panels.size() / 2], panels.back(), panels.size(), graph[graph.size() / 2], graph.back());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  QCommandLineParser parser;
  parser.setApplicationDescription("Tensorscope: a debugger for the lazy tensor engine");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addPositionalArgument("file", "Tensor script (.py) or recording (.tsrec) to open", "[script.py|run.tsrec]");
  QCommandLineOption device("device", "Device to realize on: C, INTERP, OPENCL:0, VULKAN:0, CUDA:0 where present (default: the last one used, at first C)", "device");
  QCommandLineOption run("run", "Run the script at startup");
  QCommandLineOption screenshot("screenshot",
                                "Run, wait for the run and the graph layout, save the window as PNG, quit", "file.png");
  QCommandLineOption svg("export-svg", "Run, wait for the run and the graph layout, export the graph as SVG, quit",
                         "file.svg");
  QCommandLineOption timeout("timeout", "Longest wait of --screenshot/--export-svg, in seconds (default 120)",
                             "seconds", "120");
  QCommandLineOption benchSteps("bench-steps", "Benchmark: press F10 N times on the script, print the round trips, quit",
                                "N");
  QCommandLineOption theme("theme", "Colours for this run: system, light or dark (default: the last one picked in View ▸ Theme)",
                           "theme");
  QCommandLineOption presentation("presentation", "View ▸ Presentation for this run: larger fonts, high contrast, the "
                                                  "Explain pane");
  QCommandLineOption dock("dock", "Bring a dock to the front of its tab group: script, console, properties, events, "
                                  "kernels, kernel, buffers, explain, timeline", "name");
  parser.addOptions({device, run, screenshot, svg, timeout, benchSteps, theme, presentation, dock});

  // --help, --version and a bad command line are answered on the terminal before a QApplication exists: it
  // needs a display (a terminal over ssh, a CI job), and none of these does.
  QStringList arguments;
  for (int i = 0; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);
  if (!parser.parse(arguments) || parser.isSet("help") || parser.isSet("help-all") || parser.isSet("version")) {
    QCoreApplication terminal(argc, argv);
    QCoreApplication::setApplicationName("Tensorscope");
    QCoreApplication::setApplicationVersion(TS_VERSION);
    parser.process(terminal);  // prints the help, the version or the error, and exits
    return 0;
  }

  QApplication app(argc, argv);
  QApplication::setApplicationName("Tensorscope");
  QApplication::setOrganizationName("Tensorscope");
  QApplication::setApplicationVersion(TS_VERSION);
  parser.process(app);

  const QStringList args = parser.positionalArguments();
  // Checked before the window exists: a message box would wait forever in a batch run.
  if (!args.isEmpty() && !QFileInfo(args.first()).isReadable()) {
    std::fprintf(stderr, "tensorscope: cannot read %s\n", qPrintable(args.first()));
    return 1;
  }
  tsui::MainWindow window;
  if (parser.isSet(device)) window.setDevice(parser.value(device).toUpper());  // else the last one used
  if (parser.isSet(theme)) window.setTheme(tsui::themeFromName(parser.value(theme).toLower()), false);
  if (parser.isSet(presentation)) window.setPresentation(true, false);
  if (parser.isSet(dock))
    if (auto* d = window.findChild<QDockWidget*>(parser.value(dock).toLower())) {
      d->show();
      d->raise();
    }
  if (!args.isEmpty() && args.first().endsWith(".tsrec", Qt::CaseInsensitive)) {
    QString error;  // on the terminal, not in a dialog: a batch run must not wait for a click
    if (!window.openRecording(args.first(), &error)) {
      std::fprintf(stderr, "tensorscope: %s\n", qPrintable(error));
      return 2;
    }
    std::printf("tensorscope: opened %lld events of %s in %.2f s\n", static_cast<long long>(window.lastOpenTiming().events),
                qPrintable(args.first()), window.lastOpenTiming().seconds);
  } else if (!args.isEmpty() && !window.openFile(args.first())) {
    return 1;
  }
  BatchTasks tasks{parser.value(screenshot), parser.value(svg), parser.value(timeout).toInt()};
  if (tasks.timeoutSeconds <= 0) tasks.timeoutSeconds = 120;
  const bool isRecording = !args.isEmpty() && args.first().endsWith(".tsrec", Qt::CaseInsensitive);
  // The runner starts before the window is shown: its Python starts while the window maps (5-14 ms), and what
  // it sends waits in the connection until the event loop runs.
  if (!parser.isSet(benchSteps) && !args.isEmpty() && !isRecording && (parser.isSet(run) || tasks.any()))
    window.runScript();
  window.show();
  if (parser.isSet(benchSteps)) return stepBenchmark(window, parser.value(benchSteps).toInt());
  if (tasks.any()) QTimer::singleShot(0, &window, [&window, tasks] { runBatchTasks(&window, tasks); });
  return QApplication::exec();
}
