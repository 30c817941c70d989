#include "run_recorder.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace ts {

void RunRecorder::on_event(uint64_t, const Event& event) {
  if (auto* s = std::get_if<ScheduleEvent>(&event)) {
    schedules.push_back(*s);
    for (const KernelInfo& k : s->kernels) {
      kernel_index[k.id] = kernels.size();
      kernels.push_back({k, s->schedule_id, {}});
    }
  } else if (auto* r = std::get_if<KernelRunEvent>(&event)) {
    auto it = kernel_index.find(r->kernel_id);
    if (it != kernel_index.end()) kernels[it->second].run = *r;
  }
}

static std::string file_stem(const RecordedKernel& k) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "k%03d_", k.info.id);
  return buf + k.info.name;
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

void write_manifest(const RunRecorder& rec, const std::string& dir, const std::string& script, const std::string& device) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream f(fs::path(dir) / name);
    if (!f) throw std::runtime_error("cannot write " + (fs::path(dir) / name).string());
    f << text;
  };
  using nlohmann::json;
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
    for (size_t i = 0; i < k.info.node_uids.size(); i++) nodes.push_back({{"uid", k.info.node_uids[i]}, {"op", k.info.ops[i]}});
    j["nodes"] = nodes;
    j["inputs"] = buffers(k.info.inputs);
    j["outputs"] = buffers(k.info.outputs);
    j["boundary_reasons"] = k.info.boundary_reasons;
    std::string stem = file_stem(k);
    static const KernelCode kNoCode;
    const KernelCode& code = k.run.code ? *k.run.code : kNoCode;
    json passes = json::array();
    for (size_t p = 0; p < code.ir.size(); p++) {
      std::string name = stem + "." + std::to_string(p) + "_" + code.ir[p].pass + ".ir.txt";
      write(name, code.ir[p].ir);
      passes.push_back({{"pass", code.ir[p].pass}, {"file", name}});
    }
    if (!code.ir.empty()) {
      write(stem + ".ir.txt", code.ir.back().ir);
      j["ir"] = stem + ".ir.txt";
    } else {
      j["ir"] = nullptr;
    }
    j["ir_passes"] = passes;
    json sources = json::object();
    for (const SourceListing& s : code.sources) {
      std::string name = stem + extension_of(s.renderer);
      write(name, s.code);
      sources[s.renderer] = name;
    }
    j["sources"] = sources;
    j["device_renderer"] = code.device_renderer;
    j["time_ms"] = k.run.time_ms;
    j["compile_ms"] = k.run.compile_ms;
    j["compile_cache_hit"] = k.run.compile_cache_hit;
    kernels.push_back(j);
  }
  json manifest = {{"script", script}, {"device", device}, {"kernels", kernels}};
  write("kernels.json", manifest.dump(2) + "\n");
}

}  // namespace ts
