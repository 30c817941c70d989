#include "panels/explain_panel.h"

#include <QRegularExpression>
#include <QStringList>
#include <algorithm>

#include "core/line_diff.h"
#include "core/run_model.h"

namespace tsui {
namespace {

QString esc(const std::string& s) { return QString::fromStdString(s).toHtmlEscaped(); }

// Headings a little larger than the text, not h1-h3: the pane is narrow, and Presentation enlarges it all.
QString heading(const QString& title) {
  return QString("<p style='margin-top:12px; margin-bottom:4px; font-weight:600; font-size:large;'>%1</p>").arg(title);
}

QString plural(qint64 n, const QString& one, const QString& many = {}) {
  return QString("%1 %2").arg(n).arg(n == 1 ? one : (many.isEmpty() ? one + "s" : many));
}

// "1.2 k", "3.4 M": FLOPs and bytes at a glance.
QString quantity(double v, const QString& unit) {
  const char* prefixes[] = {"", "k", "M", "G", "T"};
  int p = 0;
  while (v >= 1000 && p < 4) v /= 1000, ++p;
  return QString("%1 %2%3").arg(v, 0, 'g', p == 0 ? 6 : 3).arg(prefixes[p]).arg(unit);
}

int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int dtypeBytes(const std::string& dtype) {
  if (dtype == "float16") return 2;
  if (dtype == "bool") return 1;
  return 4;  // float32, int32
}

QString opList(const QStringList& ops) { return ops.isEmpty() ? QString("none") : "<code>" + ops.join("</code>, <code>") + "</code>"; }

}  // namespace

ExplainPanel::ExplainPanel(const RunModel* model, QWidget* parent) : QTextBrowser(parent), model_(model) {
  setObjectName("explain");
  setOpenLinks(false);
  clearKernel();
}

void ExplainPanel::clearKernel() {
  kernelId_ = -1;
  setHtml("<p style='color:#6b7280'>Select a kernel in the list or the graph: this pane says in words why it "
          "exists, what the selected pass did to it and where its time goes.</p>");
}

ExplainPanel::Cost ExplainPanel::estimateCost(const RunModel& model, int kernelId) {
  const ts::KernelInfo* k = model.kernel(kernelId);
  Cost cost;
  if (k && k->flops >= 0 && k->bytes >= 0) {  // counted by the engine at schedule time (the same rule)
    cost.flops = k->flops;
    cost.bytes = k->bytes;
    return cost;
  }
  if (!k || k->node_uids.empty()) return cost;
  double flops = 0;
  for (uint64_t uid : k->node_uids) {
    const ts::GraphNodeInfo* n = model.node(uid);
    if (!n) return cost;
    if (n->op_class == "elementwise") {
      flops += static_cast<double>(elements(n->shape));
    } else if (n->op_class == "reduce") {
      const ts::GraphNodeInfo* src = n->srcs.empty() ? nullptr : model.node(n->srcs[0]);
      if (!src) return cost;
      flops += static_cast<double>(elements(src->shape));
    }
  }
  double bytes = 0;
  for (const auto* list : {&k->inputs, &k->outputs})
    for (const ts::BufferInfo& b : *list) bytes += static_cast<double>(elements(b.shape)) * dtypeBytes(b.dtype);
  cost.flops = flops;
  cost.bytes = bytes;
  return cost;
}

QMap<QString, int> ExplainPanel::irOpCounts(const QString& listing) {
  static const QRegularExpression kOp(R"(^\s*(?:%\d+\s*=\s*)?([A-Z][A-Z0-9_]*)\b)");
  QMap<QString, int> counts;
  for (const QString& line : listing.split('\n')) {
    const QRegularExpressionMatch m = kOp.match(line);
    if (m.hasMatch()) ++counts[m.captured(1)];
  }
  return counts;
}

void ExplainPanel::explain(int kernelId, std::shared_ptr<const ts::KernelCode> code, int pass) {
  const ts::KernelInfo* k = model_->kernel(kernelId);
  const ts::KernelRunEvent* run = model_->kernelRun(kernelId);
  if (!k && !run) return clearKernel();
  kernelId_ = kernelId;
  const QString name = k ? esc(k->name) : esc(run->name);
  QString html = QString("<p style='font-size:large;'><b>Kernel #%1</b> <code>%2</code></p>").arg(kernelId).arg(name);

  // Why this many kernels: the schedule cut the graph here.
  html += heading("Why this kernel");
  const int total = static_cast<int>(model_->kernelIds().size());
  const int scheduleIndex = model_->scheduleOfKernel(kernelId);
  QString count = QString("The run has %1 in %2: each realize (a <code>numpy()</code>, an optimizer's "
                          "<code>step()</code>, an explicit <code>realize()</code>) schedules the lazy graph it "
                          "needs, and the scheduler cuts it into kernels where a value must be stored.")
                      .arg(plural(total, "kernel"), plural(static_cast<qint64>(model_->scheduleCount()), "schedule"));
  if (scheduleIndex >= 0) {
    const std::vector<int>& ids = model_->kernelIdsOf(scheduleIndex);
    const int position = static_cast<int>(std::find(ids.begin(), ids.end(), kernelId) - ids.begin()) + 1;
    count += ids.size() == 1
                 ? QString(" This kernel is the only one of its schedule")
                 : QString(" This kernel is kernel %1 of the %2 of its schedule").arg(position).arg(ids.size());
    const int line = model_->scheduleWhere(scheduleIndex).line;
    count += line > 0 ? QString(", made by line %1.").arg(line) : QString(".");
  }
  html += "<p>" + count + "</p>";
  if (k) {
    html += QString("<p>It fuses %1.</p>").arg(plural(static_cast<qint64>(k->ops.size()), "op"));
    QStringList ends, inputs;
    for (const std::string& r : k->boundary_reasons)
      (QString::fromStdString(r).startsWith("ends") ? ends : inputs) << esc(r);
    html += "<p><b>Where it ends</b> (its output is stored):</p><ul>";
    for (const QString& r : ends) html += "<li>" + r + "</li>";
    if (ends.isEmpty()) html += "<li>not reported</li>";
    html += "</ul><p><b>Why its inputs are buffers</b> (not fused in):</p><ul>";
    for (const QString& r : inputs) html += "<li>" + r + "</li>";
    if (inputs.isEmpty()) html += "<li>none: it reads no buffer</li>";
    html += "</ul>";
    if (k->fusion_decisions.empty()) {
      html += "<p>The cost model took no store-or-recompute decision about this kernel (no value it computes is "
              "read by another kernel too, or the recording predates those decisions).</p>";
    } else {
      html += "<p><b>The cost model's decisions</b> (store a value read more than once, or recompute it where it "
              "is read):</p><ul>";
      for (const ts::FusionDecision& d : k->fusion_decisions)
        html += QString("<li><b>%1</b> <code>%2</code> %%3: computed %4× if fused, %5 once, %6 to store "
                        "(%7 extra if recomputed) — %8</li>")
                    .arg(d.stored ? "Stored" : "Recomputed", esc(d.op))
                    .arg(d.node_uid)
                    .arg(d.evaluations)
                    .arg(quantity(d.flops, "FLOP"), quantity(d.store_bytes, "B"), quantity(d.recompute_flops, "FLOP"),
                         esc(d.reason));
      html += "</ul>";
    }
  }

  // What the selected pass did.
  html += heading("What the pass did");
  if (!code || pass < 0 || pass >= static_cast<int>(code->ir.size())) {
    html += "<p>No pass selected: the kernel has not been launched yet, so its IR is not known.</p>";
  } else {
    const QString passName = QString::fromStdString(code->ir[pass].pass);
    const QString before = pass > 0 ? QString::fromStdString(code->ir[pass - 1].ir()) : QString();
    const QString after = QString::fromStdString(code->ir[pass].ir());
    const UnifiedDiff diff = unifiedDiff(before, after);
    if (pass == 0) {
      html += QString("<p><code>%1</code> (pass 0 of %2) turned the fused graph into %3 of IR.</p>")
                  .arg(passName.toHtmlEscaped())
                  .arg(code->ir.size() - 1)
                  .arg(plural(diff.added.size(), "line"));
    } else if (!diff.changed()) {
      html += QString("<p><code>%1</code> (pass %2 of %3) changed nothing: its output equals its input.</p>")
                  .arg(passName.toHtmlEscaped())
                  .arg(pass)
                  .arg(code->ir.size() - 1);
    } else {
      html += QString("<p><code>%1</code> (pass %2 of %3) removed %4 and added %5.</p>")
                  .arg(passName.toHtmlEscaped())
                  .arg(pass)
                  .arg(code->ir.size() - 1)
                  .arg(plural(diff.removed.size(), "line"), plural(diff.added.size(), "line"));
      const QMap<QString, int> was = irOpCounts(before), is = irOpCounts(after);
      QStringList appeared, disappeared, more, fewer;
      QSet<QString> ops;
      for (auto it = was.begin(); it != was.end(); ++it) ops << it.key();
      for (auto it = is.begin(); it != is.end(); ++it) ops << it.key();
      QStringList sorted(ops.begin(), ops.end());
      sorted.sort();
      for (const QString& op : sorted) {
        const int a = was.value(op), b = is.value(op);
        if (a == 0 && b > 0) appeared << QString("%1 ×%2").arg(op).arg(b);
        else if (a > 0 && b == 0) disappeared << QString("%1 ×%2").arg(op).arg(a);
        else if (b > a) more << QString("%1 %2→%3").arg(op).arg(a).arg(b);
        else if (b < a) fewer << QString("%1 %2→%3").arg(op).arg(a).arg(b);
      }
      html += "<ul><li>ops that appeared: " + opList(appeared) + "</li><li>ops that disappeared: " +
              opList(disappeared) + "</li>";
      if (!more.isEmpty()) html += "<li>more of: " + opList(more) + "</li>";
      if (!fewer.isEmpty()) html += "<li>fewer of: " + opList(fewer) + "</li>";
      html += "</ul>";
    }
  }

  // Where the time goes.
  html += heading("Where its time goes");
  const Cost cost = estimateCost(*model_, kernelId);
  QStringList facts;
  if (run) {
    facts << QString("ran in %1 ms on %2").arg(run->time_ms, 0, 'f', 3).arg(esc(run->device));
    facts << (run->compile_cache_hit ? QString("its program came from the compile cache")
                                     : QString("compiling it took %1 ms").arg(run->compile_ms, 0, 'f', 1));
  } else {
    facts << "run time: not known (not launched yet)";
  }
  if (cost.flops >= 0) {
    facts << QString("about %1 (from the shapes of its fused nodes)").arg(quantity(cost.flops, "FLOP"));
    facts << QString("about %1 read and written (its inputs and outputs once)").arg(quantity(cost.bytes, "B"));
    if (cost.bytes > 0) facts << QString("%1 FLOP per byte").arg(cost.flops / cost.bytes, 0, 'g', 3);
    if (run && run->time_ms > 0)
      facts << QString("%1/s and %2/s").arg(quantity(cost.flops / (run->time_ms / 1000), "FLOP"),
                                             quantity(cost.bytes / (run->time_ms / 1000), "B"));
  } else {
    facts << "FLOPs and bytes: not known (the run's nodes are not all known)";
  }
  html += "<ul><li>" + facts.join("</li><li>") + "</li></ul>";
  setHtml(html);
}

}  // namespace tsui
