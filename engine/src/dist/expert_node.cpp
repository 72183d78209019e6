// The expert node: a gRPC service over the experts one machine holds (see zipmoe/dist/expert_node.h).
#include "zipmoe/dist/expert_node.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "base/crc32c.h"
#include "dist/node_protocol.h"
#include "model/expert_compute.h"
#include "model/linear.h"
#include "zipmoe/base/error.h"
#include "zipmoe/hf/model_config.h"
#include "zipmoe/format/store.h"

namespace zipmoe {
namespace {

using Clock = std::chrono::steady_clock;

struct HeldExpert {
  std::vector<std::vector<uint16_t>> tensors;  // store order: gate, up, down
};

class NodeService final : public dist::ExpertNode::Service {
 public:
  NodeService(std::unique_ptr<Store> store, std::string token) : store_(std::move(store)), token_(std::move(token)) {
    const Manifest& m = store_->manifest();
    config_ = parseModelConfig(*m.config, (store_->dir() / "manifest.json").string());
    layers_ = m.numLayers();
    experts_ = m.numExperts;
    if (m.numKinds() != 3)
      throw Error(store_->dir().string() + ": experts have " + std::to_string(m.numKinds()) +
                  " tensors; a node computes gated (gate, up, down) experts");
    for (int kind = 0; kind < 3; ++kind) expertBytes_ += m.expert(0, 0, kind).numel * 2;
    const auto first = read(0, 0);
    for (const auto& t : first->tensors) fingerprint_ = detail::crc32c(t.data(), t.size() * 2, fingerprint_);
  }

  void setName(std::string name) { name_ = std::move(name); }
  void setMemory(uint64_t bytes) { memoryBytes_ = bytes; }
  uint64_t expertBytes() const { return expertBytes_; }
  int layers() const { return layers_; }
  int experts() const { return experts_; }

