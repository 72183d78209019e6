// HostMemory (see host_memory.h): the CPU's buffers and recovery, delegating to io::AlignedBuffer
// and bf16::merge; and the process-wide default memory.
#include "backend/host_memory.h"

#include <atomic>
#include <string>

#include "io/page_pool.h"
#include "zipmoe/base/error.h"
#include "zipmoe/format/bf16_split.h"

namespace zipmoe::backend {

io::AlignedBuffer HostMemory::allocate(size_t bytes, Placement) const {
  // One kind of memory on a CPU: the device computes from what O_DIRECT reads into.
  return io::AlignedBuffer(bytes, 4096);
}

std::shared_ptr<io::PagePool> HostMemory::recyclingPool() const { return io::PagePool::create(); }

void HostMemory::recover(const uint8_t* exponents, const uint8_t* signMantissa, size_t count, uint16_t* words) const {
  bf16::merge(exponents, signMantissa, count, words);
}

void requireGatedMlpShapes(const char* backend, const Weight& gate, const Weight& up, const Weight& down) {
  const int64_t cols = gate.cols, width = gate.rows;
  if (up.rows != width || up.cols != cols || down.rows != cols || down.cols != width)
    throw Error(std::string(backend) + ": gated MLP: gate " + std::to_string(gate.rows) + " × " +
                std::to_string(gate.cols) + ", up " + std::to_string(up.rows) + " × " + std::to_string(up.cols) +
                ", down " + std::to_string(down.rows) + " × " + std::to_string(down.cols) +
                "; expected gate and up [width × cols], down [cols × width]");
}

const HostMemory& hostMemory() {
  static const HostMemory memory;
  return memory;
}

namespace {
std::atomic<const DeviceMemory*> chosenMemory{nullptr};
}  // namespace

const DeviceMemory& defaultMemory() {
  const DeviceMemory* m = chosenMemory.load(std::memory_order_acquire);
  return m ? *m : hostMemory();
}

void setDefaultMemory(const DeviceMemory* memory) { chosenMemory.store(memory, std::memory_order_release); }

}  // namespace zipmoe::backend
