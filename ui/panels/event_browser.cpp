#include "panels/event_browser.h"

#include <QAbstractItemModel>
#include <QFileInfo>
#include <QGuiApplication>
#include <QHash>
#include <QHeaderView>
#include <QIcon>
#include <QLineEdit>
#include <QPainter>
#include <QPalette>
#include <QScopedValueRollback>
#include <QSortFilterProxyModel>
#include <QStyledItemDelegate>
#include <QTreeView>
#include <QVBoxLayout>
#include <algorithm>
#include <set>

#include "core/run_model.h"

namespace tsui {

namespace {

// A model index keeps its level in the low two bits of internalId and, above them, what its parent
// is: the group of an item row, the item of a kernel row.
enum Level : quintptr { GroupLevel = 0, ItemLevel = 1, KernelLevel = 2 };
quintptr idOf(Level level, int parent) { return (quintptr(parent) << 2) | level; }
Level levelOf(const QModelIndex& i) { return Level(i.internalId() & 3); }
int parentOf(const QModelIndex& i) { return int(i.internalId() >> 2); }

QString plural(int n, const char* one, const char* many) { return QString("%1 %2").arg(n).arg(n == 1 ? one : many); }

// The arrow RenderDoc puts on its current event.
QIcon currentEventIcon() {
  QPixmap pixmap(16, 16);
  pixmap.fill(Qt::transparent);
  QPainter p(&pixmap);
  p.setRenderHint(QPainter::Antialiasing);
  p.setPen(QPen(QColor(255, 255, 255, 220), 1));  // stands out on the selection's colour too
  p.setBrush(QColor(46, 160, 67));
  p.drawPolygon(QPolygonF{{2.5, 1.5}, {14.5, 8}, {2.5, 14.5}});
  return QIcon(pixmap);
}

// Rows a little taller than the text: room for the bold current row's underscores (kernel names
// are full of them) and for the arrow.
class RowDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  QSize sizeHint(const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QSize size = QStyledItemDelegate::sizeHint(option, index);
    size.setHeight(std::max(size.height(), option.fontMetrics.height() + 6));
    return size;
  }
};

}  // namespace

// Rows are three small records: groups (a stretch of one script line), items (an event under it, or a
// run of launches of no schedule) and, under a schedule or a run, kernels. Items of a group are
// consecutive in items_ because events only ever join the last group. Texts are made when painted.
class EventTreeModel : public QAbstractItemModel {
 public:
  enum Column { Event, Eid, Time, ColumnCount };
  using Kind = RunModel::EventRef::Kind;

  explicit EventTreeModel(QObject* parent) : QAbstractItemModel(parent), currentIcon_(currentEventIcon()) {}

  void setRunModel(const RunModel* model) {
    model_ = model;
    reset();
  }
  void reset() {
    beginResetModel();
    groups_.clear();
    items_.clear();
    kernelRow_.clear();
    rowOfEvent_.clear();
    endResetModel();
  }
  int processedEvents() const { return static_cast<int>(rowOfEvent_.size()); }

  // Appends rows for the RunModel's events since the last call.
  void sync() {
    if (!model_) return;
    const std::vector<RunModel::EventRef>& events = model_->events();
    if (events.size() < rowOfEvent_.size()) reset();  // cleared without our hearing of it
    for (int e = processedEvents(); e < static_cast<int>(events.size()); ++e) {
      const RunModel::EventRef& ref = events[e];
      switch (ref.kind) {
        case Kind::Nodes: {
          const ts::NodesEvent& nodes = model_->nodeEvents()[ref.index];
          const ts::SourceLocation where = nodes.size() ? nodes.where(nodes.size() - 1) : ts::SourceLocation{};
          rowOfEvent_.push_back({append(Item(Kind::Nodes, ref.index, e), where, where.line > 0), -1});
          break;
        }
        case Kind::Schedule: {
          const int item = append(Item(Kind::Schedule, ref.index, e), model_->scheduleWhere(ref.index), true);
          const std::vector<int>& ids = model_->kernelIdsOf(ref.index);
          for (int k = 0; k < static_cast<int>(ids.size()); ++k) kernelRow_.insert(ids[k], {item, k});
          rowOfEvent_.push_back({item, -1});
          break;
        }
        case Kind::Output: rowOfEvent_.push_back({append(Item(Kind::Output, ref.index, e), {}, false), -1}); break;
        case Kind::Launch: rowOfEvent_.push_back(launched(ref.index, e)); break;
        case Kind::Trial: rowOfEvent_.push_back(trialRow(ref.index, e)); break;
      }
    }
    flushChanges();
  }

