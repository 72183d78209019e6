// DistributedExperts: experts computed here or on the nodes that hold them (see
// zipmoe/dist/distributed_experts.h).
#include "zipmoe/dist/distributed_experts.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <deque>
#include <thread>

#include <ATen/ATen.h>

#include "base/crc32c.h"
#include "dist/distributed_state.h"
#include "model/expert_compute.h"
#include "zipmoe/base/error.h"
#include "zipmoe/dist/expert_node.h"

namespace zipmoe {
namespace {

using Clock = std::chrono::steady_clock;

class EmptyBatch : public ExpertBatch {
 public:
  std::optional<ReadyExpert> next() override { return std::nullopt; }
};

// One layer step's calls to the nodes, and the outputs as they arrive (or are computed here instead).
class NodeCalls : public ExpertOutputs {
 public:
  struct Call {
    int member = 0;
    grpc::ClientContext context;
    dist::ComputeRequest request;
    dist::ComputeReply reply;
    grpc::Status status;
    Clock::time_point sent, answered;
    bool finished = false, handled = false;
    std::vector<ExpertRows> inputs;  // copies: the caller's span lives only through computeElsewhere
  };

  NodeCalls(DistributedExperts::Impl& impl, std::shared_ptr<const EpochRouting> routing, int layer, ActivationType type,
            int64_t hidden)
      : impl_(impl), routing_(std::move(routing)), layer_(layer), type_(type), hidden_(hidden) {}

  ~NodeCalls() override {
    {
      std::unique_lock lock(mutex_);
      for (auto& c : calls_)
        if (!c->finished) c->context.TryCancel();
      finishedCv_.wait(lock, [&] { return unfinished_ == 0; });
    }
    std::lock_guard lock(impl_.mutex);
    if (--impl_.inFlight[routing_->epoch] == 0) {
      impl_.inFlight.erase(routing_->epoch);
      impl_.idle.notify_all();
    }
  }

  // The step's in-flight count was taken by computedElsewhere; this object gives it back.
  void start(std::vector<std::unique_ptr<Call>> calls) {
    calls_ = std::move(calls);
    unfinished_ = static_cast<int>(calls_.size());
    for (auto& c : calls_) {
      Call* call = c.get();
      impl_.prepare(call->context, impl_.options.deadline);
      call->sent = Clock::now();
      NodeMember& node = *impl_.nodes[static_cast<size_t>(call->member - 1)];
      node.stub->async()->Compute(&call->context, &call->request, &call->reply, [this, call](grpc::Status status) {
        std::lock_guard lock(mutex_);
        call->answered = Clock::now();
        call->status = std::move(status);
        call->finished = true;
        --unfinished_;
        finishedCv_.notify_all();
      });
    }
  }

  std::optional<ComputedExpert> next() override {
    for (;;) {
      if (!ready_.empty()) {
        const ComputedExpert out = ready_.front();
        ready_.pop_front();
        return out;
      }
      Call* done = nullptr;
      {
        std::unique_lock lock(mutex_);
        const auto pending = [&] {
          for (auto& c : calls_)
            if (c->finished && !c->handled) return c.get();
          return static_cast<Call*>(nullptr);
        };
        // gRPC ends every call by its deadline; the extra second only guards against a lost callback.
        const auto limit = Clock::now() + impl_.options.deadline + std::chrono::seconds(1);
        while (!(done = pending()) && unfinished_ > 0)
          if (finishedCv_.wait_until(lock, limit) == std::cv_status::timeout)
            for (auto& c : calls_)
              if (!c->finished) c->context.TryCancel();
        if (!done) return std::nullopt;  // every call handled
        done->handled = true;
      }
      handle(*done);
    }
  }

