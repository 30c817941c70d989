// BEAM search over OptPlans: see autotune.h.
#include "runtime/autotune.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include "opt/pass_manager.h"
#include "runtime/cache_file.h"
#include "runtime/thread_pool.h"
#include "tensorscope/calibrate.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Trial = AutotuneTrialEvent;

constexpr int kRounds = 3;

// The amounts a round tries for each kind of action (ir::AppliedOpt::Kind) on `dev`. An action a device
// cannot take has none (its candidates would render the same source and be skipped as duplicates anyway).
// Candidates are told apart by their rendered source: LOCAL changes only the launch, and the GPU renderers
// write the launch (workgroup size and count) into the source for that reason (cstyle.cpp).
//
// The UPCAST actions try the powers of two and, beside them, every other amount from 3 to 32 that divides one
// of the kernel's loops of that kind (global loops for UPCAST_GLOBAL and REGISTER_TILE, reduce loops for
// UPCAST_REDUCE): a row of 28 is best upcast by 14 in some kernels (a depthwise convolution's weight gradient:
// 0.28 ms, where the best power of two gave 0.43), and an amount that divides no loop would not apply anyway.
// tinygrad's BEAM tries such amounts too (3, 5, 7 among its UPCAST actions).
std::vector<int> candidate_amounts(ir::AppliedOpt::Kind kind, const Device& dev, const ir::Kernel& lowered) {
  switch (kind) {
    case ir::AppliedOpt::UpcastGlobal:
    case ir::AppliedOpt::RegisterTile:
    case ir::AppliedOpt::UpcastReduce: {
      std::vector<int> amounts{0, 2, 4, 8, 16, 32};
      const int64_t loop_kind = kind == ir::AppliedOpt::UpcastReduce ? 0 : ir::kGlobalLoop;
      std::set<int> divisors;
      for (const ir::Inst& in : lowered.insts) {
        if (in.op != ir::Op::Range || in.arg != loop_kind || lowered.insts[in.src[0]].op != ir::Op::Const) continue;
        const int64_t n = static_cast<int64_t>(lowered.insts[in.src[0]].value);
        for (int d = 3; d <= 32; d++)
          if ((d & (d - 1)) != 0 && n % d == 0) divisors.insert(d);
      }
      amounts.insert(amounts.end(), divisors.begin(), divisors.end());
      return amounts;
    }
    case ir::AppliedOpt::Padto: return {4, 8, 16};  // with UPCAST_GLOBAL's default, which then divides the loop
    case ir::AppliedOpt::TransposeTile:  // C only: on or off (tiles of 8)
      return dev.name() == "C" ? std::vector<int>{0, 8} : std::vector<int>{};
    case ir::AppliedOpt::Lanes: {  // devices without workgroups (C, INTERP): off, or the lanes a loop could take
      if (DeviceRegistry::properties(DeviceRegistry::index(dev.name())).max_workgroup_size != 0) return {};
      return {0, 16, 64, 128};
    }
    case ir::AppliedOpt::Threads: {  // C only (its launch action): 1, 2, … the pool's size
      if (dev.name() != "C") return {};
      std::vector<int> counts;
      for (int n = 1; n <= ThreadPool::get().size(); n++) counts.push_back(n);
      return counts;
    }
    case ir::AppliedOpt::Local:     // the workgroup size (64 by default), on devices with workgroups;
    case ir::AppliedOpt::Group:     // lanes per reduce, on devices with local memory too
    case ir::AppliedOpt::GroupTop:
    case ir::AppliedOpt::Tile: {
      const DeviceProperties p = DeviceRegistry::properties(DeviceRegistry::index(dev.name()));
      if (p.max_workgroup_size == 0 || (kind != ir::AppliedOpt::Local && p.local_memory_bytes == 0)) return {};
      std::vector<int> amounts;
      // LOCAL around its default of 64; GROUP's lanes as a GPU wants them (many: wide coalesced loads);
      // GROUPTOP's fewer, for devices whose lanes run one after another (PoCL: 4 or 16 paid on 8 long rows);
      // TILE's edge (T·T threads per workgroup)
      const std::vector<int> tried = kind == ir::AppliedOpt::Local      ? std::vector<int>{16, 32, 128, 256}
                                     : kind == ir::AppliedOpt::Group    ? std::vector<int>{16, 64, 256}
                                     : kind == ir::AppliedOpt::GroupTop ? std::vector<int>{4, 16, 64}
                                                                        : std::vector<int>{8, 16};
      for (int u : tried)
        if (static_cast<uint64_t>(kind == ir::AppliedOpt::Tile ? u * u : u) <= p.max_workgroup_size) amounts.push_back(u);
      return amounts;
    }
    default: return {};
  }
}
constexpr int kTimedLaunches = 3;
// Candidates are dropped early (first launch over 4x the best, a timed one over 2x) only when their launches
// take longer than this: the first launch of a freshly loaded microsecond kernel is several times its later
// ones (code and data not in the caches yet), and timing such a kernel fully costs less than a millisecond.
constexpr double kEarlyDropMinMs = 0.2;
// A launch this long is timed once, its first launch being the measurement: warming caches and code is
// nothing beside it, and the launches a median takes would cost the search seconds (a 2048² matmul: 0.16 s
// a launch, 4 launches per candidate).
constexpr double kLongLaunchMs = 50;
// When the best candidate so far takes this long, a candidate first runs one part of its rows
// (Program::estimate_launch_ms, the C device) and is dropped when the estimate is over 4x the best: a
// search of a 2048² matmul otherwise waits 5-8 s for each launch of a plan without upcasts, one of a 1024²
// matmul (best 8-20 ms, depending on the machine) 0.3-0.6 s. Below this the part's fixed costs (a thread
// start, cold caches) make the estimate unreliable and a whole launch costs little.
constexpr double kProbeMinBestMs = 2;
constexpr int kProbeParts = 32;
constexpr double kFailed = 1e300;  // the time of a candidate that failed: never in the beam's lead

