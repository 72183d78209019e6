// `zipmoe bench runtime`: ZipMoE against full-tensor offloading with an LRU cache (and any other
// systems asked for) in one run, on one store, with the same trace-replayed routing, the same
// prompts and the same memory budgets; cold reads (O_DIRECT) unless --buffered.
//
// Without --hf/--store it generates a Qwen1.5-MoE-A2.7B-shaped model (real shapes, --layers of
// them) in --workdir and converts it, once. The dense weights are loaded once; for every budget and
// system a fresh runtime is plugged in. Per run: prefill of --prompt-tokens, then --tokens greedy
// decode steps; TPOT is the mean decode step after --warmup steps, TTFT the prefill. Prints a table,
// the pool split the planner chose, hit rates, bytes read, layer makespans against the lower bound,
// and replanning times; writes everything as JSON (--json, default WORKDIR/bench-runtime.json).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.h"
#include "runtime_options.h"
#include "terminal_progress.h"
#include "zipmoe/activation_trace.h"
#include "zipmoe/converter.h"
#include "zipmoe/engine.h"
#include "zipmoe/error.h"
#include "zipmoe/test_model.h"

namespace zipmoe::cli {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Forwards to whichever runtime the benchmark has plugged in.
class SwitchableExperts : public ExpertProvider {
 public:
  explicit SwitchableExperts(std::shared_ptr<ExpertProvider> first) : current_(std::move(first)) {}
  void set(std::shared_ptr<ExpertProvider> p) { current_ = std::move(p); }
  std::unique_ptr<ExpertBatch> acquire(int layer, std::span<const ExpertRequest> requests) override {
    return current_->acquire(layer, requests);
  }
  int numLayers() const override { return current_->numLayers(); }
  int numExperts() const override { return current_->numExperts(); }
  std::pair<int64_t, int64_t> tensorShape(int kind) const override { return current_->tensorShape(kind); }

