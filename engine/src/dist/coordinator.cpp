// Coordinator: DanceMoE placement over this engine and its nodes, migrated by epochs (see
// zipmoe/dist/distributed_experts.h).
#include <algorithm>
#include <condition_variable>
#include <thread>
#include <map>
#include <optional>

#include "dist/distributed_state.h"
#include "zipmoe/dist/distributed_experts.h"
#include "zipmoe/base/error.h"

namespace zipmoe {
namespace {

// What `to` holds and `from` does not, per layer, as a node message.
dist::ExpertSet difference(const ExpertPlacement& to, const ExpertPlacement& from, int member, uint64_t epoch,
                           uint64_t& count) {
  dist::ExpertSet set;
  set.set_epoch(epoch);
  for (int l = 0; l < to.layers(); ++l) {
    dist::LayerExperts* layer = nullptr;
    for (int e : to.held[static_cast<size_t>(member)][static_cast<size_t>(l)])
      if (!from.holds(member, l, e)) {
        if (!layer) {
          layer = set.add_experts();
          layer->set_layer(l);
        }
        layer->add_experts(e);
        ++count;
      }
  }
  return set;
}

// A node that has not measured a load yet (it loaded nothing) is assumed to read at this speed.
constexpr double kUnmeasuredBytesPerSecond = 1e9;

}  // namespace

Coordinator::Coordinator(std::shared_ptr<DistributedExperts> experts, CoordinatorOptions options)
    : experts_(std::move(experts)), options_(options) {
  if (!experts_) throw Error("coordinator: no distributed experts");
  if (!(options_.historyDecay >= 0 && options_.historyDecay <= 1) || !(options_.horizonRepeats > 0))
    throw Error("coordinator: historyDecay " + std::to_string(options_.historyDecay) + " must be in [0, 1] and horizonRepeats " +
                std::to_string(options_.horizonRepeats) + " positive");
}

PlacementInput Coordinator::gatherInput() const {
  DistributedExperts::Impl& impl = *experts_->impl_;
  const size_t cells = static_cast<size_t>(impl.layers) * static_cast<size_t>(impl.experts);
  PlacementInput in;
  in.expertsPerLayer.assign(static_cast<size_t>(impl.layers), impl.experts);
  in.expertBytes = impl.expertBytes;
  in.nodeNames = experts_->memberNames();
  const auto toLayers = [&](const std::vector<double>& flat) {
    std::vector<std::vector<double>> layers(static_cast<size_t>(impl.layers));
    for (int l = 0; l < impl.layers; ++l)
      layers[static_cast<size_t>(l)].assign(flat.begin() + l * impl.experts, flat.begin() + (l + 1) * impl.experts);
    return layers;
  };
  std::vector<double> local(cells, 0);
  const DistributedStats stats = experts_->stats();
  for (size_t i = 0; i < cells; ++i)
    local[i] = static_cast<double>(stats.activations[i] - (i < lastLocalCounts_.size() ? lastLocalCounts_[i] : 0)) +
               (i < history_.size() ? options_.historyDecay * history_[i] : 0.0);
  in.frequency.push_back(toLayers(local));
  uint64_t largest = 0;
  for (const auto& node : impl.nodes) largest = std::max<uint64_t>(largest, node->description.memory_bytes());
  in.memoryBytes.push_back(options_.localMemoryBytes ? options_.localMemoryBytes : largest);
  // Other engines' requests (an origin named like a node) count for that node.
  std::map<std::string, std::vector<double>> byOrigin;
  for (const auto& node : impl.nodes) {
    if (node->down) continue;
    grpc::ClientContext context;
    impl.prepare(context, impl.options.deadline);
    dist::ActivationsReply reply;
    if (!node->stub->Activations(&context, dist::ActivationsRequest(), &reply).ok()) continue;
    for (const auto& o : reply.origins()) {
      auto& sum = byOrigin[o.origin()];
      sum.resize(cells, 0);
      for (int i = 0; i < o.counts_size() && static_cast<size_t>(i) < cells; ++i) sum[static_cast<size_t>(i)] += static_cast<double>(o.counts(i));
    }
  }
  for (const auto& node : impl.nodes) {
    std::vector<double> f(cells, 0);
    if (const auto it = byOrigin.find(node->address); it != byOrigin.end()) f = it->second;
    in.frequency.push_back(toLayers(f));
    in.memoryBytes.push_back(node->down ? 0 : node->description.memory_bytes());
  }
  return in;
}

MigrationReport Coordinator::rebalance(bool force) {
  DistributedExperts::Impl& impl = *experts_->impl_;
  const PlacementInput in = gatherInput();
  const ExpertPlacement current = experts_->placement();
  const ExpertPlacement candidate = placeExperts(in);
  MigrationInputs measured;
  // This engine "loads" by its provider's first delivery of an expert: a read from its store, or
  // nothing for the resident provider (measured at connect, so near free then).
  measured.bytesPerSecond.push_back(impl.localBytesPerSecond);
  for (const auto& node : impl.nodes) {
    const double speed = node->description.load_bytes_per_second();
    measured.bytesPerSecond.push_back(speed > 0 ? speed : kUnmeasuredBytesPerSecond);
  }
  const DistributedStats stats = experts_->stats();
  measured.secondsPerRemoteCall = stats.remoteExperts ? stats.remoteSeconds / static_cast<double>(stats.remoteExperts) : 0;
  measured.horizonRepeats = options_.horizonRepeats;
  MigrationReport report;
  report.decision = decideMigration(in, current, candidate, measured);
  report.localShareBefore = localShare(in, current);
  report.localShareAfter = report.localShareBefore;
  report.epoch = stats.epoch;
  lastLocalCounts_ = stats.activations;
  history_.clear();
  for (const auto& layer : in.frequency[0]) history_.insert(history_.end(), layer.begin(), layer.end());
  if (current == candidate || (!force && !report.decision.migrate)) return report;

  const uint64_t epoch = stats.epoch + 1;
  // Load: every node gains its new experts; its reply is the acknowledgement.
  for (size_t m = 0; m < impl.nodes.size(); ++m) {
    NodeMember& node = *impl.nodes[m];
    uint64_t count = 0;
    const dist::ExpertSet gain = difference(candidate, current, static_cast<int>(m + 1), epoch, count);
    if (count == 0) continue;
    grpc::ClientContext context;
    const double speed = measured.bytesPerSecond[m + 1];
    const auto expected = std::chrono::milliseconds(static_cast<int64_t>(1e3 * static_cast<double>(count * impl.expertBytes) / speed));
    impl.prepare(context, impl.options.deadline + 4 * expected + std::chrono::seconds(30));
    dist::LoadReply reply;
    const grpc::Status status = node.stub->LoadExperts(&context, gain, &reply);
    if (!status.ok())
      throw Error("migration to epoch " + std::to_string(epoch) + ": node " + node.address + " did not load its " +
                  std::to_string(count) + " experts (" + dist::describeStatus(status) +
                  "); the placement stays at epoch " + std::to_string(stats.epoch));
    if (reply.seconds() > 0 && reply.bytes_loaded() > 0)
      node.description.set_load_bytes_per_second(static_cast<double>(reply.bytes_loaded()) / reply.seconds());
    report.expertsLoaded += count;
  }
  // Switch: the next layer step routes by the new placement.
  auto next = std::make_shared<EpochRouting>();
  next->epoch = epoch;
  next->owner = impl.ownersOf(candidate);
  next->placement = candidate;
  impl.switchTo(next);
  // Drop: once no call of the old epoch is in flight, the nodes let go of what they lost.
  impl.waitIdle(stats.epoch);
  for (size_t m = 0; m < impl.nodes.size(); ++m) {
    NodeMember& node = *impl.nodes[m];
    uint64_t count = 0;
    const dist::ExpertSet lose = difference(current, candidate, static_cast<int>(m + 1), epoch, count);
    if (count == 0 || node.down) continue;
    grpc::ClientContext context;
    impl.prepare(context, impl.options.deadline);
    dist::DropReply reply;
    if (node.stub->DropExperts(&context, lose, &reply).ok()) report.expertsDropped += count;
  }
  {
    std::lock_guard lock(impl.mutex);
    ++impl.stats.migrations;
  }
  report.migrated = true;
  report.epoch = epoch;
  report.localShareAfter = localShare(in, candidate);
  return report;
}

struct PeriodicRebalancer::State {
  std::shared_ptr<Coordinator> coordinator;
  std::chrono::milliseconds interval;
  mutable std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::vector<MigrationReport> reports;
  std::string lastError;
  std::thread thread;
};

PeriodicRebalancer::PeriodicRebalancer(std::shared_ptr<Coordinator> coordinator, std::chrono::milliseconds interval)
    : state_(std::make_shared<State>()) {
  if (!coordinator || interval.count() <= 0) throw Error("rebalancer: needs a coordinator and a positive interval");
  state_->coordinator = std::move(coordinator);
  state_->interval = interval;
  State* s = state_.get();
  state_->thread = std::thread([s] {
    std::unique_lock lock(s->mutex);
    while (!s->wake.wait_for(lock, s->interval, [s] { return s->stopping; })) {
      lock.unlock();
      std::optional<MigrationReport> report;
      std::string error;
      try {
        report = s->coordinator->rebalance();
      } catch (const std::exception& e) {
        error = e.what();
      }
      lock.lock();
      if (report) s->reports.push_back(*report);
      if (!error.empty()) s->lastError = error;
    }
  });
}

PeriodicRebalancer::~PeriodicRebalancer() {
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
}

std::vector<MigrationReport> PeriodicRebalancer::reports() const {
  std::lock_guard lock(state_->mutex);
  return state_->reports;
}

std::string PeriodicRebalancer::lastError() const {
  std::lock_guard lock(state_->mutex);
  return state_->lastError;
}

}  // namespace zipmoe