int debug_level() {  // DEBUG, read once (as the debug printer does)
  static const int level = [] {
    const char* d = std::getenv("DEBUG");
    return d ? std::atoi(d) : 0;
  }();
  return level;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }
double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// A positive number from the environment, or `fallback`.
double env_number(const char* name, double fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  return *end == '\0' && x > 0 ? x : fallback;
}

// The environment of the search (autotune.h), read once.
struct Settings {
  double budget_s = 10;       // TENSORSCOPE_BEAM_SECONDS, per kernel
  double timeout_ms = 2000;   // TENSORSCOPE_BEAM_TIMEOUT_MS, per candidate's compile and per launch
  int jobs = 2;               // TENSORSCOPE_BEAM_JOBS: compiles at once
  bool fresh = false;         // TENSORSCOPE_BEAM_FRESH: do not read the cache
  bool fail_compile = false;  // TENSORSCOPE_BEAM_FAIL_COMPILE: the test hook
  std::vector<std::string> kernels;  // TENSORSCOPE_BEAM_KERNEL: names or IR hashes; empty = every kernel
};

const Settings& settings() {
  static const Settings s = [] {
    Settings s;
    s.budget_s = env_number("TENSORSCOPE_BEAM_SECONDS", s.budget_s);
    s.timeout_ms = env_number("TENSORSCOPE_BEAM_TIMEOUT_MS", s.timeout_ms);
    s.jobs = std::max(1, static_cast<int>(env_number("TENSORSCOPE_BEAM_JOBS", s.jobs)));
    auto flag = [](const char* name) {
      const char* v = std::getenv(name);
      return v && *v && std::string(v) != "0";
    };
    s.fresh = flag("TENSORSCOPE_BEAM_FRESH");
    s.fail_compile = flag("TENSORSCOPE_BEAM_FAIL_COMPILE");
    if (const char* k = std::getenv("TENSORSCOPE_BEAM_KERNEL")) {
      std::stringstream ss(k);
      for (std::string item; std::getline(ss, item, ',');)
        if (!item.empty()) s.kernels.push_back(item);
    }
    return s;
  }();
  return s;
}

std::string hex16(uint64_t h) {
  char out[17];
  std::snprintf(out, sizeof out, "%016" PRIx64, h);
  return out;
}

std::string format_ms(double ms) {
  char out[32];
  std::snprintf(out, sizeof out, ms < 1 ? "%.4f ms" : "%.2f ms", ms);
  return out;
}

// The first line of an error message (a compiler's full output goes to DEBUG=2).
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// A failed compile in one line: the device's first line and the compiler's first "error" line, if it has one.
std::string compile_error(const std::string& text) {
  std::istringstream lines(text);
  std::string out;
  std::getline(lines, out);
  for (std::string line; std::getline(lines, line);)
    if (line.find("error") != std::string::npos && line.rfind("command:", 0) != 0) return out + " | " + line;
  return out;
}

