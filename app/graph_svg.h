// The lazy graph as graphviz: one node per primitive op, coloured by op class, every kernel a
// cluster ("cluster_k<id>", labelled with the kernel's name) around the nodes fused into it.
// Shared by the CLI (--svg) and usable by any non-Qt tool.
#pragma once
#include <string>
#include <vector>

#include "tensorscope/session.h"

namespace ts {

// Merges the schedules by node uid (a node seen first as an op keeps its op) into DOT text.
std::string graph_to_dot(const std::vector<ScheduleEvent>& schedules);
// Lays out DOT text with graphviz `dot` and renders it to a standalone SVG. Throws std::runtime_error
// when graphviz rejects the graph.
std::string dot_to_svg(const std::string& dot);

}  // namespace ts
