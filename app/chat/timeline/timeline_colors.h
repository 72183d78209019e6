// How each operation looks in the schedule chart: its colour and its translated display name.
//
// The one place that maps a zipmoe::TraceOp to a colour, so that the chart (TimelineView), its legend
// and its tooltip agree. The colours are a categorical palette chosen to stay apart from each other
// and readable on a light background; boxes that merge several operations keep the colour of their
// longest member (see TimelineModel::boxesForLane), so no "mixed" colour is needed.
// Thread-safety: pure functions of their argument; any thread (names need the app's translator).
// Cost: a switch.
#pragma once

#include <QColor>
#include <QString>

#include "zipmoe/trace/trace_events.h"

namespace zipmoe::app {

// Number of TraceOp values (ReadSM .. Stall); the legend lists them in this order.
inline constexpr int kTraceOpCount = static_cast<int>(TraceOp::Prefetch) + 1;

QColor traceOpColor(TraceOp op);
// The op's name for people ("read SM", "decompress", …), through QCoreApplication::translate.
QString traceOpDisplayName(TraceOp op);

}  // namespace zipmoe::app