// <cache>/autotune.db: one row per (device identity, lowered IR) searched.
class PlanCache {
 public:
  struct Row {
    std::string plan;
    double ms = 0, default_ms = 0, seconds = 0;
    int candidates = 0;
  };

  PlanCache() {
    const fs::path path = fs::path(peak_cache_path()).parent_path() / "autotune.db";
    std::error_code ec;
    fs::create_directories(path.parent_path(), ec);
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                        nullptr) != SQLITE_OK ||
        sqlite3_exec(db_,
                     "PRAGMA busy_timeout = 5000;"
                     "CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, kernel TEXT, plan TEXT, ms REAL, "
                     "default_ms REAL, candidates INTEGER, seconds REAL)",
                     nullptr, nullptr, nullptr) != SQLITE_OK) {
      std::fprintf(stderr, "tensorscope: warning: the autotune cache %s cannot be used (%s); searching without it\n",
                   path.c_str(), db_ ? sqlite3_errmsg(db_) : "cannot open");
      sqlite3_close(db_);
      db_ = nullptr;
    }
  }
  ~PlanCache() { sqlite3_close(db_); }

  std::optional<Row> find(const std::string& key) {
    if (!db_) return std::nullopt;
    sqlite3_stmt* st = nullptr;
    std::optional<Row> row;
    if (sqlite3_prepare_v2(db_, "SELECT plan, ms, default_ms, candidates, seconds FROM plans WHERE key = ?", -1, &st,
                           nullptr) == SQLITE_OK) {
      sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
      if (sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char* plan = sqlite3_column_text(st, 0);
        row = Row{plan ? reinterpret_cast<const char*>(plan) : "", sqlite3_column_double(st, 1),
                  sqlite3_column_double(st, 2), sqlite3_column_double(st, 4), sqlite3_column_int(st, 3)};
      }
    }
    sqlite3_finalize(st);
    return row;
  }

  void store(const std::string& key, const std::string& kernel, const Row& row) {
    if (!db_) return;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db_, "INSERT OR REPLACE INTO plans VALUES (?, ?, ?, ?, ?, ?, ?)", -1, &st, nullptr) ==
        SQLITE_OK) {
      sqlite3_bind_text(st, 1, key.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 2, kernel.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_text(st, 3, row.plan.c_str(), -1, SQLITE_TRANSIENT);
      sqlite3_bind_double(st, 4, row.ms);
      sqlite3_bind_double(st, 5, row.default_ms);
      sqlite3_bind_int(st, 6, row.candidates);
      sqlite3_bind_double(st, 7, row.seconds);
      sqlite3_step(st);
    }
    sqlite3_finalize(st);
  }

 private:
  sqlite3* db_ = nullptr;
};

PlanCache& plan_cache() {
  static PlanCache cache;
  return cache;
}

bool same(const ir::OptPlan& a, const ir::OptPlan& b) { return std::equal(a.amount, a.amount + ir::OptPlan::kKinds, b.amount); }

// One candidate plan on its way through the search: made (passes + render), compiled, timed, reported.
struct Candidate {
  ir::OptPlan plan;
  ir::Kernel kernel;  // after the passes
  SourceListing source;
  uint64_t hash = 0;  // of the source
  std::shared_ptr<Program> program;
  Trial trial;  // its event, filled in as it goes
  double ms = kFailed;
  bool done = false;  // its outcome is known (failed, duplicate, timed)
};

// What the search keeps of a source it has compiled and timed.
struct Timed {
  double ms = kFailed;
  std::string plan, applied;
  std::shared_ptr<Program> program;  // null when it failed
};

class Search {
 public:
  Search(const ir::Kernel& lowered, Device& dev, const std::vector<Buffer*>& buffers, Trial base)
      : lowered_(lowered), dev_(dev), renderer_(*dev.renderer()), buffers_(buffers), base_(std::move(base)),
        s_(settings()), t0_(Clock::now()) {}

