#include "panels/kernel_list_panel.h"

#include <QHeaderView>

#include "core/graph_spec.h"
#include "core/run_model.h"
#include "widgets/code_view.h"

namespace tsui {
namespace {

QTableWidgetItem* cell(const QString& text, Qt::Alignment align = Qt::AlignLeft | Qt::AlignVCenter) {
  auto* item = new QTableWidgetItem(text);
  item->setTextAlignment(align);
  item->setFlags(Qt::ItemIsSelectable | Qt::ItemIsEnabled);
  return item;
}

constexpr Qt::Alignment kNumber = Qt::AlignRight | Qt::AlignVCenter;

}  // namespace

KernelListPanel::KernelListPanel(const RunModel* model, QWidget* parent) : QTableWidget(parent), model_(model) {
  setColumnCount(ColumnCount);
  setHorizontalHeaderLabels({"#", "name", "fused ops", "output shape", "device", "time (ms)"});
  setSelectionBehavior(SelectRows);
  setSelectionMode(SingleSelection);
  setEditTriggers(NoEditTriggers);
  setAlternatingRowColors(true);
  setWordWrap(false);
  setShowGrid(false);
  verticalHeader()->hide();
  verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  horizontalHeader()->setHighlightSections(false);
  horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  horizontalHeader()->setSectionResizeMode(Name, QHeaderView::Stretch);  // names vary most in length
  horizontalHeader()->setMinimumSectionSize(30);
  setColumnWidth(Id, fontMetrics().horizontalAdvance("000000"));  // ids grow over a long session
  setColumnWidth(FusedOps, 64);
  setColumnWidth(OutputShape, 84);
  setColumnWidth(Device, 52);
  setColumnWidth(Time, 70);
  connect(this, &QTableWidget::itemSelectionChanged, this, [this] {
    if (updatingSelection_) return;
    const int id = selectedKernel();
    if (id >= 0) Q_EMIT kernelSelected(id);
  });
}

void KernelListPanel::clearKernels() {
  setRowCount(0);
  rowOfKernel_.clear();
}

int KernelListPanel::rowFor(int kernelId) {
  auto it = rowOfKernel_.find(kernelId);
  if (it != rowOfKernel_.end()) return *it;
  const int row = rowCount();
  insertRow(row);
  auto* id = cell(QString::number(kernelId), kNumber);
  id->setData(Qt::UserRole, kernelId);
  setItem(row, Id, id);
  for (int c = Name; c < ColumnCount; ++c)
    setItem(row, c, cell("", c == Time || c == FusedOps ? kNumber : Qt::AlignLeft | Qt::AlignVCenter));
  item(row, Name)->setFont(CodeView::codeFont());
  rowOfKernel_.insert(kernelId, row);
  return row;
}

void KernelListPanel::fillFromSchedule(int row, int kernelId) {
  const ts::KernelInfo* k = model_->kernel(kernelId);
  if (!k) return;
  item(row, Name)->setText(QString::fromStdString(k->name));
  item(row, FusedOps)->setText(QString::number(k->ops.size()));
  QStringList ops;
  for (const std::string& op : k->ops) ops << QString::fromStdString(op);
  item(row, FusedOps)->setToolTip(ops.join(", "));
  QStringList shapes;
  for (const ts::BufferInfo& out : k->outputs) shapes << shapeText(out.shape);
  item(row, OutputShape)->setText(shapes.join(", "));
  if (item(row, Device)->text().isEmpty()) item(row, Device)->setText(QString::fromStdString(k->device));
  QStringList reasons;
  for (const std::string& r : k->boundary_reasons) reasons << "• " + QString::fromStdString(r);
  item(row, Name)->setToolTip(reasons.join("\n"));
}

void KernelListPanel::addSchedule(int scheduleIndex) {
  setUpdatesEnabled(false);
  for (const ts::KernelInfo& k : model_->schedules()[scheduleIndex].kernels) fillFromSchedule(rowFor(k.id), k.id);
  setUpdatesEnabled(true);
}

void KernelListPanel::updateKernelRun(int kernelId) {
  const ts::KernelRunEvent* run = model_->kernelRun(kernelId);
  if (!run) return;
  const int row = rowFor(kernelId);
  if (item(row, Name)->text().isEmpty()) item(row, Name)->setText(QString::fromStdString(run->name));
  item(row, Device)->setText(QString::fromStdString(run->device));
  item(row, Time)->setText(QString::number(run->time_ms, 'f', 3));
  item(row, Time)->setToolTip(run->compile_cache_hit ? QString("compiled program taken from the cache")
                                                     : QString("compile: %1 ms").arg(run->compile_ms, 0, 'f', 1));
}

void KernelListPanel::selectKernel(int kernelId) {
  auto it = rowOfKernel_.find(kernelId);
  if (it == rowOfKernel_.end()) return;
  updatingSelection_ = true;
  selectRow(*it);
  scrollToItem(item(*it, Id));
  updatingSelection_ = false;
}

int KernelListPanel::selectedKernel() const {
  const QList<QTableWidgetItem*> items = selectedItems();
  for (QTableWidgetItem* i : items)
    if (i->column() == Id) return i->data(Qt::UserRole).toInt();
  return -1;
}

}  // namespace tsui
