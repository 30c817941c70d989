// The lazy graph as graphviz: one node per primitive op, coloured by op class, every kernel a
// cluster ("cluster_k<id>", labelled with the kernel's name) around the nodes fused into it.
// Shared by the CLI (--svg, --dot, --png) and usable by any non-Qt tool.
#pragma once
#include <string>
#include <vector>

#include "tensorscope/session.h"

namespace ts {

// Merges the schedules by node uid (a node seen first as an op keeps its op) into DOT text.
// Big runs stay readable and cheap to lay out (graphviz dot is superlinear: 2k nodes ≈ 2 s, 10k ≈ 4 min):
// above `max_nodes` op nodes every kernel collapses to one node (still one cluster per kernel), and
// above `max_kernels` kernels only the first `max_kernels` are drawn, with a note saying so.
std::string graph_to_dot(const std::vector<ScheduleEvent>& schedules, size_t max_nodes = 1500, size_t max_kernels = 300);
// Lays out DOT text with graphviz `dot` and renders it to a standalone SVG. Throws std::runtime_error
// when graphviz rejects the graph.
std::string dot_to_svg(const std::string& dot);
// Lays out DOT text and renders it to a PNG image (graphviz's cairo renderer) at `scale` times graphviz's
// 72 dpi: scale 2 gives twice the width and height. Throws std::runtime_error when graphviz rejects the
// graph or has no PNG renderer.
std::string dot_to_png(const std::string& dot, double scale = 1);

}  // namespace ts
