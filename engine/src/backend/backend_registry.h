// The compute backends of this build by name, and the process-wide choice of one.
//   "cpu"   CpuBackend (always);
//   "cuda"  CudaBackend (builds with ZIPMOE_CUDA=ON; it needs a GPU at run time).
// defaultBackend() is what the model's expert computations call (expertOutput, the MoE block's fused
// expert FFN); setDefaultBackend also points the expert runtime's memory (backend/host_memory.h,
// defaultMemory) at the chosen backend, so that expert buffers come from the device that computes.
// Thread-safety: all functions may be called from any thread; choose before building an engine
// (a runtime keeps the memory it was built with). Cost: the first use of a backend creates it
// (CUDA: the context and cuBLAS handle, up to seconds); later look-ups are a map find.
#pragma once

#include <string>
#include <vector>

#include "backend/compute_backend.h"

namespace zipmoe::backend {

// The names this build knows, "cpu" first.
std::vector<std::string> backendNames();
// The backend of that name, created at first use and kept for the process. Throws zipmoe::Error
// naming the backend and the known names when this build has none of that name, or the device's
// own error when it cannot start (no GPU, no driver).
ComputeBackend& backendNamed(const std::string& name);
// The process's backend: "cpu" until setDefaultBackend.
ComputeBackend& defaultBackend();
// Chooses the process's backend by name (and the runtime's memory with it). Throws as backendNamed.
void setDefaultBackend(const std::string& name);

}  // namespace zipmoe::backend
