// Colours: the Tableau 10 palette, one hue per operation. Reads share the blue/cyan/purple/brown
// side, the CPU and GPU work the warm side, and a stall (the thing to look for) gets olive, which
// none of the others resemble.
#include "timeline_colors.h"

#include <QCoreApplication>

namespace zipmoe::app {

QColor traceOpColor(TraceOp op) {
  switch (op) {
    case TraceOp::ReadSM: return QColor(0x1f, 0x77, 0xb4);         // blue
    case TraceOp::ReadE: return QColor(0x17, 0xbe, 0xcf);          // cyan
    case TraceOp::Decompress: return QColor(0xff, 0x7f, 0x0e);     // orange
    case TraceOp::Recover: return QColor(0x2c, 0xa0, 0x2c);        // green
    case TraceOp::ReadFull: return QColor(0x94, 0x67, 0xbd);       // purple
    case TraceOp::ReadTensor: return QColor(0x8c, 0x56, 0x4b);     // brown
    case TraceOp::ExpertCompute: return QColor(0xd6, 0x27, 0x28);  // red
    case TraceOp::Dense: return QColor(0xe3, 0x77, 0xc2);          // pink
    case TraceOp::Stall: return QColor(0xbc, 0xbd, 0x22);          // olive
    case TraceOp::Prefetch: return QColor(0x7f, 0x7f, 0x7f);       // grey
  }
  return QColor(0x7f, 0x7f, 0x7f);
}

QString traceOpDisplayName(TraceOp op) {
  // The same words as zipmoe::traceOpName (the engine's, untranslated), marked for translation here.
  switch (op) {
    case TraceOp::ReadSM: return QCoreApplication::translate("TraceOp", "read SM");
    case TraceOp::ReadE: return QCoreApplication::translate("TraceOp", "read E");
    case TraceOp::Decompress: return QCoreApplication::translate("TraceOp", "decompress");
    case TraceOp::Recover: return QCoreApplication::translate("TraceOp", "recover");
    case TraceOp::ReadFull: return QCoreApplication::translate("TraceOp", "read BF16");
    case TraceOp::ReadTensor: return QCoreApplication::translate("TraceOp", "read E+SM");
    case TraceOp::ExpertCompute: return QCoreApplication::translate("TraceOp", "expert");
    case TraceOp::Dense: return QCoreApplication::translate("TraceOp", "dense");
    case TraceOp::Stall: return QCoreApplication::translate("TraceOp", "stall");
    case TraceOp::Prefetch: return QCoreApplication::translate("TraceOp", "prefetch");
  }
  return QStringLiteral("?");
}

}  // namespace zipmoe::app