  // Loads (layer, expert) pairs not yet held; returns the bytes read.
  uint64_t load(const std::vector<std::pair<int, int>>& wanted) {
    uint64_t bytes = 0;
    const auto start = Clock::now();
    for (const auto& [layer, expert] : wanted) {
      {
        std::lock_guard lock(mutex_);
        if (held_.count(key(layer, expert))) continue;
      }
      auto e = read(layer, expert);
      std::lock_guard lock(mutex_);
      held_[key(layer, expert)] = std::move(e);
      bytes += expertBytes_;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::lock_guard lock(mutex_);
    if (bytes > 0 && seconds > 0) {
      loadedBytes_ += static_cast<double>(bytes);
      loadSeconds_ += seconds;
    }
    return bytes;
  }

  void checkExpert(int layer, int expert, const std::string& what) const {
    if (layer < 0 || layer >= layers_ || expert < 0 || expert >= experts_)
      throw Error(what + ": expert " + std::to_string(expert) + " of layer " + std::to_string(layer) +
                  " is outside the model's " + std::to_string(layers_) + " layers × " + std::to_string(experts_) + " experts");
  }

  ExpertNodeStats stats() const {
    std::lock_guard lock(mutex_);
    ExpertNodeStats s = stats_;
    s.heldExperts = static_cast<int>(held_.size());
    s.epoch = epoch_;
    return s;
  }

  grpc::Status Describe(grpc::ServerContext* context, const dist::DescribeRequest*, dist::NodeDescription* reply) override {
    if (auto refused = authenticate(context)) return *refused;
    reply->set_name(name_);
    reply->set_family(familyName(config_.family));
    reply->set_layers(layers_);
    reply->set_experts(experts_);
    reply->set_hidden(config_.hiddenSize);
    reply->set_intermediate(config_.moeIntermediateSize);
    reply->set_fingerprint(fingerprint_);
    reply->set_expert_bytes(expertBytes_);
    std::lock_guard lock(mutex_);
    std::map<int, std::vector<int>> byLayer;
    for (const auto& [k, e] : held_) byLayer[k / experts_].push_back(k % experts_);
    for (auto& [layer, list] : byLayer) {
      std::sort(list.begin(), list.end());
      auto* l = reply->add_held();
      l->set_layer(layer);
      for (int e : list) l->add_experts(e);
    }
    reply->set_memory_bytes(memoryBytes_ ? memoryBytes_ : held_.size() * expertBytes_);
    reply->set_load_bytes_per_second(loadSeconds_ > 0 ? loadedBytes_ / loadSeconds_ : 0);
    reply->set_epoch(epoch_);
    return grpc::Status::OK;
  }

  grpc::Status Compute(grpc::ServerContext* context, const dist::ComputeRequest* request, dist::ComputeReply* reply) override {
    if (auto refused = authenticate(context)) return *refused;
    const auto start = Clock::now();
    const int layer = request->layer();
    const ActivationType type = request->type() == dist::FLOAT32 ? ActivationType::Float32 : ActivationType::BFloat16;
    if (layer < 0 || layer >= layers_ || request->hidden() != config_.hiddenSize)
      return refuse(grpc::StatusCode::INVALID_ARGUMENT, "layer " + std::to_string(layer) + " with hidden size " +
                                                            std::to_string(request->hidden()) + " does not fit the model (" +
                                                            std::to_string(layers_) + " layers, hidden " +
                                                            std::to_string(config_.hiddenSize) + ")");
    std::vector<std::shared_ptr<const HeldExpert>> experts;
    {
      std::lock_guard lock(mutex_);
      for (const auto& in : request->inputs()) {
        const auto it = in.expert() >= 0 && in.expert() < experts_ ? held_.find(key(layer, in.expert())) : held_.end();
        if (it == held_.end()) {
          ++stats_.refusedCalls;
          return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "node " + name_ + " does not hold expert " +
                                                                         std::to_string(in.expert()) + " of layer " +
                                                                         std::to_string(layer));
        }
        experts.push_back(it->second);
      }
    }
    const at::ScalarType dtype = type == ActivationType::BFloat16 ? at::kBFloat16 : at::kFloat;
    const size_t rowBytes = static_cast<size_t>(config_.hiddenSize) * dist::activationBytes(type);
    uint64_t rows = 0, bytesIn = 0, bytesOut = 0;
    std::vector<std::pair<int, uint64_t>> counted;
    for (int i = 0; i < request->inputs_size(); ++i) {
      const auto& in = request->inputs(i);
      if (in.rows() <= 0 || in.data().size() != static_cast<size_t>(in.rows()) * rowBytes)
        return refuse(grpc::StatusCode::INVALID_ARGUMENT, "expert " + std::to_string(in.expert()) + ": " +
                                                              std::to_string(in.data().size()) + " bytes for " +
                                                              std::to_string(in.rows()) + " rows of " +
                                                              std::to_string(rowBytes) + " bytes");
      const at::Tensor x = at::from_blob(const_cast<char*>(in.data().data()), {in.rows(), config_.hiddenSize}, dtype);
      const HeldExpert& e = *experts[static_cast<size_t>(i)];
      const at::Tensor out = expertOutput(x, e.tensors[0].data(), e.tensors[1].data(), e.tensors[2].data(),
                                          config_.moeIntermediateSize).contiguous();
      auto* o = reply->add_outputs();
      o->set_expert(in.expert());
      o->set_data(out.data_ptr(), static_cast<size_t>(out.numel()) * out.element_size());
      rows += static_cast<uint64_t>(in.rows());
      bytesIn += in.data().size();
      bytesOut += o->data().size();
      counted.emplace_back(key(layer, in.expert()), static_cast<uint64_t>(in.rows()));
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    reply->set_compute_seconds(seconds);
    std::lock_guard lock(mutex_);
    ++stats_.calls;
    stats_.expertsComputed += static_cast<uint64_t>(request->inputs_size());
    stats_.rowsComputed += rows;
    stats_.bytesReceived += bytesIn;
    stats_.bytesSent += bytesOut;
    stats_.computeSeconds += seconds;
    auto& counts = originCounts_[request->origin()];
    counts.resize(static_cast<size_t>(layers_) * static_cast<size_t>(experts_), 0);
    for (const auto& [k, r] : counted) counts[static_cast<size_t>(k)] += r;
    return grpc::Status::OK;
  }

  grpc::Status LoadExperts(grpc::ServerContext* context, const dist::ExpertSet* request, dist::LoadReply* reply) override {
    if (auto refused = authenticate(context)) return *refused;
    std::vector<std::pair<int, int>> wanted;
    try {
      for (const auto& l : request->experts())
        for (int e : l.experts()) {
          checkExpert(l.layer(), e, "LoadExperts");
          wanted.emplace_back(l.layer(), e);
        }
      const auto start = Clock::now();
      reply->set_bytes_loaded(load(wanted));
      reply->set_seconds(std::chrono::duration<double>(Clock::now() - start).count());
    } catch (const Error& e) {
      return refuse(grpc::StatusCode::INVALID_ARGUMENT, e.what());
    }
    std::lock_guard lock(mutex_);
    epoch_ = std::max(epoch_, request->epoch());
    reply->set_epoch(epoch_);
    return grpc::Status::OK;
  }

  grpc::Status DropExperts(grpc::ServerContext* context, const dist::ExpertSet* request, dist::DropReply* reply) override {
    if (auto refused = authenticate(context)) return *refused;
    uint64_t dropped = 0;
    std::lock_guard lock(mutex_);
    for (const auto& l : request->experts())
      for (int e : l.experts())
        if (l.layer() >= 0 && l.layer() < layers_ && e >= 0 && e < experts_ && held_.erase(key(l.layer(), e)))
          dropped += expertBytes_;
    epoch_ = std::max(epoch_, request->epoch());
    reply->set_epoch(epoch_);
    reply->set_bytes_dropped(dropped);
    return grpc::Status::OK;
  }

  grpc::Status Activations(grpc::ServerContext* context, const dist::ActivationsRequest*, dist::ActivationsReply* reply) override {
    if (auto refused = authenticate(context)) return *refused;
    std::lock_guard lock(mutex_);
    for (const auto& [origin, counts] : originCounts_) {
      auto* o = reply->add_origins();
      o->set_origin(origin);
      for (uint64_t c : counts) o->add_counts(c);
    }
    return grpc::Status::OK;
  }

 private:
  int key(int layer, int expert) const { return layer * experts_ + expert; }

  std::shared_ptr<const HeldExpert> read(int layer, int expert) const {
    auto e = std::make_shared<HeldExpert>();
    for (int kind = 0; kind < 3; ++kind) {
      std::vector<uint16_t> t(store_->manifest().expert(layer, expert, kind).numel);
      store_->readExpertTensor(layer, expert, kind, t.data(), ReadMode::Buffered);
      e->tensors.push_back(std::move(t));
    }
    return e;
  }

  std::optional<grpc::Status> authenticate(grpc::ServerContext* context) {
    const auto& md = context->client_metadata();
    const auto it = md.find(dist::kTokenMetadataKey);
    if (it != md.end() && dist::sameToken(std::string(it->second.data(), it->second.size()), token_)) return std::nullopt;
    std::lock_guard lock(mutex_);
    ++stats_.refusedCalls;
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "node " + name_ + ": the call lacks the cluster's token");
  }

