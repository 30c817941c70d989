#include "run_recorder.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <unordered_map>

#include "runtime/cache_file.h"

namespace ts {

void RunRecorder::on_event(uint64_t, const Event& event) {
  if (auto* thin = std::get_if<ScheduleEvent>(&event)) {
    schedules.push_back(full_schedule(*thin));
    const ScheduleEvent* s = &schedules.back();
    for (const KernelInfo& k : s->kernels) {
      kernel_index[k.id] = kernels.size();
      kernels.push_back({k, s->schedule_id, {}});
    }
  } else if (auto* r = std::get_if<KernelRunEvent>(&event)) {
    auto it = kernel_index.find(r->kernel_id);
    if (it != kernel_index.end()) {
      kernels[it->second].run = *r;
    } else if (r->replayed) {
      // A jit replay: no schedule made it. It computes what the captured launch computed.
      RecordedKernel k;
      auto captured = kernel_index.find(r->replay_of);
      if (captured != kernel_index.end()) {
        k.info = kernels[captured->second].info;
        k.schedule_id = kernels[captured->second].schedule_id;
      } else {
        k.schedule_id = -1;
      }
      k.info.id = r->kernel_id;
      k.info.name = r->name;
      k.info.device = r->device;
      k.run = *r;
      kernel_index[r->kernel_id] = kernels.size();
      kernels.push_back(std::move(k));
    }
  } else if (auto* t = std::get_if<AutotuneTrialEvent>(&event)) {
    trials[t->kernel_id].push_back(*t);
  }
}

static std::string file_stem(const RecordedKernel& k) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "k%03d_", k.info.id);
  return buf + ts::file_stem(k.info.name);  // a long name is shortened with a hash: file names have 255 bytes
}

static std::string extension_of(const std::string& renderer) {
  if (renderer == "C") return ".c";
  if (renderer == "OpenCL C") return ".cl";
  if (renderer == "GLSL") return ".comp";
  if (renderer == "SPIR-V") return ".spvasm";
  if (renderer == "CUDA C") return ".cu";
  if (renderer == "PTX") return ".ptx";
  return ".txt";
}

// Up to this many kernels kernels.json is indented for people; above, it has one kernel per line.
constexpr size_t kIndentedKernels = 1000;

