// Internal: LayerBatch — the model thread's side of one executor job: the ExpertBatch that
// Executor::run returns. next() first releases the expert the model was computing (its compute time
// measured, its output or staging slot given back), then waits for the first ready expert in the
// job's compute order and hands it over: BF16 tensors, split planes, or nibble codes read in place.
// The destructor cancels what is left of the job, waits for its running operations, frees its slots
// and runs the job's onEnd. A failed job makes next() throw its error.
// Thread-safety: the model's thread only; it works under the executor's mutex. Cost: a mutex round
// trip per expert, plus the wait for it (traced as a stall when longer than 20 µs).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "sched/executor.h"
#include "zipmoe/experts/expert_provider.h"

namespace zipmoe::sched {

class LayerBatch : public ExpertBatch {
 public:
  LayerBatch(Executor& ex, std::shared_ptr<LayerJob> job, std::function<void(LayerJob&)> onEnd)
      : ex_(ex), job_(std::move(job)), onEnd_(std::move(onEnd)) {}

  ~LayerBatch() override;

  std::optional<ReadyExpert> next() override;

 private:
  // Under the mutex: the model has finished the expert it was computing.
  void releaseCurrent();

  Executor& ex_;
  std::shared_ptr<LayerJob> job_;
  std::function<void(LayerJob&)> onEnd_;
};

}  // namespace zipmoe::sched