  grpc::Status refuse(grpc::StatusCode code, const std::string& why) {
    std::lock_guard lock(mutex_);
    ++stats_.refusedCalls;
    return grpc::Status(code, "node " + name_ + ": " + why);
  }

  std::unique_ptr<Store> store_;
  std::string token_;
  std::string name_;
  ModelConfig config_;
  int layers_ = 0, experts_ = 0;
  uint64_t expertBytes_ = 0, memoryBytes_ = 0;
  uint32_t fingerprint_ = 0;
  mutable std::mutex mutex_;
  std::unordered_map<int, std::shared_ptr<const HeldExpert>> held_;
  std::map<std::string, std::vector<uint64_t>> originCounts_;
  ExpertNodeStats stats_;
  uint64_t epoch_ = 0;
  double loadedBytes_ = 0, loadSeconds_ = 0;
};

}  // namespace

struct ExpertNode::Impl {
  std::unique_ptr<NodeService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
  std::mutex mutex;
  std::condition_variable stopped;
  bool stopping = false, done = false;
};

std::unique_ptr<ExpertNode> ExpertNode::start(const ExpertNodeOptions& options) {
  checkNodeAddress(options.listen, "node --listen", true);
  if (options.token.size() < 16) throw Error("node: the shared token must have at least 16 characters");
  if (!std::filesystem::exists(options.store / "manifest.json"))
    throw Error("node: " + options.store.string() + " is not a ZipMoE store (no manifest.json); run `zipmoe convert` first");
  if (options.computeThreads > 0) setComputeThreads(options.computeThreads);
  std::unique_ptr<ExpertNode> node(new ExpertNode());
  node->impl_ = std::make_unique<Impl>();
  Impl& impl = *node->impl_;
  impl.service = std::make_unique<NodeService>(Store::open(options.store), options.token);
  NodeService& service = *impl.service;
  std::vector<std::pair<int, int>> wanted;
  if (options.experts) {
    if (options.experts->size() != static_cast<size_t>(service.layers()))
      throw Error("node: the expert list has " + std::to_string(options.experts->size()) + " layers, the model " +
                  std::to_string(service.layers()));
    for (int l = 0; l < service.layers(); ++l)
      for (int e : (*options.experts)[static_cast<size_t>(l)]) {
        service.checkExpert(l, e, "node expert list");
        wanted.emplace_back(l, e);
      }
  } else {
    for (int l = 0; l < service.layers(); ++l)
      for (int e = 0; e < service.experts(); ++e) wanted.emplace_back(l, e);
  }
  if (options.memoryBytes > 0 && wanted.size() * service.expertBytes() > options.memoryBytes)
    throw Error("node: " + std::to_string(wanted.size()) + " experts of " + std::to_string(service.expertBytes()) +
                " bytes exceed its memory of " + std::to_string(options.memoryBytes) + " bytes");
  service.setMemory(options.memoryBytes);
  service.load(wanted);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen, grpc::InsecureServerCredentials(), &port);
  builder.SetMaxReceiveMessageSize(kMaxNodeMessageBytes);
  builder.SetMaxSendMessageSize(kMaxNodeMessageBytes);
  builder.RegisterService(&service);
  impl.server = builder.BuildAndStart();
  if (!impl.server || port == 0)
    throw Error("node: cannot listen on " + options.listen + " (the port is taken or the address is not this machine's)");
  impl.address = options.listen.substr(0, options.listen.rfind(':')) + ":" + std::to_string(port);
  service.setName(options.name.empty() ? impl.address : options.name);
  return node;
}

ExpertNode::~ExpertNode() { stop(); }

const std::string& ExpertNode::address() const { return impl_->address; }

void ExpertNode::stop() {
  if (!impl_) return;
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->stopping) return;
    impl_->stopping = true;
  }
  if (impl_->server) {
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
    impl_->server->Wait();
  }
  std::lock_guard lock(impl_->mutex);
  impl_->done = true;
  impl_->stopped.notify_all();
}

void ExpertNode::wait() {
  std::unique_lock lock(impl_->mutex);
  impl_->stopped.wait(lock, [&] { return impl_->done; });
}

ExpertNodeStats ExpertNode::stats() const { return impl_->service->stats(); }

}  // namespace zipmoe
