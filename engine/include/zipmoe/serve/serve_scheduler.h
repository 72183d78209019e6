// ServeScheduler — serves many generation requests at once on one model: continuous batching on one
// engine thread, with the fcfs or the CoServe policy, prefix reuse across requests, and one memory
// budget split between the expert runtime, the KV cache and the activations.
//
// Requests arrive from any thread (submit(): an HTTP handler's) and are answered through their
// RequestTicket: a thread-safe channel of text pieces and one final event. The engine thread owns
// the model (it is not re-entrant) and loops: take new requests, drop cancelled ones (their sequence
// is freed at once), admit waiting ones, run one forward step holding every running request — each
// its next prefill chunk or its one decode token — then sample and stream each through its own
// ReplyStream (sampler, decoder, stop strings), and finish those that ended. Requests join and
// leave the batch between two forwards. A finished request's sequence is kept (up to
// cachedSequences, least recently used go first) so that a later request whose prompt starts with
// the same ids — the next turn of a conversation — reuses its KV cache (ChatSession's mechanism:
// roll back to the longest common prefix, prefill only the rest). Conversations are rendered and
// fitted to the context window, and replies stream and stop, by the same code as ChatSession's
// (zipmoe/generation/conversation.h, generation/reply_stream.h).
//
// Policies. fcfs: admitted in arrival order; a request decodes as soon as its prefill ends. coserve
// (CoServe §4.2, adapted to an MoE decoder): requests are prefilled ahead (at most maxBatch of them
// waiting with their cache), which shows each one's own expert usage (its tokens' routing; a
// conversation's earlier turns count too — never its future). When decode slots free up, the
// prefilled requests that need the fewest expert loads given what the running batch keeps using are
// chosen, greedily one by one; a request that has waited agingSteps forward steps goes first, so none
// starves. Memory (CoServe §4.4): see MemorySplit (serve/memory_split.h); KV is reserved for a
// request's whole length (prompt + max_tokens) at admission and counted by capacity; the expert
// budget follows through ExpertRuntime::setBudget as requests come and go, and admission waits for
// the shrunk plan to be applied (so experts + KV + activations ≤ total at every step) or waits for
// memory to be freed.
// Thread-safety: submit, stop, counters, renderPrompt, decodeReply from any thread; the model and
// runtime are used only by the engine thread while the scheduler runs (the tokenizer and template,
// which are const, also by renderPrompt and decodeReply). Cost: the model's forward steps; the policy is
// O(waiting × layers × experts) per admission.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "zipmoe/text/chat_template.h"
#include "zipmoe/experts/expert_runtime.h"
#include "zipmoe/model/model.h"
#include "zipmoe/serve/openai_request.h"
#include "zipmoe/generation/reply.h"
#include "zipmoe/trace/request_routing.h"
#include "zipmoe/text/tokenizer.h"

namespace zipmoe {

enum class SchedulePolicy { Fcfs, CoServe };
const char* schedulePolicyName(SchedulePolicy policy);      // "fcfs", "coserve"
SchedulePolicy parseSchedulePolicy(const std::string& text);  // throws Error naming the text

// The channel between one request's HTTP handler and the engine thread.
class RequestTicket {
 public:
  struct Event {
    // A reply with tool calls streams ToolCallBegin (toolIndex, call.id, call.name) and then
    // ToolCallDelta (toolIndex, text: the next piece of the arguments' JSON) per call, after any
    // Text; its Finished event lists the calls whole (GenerationStats::toolCalls).
    enum class Kind { Text, Finished, Failed, ToolCallBegin, ToolCallDelta };
    Kind kind = Kind::Text;
    std::string text;                 // Text; ToolCallDelta: a piece of the arguments
    int toolIndex = -1;               // ToolCallBegin / ToolCallDelta: 0, 1, … in the reply
    ToolCall call;                    // ToolCallBegin: id and name (argumentsJson empty)
    GenerationStats finish;           // Finished (its text: every Text event's, concatenated)
    std::optional<ApiError> error;    // Failed
  };

