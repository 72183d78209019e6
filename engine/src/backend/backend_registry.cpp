// The backends by name (see backend_registry.h): created at first use under one mutex, kept for the
// process (a backend outlives every engine that computes on it), and the process's choice.
#include "backend/backend_registry.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>

#include "backend/cpu_backend.h"
#include "backend/host_memory.h"
#include "zipmoe/base/error.h"
#ifdef ZIPMOE_CUDA_BACKEND
#include "backend/cuda/cuda_backend.h"
#endif

namespace zipmoe::backend {
namespace {

std::mutex registryMutex;
std::map<std::string, std::unique_ptr<ComputeBackend>>& created() {
  static std::map<std::string, std::unique_ptr<ComputeBackend>> backends;
  return backends;
}
std::atomic<ComputeBackend*> chosenBackend{nullptr};

std::unique_ptr<ComputeBackend> create(const std::string& name) {
  if (name == "cpu") return std::make_unique<CpuBackend>();
#ifdef ZIPMOE_CUDA_BACKEND
  if (name == "cuda") return std::make_unique<CudaBackend>();
#endif
  std::string known;
  for (const std::string& n : backendNames()) known += (known.empty() ? "" : ", ") + n;
  throw Error("compute backend '" + name + "': this build has none of that name (it has: " + known + ")");
}

}  // namespace

std::vector<std::string> backendNames() {
#ifdef ZIPMOE_CUDA_BACKEND
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

ComputeBackend& backendNamed(const std::string& name) {
  std::lock_guard lock(registryMutex);
  std::unique_ptr<ComputeBackend>& slot = created()[name];
  if (!slot) {
    try {
      slot = create(name);
    } catch (...) {
      created().erase(name);
      throw;
    }
  }
  return *slot;
}

ComputeBackend& defaultBackend() {
  if (ComputeBackend* b = chosenBackend.load(std::memory_order_acquire)) return *b;
  ComputeBackend& cpu = backendNamed("cpu");
  ComputeBackend* expected = nullptr;
  chosenBackend.compare_exchange_strong(expected, &cpu, std::memory_order_acq_rel);
  return *chosenBackend.load(std::memory_order_acquire);
}

void setDefaultBackend(const std::string& name) {
  ComputeBackend& b = backendNamed(name);
  chosenBackend.store(&b, std::memory_order_release);
  setDefaultMemory(&b);
}

}  // namespace zipmoe::backend
