// Facts about this build and this machine (libtorch version, SIMD level, codecs), for `zipmoe info`
// and bug reports. Thread-safety: re-entrant. Cost: negligible.
#pragma once

#include <string>

namespace zipmoe {

std::string buildInfo();

}  // namespace zipmoe