  void setScriptLines(QStringList lines) {
    scriptLines_ = std::move(lines);
    if (!groups_.empty()) Q_EMIT dataChanged(index(0, Event), index(rowCount() - 1, Event), {Qt::DisplayRole});
  }

  void setCurrent(int previous, int current) {
    current_ = current;
    for (int e : {previous, current}) {
      const QModelIndex i = indexOfEvent(e);
      if (i.isValid()) Q_EMIT dataChanged(i, i.siblingAtColumn(ColumnCount - 1));
    }
  }

  QModelIndex indexOfEvent(int eventIndex) const {
    if (eventIndex < 0 || eventIndex >= processedEvents()) return {};
    const RowRef r = rowOfEvent_[eventIndex];
    if (r.item < 0) return {};
    return r.child < 0 ? itemIndex(r.item) : kernelIndex(r.item, r.child);
  }

  // The event a click on the row makes current: its own; a group's or a run's first; a kernel
  // not launched yet, its schedule.
  int pickEvent(const QModelIndex& i) const {
    if (!i.isValid()) return -1;
    switch (levelOf(i)) {
      case GroupLevel: return items_[groups_[i.row()].firstItem].event;
      case ItemLevel: return items_[itemOf(i)].event;
      case KernelLevel: {
        if (const Item& it = items_[parentOf(i)]; it.kind == Kind::Trial) return it.trialEvents[i.row()];
        const int e = model_->eventOfLaunch(kernelIdOf(i));
        return e >= 0 ? e : items_[parentOf(i)].event;
      }
    }
    return -1;
  }

  // ---- QAbstractItemModel ----------------------------------------------------------------------

  QModelIndex index(int row, int column, const QModelIndex& parent = {}) const override {
    if (!hasIndex(row, column, parent)) return {};
    if (!parent.isValid()) return createIndex(row, column, idOf(GroupLevel, 0));
    if (levelOf(parent) == GroupLevel) return createIndex(row, column, idOf(ItemLevel, parent.row()));
    return createIndex(row, column, idOf(KernelLevel, itemOf(parent)));
  }
  QModelIndex parent(const QModelIndex& child) const override {
    if (!child.isValid()) return {};
    switch (levelOf(child)) {
      case GroupLevel: return {};
      case ItemLevel: return createIndex(parentOf(child), 0, idOf(GroupLevel, 0));
      case KernelLevel: return itemIndex(parentOf(child));
    }
    return {};
  }
  int rowCount(const QModelIndex& parent = {}) const override {
    if (!parent.isValid()) return static_cast<int>(groups_.size());
    if (parent.column() != 0) return 0;
    switch (levelOf(parent)) {
      case GroupLevel: return groups_[parent.row()].items;
      case ItemLevel: return kernelCount(itemOf(parent));
      case KernelLevel: return 0;
    }
    return 0;
  }
  int columnCount(const QModelIndex& = {}) const override { return ColumnCount; }

  QVariant headerData(int section, Qt::Orientation orientation, int role) const override {
    static const char* names[] = {"Event", "EID", "Time (ms)"};
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    if (role == Qt::DisplayRole) return QString(names[section]);
    if (role == Qt::TextAlignmentRole && section != Event) return int(Qt::AlignRight | Qt::AlignVCenter);
    return {};
  }

  QVariant data(const QModelIndex& i, int role) const override {
    if (!i.isValid() || !model_) return {};
    const int column = i.column();
    const bool current = current_ >= 0 && ownEvent(i) == current_;
    switch (role) {
      case Qt::DisplayRole:
        if (column == Event) return text(i);
        if (column == Eid) {
          const int e = levelOf(i) == KernelLevel ? ownEvent(i) : pickEvent(i);
          return e >= 0 ? QString::number(e) : QString();
        }
        if (column == Time) {
          const auto [ms, launches] = time(i);
          return launches ? QString::number(ms, 'f', 3) : QString();
        }
        return {};
      case EventBrowser::EventRole: return pickEvent(i);
      case EventBrowser::CurrentRole: return current;
      case Qt::DecorationRole: return current && column == Event ? QVariant(currentIcon_) : QVariant();
      case Qt::FontRole: {
        if (!current) return {};
        QFont bold;
        bold.setBold(true);
        return bold;
      }
      case Qt::ForegroundRole:
        // what did not run (yet) and what only grew the graph stay in the background
        if ((levelOf(i) == KernelLevel && ownEvent(i) < 0) ||
            (levelOf(i) == ItemLevel && items_[itemOf(i)].kind == Kind::Nodes))
          return QGuiApplication::palette().color(QPalette::Disabled, QPalette::Text);
        return {};
      case Qt::TextAlignmentRole:
        return column == Event ? int(Qt::AlignLeft | Qt::AlignVCenter) : int(Qt::AlignRight | Qt::AlignVCenter);
      case Qt::ToolTipRole: return column == Event ? toolTip(i) : QVariant();
      default: return {};
    }
  }

