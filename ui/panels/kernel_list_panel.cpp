#include "panels/kernel_list_panel.h"

#include <algorithm>
#include <QAbstractTableModel>
#include <QColor>
#include <QHash>
#include <QSet>
#include <QHeaderView>
#include <QMenu>

#include "core/graph_spec.h"
#include "core/run_model.h"
#include "core/theme.h"
#include "widgets/code_view.h"

namespace tsui {

// Rows are RunModel::kernelIds() in order; cells are computed when painted.
class KernelTableModel : public QAbstractTableModel {
 public:
  enum Column { Id, Name, FusedOps, OutputShape, Device, Time, ColumnCount };

  explicit KernelTableModel(const RunModel* model, QObject* parent) : QAbstractTableModel(parent), model_(model) {}

  int rowCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : rows_; }
  int columnCount(const QModelIndex& parent = {}) const override { return parent.isValid() ? 0 : ColumnCount; }

  QVariant headerData(int section, Qt::Orientation orientation, int role) const override {
    static const char* names[] = {"#", "name", "fused ops", "output shape", "device", "time (ms)"};
    if (orientation == Qt::Horizontal && role == Qt::DisplayRole && section >= 0 && section < ColumnCount)
      return QString(names[section]);
    return {};
  }

  QVariant data(const QModelIndex& index, int role) const override {
    if (!index.isValid() || index.row() >= rows_) return {};
    const int id = model_->kernelIds()[index.row()];
    const ts::KernelInfo* k = model_->kernel(id);
    const ts::KernelRunEvent* run = model_->kernelRun(id);
    const int column = index.column();
    switch (role) {
      case Qt::UserRole: return id;
      case Qt::TextAlignmentRole:
        return column == Id || column == FusedOps || column == Time ? int(Qt::AlignRight | Qt::AlignVCenter)
                                                                     : int(Qt::AlignLeft | Qt::AlignVCenter);
      case Qt::FontRole:
        if (column == Name) return CodeView::codeFont();
        return {};
      case Qt::BackgroundRole:  // a kernel made from the editor's line (MainWindow::onCursorLine)
        if (marked_.contains(id)) return isDarkTheme() ? QColor(0x5a, 0x3f, 0x1a) : QColor(0xff, 0xe0, 0xb2);
        return {};
      case Qt::ToolTipRole:
        if (column == Name && k) {
          QStringList reasons;
          for (const std::string& r : k->boundary_reasons) reasons << "• " + QString::fromStdString(r);
          return reasons.join("\n");
        }
        if (column == FusedOps && k) {
          QStringList ops;
          for (const std::string& op : k->ops) ops << QString::fromStdString(op);
          return ops.join(", ");
        }
        if (column == Time && run)
          return run->compile_cache_hit ? QString("compiled program taken from the cache")
                                        : QString("compile: %1 ms").arg(run->compile_ms, 0, 'f', 1);
        return {};
      case Qt::DisplayRole:
        switch (column) {
          case Id: return QString::number(id);
          case Name: return QString::fromStdString(k ? k->name : run ? run->name : std::string());
          case FusedOps: return k ? QString::number(k->ops.size()) : QString();
          case OutputShape: {
            if (!k) return QString();
            QStringList shapes;
            for (const ts::BufferInfo& out : k->outputs) shapes << shapeText(out.shape);
            return shapes.join(", ");
          }
          case Device: return QString::fromStdString(run ? run->device : k ? k->device : std::string());
          case Time: return run ? QString::number(run->time_ms, 'f', 3) : QString();
        }
        return {};
      default: return {};
    }
  }

  void setMarked(const QSet<int>& ids) {
    marked_ = ids;
    if (rows_ > 0) Q_EMIT dataChanged(index(0, 0), index(rows_ - 1, ColumnCount - 1), {Qt::BackgroundRole});
  }

  void reset() {
    beginResetModel();
    marked_.clear();
    rows_ = 0;
    rowOfKernel_.clear();
    endResetModel();
  }
  // Appends rows for kernels the RunModel has and the table does not show yet.
  void sync() {
    const int total = static_cast<int>(model_->kernelIds().size());
    if (total <= rows_) return;
    beginInsertRows({}, rows_, total - 1);
    for (int r = rows_; r < total; ++r) rowOfKernel_.insert(model_->kernelIds()[r], r);
    rows_ = total;
    endInsertRows();
  }
  int rowOf(int kernelId) const { return rowOfKernel_.value(kernelId, -1); }
  void changed(int kernelId) {
    const int row = rowOf(kernelId);
    if (row >= 0) Q_EMIT dataChanged(index(row, 0), index(row, ColumnCount - 1));
  }
  void changed(const std::vector<int>& kernelIds) {
    int first = rows_, last = -1;
    for (int id : kernelIds) {
      const int row = rowOf(id);
      if (row < 0) continue;
      first = std::min(first, row);
      last = std::max(last, row);
    }
    if (last >= 0) Q_EMIT dataChanged(index(first, 0), index(last, ColumnCount - 1));
  }

