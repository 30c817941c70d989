#include "runtime/realize.h"

#include <chrono>
#include <map>
#include <set>
#include <stdexcept>
#include <unordered_map>

#include "ir/lower.h"
#include "opt/pass_manager.h"
#include "runtime/buffer_pool.h"
#include "schedule/schedule.h"
#include "tensorscope/session.h"

namespace ts {
namespace {

GraphNodeInfo node_info(const Graph& g, NodeId id) {
  const Node& n = g[id];
  GraphNodeInfo info;
  info.uid = n.uid;
  info.op = op_name(n.op);
  info.op_class = op_class_name(op_class(n.op));
  info.shape = n.shape;
  info.dtype = dtype_name(n.dtype);
  info.arg = node_arg_str(n);
  if (!n.realized())
    for (int i = 0; i < n.num_src; i++) info.srcs.push_back(g[n.src[i]].uid);
  return info;
}

BufferInfo buffer_info(const Graph& g, NodeId id) {
  return BufferInfo{g[id].uid, g[id].shape, dtype_name(g[id].dtype)};
}

// Compiled programs by device and source text: a second launch of the same kernel compiles nothing.
std::unordered_map<std::string, std::shared_ptr<Program>>& program_cache() {
  static std::unordered_map<std::string, std::shared_ptr<Program>> cache;
  return cache;
}

// Listings of kernels in the languages of devices that did not run them, by (language, IR text).
std::unordered_map<std::string, SourceListing>& listing_cache() {
  static std::unordered_map<std::string, SourceListing> cache;
  return cache;
}

}  // namespace

void realize(const std::vector<NodeId>& targets) {
  Graph& g = Graph::get();
  std::vector<NodeId> todo;
  for (NodeId t : targets)
    if (!g[t].realized()) todo.push_back(t);
  if (todo.empty()) return;
  Schedule sched = create_schedule(todo);
  Session& session = Session::get();
  const bool observed = session.observed();

  std::vector<int> kernel_ids;
  for (size_t i = 0; i < sched.items.size(); i++) kernel_ids.push_back(session.next_kernel_id());
  if (observed) {
    ScheduleEvent ev;
    ev.schedule_id = session.next_schedule_id();
    std::map<NodeId, int> kernel_of;
    for (size_t k = 0; k < sched.items.size(); k++)
      for (NodeId f : sched.items[k].fused)
        if (!kernel_of.count(f)) kernel_of[f] = static_cast<int>(k);
    for (NodeId id : sched.nodes) {
      ev.nodes.push_back(node_info(g, id));
      auto it = kernel_of.find(id);
      ev.nodes.back().kernel = it == kernel_of.end() ? -1 : it->second;
    }
    for (size_t k = 0; k < sched.items.size(); k++) {
      const ScheduleItem& item = sched.items[k];
      KernelInfo ki;
      ki.id = kernel_ids[k];
      ki.name = item.name;
      ki.device = DeviceRegistry::at(g[item.output].device).name();
      for (NodeId f : item.fused) {
        ki.node_uids.push_back(g[f].uid);
        ki.ops.push_back(op_name(g[f].op));
      }
      for (NodeId in : item.inputs) ki.inputs.push_back(buffer_info(g, in));
      ki.outputs.push_back(buffer_info(g, item.output));
      ki.boundary_reasons = item.reasons;
      ev.kernels.push_back(std::move(ki));
    }
    session.emit(ev);
  }

  // Buffers of the stored nodes, attached to the graph only when the whole schedule has run.
  std::map<NodeId, std::shared_ptr<Buffer>> out_buffers;
  auto buffer_of = [&](NodeId id) -> Buffer* {
    if (g[id].realized()) return g[id].buffer.get();
    return out_buffers.at(id).get();
  };
  for (size_t k = 0; k < sched.items.size(); k++) {
    const ScheduleItem& item = sched.items[k];
    const Node& out = g[item.output];
    int dev_index = out.device;
    if (item.is_copy) {
      // device → host → device; synchronous, so the source is complete before the copy reads it
      Buffer* src = buffer_of(item.inputs[0]);
      auto dst = pooled_buffer(dev_index, out.dtype, shape_numel(out.shape));
      auto t0 = std::chrono::steady_clock::now();
      if (dst->nbytes()) {
        std::vector<uint8_t> host(dst->nbytes());
        src->device->copy_out(host.data(), src->handle, host.size());
        dst->device->copy_in(dst->handle, host.data(), host.size());
      }
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      out_buffers[item.output] = dst;
      if (observed) {
        KernelRunEvent ev;
        ev.kernel_id = kernel_ids[k];
        ev.name = item.name;
        ev.device = DeviceRegistry::at(dev_index).name();
        ev.compile_cache_hit = true;
        ev.time_ms = ms;
        session.emit(ev);
      }
      continue;
    }
    for (NodeId in : item.inputs)
      if (g[in].device != dev_index)
        throw std::runtime_error("kernel " + item.name + " reads a buffer on " + DeviceRegistry::at(g[in].device).name() +
                                 " but runs on " + DeviceRegistry::at(dev_index).name() + ": use .to(device) first");
    Device& dev = DeviceRegistry::at(dev_index);
    auto out_buf = pooled_buffer(dev_index, out.dtype, shape_numel(out.shape));
    out_buffers[item.output] = out_buf;
    if (out_buf->numel == 0) continue;  // nothing to compute for a zero-size output

    ir::Kernel kernel = lower(item);
    // always on: a few µs per kernel, and an invalid kernel would otherwise fail in a compiler
    if (auto errors = ir::verify(kernel); !errors.empty())
      throw std::logic_error("IR verifier failed for kernel " + kernel.name + " after lowering: " + errors.front());
    std::vector<PassSnapshot> snapshots;
    if (observed) snapshots.push_back({"lower", ir::print(kernel)});
    run_passes(kernel, observed ? &snapshots : nullptr);
    const Renderer* renderer = dev.renderer();
    SourceListing source;
    if (renderer) source = renderer->render(kernel);
    std::string key = std::to_string(dev_index) + "\n" + (renderer ? source.code : ir::print(kernel));
    auto& cache = program_cache();
    bool cache_hit = true;
    double compile_ms = 0;
    auto it = cache.find(key);
    if (it == cache.end()) {
      CompileResult cr = dev.compile(kernel, renderer ? &source : nullptr);
      cache_hit = cr.cache_hit;
      compile_ms = cr.compile_ms;
      it = cache.emplace(key, std::shared_ptr<Program>(std::move(cr.program))).first;
    }
    std::vector<Buffer*> bufs{out_buf.get()};
    for (NodeId in : item.inputs) bufs.push_back(buffer_of(in));
    double ms = it->second->launch(bufs);
    GlobalCounters::kernel_count++;
    GlobalCounters::time_ms += ms;

    if (observed) {
      KernelRunEvent ev;
      ev.kernel_id = kernel_ids[k];
      ev.name = kernel.name;
      ev.device = dev.name();
      ev.ir = std::move(snapshots);
      // every renderer's view of the kernel, whichever device ran it (cached: rendering for a GPU
      // target may run a compiler, e.g. GLSL → SPIR-V or CUDA C → PTX)
      std::string ir_text = ev.ir.empty() ? ir::print(kernel) : ev.ir.back().ir;
      for (const Renderer* r : DeviceRegistry::renderers()) {
        if (r == renderer) {
          ev.sources.push_back(source);
          continue;
        }
        auto& listings = listing_cache();
        std::string lkey = r->language() + "\n" + ir_text;
        auto hit = listings.find(lkey);
        if (hit == listings.end()) hit = listings.emplace(lkey, r->render(kernel)).first;
        ev.sources.push_back(hit->second);
      }
      ev.compile_cache_hit = cache_hit;
      ev.compile_ms = compile_ms;
      ev.time_ms = ms;
      session.emit(ev);
    }
  }
  for (auto& [id, buf] : out_buffers) g.set_realized(id, buf);
}

}  // namespace ts