 private:
  struct Group {
    QString file;  // as ScheduleEvent::where / SourceLocation::file
    int line = 0;  // 0: unknown
    int firstItem = 0;
    int items = 0;
    int launches = 0;
    double timeMs = 0;
  };
  struct Item {
    Item(Kind k, int i, int e) : kind(k), index(i), event(e) {}
    Kind kind;   // Nodes, Schedule, Output; Launch: a run of launches of no schedule; Trial: one kernel's search
    int index;   // into nodeEvents() / the model's schedules / outputs(); unused for a run; Trial: its first trial
    int event;   // index into events(); a run: its first launch's
    int group = -1;
    std::vector<int> kernels;  // a run: its kernel ids (a schedule's: RunModel::kernelIdsOf)
    std::vector<int> trialEvents;  // Trial: the events of its trials, the rows under it
    int launches = 0;          // kernels under it that were launched
    double timeMs = 0;
  };
  struct RowRef {
    int item = -1;
    int child = -1;  // kernel row under the item; -1: the item's own row
  };

  // Adds an item under the last group, or under a new one when `hasLine` and it is another line.
  int append(Item item, const ts::SourceLocation& where, bool hasLine) {
    const QString file = QString::fromStdString(where.file);
    const int n = static_cast<int>(items_.size());
    item.group = static_cast<int>(groups_.size()) - 1;
    if (groups_.empty() || (hasLine && (groups_.back().line != where.line || groups_.back().file != file))) {
      item.group++;
      beginInsertRows({}, item.group, item.group);
      groups_.push_back({hasLine ? file : QString(), hasLine ? where.line : 0, n, 1});
      items_.push_back(std::move(item));
    } else {
      Group& g = groups_.back();
      beginInsertRows(createIndex(item.group, 0, idOf(GroupLevel, 0)), g.items, g.items);
      items_.push_back(std::move(item));
      g.items++;
    }
    endInsertRows();
    return n;
  }

  // A launch: fills its kernel's row, or adds it to the run of launches of no schedule that is open.
  RowRef launched(int kernelId, int eventIndex) {
    const auto it = kernelRow_.constFind(kernelId);
    const bool scheduled = it != kernelRow_.cend();
    RowRef row;
    if (scheduled) {
      row = {it->item, it->kernel};
    } else if (!items_.empty() && items_.back().kind == Kind::Launch) {
      row = {static_cast<int>(items_.size()) - 1, static_cast<int>(items_.back().kernels.size())};
      beginInsertRows(itemIndex(row.item), row.child, row.child);
      items_.back().kernels.push_back(kernelId);
      endInsertRows();
    } else {
      Item run(Kind::Launch, -1, eventIndex);
      run.kernels.push_back(kernelId);
      row = {append(std::move(run), {}, false), 0};
    }
    if (!scheduled) kernelRow_.insert(kernelId, {row.item, row.child});
    const ts::KernelRunEvent* run = model_->kernelRun(kernelId);
    const double ms = run ? run->time_ms : 0;
    Item& item = items_[row.item];
    item.launches++;
    item.timeMs += ms;
    groups_[item.group].launches++;
    groups_[item.group].timeMs += ms;
    // launches of one schedule come in a row: one dataChanged per stretch of kernel rows
    if (!changed_.empty() && changed_.back().item == row.item)
      changed_.back().last = std::max(changed_.back().last, row.child);
    else
      changed_.push_back({row.item, row.child, row.child});
    return row;
  }