void write_manifest(const RunRecorder& rec, const std::string& dir, const std::string& script, const std::string& device) {
  namespace fs = std::filesystem;
  using nlohmann::json;
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream f(fs::path(dir) / name, std::ios::binary);
    if (!f) throw std::runtime_error("cannot write " + (fs::path(dir) / name).string());
    f << text;
    if (!f) throw std::runtime_error("cannot write " + (fs::path(dir) / name).string());
  };
  // Each distinct listing is written once, under the name of the first kernel that had it; later
  // kernels with the same text (same extension) name that file.
  std::unordered_map<std::string, std::string> file_of;  // extension '\0' text → file name
  auto write_once = [&](const std::string& name, const std::string& ext, const std::string& text) {
    std::string key;
    key.reserve(ext.size() + 1 + text.size());
    key.append(ext).push_back('\0');
    key.append(text);
    auto [it, fresh] = file_of.emplace(std::move(key), name);
    if (fresh) write(name, text);
    return it->second;
  };
  // What a KernelCode was written as (its "ir", "ir_passes", "sources", "device_renderer"): the launches
  // of one kernel share one KernelCode, so a training loop looks each listing up once.
  struct CodeFiles {
    json ir, passes, sources;
  };
  std::unordered_map<const KernelCode*, CodeFiles> code_files;
  auto files_of = [&](const KernelCode& code, const std::string& stem) -> const CodeFiles& {
    auto known = code_files.find(&code);
    if (known != code_files.end()) return known->second;
    CodeFiles f;
    // The final listing first, so that it keeps its own name (stem.ir.txt) and the passes that left the
    // kernel as it ends point at it.
    f.ir = code.ir.empty() ? json(nullptr) : json(write_once(stem + ".ir.txt", ".ir.txt", code.ir.back().ir()));
    f.passes = json::array();
    for (size_t p = 0; p < code.ir.size(); p++) {
      std::string name = stem + "." + std::to_string(p) + "_" + code.ir[p].pass + ".ir.txt";
      f.passes.push_back({{"pass", code.ir[p].pass}, {"file", write_once(name, ".ir.txt", code.ir[p].ir())}});
    }
    f.sources = json::object();
    for (const std::string& language : code.languages()) {  // every renderer's listing, rendered now
      const SourceListing& s = *code.listing(language);
      const std::string ext = extension_of(s.renderer);
      f.sources[s.renderer] = write_once(stem + ext, ext, s.code);
    }
    return code_files.emplace(&code, std::move(f)).first->second;
  };
  auto buffers = [](const std::vector<BufferInfo>& bs) {
    json a = json::array();
    for (auto& b : bs) a.push_back({{"node", b.node_uid}, {"shape", b.shape}, {"dtype", b.dtype}});
    return a;
  };
  json kernels = json::array();
  for (const RecordedKernel& k : rec.kernels) {
    json j;
    j["id"] = k.info.id;
    j["name"] = k.info.name;
    j["device"] = k.info.device;
    j["schedule"] = k.schedule_id;
    json nodes = json::array();
    for (size_t i = 0; i < k.info.node_uids.size() && i < k.info.ops.size(); i++)
      nodes.push_back({{"uid", k.info.node_uids[i]}, {"op", k.info.ops[i]}});
    j["nodes"] = nodes;
    j["inputs"] = buffers(k.info.inputs);
    j["outputs"] = buffers(k.info.outputs);
    j["boundary_reasons"] = k.info.boundary_reasons;
    json decisions = json::array();
    for (const FusionDecision& d : k.info.fusion_decisions)
      decisions.push_back({{"node", d.node_uid}, {"op", d.op}, {"decision", d.stored ? "stored" : "recomputed"},
                           {"evaluations", d.evaluations}, {"flops", d.flops}, {"recompute_flops", d.recompute_flops},
                           {"store_bytes", d.store_bytes}, {"reason", d.reason}});
    j["fusion_decisions"] = std::move(decisions);
    j["flops"] = k.info.flops;  // -1: not known (an older recording)
    j["bytes"] = k.info.bytes;
    // A replay has no code of its own: it ran the captured launch's program.
    const KernelCode* code = k.run.code.get();
    if (!code && k.run.replayed) {
      auto captured = rec.kernel_index.find(k.run.replay_of);
      if (captured != rec.kernel_index.end()) code = rec.kernels[captured->second].run.code.get();
    }
    if (code) {
      const CodeFiles& f = files_of(*code, file_stem(k));
      j["ir"] = f.ir;
      j["ir_passes"] = f.passes;
      j["sources"] = f.sources;
      j["device_renderer"] = code->device_renderer;
      // the optimization actions: the plan asked for, where it came from, what the passes applied
      json applied = json::array();
      for (size_t at = 0; at < code->applied.size();) {
        const size_t space = std::min(code->applied.find(' ', at), code->applied.size());
        applied.push_back(code->applied.substr(at, space - at));
        at = space + 1;
      }
      j["actions"] = {{"plan", code->plan}, {"from", code->plan_from}, {"applied", std::move(applied)}};
    } else {
      j["ir"] = nullptr;
      j["ir_passes"] = json::array();
      j["sources"] = json::object();
      j["device_renderer"] = "";
      j["actions"] = nullptr;
    }
    j["time_ms"] = k.run.time_ms;
    j["compile_ms"] = k.run.compile_ms;
    j["compile_cache_hit"] = k.run.compile_cache_hit;
    if (k.run.replayed) j["replay_of"] = k.run.replay_of;
    if (auto t = rec.trials.find(k.info.id); t != rec.trials.end()) {
      json trials = json::array();
      for (const AutotuneTrialEvent& a : t->second)
        trials.push_back({{"plan", a.plan}, {"applied", a.applied}, {"outcome", trial_outcome_name(a.outcome)},
                          {"compile_ms", a.compile_ms}, {"time_ms", a.time_ms}, {"reason", a.reason}});
      j["autotune_trials"] = std::move(trials);
    }
    kernels.push_back(std::move(j));
  }
  if (kernels.size() <= kIndentedKernels) {
    json manifest = {{"script", script}, {"device", device}, {"kernels", std::move(kernels)}};
    write("kernels.json", manifest.dump(2) + "\n");
    return;
  }
  // A long run (a training loop): one kernel per line, a fifth of the indented size.
  std::string text = "{\"script\": " + json(script).dump() + ", \"device\": " + json(device).dump() + ", \"kernels\": [\n";
  for (size_t i = 0; i < kernels.size(); i++) text += kernels[i].dump() + (i + 1 < kernels.size() ? ",\n" : "\n");
  text += "]}\n";
  write("kernels.json", text);
}

}  // namespace ts