  // Times each plan (a plan whose source was timed before costs nothing) and reports every one as a trial.
  // Returns the median ms of each plan (kFailed for one that failed), or fewer entries than plans when the
  // time budget ran out: the rest were not considered.
  std::vector<double> evaluate(const std::vector<ir::OptPlan>& plans) {
    std::vector<Candidate> cs(plans.size());
    std::vector<size_t> to_compile;
    std::map<uint64_t, size_t> first_of;  // source hash → the first candidate of this batch with it
    for (size_t i = 0; i < plans.size(); i++) {
      Candidate& c = cs[i];
      make(plans[i], c);
      if (c.done) continue;
      source_of_[c.trial.plan] = c.hash;
      if (auto t = timed_.find(c.hash); t != timed_.end()) {
        duplicate(c, t->second.plan, t->second.ms);
      } else if (auto [it, fresh] = first_of.emplace(c.hash, i); fresh) {
        to_compile.push_back(i);
      }
    }
    std::vector<double> out;
    const size_t jobs = dev_.concurrent_compiles() ? static_cast<size_t>(s_.jobs) : 1;
    size_t next_report = 0;
    for (size_t at = 0; at < to_compile.size(); at += jobs) {
      // a batch is not started when the one before (its compiles and launches) would not fit in the budget
      // again: a 2048² matmul's candidates take seconds each, and the budget is the search's, not a floor
      if (seconds_since(t0_) + last_batch_s_ >= s_.budget_s) break;
      const auto batch_start = Clock::now();
      const std::vector<size_t> chunk(to_compile.begin() + static_cast<std::ptrdiff_t>(at),
                                      to_compile.begin() + static_cast<std::ptrdiff_t>(std::min(at + jobs, to_compile.size())));
      compile(cs, chunk);
      for (size_t i : chunk) {
        if (!cs[i].done) time(cs[i]);
        timed_[cs[i].hash] = {cs[i].ms, cs[i].trial.plan, cs[i].trial.applied, cs[i].program};
      }
      last_batch_s_ = seconds_since(batch_start);
      // report in plan order what is known now: duplicates of this batch follow the candidate they copy
      for (; next_report < cs.size(); next_report++) {
        Candidate& c = cs[next_report];
        if (!c.done) {
          auto t = timed_.find(c.hash);
          if (t == timed_.end()) break;  // not compiled yet
          duplicate(c, t->second.plan, t->second.ms);
        }
        report(c.trial);
        out.push_back(c.ms);
      }
    }
    if (to_compile.empty())
      for (; next_report < cs.size(); next_report++) {
        report(cs[next_report].trial);
        out.push_back(cs[next_report].ms);
      }
    return out;
  }

  // Times a plan timed before once more (its program is kept), with nothing to drop it against. kFailed when
  // the plan was never timed or fails now. The trial is returned, not reported: the caller decides its outcome.
  double retime(const std::string& plan, Trial& trial) {
    trial = base_;
    trial.plan = plan;
    const Timed* t = timed(plan);
    if (!t || !t->program) return kFailed;
    Candidate c;
    c.program = t->program;
    c.trial = trial;
    c.trial.applied = t->applied;
    best_ms_ = kFailed;
    time(c);
    trial = c.trial;
    return c.ms;
  }

  void report(const Trial& trial) const {
    if (debug_level() >= 2)
      std::printf("BEAM %s: '%s' %s %s%s%s\n", base_.name.c_str(), trial.plan.c_str(), trial_outcome_name(trial.outcome),
                  trial.time_ms > 0 ? format_ms(trial.time_ms).c_str() : "", trial.reason.empty() ? "" : ": ",
                  trial.reason.c_str());
    Session& session = Session::get();
    if (session.observed()) session.emit(trial);
  }

  // What the passes applied for a plan that was timed ("" when none was).
  std::string applied_of(const std::string& plan) const {
    const Timed* t = timed(plan);
    return t ? t->applied : std::string();
  }

  double best_ms_ = kFailed;
  int compiled_ = 0;
  double seconds() const { return seconds_since(t0_); }
  const Trial& base() const { return base_; }

 private:
  // The passes and the renderer: a plan they cannot carry out is a failed candidate (never compiled).
  void make(const ir::OptPlan& plan, Candidate& c) {
    c.plan = plan;
    c.trial = base_;
    c.trial.plan = plan.str();
    c.kernel = lowered_;
    c.kernel.plan = plan;
    try {
      run_passes(c.kernel, nullptr, -1, /*gated=*/false);
      dev_.plan_launch(c.kernel);
      c.source = renderer_.render(c.kernel);
    } catch (const std::exception& e) {
      fail(c, Trial::FailedCompile, std::string("the passes cannot carry out this plan: ") + e.what());
      return;
    }
    c.trial.applied = ir::applied_str(c.kernel);
    if (s_.fail_compile && !same(plan, {}))  // the test hook: a line every C-family compiler rejects
      c.source.code = "#error test hook TENSORSCOPE_BEAM_FAIL_COMPILE\n" + c.source.code;
    // The dedup key: the source and the applied actions, which include the launch actions that do not change
    // the source (THREADS(2) and one thread render the same C). Other actions that apply show in the source.
    c.hash = fnv1a(c.trial.applied + "\n" + c.source.code);
  }