  // An autotune trial: a row under the search of its kernel that is open, or the first row of a new one.
  RowRef trialRow(int trialIndex, int eventIndex) {
    const int kernelId = model_->trials()[trialIndex].kernel_id;
    if (!items_.empty() && items_.back().kind == Kind::Trial && model_->trials()[items_.back().index].kernel_id == kernelId) {
      const RowRef row{static_cast<int>(items_.size()) - 1, static_cast<int>(items_.back().trialEvents.size())};
      beginInsertRows(itemIndex(row.item), row.child, row.child);
      items_.back().trialEvents.push_back(eventIndex);
      endInsertRows();
      Q_EMIT dataChanged(itemIndex(row.item), itemIndex(row.item));  // its count
      return row;
    }
    Item search(Kind::Trial, trialIndex, eventIndex);
    search.trialEvents.push_back(eventIndex);
    return {append(std::move(search), {}, false), 0};
  }

  const ts::AutotuneTrialEvent& trialOf(const QModelIndex& kernelLevel) const {
    const int e = items_[parentOf(kernelLevel)].trialEvents[kernelLevel.row()];
    return model_->trials()[model_->events()[e].index];
  }

  void flushChanges() {
    std::set<int> groups;
    for (const Changed& c : changed_) {
      Q_EMIT dataChanged(kernelIndex(c.item, c.first), kernelIndex(c.item, c.last, ColumnCount - 1));
      Q_EMIT dataChanged(itemIndex(c.item), itemIndex(c.item, ColumnCount - 1));  // a run's count, the time
      groups.insert(items_[c.item].group);
    }
    for (int g : groups) Q_EMIT dataChanged(index(g, Time), index(g, Time));
    changed_.clear();
  }

  int itemOf(const QModelIndex& i) const {
    return levelOf(i) == ItemLevel ? groups_[parentOf(i)].firstItem + i.row() : parentOf(i);
  }
  QModelIndex itemIndex(int item, int column = 0) const {
    const int g = items_[item].group;
    return createIndex(item - groups_[g].firstItem, column, idOf(ItemLevel, g));
  }
  QModelIndex kernelIndex(int item, int row, int column = 0) const {
    return createIndex(row, column, idOf(KernelLevel, item));
  }
  int kernelCount(int item) const {
    const Item& it = items_[item];
    if (it.kind == Kind::Schedule) return static_cast<int>(model_->kernelIdsOf(it.index).size());
    if (it.kind == Kind::Trial) return static_cast<int>(it.trialEvents.size());
    return static_cast<int>(it.kernels.size());
  }
  int kernelIdOf(const QModelIndex& i) const {
    const Item& it = items_[parentOf(i)];
    return it.kind == Kind::Schedule ? model_->kernelIdsOf(it.index)[i.row()] : it.kernels[i.row()];
  }
  // The event the row itself is (-1: a group, a run, a kernel not launched yet).
  int ownEvent(const QModelIndex& i) const {
    switch (levelOf(i)) {
      case GroupLevel: return -1;
      case ItemLevel: {
        const Item& it = items_[itemOf(i)];
        return it.kind == Kind::Launch || it.kind == Kind::Trial ? -1 : it.event;
      }
      case KernelLevel:
        if (const Item& it = items_[parentOf(i)]; it.kind == Kind::Trial) return it.trialEvents[i.row()];
        return model_->eventOfLaunch(kernelIdOf(i));
    }
    return -1;
  }
  // Milliseconds of the launches under (or of) the row, and how many there were.
  std::pair<double, int> time(const QModelIndex& i) const {
    switch (levelOf(i)) {
      case GroupLevel: return {groups_[i.row()].timeMs, groups_[i.row()].launches};
      case ItemLevel: {
        const Item& it = items_[itemOf(i)];
        return {it.timeMs, it.launches};
      }
      case KernelLevel: {
        if (items_[parentOf(i)].kind == Kind::Trial) return {0, 0};  // a trial is not a launch of the run
        const ts::KernelRunEvent* run = model_->kernelRun(kernelIdOf(i));
        return {run ? run->time_ms : 0, run ? 1 : 0};
      }
    }
    return {0, 0};
  }

  bool isScript(const QString& file) const {
    return file.isEmpty() || model_->scriptPath().isEmpty() || file == model_->scriptPath();
  }

