// The state DistributedExperts shares with its Coordinator (internal to dist/): the nodes with their
// stubs and descriptions, the routing of the current epoch, the statistics and the count of calls
// in flight per epoch (a migration drops the old holdings only when its epoch has none).
// Thread-safety: `mutex` guards everything below it; stubs are thread-safe. Cost: none.
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "dist/node_protocol.h"
#include "zipmoe/dist/distributed_experts.h"

namespace zipmoe {

struct NodeMember {
  std::string address;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<dist::ExpertNode::Stub> stub;
  dist::NodeDescription description;  // as connect() found it
  std::atomic<bool> down{false};
};

// Who computes each expert in one epoch: member 0 is this engine, m ≥ 1 is nodes[m − 1].
struct EpochRouting {
  uint64_t epoch = 0;
  ExpertPlacement placement;
  std::vector<int> owner;  // [layer × experts + expert]; −1 = nobody (computed here as a fallback)
};

struct DistributedExperts::Impl {
  std::shared_ptr<ExpertProvider> local, fallback;
  DistributedOptions options;
  std::vector<std::unique_ptr<NodeMember>> nodes;
  int layers = 0, experts = 0;
  int64_t hidden = 0, intermediate = 0;
  uint64_t expertBytes = 0;
  double localBytesPerSecond = 0;  // how fast this engine's own store delivered an expert (measured at connect)

  mutable std::mutex mutex;
  std::condition_variable idle;  // an epoch's last call in flight ended
  std::shared_ptr<const EpochRouting> routing;
  std::map<uint64_t, int> inFlight;  // calls per epoch
  DistributedStats stats;
  // The current layer step (the model's thread only): its routing and which member computes each expert.
  std::shared_ptr<const EpochRouting> stepRouting;
  std::vector<int> stepOwner;

  // Adds metadata and a deadline to a call's context.
  void prepare(grpc::ClientContext& context, std::chrono::milliseconds deadline) const;
  void markDown(int member, const std::string& why);
  // The owner table of a placement, preferring this engine, then the first live node that holds an expert.
  std::vector<int> ownersOf(const ExpertPlacement& placement) const;
  void switchTo(std::shared_ptr<const EpochRouting> next);
  // Blocks until no call of `epoch` is in flight.
  void waitIdle(uint64_t epoch);
};

}  // namespace zipmoe
