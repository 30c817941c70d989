#include "graph_svg.h"

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

namespace ts {

static const char* fill_for(const std::string& op_class) {
  if (op_class == "load") return "#b3d4f5";
  if (op_class == "const") return "#e0e0e0";
  if (op_class == "movement") return "#f7e3a1";
  if (op_class == "elementwise") return "#bfe6bf";
  if (op_class == "reduce") return "#f5b7b1";
  return "#d7bde2";
}

static std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    o += c;
  }
  return o;
}

std::string graph_to_dot(const std::vector<ScheduleEvent>& schedules) {
  struct N {
    GraphNodeInfo info;
    int kernel_id = -1;
  };
  std::map<uint64_t, N> nodes;
  std::vector<uint64_t> order;
  std::map<int, std::string> kernel_names;
  for (const ScheduleEvent& s : schedules) {
    for (const GraphNodeInfo& n : s.nodes) {
      int kid = n.kernel >= 0 ? s.kernels[n.kernel].id : -1;
      auto it = nodes.find(n.uid);
      if (it == nodes.end()) {
        nodes[n.uid] = {n, kid};
        order.push_back(n.uid);
      } else if (it->second.info.op == "BUFFER" && n.op != "BUFFER") {
        it->second = {n, kid};
      }
    }
    for (const KernelInfo& k : s.kernels) kernel_names[k.id] = k.name;
  }
  std::ostringstream o;
  o << "digraph tensorscope {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
       "  edge [color=\"#555555\"];\n";
  std::map<int, std::vector<uint64_t>> by_kernel;
  for (uint64_t uid : order) by_kernel[nodes[uid].kernel_id].push_back(uid);
  for (auto& [kid, uids] : by_kernel) {
    std::string indent = "  ";
    if (kid >= 0) {
      o << "  subgraph cluster_k" << kid << " {\n    label=\"" << esc(kernel_names[kid]) << " (#" << kid
        << ")\";\n    style=\"rounded\"; color=\"#3465a4\"; fontname=\"Helvetica\"; fontsize=11;\n";
      indent = "    ";
    }
    for (uint64_t uid : uids) {
      const GraphNodeInfo& n = nodes[uid].info;
      std::string shape;
      for (size_t i = 0; i < n.shape.size(); i++) shape += (i ? "x" : "") + std::to_string(n.shape[i]);
      if (shape.empty()) shape = "()";
      o << indent << "n" << uid << " [label=\"" << esc(n.op) << "\\n" << shape << "\", fillcolor=\"" << fill_for(n.op_class)
        << "\", tooltip=\"#" << uid << " " << esc(n.op) << " " << esc(n.arg) << " " << n.dtype << "\"];\n";
    }
    if (kid >= 0) o << "  }\n";
  }
  for (uint64_t uid : order)
    for (uint64_t s : nodes[uid].info.srcs)
      if (nodes.count(s)) o << "  n" << s << " -> n" << uid << ";\n";
  o << "}\n";
  return o.str();
}

std::string dot_to_svg(const std::string& dot) {
  GVC_t* gvc = gvContext();
  Agraph_t* g = agmemread(dot.c_str());
  if (!g) {
    gvFreeContext(gvc);
    throw std::runtime_error("graphviz could not parse the graph");
  }
  std::string svg;
  if (gvLayout(gvc, g, "dot") == 0) {
    char* data = nullptr;
    unsigned int len = 0;
    if (gvRenderData(gvc, g, "svg", &data, &len) == 0 && data) svg.assign(data, len);
    gvFreeRenderData(data);
    gvFreeLayout(gvc, g);
  }
  agclose(g);
  gvFreeContext(gvc);
  if (svg.empty()) throw std::runtime_error("graphviz could not lay out the graph");
  return svg;
}

}  // namespace ts
