// libFuzzer target: the files ZipMoE reads from the user's state directory and from /proc — the
// activation history (history::fromJson, a file any program of the user may have written) and the
// memory readings of `--budget auto` (parseMeminfo, parsePressureSome10). Any input must give a
// result or a zipmoe::Error, never a crash, a hang or undefined behaviour.
#include <cstddef>
#include <cstdint>
#include <string>

#include "experts/activation_history.h"
#include "zipmoe/base/error.h"
#include "zipmoe/plan/memory_follower.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    std::string identity;
    const zipmoe::ActivationCounts c = zipmoe::history::fromJson(text, "fuzz.json", &identity);
    if (c.counts.size() != static_cast<size_t>(c.layers) * static_cast<size_t>(c.experts)) __builtin_trap();
  } catch (const zipmoe::Error&) {
  }
  try {
    const zipmoe::MemoryReading r = zipmoe::parseMeminfo(text, "fuzz-meminfo");
    if (r.availableBytes > r.totalBytes) __builtin_trap();
  } catch (const zipmoe::Error&) {
  }
  (void)zipmoe::parsePressureSome10(text);
  return 0;
}
