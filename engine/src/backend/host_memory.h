// HostMemory — the CPU's DeviceMemory (backend/compute_backend.h): io::AlignedBuffer for buffers of
// either placement, io::PagePool to recycle the expert caches' pages, bf16::merge (the SIMD merge
// picked at first use) for recovery. And the
// process-wide memory the expert runtime allocates its buffers from and recovers with
// (defaultMemory): the CPU's unless a compute backend was chosen (backend/backend_registry.h).
// In zipmoe_core, without libtorch, so that the runtime and its threaded tests use it directly.
// Thread-safety: HostMemory is stateless; defaultMemory / setDefaultMemory are atomic (choose before
// building an engine: a runtime keeps the memory it was built with). Cost: see DeviceMemory.
#pragma once

#include "backend/compute_backend.h"

namespace zipmoe::backend {

class HostMemory final : public DeviceMemory {
 public:
  DeviceKind kind() const override { return DeviceKind::Cpu; }
  std::string name() const override { return "cpu"; }
  io::AlignedBuffer allocate(size_t bytes, Placement where) const override;
  void recover(const uint8_t* exponents, const uint8_t* signMantissa, size_t count, uint16_t* words) const override;
  // A fresh io::PagePool: the CPU's pages are recycled between expert buffers.
  std::shared_ptr<io::PagePool> recyclingPool() const override;
};

// The one HostMemory of the process.
const HostMemory& hostMemory();

// The memory the expert runtime's buffers come from (the executor's staging, output and kept
// buffers, prefetched planes) and its recovery runs on: hostMemory() until setDefaultMemory.
const DeviceMemory& defaultMemory();
// Sets it (nullptr: back to hostMemory()). REQUIRES: `memory` outlives every runtime built after.
void setDefaultMemory(const DeviceMemory* memory);

}  // namespace zipmoe::backend
