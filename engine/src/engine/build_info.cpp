// Build and machine facts for `zipmoe info`: the libtorch the engine links, the BF16 kernel level
// chosen for this CPU, and the codecs compiled in.
#include "zipmoe/build_info.h"

#include <torch/version.h>

#include <sstream>
#include <thread>

#include "zipmoe/bf16_split.h"
#include "zipmoe/exponent_codec.h"

namespace zipmoe {

std::string buildInfo() {
  std::ostringstream o;
  o << "zipmoe " << ZIPMOE_VERSION_STRING << "\n";
  o << "libtorch      " << TORCH_VERSION << "\n";
  o << "bf16 kernels  " << bf16::simdLevelName(bf16::detectedSimdLevel()) << " (supported:";
  for (auto l : bf16::supportedSimdLevels()) o << " " << bf16::simdLevelName(l);
  o << ")\n";
  o << "codecs       ";
  for (const auto& s : benchmarkCodecSpecs()) o << " " << describe(s);
  o << "\n";
  o << "hardware      " << std::thread::hardware_concurrency() << " hardware threads\n";
  return o.str();
}

}  // namespace zipmoe
