// The event browser: every event of the run in time order (RenderDoc's Event Browser). Each row is
// an event the user can make current; the current one is bold with a green arrow.
//
//   line 12: opt.step()                  a stretch of consecutive events from one script line
//     nodes made: 37                     a NodesEvent: the lazy graph grew (and shrank: "· freed 5")
//     schedule 3 · 4 kernels             a ScheduleEvent; Time is the sum of its launches
//       #12 r_64_16  0.031 ms            a kernel and its launch (KernelRunEvent); "(not launched yet)" before
//     output: loss 0.53                  text the script printed (the first line; the rest in the tooltip)
//     jit replay · 80 launches           launches that no schedule announced (a jit's replays)
//       #5012 r_64_16  0.029 ms · replay of #12
//     autotune #12 r_64_16 · 37 trials   the BEAM search of a kernel (AutotuneTrialEvents), before its launch
//       UPCAST_GLOBAL=8 · timed 0.0310 ms   one candidate: its plan, outcome and time; the reason in the tooltip
//
// A schedule belongs to the line whose realize made it (ScheduleEvent::where); a nodes event to the
// line of its last node (where the script was when the event was sent, usually the realize that
// follows). Outputs, launches of no schedule and nodes events without a line join the stretch that is
// open. A different line opens a new top-level row, and stretches are never merged: a loop's lines
// come back once per iteration, so the tree reads top to bottom in time.
//
// Columns: Event (the text above), EID (the row's index into RunModel::events(): a kernel's launch,
// a line's first event), Time (ms of the launches under the row).
//
// Filter: rows whose Event text contains the filter's text (any case), with the rows above them; a
// matching line row keeps everything under it.
//
// Sizes: a training run makes ~200 schedules and ~16,000 launches (listed in ~25 ms). The model keeps
// a small record per line and per event row; a kernel row is its schedule's KernelInfo and texts are
// made when painted. New events are appended with beginInsertRows, never a reset, so the user's
// expansion and scroll survive a running script; only RunModel::cleared() resets it.
#pragma once
#include <QModelIndex>
#include <QWidget>

class QAbstractItemModel;
class QLineEdit;
class QSortFilterProxyModel;
class QTreeView;

namespace tsui {

class RunModel;
class EventTreeModel;

class EventBrowser : public QWidget {
  Q_OBJECT
 public:
  // Data roles of eventModel() (column 0).
  enum Role {
    EventRole = Qt::UserRole,  // int: the event the row selects (index into RunModel::events()), -1 for none
    CurrentRole,               // bool: the row is the current event's
  };

  explicit EventBrowser(QWidget* parent = nullptr);

  // The run to list (may be null). Follows its cleared(), scheduleAdded() and kernelRunAdded();
  // the model must outlive the browser or be replaced first.
  void setModel(const RunModel* model);
  // Appends the rows of the events the RunModel got since the last call: nodes events and outputs
  // come without a signal, so the window calls this after each batch. Costs nothing when nothing is new.
  void refresh();
  // The script's text, for the line rows' labels ("line 42: loss.backward()").
  void setScriptText(const QString& text);

  // Marks the row of events()[eventIndex] as current, expands to it, selects it and scrolls it into
  // view, without emitting eventSelected. -1 clears the marker. An event without a row (yet) is
  // remembered and marked when its row arrives.
  void setCurrentEvent(int eventIndex);
  int currentEvent() const { return current_; }

  // For tests and the window: the tree's source model, the view (whose model is a filter proxy over
  // it), the filter's text box.
  QAbstractItemModel* eventModel() const;
  QTreeView* view() const { return view_; }
  QLineEdit* filterEdit() const { return filter_; }
  // The Event column's text of the event's row ("" when it has none), and the row in the view's
  // model (invalid when it has none or the filter hides it).
  QString rowText(int eventIndex) const;
  QModelIndex viewIndexOfEvent(int eventIndex) const;

 signals:
  // The user clicked a row or moved to it with the keys: a line row gives its first event, a kernel
  // not launched yet its schedule's.
  void eventSelected(int eventIndex);

 private:
  // The user made a row of the view current (onlyIfNew: or clicked it again): emits its event.
  void userPicked(const QModelIndex& viewIndex, bool onlyIfNew);
  // The view shows the tree, or the filter proxy over it while a filter is typed.
  void showModel(QAbstractItemModel* model);

  const RunModel* model_ = nullptr;
  EventTreeModel* tree_;
  QSortFilterProxyModel* proxy_;
  QLineEdit* filter_;
  QTreeView* view_;
  int current_ = -1;
  int lastEmitted_ = -1;         // since the last setCurrentEvent
  bool settingCurrent_ = false;  // the view's current row moved by us (setCurrentEvent, new rows, the filter): no signal
};

}  // namespace tsui