  static void fail(Candidate& c, Trial::Outcome outcome, std::string reason) {
    c.trial.outcome = outcome;
    c.trial.reason = std::move(reason);
    c.ms = kFailed;
    c.done = true;
  }

  static void duplicate(Candidate& c, const std::string& of, double ms) {
    c.trial.outcome = Trial::Duplicate;
    c.trial.reason = "the same source as '" + of + "': not compiled again";
    c.ms = ms;
    c.done = true;
  }

  // Compiles the candidates `chunk` of `cs` at once, one thread each, under the compile time limit.
  void compile(std::vector<Candidate>& cs, const std::vector<size_t>& chunk) {
    std::exception_ptr lost;  // a lost device ends the search, after every thread is joined
    std::mutex lost_mutex;
    auto one = [&](Candidate& c) {
      const ScopedCompileLimit limit(s_.timeout_ms);
      const auto t0 = Clock::now();
      try {
        CompileResult cr = dev_.compile(c.kernel, &c.source);
        c.trial.compile_ms = cr.compile_ms;  // 0 when the device's compile cache had the program
        if (cr.compile_ms > s_.timeout_ms) {  // an in-process compiler: it could not be stopped, so drop it now
          fail(c, Trial::Timeout,
               "compiling took " + format_ms(cr.compile_ms) + ", over the " + format_ms(s_.timeout_ms) + " limit");
          return;
        }
        c.program = std::move(cr.program);
      } catch (const DeviceLostError&) {
        std::lock_guard lock(lost_mutex);
        lost = std::current_exception();
      } catch (const CompileTimeoutError& e) {
        c.trial.compile_ms = ms_since(t0);
        fail(c, Trial::Timeout, e.what());
      } catch (const std::exception& e) {
        if (debug_level() >= 2) std::printf("BEAM %s: '%s': %s\n", base_.name.c_str(), c.trial.plan.c_str(), e.what());
        fail(c, Trial::FailedCompile, compile_error(e.what()));
      }
    };
    if (chunk.size() == 1) {
      one(cs[chunk[0]]);
    } else {
      std::vector<std::thread> threads;
      for (size_t i : chunk) threads.emplace_back(one, std::ref(cs[i]));
      for (std::thread& t : threads) t.join();
    }
    if (lost) std::rethrow_exception(lost);
    for (size_t i : chunk) compiled_ += cs[i].program != nullptr;
  }

  // One launch untimed, then the median of kTimedLaunches, dropping it early when it is clearly slower than
  // the best so far or a launch returns past the time limit.
  void time(Candidate& c) {
    Trial& t = c.trial;
    auto launch = [&](double& ms) {  // false: past the limit
      const auto t0 = Clock::now();
      ms = launch_on_device(*c.program, buffers_);
      const double wall_ms = ms_since(t0);
      if (wall_ms <= s_.timeout_ms) return true;
      t.time_ms = ms;
      fail(c, Trial::Timeout, "a launch took " + format_ms(wall_ms) + ", over the " + format_ms(s_.timeout_ms) +
                                  " limit: not launched again");
      return false;
    };
    try {
      if (best_ms_ < kFailed && best_ms_ >= kProbeMinBestMs) {
        const auto t0 = Clock::now();
        if (auto estimate = c.program->estimate_launch_ms(buffers_, kProbeParts); estimate && *estimate > 4 * best_ms_) {
          t.time_ms = *estimate;
          fail(c, Trial::DroppedSlow, "1/" + std::to_string(kProbeParts) + " of its rows took " + format_ms(ms_since(t0)) +
                                          ": about " + format_ms(*estimate) + " in all, over 4x the best (" +
                                          format_ms(best_ms_) + "): not launched");
          return;
        }
      }
      double first = 0;
      if (!launch(first)) return;
      if (first > 4 * best_ms_ && first > kEarlyDropMinMs) {
        t.time_ms = first;
        fail(c, Trial::DroppedSlow, "its first launch took " + format_ms(first) + ", over 4x the best (" +
                                        format_ms(best_ms_) + "): not timed");
        return;
      }
      std::vector<double> runs;
      const bool long_launch = first >= kLongLaunchMs;  // long enough to be its own measurement
      if (long_launch) runs.push_back(first);
      for (int i = 0; i < (long_launch ? 0 : kTimedLaunches); i++) {
        double ms = 0;
        if (!launch(ms)) return;
        runs.push_back(ms);
        if (ms > 2 * best_ms_ && ms > kEarlyDropMinMs) {  // clearly slower: not worth the other launches
          t.outcome = Trial::DroppedSlow;
          t.reason = "a timed launch took " + format_ms(ms) + ", over 2x the best (" + format_ms(best_ms_) + ")";
          break;
        }
      }
      std::sort(runs.begin(), runs.end());
      c.ms = t.time_ms = runs[runs.size() / 2];
      if (t.outcome != Trial::DroppedSlow) {
        t.outcome = Trial::Timed;
        t.reason = runs.size() == 1 ? "one launch (over " + format_ms(kLongLaunchMs) + ": no warm-up, no median)"
                                    : "median of " + std::to_string(runs.size()) + " launches";
      }
      best_ms_ = std::min(best_ms_, c.ms);
      c.done = true;
    } catch (const DeviceLostError&) {
      throw;
    } catch (const std::exception& e) {
      fail(c, Trial::FailedRun, first_line(e.what()));
    }
  }

