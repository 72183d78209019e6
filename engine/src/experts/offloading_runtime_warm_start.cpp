// OffloadingRuntime (experts/offloading_runtime.h): the warm start (ExpertRuntime::warmUp). Layer by
// layer, the experts the plan in force would keep are read as a batch of their own, not counted as
// demand, and readied for their first use; the model's first acquire() stops it between layers.
#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "experts/offloading_runtime.h"

namespace zipmoe::experts {

using sched::seconds;

WarmUpResult OffloadingRuntime::warmUp(const std::atomic<bool>* stop) {
  WarmUpResult result;
  const auto start = Clock::now();
  for (int layer = 0; layer < sizes_.layers(); ++layer) {
    std::lock_guard warm(warmMutex_);  // held for the layer's batch: acquire() waits for it
    if (demanded_.load() || (stop && stop->load())) {
      result.stopped = true;
      break;
    }
    std::vector<ExpertRequest> requests;
    std::unique_ptr<ExpertBatch> batch;
    {
      std::lock_guard lock(cacheMutex_);
      for (int e : strategy_->warmSet(*cache_, plan_, layer))
        requests.push_back(ExpertRequest{.expert = e, .tokens = 1, .acceptsSplit = true, .mergesSplit = true});
      if (!requests.empty()) {
        auto job = std::make_shared<sched::LayerJob>();
        job->layer = layer;
        job->token = static_cast<int>(token_);
        job->traced = false;  // no step of the model's: the schedule's lanes would show it as token 0's
        job->start = Clock::now();
        auto kept = std::make_shared<std::vector<Keep>>();
        experts::JobCounts counts;  // not counted: a warm start is no demand
        const experts::LayerRequest request{layer, requests, {}, plan_.pools, useClock_};
        strategy_->buildJob(*cache_, request, *job, *kept, counts);
        batch = executor_->run(job, [this, kept, &result](sched::LayerJob& done) {
          std::lock_guard batchLock(cacheMutex_);
          result.experts += finishBatch(done, *kept);
          result.bytesRead += done.bytesRead;
        });
      }
    }
    if (batch) {
      while (batch->next()) {
      }
      batch.reset();  // commits what the layer keeps
    }
    // What the layer now keeps, readied for its first use while the model does not wait (a C
    // member's codes indexed for reading in place: about as long as reading them from memory once).
    // A demand stops it between experts; an expert not reached is readied at its first use.
    for (const ExpertRequest& r : requests) {
      if (demanded_.load()) break;
      std::lock_guard lock(cacheMutex_);
      if (strategy_->prepareWarm(*cache_, layer, r.expert)) ++result.prepared;
    }
    ++result.layers;
  }
  result.seconds = seconds(Clock::now() - start);
  std::lock_guard statsLock(statsMutex_);
  stats_.warmLayers += result.layers;
  stats_.warmExperts += result.experts;
  stats_.warmBytes += result.bytesRead;
  stats_.warmPrepared += result.prepared;
  stats_.warmSeconds += result.seconds;
  return result;
}

}  // namespace zipmoe::experts
