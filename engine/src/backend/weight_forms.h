// The model's GemvWeight (model/linear.h) and the backend's Weight (backend/compute_backend.h) are the
// same three forms of one weight matrix; these convert between them field by field, so that the MoE
// block hands the runtime's forms to a backend unchanged. Includes <ATen/ATen.h> (through
// model/linear.h): for the model's sources, not for the runtime's.
// Thread-safety: pure. Cost: a copy of five fields.
#pragma once

#include "backend/compute_backend.h"
#include "model/linear.h"

namespace zipmoe::backend {

inline Weight weightOf(const GemvWeight& w) {
  return Weight{w.words, w.exponents, w.signMantissa, w.nibble, w.rows, w.cols};
}

inline GemvWeight gemvWeightOf(const Weight& w) {
  GemvWeight g;
  g.words = w.words;
  g.exponents = w.exponents;
  g.signMantissa = w.signMantissa;
  g.nibble = w.nibble;
  g.rows = w.rows;
  g.cols = w.cols;
  return g;
}

}  // namespace zipmoe::backend
