// `zipmoe node STORE --listen ADDR [--experts-of PLACEMENT] ...`: serve this machine's share of a
// model's experts to the engines of other machines (docs/DISTRIBUTED.md). Runs until SIGINT or
// SIGTERM, then finishes the calls in flight and exits 0. Prints "listening ADDR" on stdout once it
// serves (with the port bound, when --listen gave port 0).
#include <csignal>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "command_line.h"
#include "commands.h"
#include "runtime_options.h"
#include "zipmoe/base/error.h"
#include "zipmoe/dist/expert_node.h"
#include "zipmoe/plan/expert_placement.h"

namespace zipmoe::cli {
namespace {

const CommandSpec& nodeSpec() {
  static const CommandSpec spec{
      "zipmoe node STORE --listen ADDR [OPTIONS]",
      "Serve experts of a ZipMoE store to other machines' engines over gRPC (they name this node in --nodes).\n"
      "Every call must carry the cluster's shared token ($ZIPMOE_NODE_TOKEN or --token-file).",
      {{"--listen", "ADDR", "host:port to listen on: 127.0.0.1:7001, [::1]:7001 or an interface's own address (no wildcard); port 0 = any free port"},
       {"--experts-of", "PLACEMENT", "hold only this node's experts of a placement file (JSON, as `zipmoe bench dist` writes); default: every expert"},
       {"--member", "NAME", "which member of the placement this node is (default: the --listen address)"},
       {"--memory", "SIZE", "expert bytes this node may hold (K/M/G suffix), for the coordinator's placement; default: what it holds"},
       {"--token-file", "FILE", "the shared token's file (default: $ZIPMOE_NODE_TOKEN)"},
       {"--threads", "N", "compute threads (1-4096; default 1)"},
       {"--name", "NAME", "this node's name in messages (default: its address)"}},
      1, 1, ""};
  return spec;
}

std::vector<std::vector<int>> expertsOf(const std::filesystem::path& file, const std::string& member) {
  std::ifstream in(file);
  if (!in) throw Error("--experts-of: cannot read " + file.string());
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    throw Error("--experts-of: " + file.string() + " is not JSON: " + e.what());
  }
  std::vector<std::string> names;
  const ExpertPlacement p = placementFromJson(j, file.string(), &names);
  for (size_t m = 0; m < names.size(); ++m)
    if (names[m] == member) return p.held[m];
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw Error("--experts-of: " + file.string() + " has no member '" + member + "' (it has " + known +
              "); name it with --member");
}

}  // namespace

int runNode(const Args& arguments) {
  const CommandLine line = CommandLine::parse(nodeSpec(), arguments);
  if (line.help()) return printUsage(nodeSpec());
  ExpertNodeOptions o;
  o.store = line.positional(0);
  const auto listen = line.text("--listen");
  if (!listen) throw Error("node needs --listen ADDR\nusage: " + nodeSpec().synopsis);
  o.listen = *listen;
  checkNodeAddress(o.listen, "--listen", true);
  o.token = loadNodeToken(line.text("--token-file", ""));
  o.computeThreads = line.integer<int>("--threads", 1, 4096, 1);
  o.name = line.text("--name", "");
  if (const auto m = line.text("--memory")) {
    o.memoryBytes = parseByteSize("--memory", *m);
  }
  if (line.has("--member") && !line.has("--experts-of")) throw Error("--member picks a member of --experts-of PLACEMENT: give that too");
  if (const auto file = line.text("--experts-of")) o.experts = expertsOf(*file, line.text("--member", o.listen));

  // SIGINT/SIGTERM are taken by this thread (sigwait), not by a handler: blocked before gRPC starts
  // its threads, so that they inherit the mask.
  // A parent may have left them ignored (an ignored signal is discarded, never waited for).
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);
  const auto node = ExpertNode::start(o);
  const ExpertNodeStats s = node->stats();
  std::fprintf(stderr, "zipmoe node: serving %d experts of %s\n", s.heldExperts, o.store.string().c_str());
  std::printf("listening %s\n", node->address().c_str());
  std::fflush(stdout);
  int received = 0;
  sigwait(&stopSignals, &received);
  node->stop();
  const ExpertNodeStats end = node->stats();
  std::fprintf(stderr,
               "zipmoe node: stopped (%s); %llu calls, %llu experts for %llu rows, %.1f MB in, %.1f MB out, %llu refused\n",
               received == SIGINT ? "SIGINT" : "SIGTERM", static_cast<unsigned long long>(end.calls),
               static_cast<unsigned long long>(end.expertsComputed), static_cast<unsigned long long>(end.rowsComputed),
               static_cast<double>(end.bytesReceived) / 1e6, static_cast<double>(end.bytesSent) / 1e6,
               static_cast<unsigned long long>(end.refusedCalls));
  return 0;
}

}  // namespace zipmoe::cli