 private:
  void handle(Call& call) {
    const NodeMember& node = *impl_.nodes[static_cast<size_t>(call.member - 1)];
    // The round trip as the network and the node made it (not how long this thread took to look),
    // plus the injected latency, which the output waits out.
    const double seconds = std::chrono::duration<double>(call.answered - call.sent + impl_.options.injectedLatency).count();
    if (impl_.options.injectedLatency.count() > 0) std::this_thread::sleep_until(call.answered + impl_.options.injectedLatency);
    std::string problem;
    if (!call.status.ok()) {
      problem = dist::describeStatus(call.status);
    } else if (call.reply.outputs_size() != call.request.inputs_size()) {
      problem = "it returned " + std::to_string(call.reply.outputs_size()) + " outputs for " +
                std::to_string(call.request.inputs_size()) + " experts";
    } else {
      for (int i = 0; i < call.reply.outputs_size() && problem.empty(); ++i)
        if (call.reply.outputs(i).expert() != call.request.inputs(i).expert() ||
            call.reply.outputs(i).data().size() != call.request.inputs(i).data().size())
          problem = "its output for expert " + std::to_string(call.request.inputs(i).expert()) + " has the wrong size";
    }
    {
      std::lock_guard lock(impl_.mutex);
      ++impl_.stats.remoteCalls;
      impl_.stats.remoteSeconds += seconds;
      impl_.stats.bytesSent += static_cast<uint64_t>(call.request.ByteSizeLong());
      if (problem.empty()) {
        impl_.stats.bytesReceived += static_cast<uint64_t>(call.reply.ByteSizeLong());
        impl_.stats.remoteExperts += static_cast<uint64_t>(call.request.inputs_size());
      } else {
        ++impl_.stats.failedCalls;
      }
    }
    if (problem.empty()) {
      for (const auto& o : call.reply.outputs()) ready_.push_back({o.expert(), o.data().data()});
      return;
    }
    const std::string what = "node " + node.address + " failed layer " + std::to_string(layer_) + " (" + problem + ")";
    if (call.status.error_code() != grpc::StatusCode::FAILED_PRECONDITION) impl_.markDown(call.member, problem);
    if (impl_.options.onFailure == NodeFailurePolicy::Fail)
      throw Error(what + "; its experts are not computed here (--node-failure fail)");
    computeHere(call);
  }

  // The fallback: the experts of a failed call, from this machine's own store.
  void computeHere(const Call& call) {
    const at::ScalarType dtype = type_ == ActivationType::BFloat16 ? at::kBFloat16 : at::kFloat;
    for (const ExpertRows& row : call.inputs) {
      const ExpertRows* in = &row;
      const ExpertRequest request{in->expert, static_cast<int>(in->rows), false, true};
      const auto batch = impl_.fallback->acquire(layer_, std::span<const ExpertRequest>(&request, 1));
      const auto ready = batch->next();
      if (!ready || ready->expert != in->expert || ready->tensors.size() != 3)
        throw Error("distributed experts: the fallback provider did not deliver expert " + std::to_string(in->expert) +
                    " of layer " + std::to_string(layer_));
      std::array<const uint16_t*, 3> words{};
      for (size_t kind = 0; kind < 3; ++kind) {
        const auto [r, c] = impl_.fallback->tensorShape(static_cast<int>(kind));
        words[kind] = bf16Words(*ready, kind, static_cast<size_t>(r * c), scratch_[kind]);
      }
      const at::Tensor x = at::from_blob(const_cast<void*>(in->data), {in->rows, hidden_}, dtype);
      kept_.push_back(expertOutput(x, words[0], words[1], words[2], impl_.intermediate).contiguous());
      ready_.push_back({in->expert, kept_.back().data_ptr()});
    }
    std::lock_guard lock(impl_.mutex);
    impl_.stats.fallbackExperts += call.inputs.size();
  }