  RequestTicket(uint64_t id, std::function<void()> wakeEngine, bool paused = false)
      : id_(id), wake_(std::move(wakeEngine)), paused_(paused) {}
  uint64_t id() const { return id_; }
  // Waits until an event is there, the ticket is closed or `timeout` passed; moves the events into
  // `out`. Returns false once the final event has been taken (nothing more will come).
  bool wait(std::vector<Event>& out, std::chrono::milliseconds timeout);
  // From any thread (the client went away): the engine drops the request and frees its sequence at
  // its next step boundary; the ticket then closes with a Failed event.
  void cancel();
  bool cancelled() const;
  // From any thread (the user pressed stop): the reply ends before its next token with
  // StopReason::Stopped, its held-back text flushed; the ticket closes with a Finished event and the
  // sequence is kept for reuse, as after any other end.
  void stop();
  bool stopRequested() const;
  // From any thread: while paused, the engine holds the request after the latest token that showed
  // text (a reply whose first tokens show none goes on until one does) — its sequence and KV stay,
  // other requests go on — until it is resumed (or stopped, cancelled).
  void setPaused(bool paused);
  bool paused() const;

  // The engine thread's side.
  void pushText(std::string text);
  void pushToolCallBegin(int index, std::string id, std::string name);
  void pushToolCallDelta(int index, std::string arguments);
  void finish(GenerationStats info);
  void fail(ApiError error);
  bool closed() const;

 private:
  void push(Event e, bool last);
  void setFlag(bool& flag, bool value);
  bool readFlag(const bool& flag) const;
  const uint64_t id_;
  std::function<void()> wake_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Event> events_;
  bool closed_ = false, drained_ = false, cancelled_ = false, stopRequested_ = false;
  bool paused_;
};

// What the engine thread observed in one forward step (ServeOptions::onStep).
struct StepReport {
  // One request's part of the forward.
  struct Member {
    uint64_t request = 0;  // RequestTicket::id
    int tokens = 0;        // its tokens in the forward: 1 when decoding, else a prefill chunk
    bool prefill = false;  // a chunk of its prompt (false: one decode token)
  };
  uint64_t step = 0;
  int running = 0, prefilling = 0, parked = 0, waiting = 0;
  int tokens = 0;                 // tokens of this forward
  std::vector<Member> members;    // the forward's requests, in step order (their tokens add up to `tokens`)
  double forwardMs = 0;           // MoeModel::forward's wall time, as the engine thread measured it
  uint64_t weightBytes = 0;       // MoeModel::lastForwardWeightBytes() of this forward
  uint64_t totalBudgetBytes = 0;  // 0 = no budget
  uint64_t expertBudgetBytes = 0, expertHeldBytes = 0;  // the runtime's (0 without one)
  uint64_t kvCapacityBytes = 0;   // MoeModel::kvCacheBytes() after the step
  uint64_t kvReservedBytes = 0;   // the split's KV share
  uint64_t activationBytes = 0;   // the split's reserve for one forward
  uint64_t expertLoads = 0;       // experts fetched by this step (runtime misses)
  uint64_t bytesRead = 0;         // bytes read by this step
};

struct ServeCounters {
  int running = 0;          // decoding or prefilling (coserve: also prefilled, waiting for a slot)
  int waiting = 0;          // not admitted yet
  int cachedSequences = 0;  // finished conversations kept for prefix reuse
  int liveSequences = 0;    // model sequences the scheduler holds (running + cached)
  uint64_t completed = 0, cancelled = 0, failed = 0, steps = 0, generatedTokens = 0;
  uint64_t reusedPromptTokens = 0, agedAdmissions = 0;
  // --prompt-cache: requests started from a file on disk, and the prompt tokens those files held.
  uint64_t promptCacheHits = 0, promptCacheTokens = 0;
  // Memory (with a budget): the most experts + KV capacity + activations held after any step, and
  // the steps after which that sum exceeded the budget — since the budget was last set
  // (setMemoryBudget restarts both): 0 unless the accounting is broken, or a budget was lowered
  // below what live requests already held.
  uint64_t budgetBytes = 0, peakUsedBytes = 0, overBudgetSteps = 0;
};

struct ServeOptions {
  // The options of an engine's own core (Engine::scheduler()) for interactive use — the CLI and the
  // app: a prompt is prefilled in one forward step rather than in chunks of prefillChunk.
  static ServeOptions interactive();

