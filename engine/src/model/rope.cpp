// Rope: frequency tables and rotations (see rope.h). Thread-safety: immutable. Cost: O(n × dim).
#include "model/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace zipmoe {
namespace {

// 1 / base^(arange(0, dim, 2) / dim), in fp32 like transformers.
at::Tensor baseFrequencies(double base, int dim) {
  const at::Tensor exponents = at::arange(0, dim, 2, at::kLong).to(at::kFloat) / dim;
  return at::pow(base, exponents);
}

double correctionDim(double rotations, int dim, double base, int maxPositions) {
  return dim * std::log(maxPositions / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

double yarnGetMscale(double scale, double mscale) {
  if (scale <= 1) return 1.0;
  return 0.1 * mscale * std::log(scale) + 1.0;
}

Rope::Rope(const ModelConfig& config, int rotaryDim, Layout layout) : layout_(layout) {
  const double base = config.ropeTheta;
  const RopeScaling& rs = config.ropeScaling;
  const at::Tensor posFreqs = baseFrequencies(base, rotaryDim);
  if (rs.type.empty()) {
    invFreq_ = at::reciprocal(posFreqs);
  } else if (rs.type == "linear") {
    invFreq_ = at::reciprocal(posFreqs) / rs.factor;
  } else {  // yarn
    const int original = rs.originalMaxPositionEmbeddings;
    const double factor = rs.factor;
    if (rs.attentionFactor > 0) {
      attentionScaling_ = rs.attentionFactor;
    } else if (rs.mscale != 0 && rs.mscaleAllDim != 0) {
      attentionScaling_ = yarnGetMscale(factor, rs.mscale) / yarnGetMscale(factor, rs.mscaleAllDim);
    } else {
      attentionScaling_ = yarnGetMscale(factor, 1.0);
    }
    double low = correctionDim(rs.betaFast, rotaryDim, base, original);
    double high = correctionDim(rs.betaSlow, rotaryDim, base, original);
    if (rs.truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0);
    high = std::min(high, static_cast<double>(rotaryDim - 1));
    if (low == high) high += 0.001;
    const at::Tensor ramp = ((at::arange(rotaryDim / 2, at::kFloat) - low) / (high - low)).clamp(0, 1);
    const at::Tensor extrapolationFactor = 1 - ramp;
    const at::Tensor extrapolation = at::reciprocal(posFreqs);
    const at::Tensor interpolation = at::reciprocal(factor * posFreqs);
    invFreq_ = interpolation * (1 - extrapolationFactor) + extrapolation * extrapolationFactor;
  }
}

Rope::Tables Rope::tables(const at::Tensor& positions) const {
  const at::Tensor freqs = positions.to(at::kFloat).unsqueeze(1) * invFreq_.unsqueeze(0);
  Tables t{freqs.cos(), freqs.sin()};
  if (attentionScaling_ != 1.0) {
    t.cos = t.cos * attentionScaling_;
    t.sin = t.sin * attentionScaling_;
  }
  return t;
}

at::Tensor Rope::apply(const at::Tensor& x, const Tables& t) const {
  const int64_t half = x.size(-1) / 2;
  if (layout_ == Layout::Half) {
    const at::Tensor cos = at::cat({t.cos, t.cos}, -1).unsqueeze(1).to(x.scalar_type());
    const at::Tensor sin = at::cat({t.sin, t.sin}, -1).unsqueeze(1).to(x.scalar_type());
    const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
    return x * cos + rotated * sin;
  }
  const at::Tensor pairs = x.to(at::kFloat).reshape({x.size(0), x.size(1), half, 2});
  const at::Tensor a = pairs.select(-1, 0), b = pairs.select(-1, 1);
  const at::Tensor c = t.cos.unsqueeze(1), s = t.sin.unsqueeze(1);
  return at::stack({a * c - b * s, a * s + b * c}, -1).flatten(-2).to(x.scalar_type());
}

}  // namespace zipmoe