 private:
  const RunModel* model_;
  int rows_ = 0;
  QSet<int> marked_;
  QHash<int, int> rowOfKernel_;
};

KernelListPanel::KernelListPanel(const RunModel* model, QWidget* parent)
    : QTableView(parent), table_(new KernelTableModel(model, this)) {
  setModel(table_);
  setSelectionBehavior(SelectRows);
  setSelectionMode(SingleSelection);
  setEditTriggers(NoEditTriggers);
  setAlternatingRowColors(true);
  setWordWrap(false);
  setShowGrid(false);
  verticalHeader()->hide();
  // a fixed row height: the view never measures 50,000 rows
  verticalHeader()->setSectionResizeMode(QHeaderView::Fixed);
  verticalHeader()->setDefaultSectionSize(fontMetrics().height() + 6);
  horizontalHeader()->setHighlightSections(false);
  horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  horizontalHeader()->setSectionResizeMode(KernelTableModel::Name, QHeaderView::Stretch);  // names vary most
  horizontalHeader()->setMinimumSectionSize(30);
  setColumnWidth(KernelTableModel::Id, fontMetrics().horizontalAdvance("000000"));  // ids grow over a session
  setColumnWidth(KernelTableModel::FusedOps, 64);
  setColumnWidth(KernelTableModel::OutputShape, 84);
  setColumnWidth(KernelTableModel::Device, 52);
  setColumnWidth(KernelTableModel::Time, 70);
  connect(selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
    if (updatingSelection_) return;
    const int id = selectedKernel();
    if (id >= 0) Q_EMIT kernelSelected(id);
  });
  setContextMenuPolicy(Qt::CustomContextMenu);
  connect(this, &QWidget::customContextMenuRequested, this, [this](const QPoint& pos) {
    const QModelIndex at = indexAt(pos);
    const int id = at.isValid() ? kernelAt(at.row()) : -1;
    if (id < 0) return;
    QMenu* menu = kernelMenu(id, this);
    menu->setAttribute(Qt::WA_DeleteOnClose);
    menu->popup(viewport()->mapToGlobal(pos));
  });
}

QMenu* KernelListPanel::kernelMenu(int kernelId, QWidget* parent) {
  auto* menu = new QMenu(parent);
  const QString name = table_->index(table_->rowOf(kernelId), KernelTableModel::Name).data().toString();
  QAction* autotune = menu->addAction(QString("Autotune #%1 %2").arg(kernelId).arg(name), this,
                                      [this, kernelId] { Q_EMIT autotuneRequested(kernelId); });
  autotune->setToolTip("Run the script again, searching this kernel's optimization plan (BEAM); the trials show "
                       "in the timeline's autotune lane");
  menu->setToolTipsVisible(true);
  return menu;
}

void KernelListPanel::clearKernels() { table_->reset(); }

void KernelListPanel::addSchedule(int) { table_->sync(); }

void KernelListPanel::updateKernelRun(int kernelId) {
  if (table_->rowOf(kernelId) < 0) table_->sync();
  else table_->changed(kernelId);
}

void KernelListPanel::updateKernelRuns(const std::vector<int>& kernelIds) {
  table_->sync();  // rows for kernels it did not show yet (a launch of a schedule it did not see)
  table_->changed(kernelIds);
}

void KernelListPanel::selectKernel(int kernelId) {
  const int row = table_->rowOf(kernelId);
  if (row < 0) return;
  updatingSelection_ = true;
  selectRow(row);
  scrollTo(table_->index(row, 0));
  updatingSelection_ = false;
}

void KernelListPanel::markKernels(const QSet<int>& ids) { table_->setMarked(ids); }

int KernelListPanel::kernelCount() const { return table_->rowCount(); }

int KernelListPanel::kernelAt(int row) const {
  const QVariant v = table_->index(row, 0).data(Qt::UserRole);
  return v.isValid() ? v.toInt() : -1;
}

int KernelListPanel::selectedKernel() const {
  const QModelIndexList rows = selectionModel()->selectedRows();
  return rows.isEmpty() ? -1 : rows.first().data(Qt::UserRole).toInt();
}

}  // namespace tsui
