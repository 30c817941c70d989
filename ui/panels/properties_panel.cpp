#include "panels/properties_panel.h"

#include <QFileInfo>

#include <QMap>

#include "core/op_palette.h"
#include "core/run_model.h"

namespace tsui {
namespace {

QString esc(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

QString section(const QString& title) {
  return QString("<p style='margin-top:10px; margin-bottom:3px; color:#6b7280; font-size:small;'>%1</p>")
      .arg(title.toUpper());
}

QString row(const QString& name, const QString& value) {
  return QString("<tr><td style='color:#6b7280; padding-right:10px;'>%1</td><td>%2</td></tr>").arg(name, value);
}

QString mono(const QString& text) { return QString("<code>%1</code>").arg(text); }

// The chain of fused ops, or for a long chain how many of each op (a 2000-op chain is unreadable).
QString fusedOpsText(const std::vector<std::string>& ops) {
  constexpr size_t kChainMax = 16;
  QStringList parts;
  if (ops.size() <= kChainMax) {
    for (const std::string& op : ops) parts << esc(op);
    return parts.join(" → ");
  }
  QMap<QString, int> counts;
  for (const std::string& op : ops) ++counts[esc(op)];
  for (auto it = counts.begin(); it != counts.end(); ++it) parts << QString("%1 ×%2").arg(it.key()).arg(it.value());
  return parts.join(", ");
}

QString bufferRow(const ts::BufferInfo& b) {
  return row(QString("%%1").arg(b.node_uid), mono(shapeText(b.shape) + " " + esc(b.dtype)));
}

}  // namespace

PropertiesPanel::PropertiesPanel(const RunModel* model, QWidget* parent) : QTextBrowser(parent), model_(model) {
  setOpenLinks(false);
  clearSelection();
}

void PropertiesPanel::clearSelection() {
  setHtml(
      "<p style='color:#6b7280'>Click a node or a kernel in the graph, or a kernel in the list, "
      "to see its properties.</p>");
}

QString PropertiesPanel::nodeSummary(uint64_t uid) const {
  const ts::GraphNodeInfo* n = model_->node(uid);
  if (!n) return mono(QString("%%1").arg(uid));
  return mono(QString("%%1 %2 %3").arg(uid).arg(esc(n->op), shapeText(n->shape)));
}

void PropertiesPanel::showKernel(int kernelId) {
  const ts::KernelInfo* k = model_->kernel(kernelId);
  const ts::KernelRunEvent* run = model_->kernelRun(kernelId);
  if (!k && !run) return clearSelection();
  QString html = section("Kernel") + "<table>";
  html += row("id", QString::number(kernelId));
  html += row("name", mono(k ? esc(k->name) : esc(run->name)));
  html += row("device", esc(run ? run->device : k->device));
  if (run) {
    html += row("time", QString("%1 ms").arg(run->time_ms, 0, 'f', 3));
    html +=
        row("compile", run->compile_cache_hit ? QString("cached") : QString("%1 ms").arg(run->compile_ms, 0, 'f', 1));
  }
  if (k && k->flops >= 0 && k->bytes >= 0) {  // the work the engine counted at schedule time
    html += row("work", QString("%1 FLOP, %2 bytes (%3 FLOP/byte)")
                            .arg(k->flops, 0, 'g', 4)
                            .arg(k->bytes, 0, 'g', 4)
                            .arg(k->bytes > 0 ? k->flops / k->bytes : 0.0, 0, 'g', 3));
    if (run && run->time_ms > 0)
      html += row("rate", QString("%1 GFLOP/s, %2 GB/s")
                              .arg(k->flops / run->time_ms / 1e6, 0, 'f', 2)
                              .arg(k->bytes / run->time_ms / 1e6, 0, 'f', 2));
  }
  html += "</table>";
  // The optimization actions (issue 14): the plan, where it came from, what the passes applied; and a summary
  // of the autotune search when this kernel was searched.
  if (run && run->code && !run->code->plan_from.empty()) {
    const ts::KernelCode& code = *run->code;
    html += section("Optimization actions") + "<table>";
    html += row("plan", code.plan.empty() ? QString("default") : mono(esc(code.plan)));
    html += row("from", esc(code.plan_from));
    html += row("applied", code.applied.empty() ? QString("<span style='color:#6b7280'>nothing</span>")
                                                : mono(esc(code.applied)));
    const std::vector<int> trials = model_->trialsOfKernel(kernelId);
    if (!trials.empty()) {
      QMap<QString, int> byOutcome;
      for (int t : trials) ++byOutcome[QString::fromUtf8(ts::trial_outcome_name(model_->trials()[t].outcome))];
      QStringList parts;
      for (auto it = byOutcome.begin(); it != byOutcome.end(); ++it) parts << QString("%1 %2").arg(it.value()).arg(it.key());
      html += row("autotune", QString("%1 trials: %2").arg(trials.size()).arg(parts.join(", ")));
      for (int t : trials)
        if (const ts::AutotuneTrialEvent& a = model_->trials()[t];
            a.outcome == ts::AutotuneTrialEvent::Kept || a.outcome == ts::AutotuneTrialEvent::CacheHit)
          html += row("kept", esc(a.reason));
    }
    html += "</table>";
  }
  if (k) {
    html += section(QString("Fused ops (%1)").arg(k->ops.size())) + mono(fusedOpsText(k->ops));
    html += section("Inputs") + "<table>";
    for (const ts::BufferInfo& b : k->inputs) html += bufferRow(b);
    html += "</table>" + section("Outputs") + "<table>";
    for (const ts::BufferInfo& b : k->outputs) html += bufferRow(b);
    html += "</table>" + section("Boundary reasons") + "<ul style='margin-left:-20px'>";
    for (const std::string& r : k->boundary_reasons) html += "<li>" + esc(r) + "</li>";
    if (k->boundary_reasons.empty()) html += "<li style='color:#6b7280'>none reported</li>";
    html += "</ul>";
    if (!k->fusion_decisions.empty()) {
      // the kernelizer's cost model: values read more than once, stored or recomputed here, with its numbers
      html += section("Fusion decisions") + "<ul style='margin-left:-20px'>";
      for (const ts::FusionDecision& d : k->fusion_decisions)
        html += QString("<li><b>%1</b> %2 #%3 (computed %4×, %5 FLOP once, %6 bytes to store): %7</li>")
                    .arg(d.stored ? "stored" : "recomputed", esc(d.op))
                    .arg(d.node_uid)
                    .arg(d.evaluations)
                    .arg(d.flops, 0, 'g', 3)
                    .arg(d.store_bytes, 0, 'g', 3)
                    .arg(esc(d.reason));
      html += "</ul>";
    }
  }
  setHtml(html);
}

void PropertiesPanel::showNode(const GraphSpecNode& node) {
  const ts::GraphNodeInfo& n = node.info;
  const QColor colour = opClassColor(QString::fromStdString(n.op_class));
  QString html = section("Node") + "<table>";
  html += row("op", QString("<span style='background:%1'>&nbsp;<b>%2</b>&nbsp;</span>").arg(colour.name(), esc(n.op)));
  html += row("class", esc(n.op_class));
  html += row("uid", mono(QString("%%1").arg(n.uid)));
  html += row("shape", mono(shapeText(n.shape)));
  html += row("dtype", mono(esc(n.dtype)));
  if (!n.arg.empty()) html += row("arg", mono(esc(n.arg)));
  if (node.kernelId >= 0) {
    const ts::KernelInfo* k = model_->kernel(node.kernelId);
    html += row("kernel", QString("#%1 %2").arg(node.kernelId).arg(k ? mono(esc(k->name)) : QString()));
  } else if (node.lazy) {
    html += row("kernel", "<span style='color:#6b7280'>none yet: lazy, not computed</span>");
  } else {
    html += row("kernel", "<span style='color:#6b7280'>none: an input buffer</span>");
  }
  const ts::SourceStack* stack = model_->stackOf(n.uid);
  if (stack && stack->user >= 0)
    html += row("made at", mono(QString("line %1").arg(stack->frames[stack->user].line)));
  html += "</table>" + section(QString("Inputs (%1)").arg(n.srcs.size())) + "<table>";
  for (size_t i = 0; i < n.srcs.size(); ++i) html += row(QString::number(i), nodeSummary(n.srcs[i]));
  html += "</table>";
  if (stack) {  // the short call stack, innermost first; the user's line in bold
    html += section("Made by") + "<table>";
    for (int i = 0; i < static_cast<int>(stack->frames.size()); ++i) {
      const ts::SourceFrame& f = stack->frames[i];
      QString where = QString("%1:%2").arg(QFileInfo(QString::fromStdString(f.file)).fileName()).arg(f.line);
      where = i == stack->user ? "<b>" + esc(where.toStdString()) + "</b>" : esc(where.toStdString());
      html += row(esc(f.function), mono(where));
    }
    html += "</table>";
  }
  setHtml(html);
}

}  // namespace tsui
