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

std::string graph_to_dot(const std::vector<ScheduleEvent>& all_schedules, size_t max_nodes, size_t max_kernels) {
  struct N {
    GraphNodeInfo info;
    int kernel_id = -1;
  };
  // keep whole schedules until the kernel budget is used up
  std::vector<const ScheduleEvent*> schedules;
  size_t total_kernels = 0, kept_kernels = 0;
  for (const ScheduleEvent& s : all_schedules) {
    total_kernels += s.kernels.size();
    if (kept_kernels + s.kernels.size() <= max_kernels || schedules.empty()) {
      schedules.push_back(&s);
      kept_kernels += s.kernels.size();
    }
  }
  std::map<uint64_t, N> nodes;
  std::vector<uint64_t> order;
  std::map<int, std::string> kernel_names;
  std::map<int, std::vector<std::string>> kernel_ops;
  for (const ScheduleEvent* s : schedules) {
    for (const GraphNodeInfo& n : s->nodes) {
      int kid = n.kernel >= 0 ? s->kernels[n.kernel].id : -1;
      auto it = nodes.find(n.uid);
      if (it == nodes.end()) {
        nodes[n.uid] = {n, kid};
        order.push_back(n.uid);
      } else if (it->second.info.op == "BUFFER" && n.op != "BUFFER") {
        it->second = {n, kid};
      }
    }
    for (const KernelInfo& k : s->kernels) {
      kernel_names[k.id] = k.name;
      kernel_ops[k.id] = k.ops;
    }
  }
  const bool collapsed = nodes.size() > max_nodes;
  std::ostringstream o;
  o << "digraph tensorscope {\n  rankdir=TB;\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n"
       "  edge [color=\"#555555\"];\n";
  if (collapsed || kept_kernels < total_kernels) {
    o << "  labelloc=t; fontname=\"Helvetica\"; label=\"" << kept_kernels << " of " << total_kernels << " kernels"
      << (collapsed ? ", one node per kernel" : "") << "\";\n";
  }
  auto shape_text = [](const std::vector<int64_t>& shape) {
    std::string t;
    for (size_t i = 0; i < shape.size(); i++) t += (i ? "x" : "") + std::to_string(shape[i]);
    return t.empty() ? std::string("()") : t;
  };
  std::map<int, std::vector<uint64_t>> by_kernel;
  for (uint64_t uid : order) by_kernel[nodes[uid].kernel_id].push_back(uid);
  // In collapsed mode a node stands for its kernel: "k<id>"; inputs stay nodes of their own.
  auto dot_id = [&](uint64_t uid) {
    int kid = nodes[uid].kernel_id;
    return collapsed && kid >= 0 ? "k" + std::to_string(kid) : "n" + std::to_string(uid);
  };
  for (auto& [kid, uids] : by_kernel) {
    std::string indent = "  ";
    if (kid >= 0) {
      o << "  subgraph cluster_k" << kid << " {\n    label=\"" << esc(kernel_names[kid]) << " (#" << kid
        << ")\";\n    style=\"rounded\"; color=\"#3465a4\"; fontname=\"Helvetica\"; fontsize=11;\n";
      indent = "    ";
    }
    if (collapsed && kid >= 0) {
      o << indent << "k" << kid << " [label=\"" << kernel_ops[kid].size() << " ops\\n"
        << shape_text(nodes[uids.back()].info.shape) << "\", fillcolor=\"#dce8f5\"];\n";
    } else {
      for (uint64_t uid : uids) {
        const GraphNodeInfo& n = nodes[uid].info;
        o << indent << "n" << uid << " [label=\"" << esc(n.op) << "\\n" << shape_text(n.shape) << "\", fillcolor=\""
          << fill_for(n.op_class) << "\", tooltip=\"#" << uid << " " << esc(n.op) << " " << esc(n.arg) << " " << n.dtype
          << "\"];\n";
      }
    }
    if (kid >= 0) o << "  }\n";
  }
  std::set<std::pair<std::string, std::string>> edges;
  for (uint64_t uid : order)
    for (uint64_t s : nodes[uid].info.srcs)
      if (nodes.count(s)) {
        std::string a = dot_id(s), b = dot_id(uid);
        if (a != b && edges.insert({a, b}).second) o << "  " << a << " -> " << b << ";\n";
      }
  o << "}\n";
  return o.str();
}

// Lays `dot` out and renders it with graphviz's `format` renderer ("svg", "png"); `dpi` > 0 sets the
// graph's resolution (graphviz draws at 72 dpi).
static std::string render(const std::string& dot, const char* format, double dpi) {
  GVC_t* gvc = gvContext();
  Agraph_t* g = agmemread(dot.c_str());
  if (!g) {
    gvFreeContext(gvc);
    throw std::runtime_error("graphviz could not parse the graph");
  }
  if (dpi > 0) agsafeset(g, const_cast<char*>("dpi"), const_cast<char*>(std::to_string(dpi).c_str()), const_cast<char*>(""));
  std::string out;
  bool laid_out = false;
  if (gvLayout(gvc, g, "dot") == 0) {
    laid_out = true;
    char* data = nullptr;
    unsigned int len = 0;
    if (gvRenderData(gvc, g, format, &data, &len) == 0 && data) out.assign(data, len);
    gvFreeRenderData(data);
    gvFreeLayout(gvc, g);
  }
  agclose(g);
  gvFreeContext(gvc);
  if (!laid_out) throw std::runtime_error("graphviz could not lay out the graph");
  if (out.empty()) throw std::runtime_error(std::string("graphviz could not render the graph as ") + format);
  return out;
}

std::string dot_to_svg(const std::string& dot) { return render(dot, "svg", 0); }

std::string dot_to_png(const std::string& dot, double scale) {
  if (!(scale > 0) || scale > 16) throw std::invalid_argument("the PNG scale must be above 0 and at most 16");
  return render(dot, "png", 72 * scale);
}

}  // namespace ts
