// The serving scheduler's engine thread (zipmoe/serve/serve_scheduler.h): its state and its steps.
// ServeScheduler::Loop owns the requests once they left the inbox — waiting, live (prefilling,
// parked under coserve, decoding) and the finished conversations cached for prefix reuse — and is
// driven by ServeScheduler::run(): take new requests, drop cancelled ones, admit, run one forward
// step, publish the counters. Admission and memory: scheduler_admission.cpp; the forward step and
// each reply's tokens: scheduler_step.cpp. Internal to serve/.
// Thread-safety: only the engine thread touches a Loop; Shared is the one part other threads see
// (under its mutex). Cost: see zipmoe/serve/serve_scheduler.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "generation/reply_stream.h"
#include "zipmoe/generation/conversation.h"
#include "serve/coserve_policy.h"
#include "serve/memory_split.h"
#include "serve/prompt_cache.h"
#include "zipmoe/serve/serve_scheduler.h"

namespace zipmoe {

namespace serve {

using Clock = std::chrono::steady_clock;

// A request admitted to the model: its sequence and its reply (sampler, decoder, stop strings).
struct Live {
  enum class State { Prefilling, Parked, Decoding };
  Live(std::shared_ptr<RequestTicket> t, GenerationRequest r) : ticket(std::move(t)), request(std::move(r)) {}
  std::shared_ptr<RequestTicket> ticket;
  GenerationRequest request;
  std::optional<ReplyStream> reply;  // from admission on
  std::vector<int32_t> prompt, seqTokens;
  MoeModel::SequenceId seq = 0;
  int64_t capacity = 0;  // KV tokens reserved for the sequence
  State state = State::Prefilling;
  std::vector<float> logits;  // Parked: the prompt's last logits
  int32_t next = -1;          // Decoding: the token to feed
  int chunk = 0;              // tokens of this request in the current forward
  GenerationStats info;
  UsageProfile usage;
  uint64_t arrivedStep = 0;
  Clock::time_point arrived, firstAt, lastAt;
  bool firstSampled = false;
  bool done = false;  // the reply has ended: retire at the next boundary
};

struct Waiting {
  std::shared_ptr<RequestTicket> ticket;
  GenerationRequest request;
  uint64_t arrivedStep = 0;
  Clock::time_point arrived;
};

struct Cached {
  MoeModel::SequenceId seq = 0;
  std::vector<int32_t> tokens;
  int64_t capacity = 0;
  UsageProfile usage;  // what its conversation used so far
  uint64_t lastUsed = 0;
  uint64_t owner = 0;  // GenerationRequest::cacheOwner of the requests that may reuse it
};

ApiError shuttingDown();

}  // namespace serve

// What the client threads and the engine thread share; tickets hold it weakly (a ticket may outlive
// the scheduler in a handler's hands).
struct ServeScheduler::Shared {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::pair<std::shared_ptr<RequestTicket>, GenerationRequest>> inbox;
  std::vector<uint64_t> forgotten;  // cache owners whose sequences go (forget())
  bool stopping = false;
  bool wake = false;  // a ticket was cancelled, stopped, paused or resumed
  // setMemoryBudget: the newest limit asked for (taken by the engine thread), how many were asked
  // for and applied, and the last one's error ("" when it was applied).
  std::optional<std::optional<MemoryLimit>> limit;
  uint64_t limitsAsked = 0, limitsApplied = 0;
  std::string limitError;
  std::condition_variable limitApplied;
  uint64_t nextId = 1;
  ServeCounters counters;
};

struct ServeScheduler::Loop {
  MoeModel& model;
  const Tokenizer& tokenizer;
  const ChatTemplate* chatTemplate;
  ExpertRuntime* runtime;
  const ServeOptions& options;
  Shared& shared;
  int layers = 0, experts = 0, k = 0, context = 0;
  uint64_t kvPerToken = 0;
  serve::MemorySplit split;
  uint64_t expertBudget = 0;  // what the runtime was last set to (budgeted mode)
  // Tokens of one forward and of one prompt chunk: the options', or a live MemoryLimit's.
  int stepTokens = 0, prefillChunk = 0;
  serve::BatchFootprint footprint;
  uint64_t step = 0;
  std::deque<serve::Waiting> waiting;
  std::list<std::unique_ptr<serve::Live>> live;
  std::vector<serve::Cached> cached;
  std::unique_ptr<serve::PromptCache> promptCache;  // ServeOptions::promptCacheDir: owner 0's, on disk
  uint64_t lastMisses = 0, lastBytesRead = 0;
  ServeCounters counters;  // the engine's copy, published after each iteration
  // The vocabulary's bytes for constrained decoding, built at the first request that needs it.
  std::shared_ptr<const constrain::TokenIndex> tokenIndex;

  // Throws zipmoe::Error for a budget without a runtime (scheduler_admission.cpp).
  Loop(MoeModel& m, const Tokenizer& t, const ChatTemplate* tpl, ExpertRuntime* rt, const ServeOptions& o, Shared& s);

  // ---- memory and the cache of finished conversations (scheduler_admission.cpp) ----
  void followSplit(bool force);
  // A limit from setMemoryBudget (the split rebuilt around the KV held); throws zipmoe::Error,
  // changing nothing, for one it cannot hold.
  void applyLimit(const std::optional<MemoryLimit>& limit);
  serve::MemorySplit makeSplit(uint64_t total, int tokens) const;  // REQUIRES: runtime
  static std::string noRuntimeForBudget();
  void releaseSequence(MoeModel::SequenceId seq, int64_t capacity);
  void evictCached(size_t i);
  bool makeRoom(uint64_t bytes, std::optional<MoeModel::SequenceId> keep);
  void forget(uint64_t owner);  // frees every cached sequence of `owner`

  // ---- admission (scheduler_admission.cpp) ----
  enum class Admit { Started, Failed, NoRoom };
  // The ids admission runs; throws ApiError (400 naming the field). Reads only what the constructor
  // set: callable from any thread.
  RenderedConversation renderPrompt(const GenerationRequest& request) const;
  Admit admit(serve::Waiting& w);
  int count(serve::Live::State s) const;
  void admitWaiting();
  void promoteParked();

  // ---- replies and the forward step (scheduler_step.cpp) ----
  void sampleNext(serve::Live& r, const std::vector<float>& logits);
  void endReply(serve::Live& r, StopReason reason);
  void honourStops();          // requests whose ticket asked to stop end now
  static bool held(const serve::Live& r);  // paused, and holding (scheduler_step.cpp)
  void retireFinished();
  void retire(std::list<std::unique_ptr<serve::Live>>::iterator it);
  void dropCancelled();
  bool runStep();  // false when no request could take part (none live, or all held)
  void attributeRouting(const std::vector<serve::Live*>& members);
  void report(StepReport& rep);  // completes the forward's report (counts, memory) and calls onStep
  void publish();
  void failLive(const std::string& why);  // every live request fails (500), its sequence freed
  void shutdown();
};

}  // namespace zipmoe