  SchedulePolicy policy = SchedulePolicy::Fcfs;
  int maxBatch = 8;          // requests decoding together
  // Prompt tokens of one request per forward. A prompt is cut into chunks of min(prefillChunk,
  // maxStepTokens − maxBatch) tokens from its first uncached one, whatever else a forward holds (a
  // chunk that does not fit waits for the next forward), so a request's reply is the same alone or
  // batched.
  int prefillChunk = 128;
  int maxStepTokens = 256;   // tokens of one forward (decode tokens first, then prefill chunks)
  int agingSteps = 128;      // coserve: waited this many steps → admitted before any other
  int maxQueued = 1024;      // submit() refuses with 503 beyond
  int cachedSequences = 8;   // finished sequences kept for prefix reuse (0 = none)
  // The whole memory of serving: experts + KV + activations (unset: not accounted). A share means
  // that share of the model's expert bytes, as `--budget N%` does everywhere. Given in the Engine's
  // options (EngineOptions::serve), the expert runtime is opened with the experts' part of it, so
  // the model is planned once, at start.
  MemoryBudget memoryBudget;
  double expertFloorShare = 0.5;
  RequestLimits limits;      // defaultMaxTokens for requests without max_tokens
  // A conversation that outgrows the context window (zipmoe/generation/conversation.h): its oldest turns are
  // left out (usage says how many), or the request is refused with 400 context_length_exceeded.
  ContextOverflow contextOverflow = ContextOverflow::DropOldest;
  // A forward that holds a prefill chunk holds nothing else: one request's chunk, no decode tokens;
  // while an admitted request is prefilling, the decoding ones wait (vLLM's scheduler before
  // chunked prefill). Each prompt's prefill then runs alone, which is what benchmarks time as
  // TTFT, and requests submitted together (submitAll) start decoding in the same forward. Off: a
  // forward mixes the batch's decode tokens with prefill chunks of several requests.
  bool separatePrefill = false;
  // The prompt cache on disk (`zipmoe serve --prompt-cache`, serve/prompt_cache.h): set, the
  // finished conversations of cache owner 0 (the HTTP server's clients) are also saved as files in
  // this directory, at most promptCacheBytes of them (least recently used deleted first), and a
  // request of owner 0 whose prompt shares a longer prefix with a file than with any sequence in
  // memory starts from that file's KV — also after a restart. The scheduler's constructor throws
  // zipmoe::Error naming the directory when it cannot be written. Empty: none.
  std::filesystem::path promptCacheDir;
  uint64_t promptCacheBytes = uint64_t{2} << 30;
  // Benchmarks: the model's routing override when it routes each request on its own (the same
  // object as the model's ModelOptions::routing): told before each forward which request each step
  // belongs to, and when a request ends. Null: the model routes as it was loaded to.
  std::shared_ptr<RequestRouting> routing;
  // On the engine thread after each forward (tests assert the budget here; benchmarks count).
  std::function<void(const StepReport&)> onStep;
};

class ServeScheduler {
 public:
  // REQUIRES: model, tokenizer, chat template and runtime outlive the scheduler and are not used by
  // any other thread while it runs. `runtime` may be null (every expert resident); a memoryBudget
  // needs one. Throws zipmoe::Error for bad options or a budget that cannot hold the activations and
  // the runtime's minimum. Starts the engine thread.
  ServeScheduler(MoeModel& model, const Tokenizer& tokenizer, const ChatTemplate* chatTemplate,
                 ExpertRuntime* runtime, ServeOptions options);
  ~ServeScheduler();  // stop()
  ServeScheduler(const ServeScheduler&) = delete;
  ServeScheduler& operator=(const ServeScheduler&) = delete;

