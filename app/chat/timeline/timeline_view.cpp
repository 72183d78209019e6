// TimelineView: the window arithmetic (zoom, pan, limits, follow) and the scene-graph nodes.
#include "timeline_view.h"

#include <QMatrix4x4>
#include <QQuickWindow>
#include <QSGGeometryNode>
#include <QSGRectangleNode>
#include <QSGTransformNode>
#include <QSGVertexColorMaterial>

#include <algorithm>
#include <cmath>
#include <limits>

#include "timeline_colors.h"

namespace zipmoe::app {

namespace {

constexpr double kMinNsPerPixel = 10;        // 1 µs per 100 px
constexpr double kMaxExtentFactor = 1.1;     // zoomed out: the data and 5 % either side
constexpr double kHoverTolerancePx = 3;
constexpr double kMinBoxWidthBuildPx = 2;    // 1 to 2 screen pixels: a lone short event stays visible
constexpr quint64 kNotBuilt = std::numeric_limits<quint64>::max();

}  // namespace

TimelineView::TimelineView(QQuickItem* parent) : QQuickItem(parent) {
  setFlag(ItemHasContents, true);
  setClip(true);
  updateImplicitHeight();
}

TimelineView::~TimelineView() = default;

void TimelineView::setModel(TimelineModel* model) {
  if (model_ == model) return;
  if (model_) disconnect(model_, nullptr, this, nullptr);
  model_ = model;
  if (model_) {
    connect(model_, &TimelineModel::dataChanged, this, &TimelineView::onDataChanged);
    connect(model_, &TimelineModel::lanesChanged, this, &TimelineView::onLanesChanged);
    connect(model_, &QObject::destroyed, this, [this] { setModel(nullptr); });
  }
  built_.revisions.clear();
  viewStartNs_ = viewEndNs_ = 0;
  Q_EMIT modelChanged();
  Q_EMIT viewChanged();
  onLanesChanged();
  onDataChanged();
}

void TimelineView::setViewStartNs(double ns) { setWindow(ns, viewEndNs_ - ns); }

void TimelineView::setViewEndNs(double ns) { setWindow(viewStartNs_, ns - viewStartNs_); }

double TimelineView::nsPerPixel() const {
  if (!windowSet() || !(width() > 0)) return 0;
  return (viewEndNs_ - viewStartNs_) / width();
}

void TimelineView::setLaneHeight(double height) {
  height = std::max(height, 1.0);
  if (laneHeight_ == height) return;
  laneHeight_ = height;
  built_.rowsDirty = true;
  updateImplicitHeight();
  Q_EMIT laneHeightChanged();
  update();
}

void TimelineView::setRowSpacing(double spacing) {
  spacing = std::max(spacing, 0.0);
  if (rowSpacing_ == spacing) return;
  rowSpacing_ = spacing;
  built_.rowsDirty = true;
  updateImplicitHeight();
  Q_EMIT rowSpacingChanged();
  update();
}

void TimelineView::setFollowLive(bool follow) {
  if (followLive_ == follow) return;
  followLive_ = follow;
  Q_EMIT followLiveChanged();
  if (followLive_) onDataChanged();
}

void TimelineView::zoomAt(double factor, double x) {
  if (!windowSet() || !(factor > 0) || !(width() > 0)) return;
  const double anchor = timeAtX(x);
  const double newWidth = std::clamp((viewEndNs_ - viewStartNs_) / factor, minWidthNs(), maxWidthNs());
  setWindow(anchor - x / width() * newWidth, newWidth);
}

void TimelineView::panBy(double dxPixels) {
  if (!windowSet()) return;
  setFollowLive(false);
  setWindow(viewStartNs_ - dxPixels * nsPerPixel(), viewEndNs_ - viewStartNs_);
}

void TimelineView::showRange(qint64 t0, qint64 t1) {
  setFollowLive(false);
  setWindow(static_cast<double>(t0), static_cast<double>(t1 - t0));
}

void TimelineView::zoomToFit() {
  if (!model_ || model_->eventCount() == 0) return;
  setFollowLive(false);
  const double extent = static_cast<double>(model_->endNs() - model_->startNs());
  setWindow(static_cast<double>(model_->startNs()) - extent * (kMaxExtentFactor - 1) / 2, extent * kMaxExtentFactor);
}

bool TimelineView::jumpToToken(int token) {
  const qint64 start = model_ ? model_->startOfToken(token) : -1;
  if (start < 0) return false;
  setFollowLive(false);
  const double width = windowSet() ? viewEndNs_ - viewStartNs_ : minWidthNs() * 1000;
  setWindow(static_cast<double>(start) - width * 0.05, width);
  return true;
}

bool TimelineView::jumpToLayer(int token, int layer) {
  const qint64 start = model_ ? model_->startOfLayer(token, layer) : -1;
  if (start < 0) return false;
  setFollowLive(false);
  const double width = windowSet() ? viewEndNs_ - viewStartNs_ : minWidthNs() * 1000;
  setWindow(static_cast<double>(start) - width * 0.05, width);
  return true;
}

QVariantMap TimelineView::eventAtPoint(double x, double y) const {
  const int lane = laneAtY(y);
  const double nsPerPx = nsPerPixel();
  if (!model_ || lane < 0 || !(nsPerPx > 0)) return {};
  return model_->eventAt(lane, std::llround(timeAtX(x)), std::llround(kHoverTolerancePx * nsPerPx));
}

double TimelineView::timeAtX(double x) const { return viewStartNs_ + x * nsPerPixel(); }

double TimelineView::xAtTime(double ns) const {
  const double nsPerPx = nsPerPixel();
  return nsPerPx > 0 ? (ns - viewStartNs_) / nsPerPx : 0;
}

int TimelineView::laneAtY(double y) const {
  const double pitch = laneHeight_ + rowSpacing_;
  if (!model_ || y < 0) return -1;
  const auto lane = static_cast<int>(std::floor(y / pitch));
  return lane < model_->laneCount() ? lane : -1;
}

void TimelineView::onDataChanged() {
  if (!model_ || model_->eventCount() == 0) {
    // Nothing to show: forget the window, so that the first data is shown whole.
    if (windowSet()) {
      viewStartNs_ = viewEndNs_ = 0;
      Q_EMIT viewChanged();
    }
    update();
    return;
  }
  const double extent = static_cast<double>(model_->endNs() - model_->startNs());
  if (!windowSet()) {
    setWindow(static_cast<double>(model_->startNs()) - extent * (kMaxExtentFactor - 1) / 2, extent * kMaxExtentFactor);
  } else if (followLive_) {
    const double width = viewEndNs_ - viewStartNs_;
    setWindow(static_cast<double>(model_->endNs()) + width * 0.02 - width, width);
  } else {
    setWindow(viewStartNs_, viewEndNs_ - viewStartNs_);  // eviction may have moved the data
  }
  update();
}

void TimelineView::onLanesChanged() {
  built_.revisions.clear();
  updateImplicitHeight();
  update();
}

void TimelineView::setWindow(double start, double width) {
  if (!std::isfinite(start) || !std::isfinite(width)) return;
  width = std::clamp(width, minWidthNs(), maxWidthNs());
  if (model_ && model_->eventCount() > 0) {
    // Keep the window on the data: within its extent plus the 5 % margin either side, or centred
    // on it when the window is wider than that (the data is shorter than the narrowest window).
    const double extent = static_cast<double>(model_->endNs() - model_->startNs());
    const double pad = extent * (kMaxExtentFactor - 1) / 2;
    const double lo = static_cast<double>(model_->startNs()) - pad;
    const double hi = static_cast<double>(model_->endNs()) + pad;
    start = width <= hi - lo ? std::clamp(start, lo, hi - width) : (lo + hi - width) / 2;
  }
  if (start == viewStartNs_ && start + width == viewEndNs_) return;
  viewStartNs_ = start;
  viewEndNs_ = start + width;
  Q_EMIT viewChanged();
  update();
}

void TimelineView::updateImplicitHeight() {
  const int lanes = model_ ? model_->laneCount() : 0;
  setImplicitHeight(lanes * (laneHeight_ + rowSpacing_));
}

double TimelineView::minWidthNs() const { return std::max(width(), 1.0) * kMinNsPerPixel; }

double TimelineView::maxWidthNs() const {
  if (!model_ || model_->eventCount() == 0) return std::numeric_limits<double>::max();
  const double extent = static_cast<double>(model_->endNs() - model_->startNs());
  return std::max(extent * kMaxExtentFactor, minWidthNs());
}

void TimelineView::geometryChange(const QRectF& newGeometry, const QRectF& oldGeometry) {
  QQuickItem::geometryChange(newGeometry, oldGeometry);
  if (newGeometry.width() != oldGeometry.width()) {
    // The window stays; its ns per pixel changes, and the narrowest window with it.
    if (windowSet()) setWindow(viewStartNs_, viewEndNs_ - viewStartNs_);
    Q_EMIT viewChanged();
    update();
  }
}

QSGNode* TimelineView::updatePaintNode(QSGNode* oldNode, UpdatePaintNodeData*) {
  // Qt Quick's software renderer (used where there is no OpenGL/Vulkan, and on the offscreen
  // platform) draws no custom geometry; there each box is a rectangle node instead.
  const bool software =
      window() && window()->rendererInterface()->graphicsApi() == QSGRendererInterface::Software;
  auto* root = static_cast<QSGTransformNode*>(oldNode);
  if (!root || software != built_.software) {
    delete root;
    root = new QSGTransformNode;
    built_ = Built{};
    built_.software = software;
  }
  const int lanes = model_ ? model_->laneCount() : 0;
  while (root->childCount() > lanes) {
    QSGNode* last = root->lastChild();
    root->removeChildNode(last);
    delete last;
  }
  while (root->childCount() < lanes) root->appendChildNode(software ? new QSGNode : newGeometryNode());
  built_.revisions.resize(static_cast<size_t>(lanes), kNotBuilt);

  const double nsPerPx = nsPerPixel();
  if (lanes == 0 || !(nsPerPx > 0)) {
    // No window: draw nothing, and build from scratch once there is one.
    for (QSGNode* child = root->firstChild(); child; child = child->nextSibling()) drawBoxes(child, {});
    std::fill(built_.revisions.begin(), built_.revisions.end(), kNotBuilt);
    built_.nsPerPixel = 0;
    return root;
  }

  // The build scale: ns per pixel rounded down to a power of two, so zooming within one octave
  // reuses the geometry and merging happens at no more than the current ns per pixel.
  const double scale = std::exp2(std::floor(std::log2(nsPerPx)));
  const bool rebuildAll = built_.rowsDirty || scale != built_.nsPerPixel ||
                          viewStartNs_ < static_cast<double>(built_.t0) || viewEndNs_ > static_cast<double>(built_.t1);
  if (rebuildAll) {
    const double width = viewEndNs_ - viewStartNs_;
    built_.nsPerPixel = scale;
    built_.originNs = std::llround(viewStartNs_);
    built_.t0 = static_cast<qint64>(std::floor(viewStartNs_ - width));
    built_.t1 = static_cast<qint64>(std::ceil(viewEndNs_ + width));
    built_.rowsDirty = false;
  }
  int lane = 0;
  for (QSGNode* child = root->firstChild(); child; child = child->nextSibling(), ++lane) {
    const quint64 revision = model_->laneRevision(lane);
    auto& builtRevision = built_.revisions[static_cast<size_t>(lane)];
    if (!rebuildAll && builtRevision == revision) continue;
    drawBoxes(child, laneRects(lane));
    builtRevision = revision;
    geometryRebuilds_.fetch_add(1, std::memory_order_relaxed);
  }

  // Timeline coordinates to item pixels: x = (t - origin) / scale  ->  (t - viewStart) / nsPerPx.
  QMatrix4x4 matrix;
  matrix.translate(static_cast<float>((static_cast<double>(built_.originNs) - viewStartNs_) / nsPerPx), 0);
  matrix.scale(static_cast<float>(scale / nsPerPx), 1);
  root->setMatrix(matrix);
  return root;
}

QSGGeometryNode* TimelineView::newGeometryNode() {
  auto* node = new QSGGeometryNode;
  auto* geometry = new QSGGeometry(QSGGeometry::defaultAttributes_ColoredPoint2D(), 0);
  geometry->setDrawingMode(QSGGeometry::DrawTriangles);
  node->setGeometry(geometry);
  node->setFlag(QSGNode::OwnsGeometry);
  node->setMaterial(new QSGVertexColorMaterial);
  node->setFlag(QSGNode::OwnsMaterial);
  return node;
}

std::vector<TimelineView::LaneRect> TimelineView::laneRects(int lane) const {
  const std::vector<TimelineBox> boxes = model_->boxesForLane(lane, built_.t0, built_.t1, built_.nsPerPixel);
  const auto origin = static_cast<double>(built_.originNs);
  const double scale = built_.nsPerPixel;
  // Boxes reaching far outside the built range are cut at its edges (plus a pixel), which keeps
  // the floats small and exact enough.
  const double lo = (static_cast<double>(built_.t0) - origin) / scale - 1;
  const double hi = (static_cast<double>(built_.t1) - origin) / scale + 1;
  const double top = lane * (laneHeight_ + rowSpacing_) + rowSpacing_ / 2;
  std::vector<LaneRect> rects;
  rects.reserve(boxes.size());
  for (const TimelineBox& box : boxes) {
    const double left = std::clamp((static_cast<double>(box.startNs) - origin) / scale, lo, hi);
    const double right = std::max(std::clamp((static_cast<double>(box.endNs) - origin) / scale, lo, hi),
                                  left + kMinBoxWidthBuildPx);
    rects.push_back(LaneRect{QRectF(left, top, right - left, laneHeight_), traceOpColor(box.op)});
  }
  return rects;
}

void TimelineView::drawBoxes(QSGNode* laneNode, const std::vector<LaneRect>& rects) {
  if (!built_.software) {
    auto* node = static_cast<QSGGeometryNode*>(laneNode);
    QSGGeometry* geometry = node->geometry();
    if (rects.empty() && geometry->vertexCount() == 0) return;
    geometry->allocate(static_cast<int>(rects.size() * 6));
    QSGGeometry::ColoredPoint2D* v = geometry->vertexDataAsColoredPoint2D();
    for (const LaneRect& rect : rects) {
      const auto x0 = static_cast<float>(rect.rect.left());
      const auto x1 = static_cast<float>(rect.rect.right());
      const auto y0 = static_cast<float>(rect.rect.top());
      const auto y1 = static_cast<float>(rect.rect.bottom());
      const auto r = static_cast<uchar>(rect.color.red());
      const auto g = static_cast<uchar>(rect.color.green());
      const auto b = static_cast<uchar>(rect.color.blue());
      v[0].set(x0, y0, r, g, b, 255);
      v[1].set(x1, y0, r, g, b, 255);
      v[2].set(x0, y1, r, g, b, 255);
      v[3].set(x1, y0, r, g, b, 255);
      v[4].set(x1, y1, r, g, b, 255);
      v[5].set(x0, y1, r, g, b, 255);
      v += 6;
    }
    node->markDirty(QSGNode::DirtyGeometry);
    return;
  }
  // Software renderer: one rectangle node per box, reusing the lane's existing ones.
  while (laneNode->childCount() > static_cast<int>(rects.size())) {
    QSGNode* last = laneNode->lastChild();
    laneNode->removeChildNode(last);
    delete last;
  }
  while (laneNode->childCount() < static_cast<int>(rects.size())) laneNode->appendChildNode(window()->createRectangleNode());
  QSGNode* child = laneNode->firstChild();
  for (const LaneRect& rect : rects) {
    auto* node = static_cast<QSGRectangleNode*>(child);
    node->setRect(rect.rect);
    node->setColor(rect.color);
    child = child->nextSibling();
  }
}

}  // namespace zipmoe::app