  const ir::Kernel& lowered_;
  Device& dev_;
  const Renderer& renderer_;
  const std::vector<Buffer*>& buffers_;
  const Trial base_;  // kernel id, name, IR hash, device: what every trial shares
  const Settings& s_;
  const Clock::time_point t0_;
  // How the source of a plan did (a duplicate's: the plan it copies), or null when it was not timed.
  const Timed* timed(const std::string& plan) const {
    auto source = source_of_.find(plan);
    if (source == source_of_.end()) return nullptr;
    auto t = timed_.find(source->second);
    return t == timed_.end() ? nullptr : &t->second;
  }

  std::map<uint64_t, Timed> timed_;             // source hash → how it did
  std::map<std::string, uint64_t> source_of_;  // plan (OptPlan::str) → its source's hash
  double last_batch_s_ = 0;  // how long the last batch of candidates took (compiles and launches), seconds
};

struct Ranked {
  ir::OptPlan plan;
  double ms = kFailed;
};

}  // namespace

int beam_width() {
  static const int width = [] {
    const char* b = std::getenv("TENSORSCOPE_BEAM");
    return b ? std::max(0, std::atoi(b)) : 0;
  }();
  return width;
}

BeamResult beam_search(const ir::Kernel& lowered, int device_index, const std::vector<Buffer*>& buffers, int kernel_id) {
  static std::mutex mutex;  // one search at a time: candidates are timed on an otherwise idle device
  std::lock_guard lock(mutex);
  Device& dev = DeviceRegistry::at(device_index);
  const int width = beam_width();
  if (!dev.renderer() || width <= 0) return {};
  const Settings& s = settings();
  const std::string listing = ir::print(lowered);
  Trial base;
  base.kernel_id = kernel_id;
  base.name = lowered.name;
  base.ir_hash = hex16(fnv1a(listing));
  base.device = dev.name();
  if (!s.kernels.empty() &&
      std::none_of(s.kernels.begin(), s.kernels.end(), [&](const std::string& k) { return k == base.name || k == base.ir_hash; }))
    return {};
  const std::string key = hex16(fnv1a(device_identity(dev.name()) + "\n" + listing));
  if (auto cached = s.fresh ? std::nullopt : plan_cache().find(key)) {
    if (debug_level() >= 1) std::printf("BEAM %s: cached plan '%s'\n", lowered.name.c_str(), cached->plan.c_str());
    Trial t = base;
    t.plan = cached->plan;
    t.time_ms = cached->ms;
    t.outcome = Trial::CacheHit;
    char reason[160];
    std::snprintf(reason, sizeof reason, "found by an earlier search (%d candidates in %.2f s; the default took %s)",
                  cached->candidates, cached->seconds, format_ms(cached->default_ms).c_str());
    t.reason = reason;
    Session& session = Session::get();
    if (session.observed()) session.emit(t);
    return {ir::OptPlan::parse(cached->plan), "autotune cache"};
  }

  Search search(lowered, dev, buffers, base);
  const std::vector<double> first = search.evaluate({ir::OptPlan{}});
  const double default_ms = first.empty() ? kFailed : first[0];
  if (default_ms >= kFailed) {  // the default itself failed or timed out: nothing to compare with, keep it
    if (debug_level() >= 1) std::printf("BEAM %s: the default plan could not be timed; not searched\n", lowered.name.c_str());
    return {{}, "BEAM search"};
  }
  std::vector<Ranked> beam{{{}, default_ms}};
  double best_ms = default_ms;
  for (int round = 0; round < kRounds && search.seconds() < s.budget_s; round++) {
    std::vector<Ranked> pool = beam;
    std::vector<ir::OptPlan> fresh;
    for (const Ranked& parent : beam)
      for (int kind = 0; kind < ir::OptPlan::kKinds; kind++)
        for (int amount : candidate_amounts(static_cast<ir::AppliedOpt::Kind>(kind), dev, lowered)) {
          ir::OptPlan plan = parent.plan;
          plan.set(static_cast<ir::AppliedOpt::Kind>(kind), amount);
          if (same(plan, parent.plan)) continue;
          bool known = false;
          for (const Ranked& t : pool) known = known || same(t.plan, plan);
          for (const ir::OptPlan& f : fresh) known = known || same(f, plan);
          if (!known) fresh.push_back(plan);
        }
    const std::vector<double> ms = search.evaluate(fresh);
    for (size_t i = 0; i < ms.size(); i++) pool.push_back({fresh[i], ms[i]});
    std::stable_sort(pool.begin(), pool.end(), [](const Ranked& a, const Ranked& b) { return a.ms < b.ms; });
    pool.resize(std::min<size_t>(pool.size(), static_cast<size_t>(width)));
    beam = pool;
    const bool improved = beam.front().ms < 0.99 * best_ms;
    best_ms = std::min(best_ms, beam.front().ms);
    if (!improved) break;
  }
  // The default was timed first, the others later: time the winner and the default once more, side by side,
  // and keep the default unless the winner still beats it by more than the timing noise of a launch (1%).
  const ir::OptPlan winner = beam.front().plan;
  ir::OptPlan chosen;
  double chosen_ms = default_ms, again_default_ms = default_ms;
  if (!same(winner, {}) && beam.front().ms < 0.99 * default_ms) {
    Trial d, w;
    again_default_ms = search.retime("", d);
    const double winner_ms = search.retime(winner.str(), w);
    const bool wins = winner_ms < 0.99 * again_default_ms;
    if (wins) {
      chosen = winner;
      chosen_ms = winner_ms;
    } else {
      chosen_ms = again_default_ms;
    }
    char reason[200];
    std::snprintf(reason, sizeof reason, "timed again beside '%s': %s vs %s", winner.str().c_str(),
                  format_ms(again_default_ms).c_str(), format_ms(winner_ms).c_str());
    d.reason = w.reason = reason;
    d.outcome = wins ? Trial::Timed : Trial::Kept;
    w.outcome = wins ? Trial::Kept : Trial::Timed;
    if (wins) {
      std::snprintf(reason, sizeof reason, "%.2fx the default (%s), timed again side by side",
                    winner_ms > 0 ? again_default_ms / winner_ms : 1.0, format_ms(again_default_ms).c_str());
      w.reason = reason;
    } else {
      d.reason = "the default: '" + winner.str() + "' no longer beats it by over 1% when timed again beside it";
    }
    search.report(d);
    search.report(w);
  } else {
    Trial d = search.base();
    d.applied = search.applied_of("");
    d.time_ms = default_ms;
    d.outcome = Trial::Kept;
    d.reason = "the default: no candidate beats it by over 1%";
    search.report(d);
  }
  const double seconds = search.seconds();
  plan_cache().store(key, lowered.name, {chosen.str(), chosen_ms, again_default_ms, seconds, search.compiled_});
  if (debug_level() >= 1)
    std::printf("BEAM %s: %d candidates compiled in %.2f s; default %.4f ms, chosen '%s' %.4f ms (%.2fx)\n",
                lowered.name.c_str(), search.compiled_, seconds, again_default_ms, chosen.str().c_str(), chosen_ms,
                chosen_ms > 0 ? again_default_ms / chosen_ms : 1.0);
  return {chosen, "BEAM search"};
}

}  // namespace ts