  // Queues a request (held from its first token on when `paused`: RequestTicket::setPaused). Throws
  // ApiError 503 when stopped or the queue is full. Errors found later (a conversation too long for
  // the context, a failed forward) arrive as the ticket's Failed event.
  std::shared_ptr<RequestTicket> submit(GenerationRequest request, bool paused = false);
  // Queues `requests` at once: the engine thread takes them in the same iteration, in this order
  // (admitted together when maxBatch leaves room), and their tickets' ids follow the same order.
  // Throws as submit() does, then queueing none of them.
  std::vector<std::shared_ptr<RequestTicket>> submitAll(std::vector<GenerationRequest> requests);
  // Frees the cached sequences of `cacheOwner` (GenerationRequest::cacheOwner) at the next step
  // boundary: a conversation that has ended (ChatSession's destructor). From any thread.
  void forget(uint64_t cacheOwner);
  // A cache owner no other caller has (process-wide, never 0).
  static uint64_t newCacheOwner();
  // Fails every request not finished (503 "shutting down"), frees every sequence, joins the engine
  // thread. Idempotent.
  void stop();
  ServeCounters counters() const;
  const ServeOptions& options() const { return options_; }

  // A memory budget set while the scheduler runs: the whole memory of serving (experts + KV +
  // activations, ServeOptions::memoryBudget's meaning) in bytes, with forward steps of at most
  // `maxStepTokens` tokens and prompts prefilled `prefillChunk` tokens at a time (the activation
  // reserve is what such a step needs).
  struct MemoryLimit {
    uint64_t totalBytes = 0;
    int maxStepTokens = 256;
    int prefillChunk = 128;
  };
  // From now on, serving's memory is `limit`; nullopt: no budget (the options' step sizes again),
  // and the expert runtime gets the whole of the last budget back. The app's local server runs
  // within the app's budget this way (Engine::serveWithinBudget). The engine thread applies it at
  // its next step boundary and this call returns once it has (at once when the scheduler has
  // stopped). KV already held stays: cached conversations are freed until the KV fits the new
  // room; while live requests hold more, admission waits and the experts stay at their floor.
  // Throws zipmoe::Error, changing nothing, without a runtime, for steps that cannot hold the
  // batch, or for a budget that cannot hold the activations and the runtime's minimum. From any
  // thread but the engine thread (not from ServeOptions::onStep).
  void setMemoryBudget(std::optional<MemoryLimit> limit);
  // The prompt ids `request` would run: rendered, fitted to the context window and encoded as its
  // admission does them (count_tokens, a stream's announced input tokens). From any thread (the
  // tokenizer and template are const). Throws ApiError (400 naming the field) where admission would
  // fail the request.
  std::vector<int32_t> renderPrompt(const GenerationRequest& request) const;
  // Generated ids decoded as a reply decodes them (special tokens skipped). From any thread.
  std::string decodeReply(const std::vector<int32_t>& ids) const;

 private:
  struct Loop;    // the engine thread's state (serve_scheduler.cpp)
  struct Shared;  // the inbox, its lock and condition variable, the published counters
  void run();
  std::vector<std::shared_ptr<RequestTicket>> enqueue(std::vector<GenerationRequest> requests, bool paused);

  ServeOptions options_;
  std::shared_ptr<Shared> shared_;
  std::unique_ptr<Loop> loop_;
  std::thread thread_;
};

}  // namespace zipmoe