 private:
  std::shared_ptr<ExpertProvider> current_;
};

struct System {
  std::string name;
  RuntimeOptions options;
};

System parseSystem(const std::string& text, const RuntimeOptions& base, const std::filesystem::path& hf) {
  System s{text, base};
  if (text == "zipmoe") return s;
  if (text.rfind("zipmoe:", 0) == 0) {  // zipmoe:FS = ZipMoE with only those pools
    s.options.pools = parsePools(text.substr(7));
    return s;
  }
  if (text == "zipmoe-noplan") {
    s.options.planning = false;
    return s;
  }
  if (text == "zipmoe-fifo-schedule") {
    s.options.fifoSchedule = true;
    return s;
  }
  for (const char* policy : {"lru", "fifo", "marking"})
    if (text == std::string("zipmoe-") + policy) {
      s.options.eviction = parseEvictionPolicy(policy);
      return s;
    }
  if (text.rfind("full-", 0) == 0) {
    s.options.mode = OffloadMode::FullTensor;
    s.options.eviction = parseEvictionPolicy(text.substr(5));
    s.options.checkpointDir = hf;
    return s;
  }
  throw Error("unknown system '" + text +
              "' (zipmoe, zipmoe:POOLS e.g. zipmoe:FS, zipmoe-noplan, zipmoe-fifo-schedule, zipmoe-lru, zipmoe-fifo, zipmoe-marking, full-lru, "
              "full-fifo, full-lfu, full-marking)");
}

std::vector<std::string> splitList(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

}  // namespace

int runBenchRuntime(const Args& arguments) {
  Args args = arguments;
  const std::string usage =
      "zipmoe bench runtime [--workdir DIR] [--hf HF_DIR --store STORE] [--layers N] [--budgets 10,25,50]\n"
      "  [--systems zipmoe,full-lru] [--trace-file TSV] [--trace-prompts 0,1] [--prompt-tokens N] [--tokens N]\n"
      "  [--warmup N] [--workers L] [--threads N] [--pools FCSE] [--buffered] [--json OUT]";
  std::string v, workdir = "out/bench", hfArg, storeArg, json;
  int layers = 8, promptTokens = 16, tokens = 24, warmup = 4, threads = 0, workers = 0;
  std::vector<double> budgets = {10, 25, 50};
  std::vector<std::string> systems = {"zipmoe", "full-lru"};
  std::vector<int> tracePrompts = {0};
  std::filesystem::path traceFile = "../shared/data/traces/qwen1.5-moe.tsv";  // read at run time, never copied
  unsigned pools = 0xF;
  takeOption(args, "--workdir", workdir);
  takeOption(args, "--hf", hfArg);
  takeOption(args, "--store", storeArg);
  json = workdir + "/bench-runtime.json";
  takeOption(args, "--json", json);
  auto positive = [&](const char* name, int& out, int lo, int hi) {
    if (takeOption(args, name, v)) {
      const long long n = parseInteger(name, v);
      if (n < lo || n > hi) throw Error(std::string("option ") + name + " must be in " + std::to_string(lo) + ".." + std::to_string(hi) + ", got " + v);
      out = static_cast<int>(n);
    }
  };
  positive("--layers", layers, 1, 24);
  positive("--prompt-tokens", promptTokens, 1, 4096);
  positive("--tokens", tokens, 2, 100000);
  positive("--warmup", warmup, 0, 100000);
  positive("--threads", threads, 0, 4096);
  positive("--workers", workers, 0, 256);
  if (warmup >= tokens) throw Error("option --warmup must be below --tokens");
  if (takeOption(args, "--budgets", v)) {
    budgets.clear();
    for (const auto& b : splitList(v)) {
      const double x = parseNumber("--budgets", b);
      if (!(x > 0 && x <= 1000)) throw Error("option --budgets: " + b + " is not a percentage in (0, 1000]");
      budgets.push_back(x);
    }
  }
  if (takeOption(args, "--systems", v)) systems = splitList(v);
  if (takeOption(args, "--trace-file", v)) traceFile = v;
  if (takeOption(args, "--trace-prompts", v)) {
    tracePrompts.clear();
    for (const auto& p : splitList(v)) tracePrompts.push_back(static_cast<int>(parseInteger("--trace-prompts", p)));
  }
  if (takeOption(args, "--pools", v)) pools = parsePools(v);
  const ReadMode mode = takeFlag(args, "--buffered") ? ReadMode::Buffered : ReadMode::Direct;
  expectPositionals(args, 0, usage);
  if (!std::filesystem::exists(traceFile))
    throw Error("trace file " + traceFile.string() + " not found (give --trace-file ../shared/data/traces/qwen1.5-moe.tsv)");

  // The model and the store, made once.
  std::filesystem::create_directories(workdir);
  const std::string tag = "qwen1.5-moe-" + std::to_string(layers) + "l";
  const std::filesystem::path hf = hfArg.empty() ? std::filesystem::path(workdir) / (tag + "-hf") : std::filesystem::path(hfArg);
  const std::filesystem::path storeDir =
      storeArg.empty() ? std::filesystem::path(workdir) / (tag + "-store") : std::filesystem::path(storeArg);
  if (!std::filesystem::exists(hf / "config.json")) {
    if (!hfArg.empty()) throw Error(hf.string() + " has no config.json");
    std::fprintf(stderr, "bench: generating %s (Qwen1.5-MoE-A2.7B shapes, %d layers)…\n", hf.string().c_str(), layers);
    TestModelOptions o;
    o.family = ModelFamily::Qwen2Moe;
    o.preset = "qwen1.5-moe-a2.7b";
    o.layers = layers;
    generateTestModel(hf, o);
  }
  if (!std::filesystem::exists(storeDir / "manifest.json")) {
    if (!storeArg.empty()) throw Error(storeDir.string() + " is not a store (no manifest.json)");
    std::fprintf(stderr, "bench: converting to %s…\n", storeDir.string().c_str());
    convertCheckpoint(hf, storeDir, ConvertOptions{});
  }
  auto store = std::shared_ptr<const Store>(Store::open(storeDir).release());
  const auto profilePath = storeDir / (mode == ReadMode::Direct ? "profile.json" : "profile-buffered.json");
  std::optional<CostProfile> saved;
  try {
    std::string whyNot;
    saved = loadMatchingProfile(profilePath, *store, mode, &whyNot);
    if (!whyNot.empty()) std::fprintf(stderr, "bench: %s: re-measuring\n", whyNot.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "bench: %s: re-measuring\n", e.what());
  }
  if (!saved) {
    std::fprintf(stderr, "bench: measuring the cost profile…\n");
    saved = profileStore(*store, mode, ComputeDtype::Auto, threads, 24);
    saveCostProfile(*saved, profilePath);
  }
  const CostProfile profile = *saved;
  std::fprintf(stderr, "bench: profile u %.2f ms, v %.2f ms, c %.2f ms, recovery %.2f ms, BF16 tensor read %.2f ms, FFN %.2f + %.3f·t ms\n",
               profile.smRead * 1e3, profile.eRead * 1e3, profile.decompress * 1e3, profile.recover * 1e3,
               profile.fullRead * 1e3, profile.computeBase * 1e3, profile.computePerToken * 1e3);

  RuntimeOptions base;
  base.pools = pools;
  base.decompressWorkers = workers;
  base.readMode = mode;
  base.budgetBytes = UINT64_MAX / 4;
  std::vector<System> parsed;
  for (const auto& s : systems) parsed.push_back(parseSystem(s, base, hf));

  // One model, loaded once, with routing replayed from the trace.
  auto first = ExpertRuntime::open(store, base, profile);
  const uint64_t expertBytes = first->expertBytes();
  auto switchable = std::make_shared<SwitchableExperts>(first);
  const auto trace = ActivationTrace::load(traceFile);
  const Manifest& m = store->manifest();
  auto routing = std::make_shared<TraceRouting>(trace, m.numLayers(), m.numExperts,
                                                static_cast<int>(m.config->value("num_experts_per_tok", 1)), 1);
  ModelOptions mo;
  mo.threads = threads;
  mo.experts = switchable;
  mo.routing = routing;
  std::fprintf(stderr, "bench: loading the dense weights of %s…\n", storeDir.string().c_str());
  auto t0 = Clock::now();
  auto model = MoeModel::load(storeDir, mo);
  std::fprintf(stderr, "bench: loaded in %.1f s; %d MoE layers × %d experts, %.2f GiB of experts (BF16)\n", since(t0),
               m.numLayers(), m.numExperts, static_cast<double>(expertBytes) / (1 << 30));
  first.reset();
  switchable->set(nullptr);

  nlohmann::json results = nlohmann::json::array();
  std::printf("%-22s %7s %10s %10s %8s %8s %8s %8s %8s %9s %10s %10s\n", "system", "budget", "TPOT ms", "TTFT ms", "F/C/S/E%",
              "", "", "", "miss%", "MiB/token", "layer ms", "meas/LB");
  for (double budgetPct : budgets) {
    const auto budgetBytes = static_cast<uint64_t>(budgetPct / 100.0 * static_cast<double>(expertBytes));
    for (const System& sys : parsed) {
      RuntimeOptions o = sys.options;
      o.budgetBytes = budgetBytes;
      std::shared_ptr<ExpertRuntime> rt;
      try {
        rt = ExpertRuntime::open(store, o, profile);
      } catch (const Error& e) {
        std::printf("%-22s %6.1f%%  skipped: %s\n", sys.name.c_str(), budgetPct, e.what());
        continue;
      }
      switchable->set(rt);
      double ttft = 0, decodeSeconds = 0;
      int decodeSteps = 0;
      const RuntimeStats before = rt->stats();
      (void)before;
      RuntimeStats atWarm;
      for (int prompt : tracePrompts) {
        routing->setPrompt(prompt);
        const auto seq = model->addSequence();
        std::vector<int32_t> ids;
        const int64_t vocab = model->config().vocabSize;
        for (int i = 0; i < promptTokens; ++i)
          ids.push_back(static_cast<int32_t>((1009 * (i + 1) + 7919 * static_cast<int64_t>(prompt)) % vocab));
        t0 = Clock::now();
        auto logits = model->forward({{seq, ids}});
        ttft += since(t0);
        for (int step = 0; step < tokens; ++step) {
          const auto& l = logits[0];
          const auto next = static_cast<int32_t>(std::max_element(l.begin(), l.end()) - l.begin());
          if (step == warmup && prompt == tracePrompts.front()) atWarm = rt->stats();
          t0 = Clock::now();
          logits = model->forward({{seq, {next}}});
          if (step >= warmup) {
            decodeSeconds += since(t0);
            ++decodeSteps;
          }
        }
        model->removeSequence(seq);
      }
      const RuntimeStats st = rt->stats();
      // Replanning latency, as a budget slider would cause it (ZipMoE only).
      double replanMean = 0, replanMax = 0;
      if (o.mode == OffloadMode::ZipMoE) {
        const int moves = 10;
        for (int i = 0; i < moves; ++i) {
          rt->setMemoryBudget(budgetBytes - budgetBytes / 20 * static_cast<uint64_t>(i % 2));
          rt->waitForPlan();
          const double s = rt->stats().lastReplanSeconds;
          replanMean += s / moves;
          replanMax = std::max(replanMax, s);
        }
      }
      switchable->set(nullptr);
      const double acts = static_cast<double>(std::max<uint64_t>(1, st.activations - atWarm.activations));
      auto rate = [&](uint64_t now, uint64_t then) { return 100.0 * static_cast<double>(now - then) / acts; };
      const double tpot = decodeSeconds / std::max(1, decodeSteps);
      const double mibPerToken = static_cast<double>(st.bytesRead - atWarm.bytesRead) / (1 << 20) /
                                 std::max<double>(1, static_cast<double>(st.steps - atWarm.steps));
      const double layerMs = st.layers > atWarm.layers
                                 ? (st.measuredMakespan - atWarm.measuredMakespan) / static_cast<double>(st.layers - atWarm.layers) * 1e3
                                 : 0;
      const double ratio = st.lowerBound - atWarm.lowerBound > 0
                               ? (st.measuredMakespan - atWarm.measuredMakespan) / (st.lowerBound - atWarm.lowerBound)
                               : 0;
      std::printf("%-22s %6.1f%% %10.1f %10.1f %7.1f %8.1f %8.1f %8.1f %8.1f %9.1f %10.2f %10.2f\n", sys.name.c_str(), budgetPct,
                  tpot * 1e3, ttft / static_cast<double>(tracePrompts.size()) * 1e3, rate(st.hits[0], atWarm.hits[0]),
                  rate(st.hits[1], atWarm.hits[1]), rate(st.hits[2], atWarm.hits[2]), rate(st.hits[3], atWarm.hits[3]),
                  rate(st.misses, atWarm.misses), mibPerToken, layerMs, ratio);
      if (o.mode == OffloadMode::ZipMoE)
        std::printf("%-22s         pool split F %.0f%% C %.0f%% S %.0f%% E %.0f%% (mean over layers); replanning %.2f ms mean, %.2f ms max\n",
                    "", 100 * st.pools[0].ratio, 100 * st.pools[1].ratio, 100 * st.pools[2].ratio, 100 * st.pools[3].ratio,
                    replanMean * 1e3, replanMax * 1e3);
      std::fflush(stdout);
      nlohmann::json r = {{"system", sys.name},
                          {"budget_percent", budgetPct},
                          {"budget_bytes", budgetBytes},
                          {"tpot_ms", tpot * 1e3},
                          {"ttft_ms", ttft / static_cast<double>(tracePrompts.size()) * 1e3},
                          {"decode_steps", decodeSteps},
                          {"hit_percent", {rate(st.hits[0], atWarm.hits[0]), rate(st.hits[1], atWarm.hits[1]),
                                           rate(st.hits[2], atWarm.hits[2]), rate(st.hits[3], atWarm.hits[3])}},
                          {"miss_percent", rate(st.misses, atWarm.misses)},
                          {"mib_read_per_token", mibPerToken},
                          {"layer_makespan_ms", layerMs},
                          {"makespan_over_lower_bound", ratio},
                          {"pool_ratio", {st.pools[0].ratio, st.pools[1].ratio, st.pools[2].ratio, st.pools[3].ratio}},
                          {"pool_capacity_bytes", {st.pools[0].capacityBytes, st.pools[1].capacityBytes,
                                                   st.pools[2].capacityBytes, st.pools[3].capacityBytes}},
                          {"working_set_bytes", st.workingSetBytes},
                          {"replan_ms_mean", replanMean * 1e3},
                          {"replan_ms_max", replanMax * 1e3},
                          {"stall_s", st.stallSeconds}};
      results.push_back(r);
    }
  }
  // TPOT ratios against the first full-tensor system at each budget.
  std::printf("\nTPOT speed-up of each system over the full-tensor baseline at the same budget:\n");
  for (double budgetPct : budgets) {
    const nlohmann::json* baseline = nullptr;
    for (const auto& r : results)
      if (r["budget_percent"] == budgetPct && r["system"].get<std::string>().rfind("full-", 0) == 0) {
        baseline = &r;
        break;
      }
    if (!baseline) continue;
    for (const auto& r : results)
      if (r["budget_percent"] == budgetPct && &r != baseline)
        std::printf("  %5.1f%%  %-22s %.2f× (vs %s)\n", budgetPct, r["system"].get<std::string>().c_str(),
                    (*baseline)["tpot_ms"].get<double>() / r["tpot_ms"].get<double>(),
                    (*baseline)["system"].get<std::string>().c_str());
  }
  const nlohmann::json doc = {{"command", "zipmoe bench runtime"},
                              {"store", storeDir.string()},
                              {"trace_file", traceFile.string()},
                              {"trace_prompts", tracePrompts},
                              {"prompt_tokens", promptTokens},
                              {"tokens", tokens},
                              {"warmup", warmup},
                              {"read_mode", mode == ReadMode::Direct ? "direct" : "buffered"},
                              {"host", profile.host},
                              {"profile", {{"u_ms", profile.smRead * 1e3}, {"v_ms", profile.eRead * 1e3},
                                           {"c_ms", profile.decompress * 1e3}, {"recover_ms", profile.recover * 1e3},
                                           {"full_read_ms", profile.fullRead * 1e3}}},
                              {"results", results}};
  std::ofstream out(json);
  out << doc.dump(2) << "\n";
  if (!out) throw Error("cannot write " + json);
  std::fprintf(stderr, "bench: wrote %s\n", json.c_str());
  return 0;
}

}  // namespace zipmoe::cli