  QString text(const QModelIndex& i) const {
    switch (levelOf(i)) {
      case GroupLevel: {
        const Group& g = groups_[i.row()];
        if (g.line <= 0) return "(unknown line)";
        if (!isScript(g.file)) return QString("%1:%2").arg(QFileInfo(g.file).fileName()).arg(g.line);
        const QString code = g.line <= scriptLines_.size() ? scriptLines_[g.line - 1].trimmed() : QString();
        return code.isEmpty() ? QString("line %1").arg(g.line) : QString("line %1: %2").arg(g.line).arg(code);
      }
      case ItemLevel: {
        const Item& it = items_[itemOf(i)];
        switch (it.kind) {
          case Kind::Nodes: {
            const ts::NodesEvent& n = model_->nodeEvents()[it.index];
            const int freed = static_cast<int>(n.freed_uids.size());
            if (n.size() == 0) return QString("nodes freed: %1").arg(freed);
            return QString("nodes made: %1").arg(n.size()) + (freed ? QString(" · freed %1").arg(freed) : QString());
          }
          case Kind::Schedule:
            return QString("schedule %1 · %2").arg(it.index + 1).arg(plural(kernelCount(itemOf(i)), "kernel", "kernels"));
          case Kind::Output: {
            const ts::ScriptOutputEvent& out = model_->outputs()[it.index];
            const QStringList lines = QString::fromStdString(out.text).split('\n', Qt::SkipEmptyParts);
            QString first = lines.isEmpty() ? QString() : lines.first().trimmed();
            if (lines.size() > 1) first += " …";
            return (out.stream == ts::ScriptOutputEvent::Stderr ? "stderr: " : "output: ") + first;
          }
          case Kind::Launch: {
            const ts::KernelRunEvent* first = model_->kernelRun(it.kernels.front());
            const QString launches = plural(static_cast<int>(it.kernels.size()), "launch", "launches");
            return first && first->replayed ? "jit replay · " + launches : "no schedule · " + launches;
          }
          case Kind::Trial: {
            const ts::AutotuneTrialEvent& t = model_->trials()[it.index];
            return QString("autotune #%1 %2 · %3")
                .arg(t.kernel_id)
                .arg(QString::fromStdString(t.name), plural(static_cast<int>(it.trialEvents.size()), "trial", "trials"));
          }
        }
        return {};
      }
      case KernelLevel: {
        if (items_[parentOf(i)].kind == Kind::Trial) {  // "UPCAST_GLOBAL=8 · timed 0.031 ms"
          const ts::AutotuneTrialEvent& t = trialOf(i);
          QString s = QString("%1 · %2").arg(t.plan.empty() ? QString("default") : QString::fromStdString(t.plan),
                                             QString::fromUtf8(ts::trial_outcome_name(t.outcome)));
          if (t.time_ms > 0) s += QString(" %1 ms").arg(t.time_ms, 0, 'f', 4);
          return s;
        }
        const int id = kernelIdOf(i);
        const ts::KernelInfo* k = model_->kernel(id);
        const ts::KernelRunEvent* run = model_->kernelRun(id);
        const QString name = QString::fromStdString(k ? k->name : run ? run->name : std::string());
        if (!run) return QString("#%1 %2  (not launched yet)").arg(id).arg(name);
        QString s = QString("#%1 %2  %3 ms").arg(id).arg(name).arg(run->time_ms, 0, 'f', 3);
        if (run->replayed) s += QString(" · replay of #%1").arg(run->replay_of);
        return s;
      }
    }
    return {};
  }

