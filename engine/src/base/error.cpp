#include "zipmoe/base/error.h"

#include <cstring>

namespace zipmoe {

std::string systemErrorMessage(const std::string& what, int errnoValue) {
  return what + ": " + std::strerror(errnoValue);
}

}  // namespace zipmoe
