#include "commands.h"
#include "zipmoe/error.h"
namespace zipmoe::cli {
int runBenchDist(const Args&) { throw Error("bench dist: under construction"); }
}  // namespace zipmoe::cli
