// TimelineView — the Gantt chart of a TimelineModel: one row per lane, one box per interval.
//
// The scene graph holds a QSGTransformNode with one vertex-coloured QSGGeometryNode per lane. The
// geometry is built in "timeline coordinates": x = (t - origin) / buildNsPerPixel, where the build
// scale is the view's ns-per-pixel rounded down to a power of two, over the visible window plus one
// window's width of margin on each side; the transform maps that onto the item. Panning, and
// zooming within the same power of two, only change the matrix. A lane's geometry is rebuilt when its
// data changed, when the scale crosses a power of two (the merging of sub-pixel intervals must be
// redone; boxes then number at most about twice the pixels), or when the window leaves the built range.
// Qt Quick's software renderer (no OpenGL/Vulkan, the offscreen platform) ignores custom geometry;
// there each lane holds one QSGRectangleNode per box instead, under the same transform.
// The window is viewStartNs..viewEndNs (ns, the model's clock). It is kept between a width of 1 µs per
// 100 px and 1.1 × the data's extent, and near the data. With followLive on, each dataChanged slides
// the window, keeping its width, to end at the newest data; panBy, showRange, zoomToFit and the jumps
// turn followLive off (zoomAt keeps it). Before the first data the window is unset (0..0) and the
// first data is shown whole.
// Thread-safety: GUI thread (updatePaintNode runs on the render thread while the GUI thread is blocked).
// Cost: a frame that only pans or zooms is a matrix; a rebuild is O(log n + boxes) per lane.
#pragma once

#include <QColor>
#include <QQuickItem>
#include <QRectF>
#include <QVariantMap>
#include <QtQml/qqmlregistration.h>

#include <atomic>
#include <vector>

#include "timeline_model.h"

class QSGGeometryNode;
class QSGNode;

namespace zipmoe::app {

class TimelineView : public QQuickItem {
  Q_OBJECT
  QML_ELEMENT
  Q_PROPERTY(zipmoe::app::TimelineModel* model READ model WRITE setModel NOTIFY modelChanged)
  Q_PROPERTY(double viewStartNs READ viewStartNs WRITE setViewStartNs NOTIFY viewChanged)
  Q_PROPERTY(double viewEndNs READ viewEndNs WRITE setViewEndNs NOTIFY viewChanged)
  Q_PROPERTY(double nsPerPixel READ nsPerPixel NOTIFY viewChanged)
  Q_PROPERTY(double laneHeight READ laneHeight WRITE setLaneHeight NOTIFY laneHeightChanged)
  Q_PROPERTY(double rowSpacing READ rowSpacing WRITE setRowSpacing NOTIFY rowSpacingChanged)
  Q_PROPERTY(bool followLive READ followLive WRITE setFollowLive NOTIFY followLiveChanged)

 public:
  explicit TimelineView(QQuickItem* parent = nullptr);
  ~TimelineView() override;

  TimelineModel* model() const { return model_; }
  void setModel(TimelineModel* model);
  double viewStartNs() const { return viewStartNs_; }
  double viewEndNs() const { return viewEndNs_; }
  void setViewStartNs(double ns);  // clamped like showRange; keeps followLive
  void setViewEndNs(double ns);
  double nsPerPixel() const;       // 0 while the window or the width is empty
  double laneHeight() const { return laneHeight_; }
  void setLaneHeight(double height);
  double rowSpacing() const { return rowSpacing_; }
  void setRowSpacing(double spacing);
  bool followLive() const { return followLive_; }
  void setFollowLive(bool follow);

  // Zooms by `factor` (> 1 zooms in) keeping the time under pixel x where it is.
  Q_INVOKABLE void zoomAt(double factor, double x);
  // Moves the content by dx pixels: positive drags it right, showing earlier times.
  Q_INVOKABLE void panBy(double dxPixels);
  Q_INVOKABLE void showRange(qint64 t0, qint64 t1);
  Q_INVOKABLE void zoomToFit();
  // Show the token's (the token's layer's) first event near the left edge, keeping the zoom; false
  // when the model holds no such event.
  Q_INVOKABLE bool jumpToToken(int token);
  Q_INVOKABLE bool jumpToLayer(int token, int layer);
  // The model's eventAt for the lane under y and the time under x, with a tolerance of 3 px.
  Q_INVOKABLE QVariantMap eventAtPoint(double x, double y) const;
  Q_INVOKABLE double timeAtX(double x) const;
  Q_INVOKABLE double xAtTime(double ns) const;
  Q_INVOKABLE int laneAtY(double y) const;  // a row owns its spacing; -1 above the first, below the last

  // How many lane geometries were rebuilt since construction (for tests: a pan must not rebuild).
  int geometryRebuilds() const { return geometryRebuilds_.load(std::memory_order_relaxed); }

 Q_SIGNALS:
  void modelChanged();
  void viewChanged();
  void laneHeightChanged();
  void rowSpacingChanged();
  void followLiveChanged();

 protected:
  QSGNode* updatePaintNode(QSGNode* oldNode, UpdatePaintNodeData* data) override;
  void geometryChange(const QRectF& newGeometry, const QRectF& oldGeometry) override;

 private:
  // What the lanes' geometry was built for.
  struct Built {
    double nsPerPixel = 0;  // the build scale (a power of two); 0: nothing built
    qint64 originNs = 0;    // time at x = 0 of the geometry
    qint64 t0 = 0;          // built range, margins included
    qint64 t1 = 0;
    std::vector<quint64> revisions;  // per lane, the model revision its geometry shows
    bool rowsDirty = true;           // lane height or spacing changed
    bool software = false;           // built for the software renderer (rectangle nodes)
  };
  // One box to draw, in timeline coordinates.
  struct LaneRect {
    QRectF rect;
    QColor color;
  };

  void onDataChanged();
  void onLanesChanged();
  // Clamps the width to [minWidthNs, maxWidthNs] and the start to near the data, then emits
  // viewChanged and schedules a frame if anything moved.
  void setWindow(double start, double width);
  void updateImplicitHeight();
  double minWidthNs() const;
  double maxWidthNs() const;
  bool windowSet() const { return viewEndNs_ > viewStartNs_; }
  static QSGGeometryNode* newGeometryNode();
  std::vector<LaneRect> laneRects(int lane) const;
  // Puts the rectangles into a lane's node: a vertex-coloured geometry node, or, for the software
  // renderer, a plain node holding one rectangle node per box.
  void drawBoxes(QSGNode* laneNode, const std::vector<LaneRect>& rects);

  TimelineModel* model_ = nullptr;  // not owned; reset when it is destroyed
  double viewStartNs_ = 0;
  double viewEndNs_ = 0;
  double laneHeight_ = 18;
  double rowSpacing_ = 6;
  bool followLive_ = false;
  Built built_;
  std::atomic<int> geometryRebuilds_{0};  // counted on the render thread
};

}  // namespace zipmoe::app
