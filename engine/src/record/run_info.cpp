// The run's description, as a recording's `run` table and the connection's first frame hold it.
#include <chrono>

#include "record/json_writer.h"
#include "tensorscope/device.h"
#include "tensorscope/recording.h"

namespace ts {

RunInfo new_run_info(const std::string& script_path, const std::string& script_text,
                     const std::vector<std::string>& argv, const std::string& device) {
  RunInfo r;
  r.script_path = script_path;
  r.script_text = script_text;
  r.argv = argv;
  const int index = device.empty() ? DeviceRegistry::default_index() : DeviceRegistry::index(device);
  const DeviceProperties p = DeviceRegistry::properties(index);
  r.device = p.name;
  JsonWriter w;
  w.begin_object();
  w.key("name").value(p.name);
  w.key("backend").value(p.backend);
  w.key("description").value(p.description);
  w.key("vendor").value(p.vendor);
  w.key("driver").value(p.driver);
  w.key("memory_bytes").value(p.memory_bytes);
  w.key("max_workgroup_size").value(p.max_workgroup_size);
  w.key("local_memory_bytes").value(p.local_memory_bytes);
  w.key("subgroup_size").value(static_cast<uint64_t>(p.subgroup_size));
  w.key("vector_bytes").value(static_cast<uint64_t>(p.vector_bytes));
  w.key("vector_registers").value(static_cast<uint64_t>(p.vector_registers));
  w.key("can_run").value(p.can_run);
  w.key("float16").value(p.float16);
  w.key("note").value(p.note);
  w.end_object();
  r.device_properties = w.take();
  r.version = TENSORSCOPE_VERSION_STRING;
  r.start_time_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch()).count();
  return r;
}

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace ts
