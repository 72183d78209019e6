// Fuzzes the safetensors header parser with the input as the start of a file whose total size is
// taken from the first 4 bytes (so that offsets beyond the provided bytes are exercised too).
#include <cstddef>
#include <cstdint>
#include <span>

#include "zipmoe/base/error.h"
#include "zipmoe/hf/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  uint32_t extra = 0;
  for (int i = 0; i < 4; ++i) extra = (extra << 8) | data[i];
  const std::span<const uint8_t> bytes(data + 4, size - 4);
  try {
    const auto h = zipmoe::parseSafetensorsHeader(bytes, bytes.size() + (extra & 0xFFFF), "fuzz.safetensors");
    for (const auto& t : h.tensors) (void)t.numel();
  } catch (const zipmoe::Error&) {
  }
  return 0;
}