  QString toolTip(const QModelIndex& i) const {
    switch (levelOf(i)) {
      case GroupLevel: {
        const Group& g = groups_[i.row()];
        const QString where = g.line > 0 ? QString("%1:%2").arg(g.file.isEmpty() ? "the script" : g.file).arg(g.line)
                                         : QString("events whose script line is unknown");
        return QString("%1\n%2 · %3").arg(where, plural(g.items, "event", "events"), plural(g.launches, "launch", "launches"));
      }
      case ItemLevel: {
        const Item& it = items_[itemOf(i)];
        if (it.kind == Kind::Output) return QString::fromStdString(model_->outputs()[it.index].text).left(4000);
        if (it.kind == Kind::Nodes) {
          // the lines that made them: a batch has few stacks
          const ts::NodesEvent& n = model_->nodeEvents()[it.index];
          std::set<int> lines;
          if (n.batch)
            for (const ts::SourceStack& s : n.batch->stacks)
              if (s.where().line > 0) lines.insert(s.where().line);
          QStringList l;
          for (int line : lines) l << QString::number(line);
          return l.isEmpty() ? QString("lines unknown") : "made at line " + l.join(", ");
        }
        return {};
      }
      case KernelLevel: {
        if (items_[parentOf(i)].kind == Kind::Trial) {
          const ts::AutotuneTrialEvent& t = trialOf(i);
          QStringList lines;
          if (!t.reason.empty()) lines << QString::fromStdString(t.reason).left(2000);
          lines << "applied: " + (t.applied.empty() ? QString("nothing") : QString::fromStdString(t.applied));
          if (t.compile_ms > 0) lines << QString("compiled in %1 ms").arg(t.compile_ms, 0, 'f', 1);
          lines << QString("lowered IR %1 on %2").arg(QString::fromStdString(t.ir_hash), QString::fromStdString(t.device));
          return lines.join('\n');
        }
        const int id = kernelIdOf(i);
        const ts::KernelRunEvent* run = model_->kernelRun(id);
        if (!run) return "scheduled, not launched yet";
        QString s = QString("on %1 · ").arg(QString::fromStdString(run->device));
        if (run->replayed) s += QString("jit replay of kernel %1").arg(run->replay_of);
        else if (run->compile_cache_hit) s += "compiled program taken from the cache";
        else s += QString("compiled in %1 ms").arg(run->compile_ms, 0, 'f', 1);
        return s;
      }
    }
    return {};
  }

  struct Changed {
    int item, first, last;
  };
  const RunModel* model_ = nullptr;
  std::vector<Group> groups_;
  std::vector<Item> items_;
  struct KernelRow {
    int item, kernel;
  };
  QHash<int, KernelRow> kernelRow_;  // kernel id -> its row
  std::vector<RowRef> rowOfEvent_;   // per event of events(), those seen so far
  std::vector<Changed> changed_;     // kernel rows launched since the last flushChanges
  QStringList scriptLines_;
  int current_ = -1;
  QIcon currentIcon_;
};

// ---- EventBrowser ---------------------------------------------------------------------------------

EventBrowser::EventBrowser(QWidget* parent)
    : QWidget(parent),
      tree_(new EventTreeModel(this)),
      proxy_(new QSortFilterProxyModel(this)),
      filter_(new QLineEdit(this)),
      view_(new QTreeView(this)) {
  // a kernel that matches keeps its schedule and line visible; a line that matches keeps all it holds
  proxy_->setRecursiveFilteringEnabled(true);
  proxy_->setAutoAcceptChildRows(true);
  proxy_->setFilterCaseSensitivity(Qt::CaseInsensitive);
  proxy_->setFilterKeyColumn(EventTreeModel::Event);

  filter_->setPlaceholderText("filter: kernel name or line");
  filter_->setClearButtonEnabled(true);
  connect(filter_, &QLineEdit::textChanged, this, [this](const QString& text) {
    QScopedValueRollback guard(settingCurrent_, true);
    // The proxy is in the way only while there is a filter: kept on the source model, it spends time on
    // every appended row (a 150,000-event recording took seconds more to open).
    const QString pattern = text.trimmed();
    if (pattern.isEmpty()) {
      showModel(tree_);
      proxy_->setSourceModel(nullptr);
    } else {
      if (!proxy_->sourceModel()) proxy_->setSourceModel(tree_);
      proxy_->setFilterFixedString(pattern);
      showModel(proxy_);
    }
    const QModelIndex current = viewIndexOfEvent(current_);
    if (current.isValid()) view_->scrollTo(current);
  });
  view_->setUniformRowHeights(true);  // the view never measures 16,000 rows
  view_->setItemDelegate(new RowDelegate(view_));
  view_->setAlternatingRowColors(true);
  view_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  view_->setSelectionMode(QAbstractItemView::SingleSelection);
  view_->setSelectionBehavior(QAbstractItemView::SelectRows);
  view_->setAllColumnsShowFocus(true);
  view_->setExpandsOnDoubleClick(true);

  showModel(tree_);
  // a click on the row that is already the view's current one (after the filter hid the current event)
  connect(view_, &QTreeView::clicked, this, [this](const QModelIndex& index) { userPicked(index, true); });
  connect(view_, &QTreeView::activated, this, [this](const QModelIndex& index) { userPicked(index, true); });

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  layout->addWidget(filter_);
  layout->addWidget(view_);
}