  DistributedExperts::Impl& impl_;
  std::shared_ptr<const EpochRouting> routing_;
  int layer_;
  ActivationType type_;
  int64_t hidden_;
  std::mutex mutex_;
  std::condition_variable finishedCv_;
  std::vector<std::unique_ptr<Call>> calls_;
  int unfinished_ = 0;
  std::deque<ComputedExpert> ready_;
  std::vector<at::Tensor> kept_;  // fallback outputs
  std::array<std::vector<uint16_t>, 3> scratch_;  // split planes the fallback handed, merged
};

}  // namespace

double DistributedStats::localShare() const {
  const double all = static_cast<double>(localExperts + remoteExperts + fallbackExperts);
  return all > 0 ? static_cast<double>(localExperts) / all : 1.0;
}

void DistributedExperts::Impl::prepare(grpc::ClientContext& context, std::chrono::milliseconds deadline) const {
  context.AddMetadata(dist::kTokenMetadataKey, options.token);
  context.set_deadline(std::chrono::system_clock::now() + deadline);
}

void DistributedExperts::Impl::markDown(int member, const std::string& why) {
  NodeMember& node = *nodes[static_cast<size_t>(member - 1)];
  if (node.down.exchange(true)) return;
  std::lock_guard lock(mutex);
  stats.downNodes.push_back(node.address + ": " + why);
}

std::vector<int> DistributedExperts::Impl::ownersOf(const ExpertPlacement& placement) const {
  std::vector<int> owner(static_cast<size_t>(layers) * static_cast<size_t>(experts), -1);
  for (int l = 0; l < layers; ++l)
    for (int e = 0; e < experts; ++e) {
      int& o = owner[static_cast<size_t>(l) * static_cast<size_t>(experts) + static_cast<size_t>(e)];
      for (int m = 0; m < placement.nodes() && o < 0; ++m)
        if (placement.holds(m, l, e) && (m == 0 || !nodes[static_cast<size_t>(m - 1)]->down)) o = m;
    }
  return owner;
}

void DistributedExperts::Impl::switchTo(std::shared_ptr<const EpochRouting> next) {
  std::lock_guard lock(mutex);
  routing = std::move(next);
  stats.epoch = routing->epoch;
}

void DistributedExperts::Impl::waitIdle(uint64_t epoch) {
  // Calls end by their deadline; the bound is a way out should a step have ended without its calls
  // (an exception between computedElsewhere and computeElsewhere): a call still sent to the old
  // holder then fails over like any failed call.
  std::unique_lock lock(mutex);
  idle.wait_for(lock, 2 * options.deadline + std::chrono::seconds(5), [&] { return inFlight.count(epoch) == 0; });
}

DistributedExperts::DistributedExperts(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
DistributedExperts::~DistributedExperts() = default;

std::shared_ptr<DistributedExperts> DistributedExperts::connect(std::shared_ptr<ExpertProvider> local,
                                                                std::shared_ptr<ExpertProvider> fallback,
                                                                const DistributedOptions& options) {
  if (!local) throw Error("distributed experts: no local expert provider");
  if (options.nodes.empty()) throw Error("distributed experts: --nodes names no node");
  if (options.token.size() < 16) throw Error("distributed experts: the shared token must have at least 16 characters");
  if (options.deadline.count() <= 0) throw Error("distributed experts: the call deadline must be positive");
  auto impl = std::make_unique<Impl>();
  impl->local = local;
  impl->fallback = fallback ? fallback : local;
  impl->options = options;
  impl->layers = local->numLayers();
  impl->experts = local->numExperts();
  impl->hidden = local->tensorShape(0).second;
  impl->intermediate = local->tensorShape(0).first;
  for (int kind = 0; kind < 3; ++kind) {
    const auto [r, c] = local->tensorShape(kind);
    impl->expertBytes += static_cast<uint64_t>(r * c) * 2;
  }
  uint32_t fingerprint = 0;
  {
    const ExpertRequest first{0, 1, false, true};
    const auto start = Clock::now();
    const auto batch = impl->fallback->acquire(0, std::span<const ExpertRequest>(&first, 1));
    const auto ready = batch->next();
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    impl->localBytesPerSecond = seconds > 0 ? static_cast<double>(impl->expertBytes) / seconds : 1e12;
    if (!ready || ready->tensors.size() != 3) throw Error("distributed experts: the local provider has no expert 0 of layer 0");
    std::vector<uint16_t> scratch;
    for (int kind = 0; kind < 3; ++kind) {
      const auto [r, c] = impl->fallback->tensorShape(kind);
      const uint16_t* words = bf16Words(*ready, static_cast<size_t>(kind), static_cast<size_t>(r * c), scratch);
      fingerprint = detail::crc32c(words, static_cast<size_t>(r * c) * 2, fingerprint);
    }
  }
  ExpertPlacement placement;
  placement.expertsPerLayer.assign(static_cast<size_t>(impl->layers), impl->experts);
  placement.held.assign(options.nodes.size() + 1, std::vector<std::vector<int>>(static_cast<size_t>(impl->layers)));
  std::vector<bool> heldSomewhere(static_cast<size_t>(impl->layers) * static_cast<size_t>(impl->experts), false);
  for (size_t i = 0; i < options.nodes.size(); ++i) {
    checkNodeAddress(options.nodes[i], "--nodes", false);
    auto node = std::make_unique<NodeMember>();
    node->address = options.nodes[i];
    node->channel = dist::openChannel(node->address);
    node->stub = dist::ExpertNode::NewStub(node->channel);
    grpc::ClientContext context;
    impl->prepare(context, std::max(options.deadline, std::chrono::milliseconds(10000)));
    context.set_wait_for_ready(true);  // a node just started may still be binding
    const grpc::Status status = node->stub->Describe(&context, dist::DescribeRequest(), &node->description);
    if (!status.ok()) throw Error("node " + node->address + ": " + dist::describeStatus(status));
    const dist::NodeDescription& d = node->description;
    if (d.layers() != impl->layers || d.experts() != impl->experts || d.hidden() != impl->hidden ||
        d.intermediate() != impl->intermediate || d.fingerprint() != fingerprint)
      throw Error("node " + node->address + " serves another model: " + std::to_string(d.layers()) + " MoE layers × " +
                  std::to_string(d.experts()) + " experts, hidden " + std::to_string(d.hidden()) + ", expert " +
                  std::to_string(d.intermediate()) + " wide, checksum " + std::to_string(d.fingerprint()) + "; this one has " +
                  std::to_string(impl->layers) + " × " + std::to_string(impl->experts) + ", " + std::to_string(impl->hidden) +
                  ", " + std::to_string(impl->intermediate) + ", checksum " + std::to_string(fingerprint));
    for (const auto& l : d.held()) {
      if (l.layer() < 0 || l.layer() >= impl->layers) throw Error("node " + node->address + " holds a layer out of range");
      auto& set = placement.held[i + 1][static_cast<size_t>(l.layer())];
      for (int e : l.experts()) {
        set.push_back(e);
        heldSomewhere[static_cast<size_t>(l.layer()) * static_cast<size_t>(impl->experts) + static_cast<size_t>(e)] = true;
      }
      std::sort(set.begin(), set.end());
    }
    impl->nodes.push_back(std::move(node));
  }
  for (int l = 0; l < impl->layers; ++l)
    for (int e = 0; e < impl->experts; ++e)
      if (!heldSomewhere[static_cast<size_t>(l) * static_cast<size_t>(impl->experts) + static_cast<size_t>(e)])
        placement.held[0][static_cast<size_t>(l)].push_back(e);
  if (options.placement) {
    const ExpertPlacement& given = *options.placement;
    if (given.nodes() != placement.nodes() || given.expertsPerLayer != placement.expertsPerLayer)
      throw Error("distributed experts: the placement has " + std::to_string(given.nodes()) + " members and " +
                  std::to_string(given.layers()) + " layers; expected this engine and " + std::to_string(options.nodes.size()) +
                  " nodes, " + std::to_string(impl->layers) + " layers of " + std::to_string(impl->experts) + " experts");
    for (int m = 1; m < given.nodes(); ++m)
      for (int l = 0; l < given.layers(); ++l)
        for (int e : given.held[static_cast<size_t>(m)][static_cast<size_t>(l)])
          if (!placement.holds(m, l, e))
            throw Error("distributed experts: the placement gives expert " + std::to_string(e) + " of layer " +
                        std::to_string(l) + " to node " + options.nodes[static_cast<size_t>(m - 1)] + ", which does not hold it");
    placement = given;
  }
  auto routing = std::make_shared<EpochRouting>();
  routing->epoch = 0;
  routing->owner = impl->ownersOf(placement);
  routing->placement = std::move(placement);
  impl->routing = routing;
  impl->stats.activations.assign(static_cast<size_t>(impl->layers) * static_cast<size_t>(impl->experts), 0);
  impl->stepOwner.assign(static_cast<size_t>(impl->experts), 0);
  return std::shared_ptr<DistributedExperts>(new DistributedExperts(std::move(impl)));
}

std::unique_ptr<ExpertBatch> DistributedExperts::acquire(int layer, std::span<const ExpertRequest> requests) {
  if (requests.empty()) return std::make_unique<EmptyBatch>();
  return impl_->local->acquire(layer, requests);
}

void DistributedExperts::prefetch(int layer, std::span<const int> experts) {
  std::vector<int> here;
  const auto routing = [&] {
    std::lock_guard lock(impl_->mutex);
    return impl_->routing;
  }();
  for (int e : experts)
    if (e >= 0 && e < impl_->experts && routing->owner[static_cast<size_t>(layer * impl_->experts + e)] <= 0)
      here.push_back(e);
  if (!here.empty()) impl_->local->prefetch(layer, here);
}

std::vector<int> DistributedExperts::computedElsewhere(int layer, std::span<const ExpertRequest> requests) {
  Impl& impl = *impl_;
  if (layer < 0 || layer >= impl.layers)
    throw Error("distributed experts: MoE layer " + std::to_string(layer) + " out of range (0.." +
                std::to_string(impl.layers - 1) + ")");
  std::vector<int> elsewhere;
  uint64_t local = 0, fallback = 0;
  {
    std::lock_guard lock(impl.mutex);
    impl.stepRouting = impl.routing;  // an epoch switch takes effect between layer steps
    ++impl.stats.steps;
    // Taken with the snapshot, so that a migration's drop waits for this step's calls; given back
    // below when nothing goes out, else when the calls end (NodeCalls).
    ++impl.inFlight[impl.stepRouting->epoch];
  }
  const EpochRouting& routing = *impl.stepRouting;
  try {
    for (const ExpertRequest& r : requests) {
      if (r.expert < 0 || r.expert >= impl.experts)
        throw Error("distributed experts: expert " + std::to_string(r.expert) + " out of range (0.." +
                    std::to_string(impl.experts - 1) + ")");
      int owner = routing.owner[static_cast<size_t>(layer * impl.experts + r.expert)];
      if (owner > 0 && impl.nodes[static_cast<size_t>(owner - 1)]->down) {
        owner = -1;  // look for another live holder
        for (int m = 1; m < routing.placement.nodes() && owner < 0; ++m)
          if (routing.placement.holds(m, layer, r.expert) && !impl.nodes[static_cast<size_t>(m - 1)]->down) owner = m;
      }
      impl.stepOwner[static_cast<size_t>(r.expert)] = owner;
      if (owner > 0) {
        elsewhere.push_back(r.expert);
      } else if (owner == 0) {
        ++local;
      } else {
        if (impl.options.onFailure == NodeFailurePolicy::Fail)
          throw Error("distributed experts: expert " + std::to_string(r.expert) + " of layer " + std::to_string(layer) +
                      " is held only by nodes that are down (" + [&] {
                        std::lock_guard lock(impl.mutex);
                        std::string s;
                        for (const auto& d : impl.stats.downNodes) s += (s.empty() ? "" : "; ") + d;
                        return s;
                      }() + "); it is not computed here (--node-failure fail)");
        ++fallback;
      }
    }
  } catch (...) {
    std::lock_guard lock(impl.mutex);
    if (--impl.inFlight[routing.epoch] == 0) {
      impl.inFlight.erase(routing.epoch);
      impl.idle.notify_all();
    }
    throw;
  }
  std::sort(elsewhere.begin(), elsewhere.end());
  std::lock_guard lock(impl.mutex);
  if (elsewhere.empty() && --impl.inFlight[routing.epoch] == 0) {
    impl.inFlight.erase(routing.epoch);
    impl.idle.notify_all();
  }
  for (const ExpertRequest& r : requests)
    impl.stats.activations[static_cast<size_t>(layer * impl.experts + r.expert)] += static_cast<uint64_t>(r.tokens);
  impl.stats.localExperts += local;
  impl.stats.fallbackExperts += fallback;
  return elsewhere;
}

std::unique_ptr<ExpertOutputs> DistributedExperts::computeElsewhere(int layer, std::span<const ExpertRows> inputs,
                                                                    ActivationType type, int64_t hidden) {
  Impl& impl = *impl_;
  if (hidden != impl.hidden)
    throw Error("distributed experts: rows of " + std::to_string(hidden) + " values, the model's hidden size is " +
                std::to_string(impl.hidden));
  auto outputs = std::make_unique<NodeCalls>(impl, impl.stepRouting, layer, type, hidden);
  std::vector<std::unique_ptr<NodeCalls::Call>> calls;
  std::map<int, NodeCalls::Call*> byMember;
  const size_t rowBytes = static_cast<size_t>(hidden) * dist::activationBytes(type);
  for (const ExpertRows& in : inputs) {
    const int member = impl.stepOwner[static_cast<size_t>(in.expert)];
    if (member <= 0)
      throw Error("distributed experts: expert " + std::to_string(in.expert) + " of layer " + std::to_string(layer) +
                  " was not named by computedElsewhere");
    NodeCalls::Call*& call = byMember[member];
    if (!call) {
      calls.push_back(std::make_unique<NodeCalls::Call>());
      call = calls.back().get();
      call->member = member;
      call->request.set_origin(impl.options.origin);
      call->request.set_layer(layer);
      call->request.set_type(type == ActivationType::BFloat16 ? dist::BFLOAT16 : dist::FLOAT32);
      call->request.set_hidden(hidden);
    }
    auto* input = call->request.add_inputs();
    input->set_expert(in.expert);
    input->set_rows(in.rows);
    input->set_data(in.data, static_cast<size_t>(in.rows) * rowBytes);
    call->inputs.push_back(in);
  }
  outputs->start(std::move(calls));
  return outputs;
}

int DistributedExperts::numLayers() const { return impl_->layers; }
int DistributedExperts::numExperts() const { return impl_->experts; }
std::pair<int64_t, int64_t> DistributedExperts::tensorShape(int kind) const { return impl_->local->tensorShape(kind); }

DistributedStats DistributedExperts::stats() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->stats;
}

ExpertPlacement DistributedExperts::placement() const {
  std::lock_guard lock(impl_->mutex);
  return impl_->routing->placement;
}

std::vector<std::string> DistributedExperts::memberNames() const {
  std::vector<std::string> names{impl_->options.origin};
  for (const auto& n : impl_->nodes) names.push_back(n->address);
  return names;
}

uint64_t DistributedExperts::expertBytes() const { return impl_->expertBytes; }

}  // namespace zipmoe
