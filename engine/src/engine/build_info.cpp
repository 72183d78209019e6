// Build and machine facts for `zipmoe info`: the libtorch the engine links, the BF16 kernel level
// chosen for this CPU, the matrix-product kernels, and the codecs compiled in.
#include "zipmoe/build_info.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

#include <sstream>
#include <thread>

#include "model/linear.h"
#include "zipmoe/format/bf16_split.h"
#include "zipmoe/profile/cost_profile.h"
#include "zipmoe/format/exponent_codec.h"
#include "zipmoe/model/model.h"

namespace zipmoe {

std::string buildInfo() {
  std::ostringstream o;
  o << "zipmoe " << ZIPMOE_VERSION_STRING << "\n";
  o << "libtorch      " << TORCH_VERSION << "\n";
  o << "bf16 kernels  " << bf16::simdLevelName(bf16::detectedSimdLevel()) << " (supported:";
  for (auto l : bf16::supportedSimdLevels()) o << " " << bf16::simdLevelName(l);
  o << "; merge measured fastest: " << bf16::simdLevelName(bf16::mergeSimdLevel()) << ")\n";
  o << "matmul        decoding (<= 8 rows): ";
  for (const MatmulKernel k : {MatmulKernel::Avx512Bf16, MatmulKernel::Avx2, MatmulKernel::Scalar})
    if (matmulKernelSupported(k)) {
      o << matmulKernelName(k) << " GEMV";
      break;
    }
  o << "; prefill: libtorch; " << availableCpus() << " compute threads by default (libtorch's own default here: "
    << at::get_num_threads() << ")\n";
  o << "cost profile  measured by code '" << kernelsIdentity() << "' (a saved profile must name the same)\n";
  o << "codecs       ";
  for (const auto& s : benchmarkCodecSpecs()) o << " " << describe(s);
  o << "\n";
  o << "hardware      " << std::thread::hardware_concurrency() << " hardware threads\n";
  return o.str();
}

}  // namespace zipmoe