void EventBrowser::setModel(const RunModel* model) {
  if (model_) disconnect(model_, nullptr, this, nullptr);
  model_ = model;
  current_ = -1;
  {
    QScopedValueRollback guard(settingCurrent_, true);
    tree_->setRunModel(model);
  }
  if (!model) return;
  connect(model, &RunModel::cleared, this, [this] {
    QScopedValueRollback guard(settingCurrent_, true);
    current_ = -1;
    tree_->setCurrent(-1, -1);
    tree_->reset();
  });
  connect(model, &RunModel::scheduleAdded, this, &EventBrowser::refresh);
  connect(model, &RunModel::kernelRunAdded, this, &EventBrowser::refresh);
  refresh();
}

void EventBrowser::refresh() {
  if (!model_ || tree_->processedEvents() == static_cast<int>(model_->events().size())) return;
  QScopedValueRollback guard(settingCurrent_, true);  // rows the filter drops move the view's current row
  tree_->sync();
}

void EventBrowser::setScriptText(const QString& text) { tree_->setScriptLines(text.split('\n')); }

void EventBrowser::setCurrentEvent(int eventIndex) {
  refresh();
  const int previous = current_;
  current_ = eventIndex;
  lastEmitted_ = -1;
  tree_->setCurrent(previous, eventIndex);
  const QModelIndex index = viewIndexOfEvent(eventIndex);
  if (!index.isValid()) return;
  QScopedValueRollback guard(settingCurrent_, true);
  bool expanded = false;
  for (QModelIndex p = index.parent(); p.isValid(); p = p.parent())
    if (!view_->isExpanded(p)) {
      view_->expand(p);
      expanded = true;
    }
  if (expanded) view_->doItemsLayout();  // else the scroll bar's range is the one before the expansion
  // stepping through events on screen does not scroll; a jump centres the row, with its line above it
  // (asked before setCurrentIndex, which scrolls it just into view)
  const bool onScreen = view_->viewport()->rect().contains(view_->visualRect(index));
  view_->selectionModel()->setCurrentIndex(index, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
  if (!onScreen) view_->scrollTo(index, QAbstractItemView::PositionAtCenter);
}

void EventBrowser::showModel(QAbstractItemModel* model) {
  if (view_->model() == model) return;
  const bool first = !view_->model();
  const int eid = first ? fontMetrics().horizontalAdvance("0000000") : view_->columnWidth(EventTreeModel::Eid);
  const int time = first ? fontMetrics().horizontalAdvance("Time (ms)000") : view_->columnWidth(EventTreeModel::Time);
  view_->setModel(model);  // a new selection model comes with it, and the header's sections are new
  connect(view_->selectionModel(), &QItemSelectionModel::currentChanged, this, [this](const QModelIndex& index) {
    if (!settingCurrent_) userPicked(index, false);
  });
  QHeaderView* header = view_->header();
  header->setStretchLastSection(false);
  header->setSectionResizeMode(EventTreeModel::Event, QHeaderView::Stretch);
  header->setSectionResizeMode(EventTreeModel::Eid, QHeaderView::Interactive);
  header->setSectionResizeMode(EventTreeModel::Time, QHeaderView::Interactive);
  view_->setColumnWidth(EventTreeModel::Eid, eid);
  view_->setColumnWidth(EventTreeModel::Time, time);
}

QAbstractItemModel* EventBrowser::eventModel() const { return tree_; }

QString EventBrowser::rowText(int eventIndex) const {
  const QModelIndex index = tree_->indexOfEvent(eventIndex);
  return index.isValid() ? index.data().toString() : QString();
}

QModelIndex EventBrowser::viewIndexOfEvent(int eventIndex) const {
  const QModelIndex source = tree_->indexOfEvent(eventIndex);
  return view_->model() == proxy_ ? proxy_->mapFromSource(source) : source;
}

void EventBrowser::userPicked(const QModelIndex& viewIndex, bool onlyIfNew) {
  const int event = tree_->pickEvent(view_->model() == proxy_ ? proxy_->mapToSource(viewIndex) : viewIndex);
  // a press moves the view's current row (one signal) and then clicks it (another): one eventSelected
  if (event < 0 || (onlyIfNew && (event == current_ || event == lastEmitted_))) return;
  lastEmitted_ = event;
  Q_EMIT eventSelected(event);
}

}  // namespace tsui
