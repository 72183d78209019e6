// ExpertNode — one machine's share of a model's routed experts, served over gRPC to the engines of
// other machines (DanceMoE, seed 002; docs/DISTRIBUTED.md). `zipmoe node STORE --listen ADDR` runs one.
//
// The node reads the experts it is told to hold from its own copy of the store into memory (BF16),
// and for each Compute call runs those experts' FFNs on the rows sent, exactly as the engine's MoE
// block would (model/expert_compute.h), returning the outputs. It loads and drops experts when a
// coordinator migrates the placement (load → acknowledge → the callers switch → drop), counts per
// calling origin how many rows each expert computed, and refuses any call without the cluster's
// shared token. It listens only on an explicit address (a loopback or a given interface's; never a
// wildcard such as 0.0.0.0), and accepts messages up to kMaxNodeMessageBytes (raised deliberately
// from gRPC's 4 MB default: one prefill's rows for a layer exceed it).
// Thread-safety: start() returns a running node whose gRPC threads it owns; stop() (or the
// destructor) finishes the calls in flight and joins them. stats() may be called from any thread.
// Cost: holding experts costs their BF16 bytes; a call costs the FFNs of its rows.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zipmoe {

inline constexpr int kMaxNodeMessageBytes = 1 << 30;

struct ExpertNodeOptions {
  std::filesystem::path store;  // a ZipMoE store (zipmoe convert)
  std::string listen;           // "127.0.0.1:7001", "[::1]:7001"; port 0 picks a free port
  std::string token;            // the cluster's shared secret (at least 16 characters)
  std::string name;             // in messages and counts; default: the bound address
  // The experts to hold, per MoE layer; std::nullopt = every expert.
  std::optional<std::vector<std::vector<int>>> experts;
  uint64_t memoryBytes = 0;  // what the node may hold (a placement's M_n); 0 = what it holds at start
  int computeThreads = 0;    // > 0: libtorch's intra-op threads, process-wide; 0 = leave them
};

struct ExpertNodeStats {
  uint64_t calls = 0, refusedCalls = 0;  // refused: bad token, bad request, an expert not held
  uint64_t expertsComputed = 0, rowsComputed = 0;
  uint64_t bytesReceived = 0, bytesSent = 0;  // payloads of Compute
  double computeSeconds = 0;
  int heldExperts = 0;
  uint64_t epoch = 0;
};

class ExpertNode {
 public:
  // Opens the store, loads the experts, binds and serves. Throws zipmoe::Error naming the store, the
  // address (a wildcard, a missing port, a port taken) or the expert list at fault.
  static std::unique_ptr<ExpertNode> start(const ExpertNodeOptions& options);
  ~ExpertNode();
  ExpertNode(const ExpertNode&) = delete;
  ExpertNode& operator=(const ExpertNode&) = delete;

  // host:port with the port actually bound.
  const std::string& address() const;
  // Stops accepting calls, lets those in flight finish (at most a few seconds), joins the threads.
  void stop();
  // Blocks until stop() has been called (from another thread or a signal handler's thread).
  void wait();
  ExpertNodeStats stats() const;

 private:
  ExpertNode() = default;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Checks an address a node listens on or a caller dials: "host:port" with an IPv4 literal,
// "localhost" or a bracketed IPv6 literal, a port in 0..65535 (0 only for listening), never a wildcard
// host (0.0.0.0, [::]). Throws zipmoe::Error naming `what` and the address.
void checkNodeAddress(const std::string& address, const std::string& what, bool listening);
// The shared token: the first line of `file` when given, else $ZIPMOE_NODE_TOKEN. Throws zipmoe::Error
// when there is none or it is shorter than 16 characters.
std::string loadNodeToken(const std::filesystem::path& file);

}  // namespace zipmoe
