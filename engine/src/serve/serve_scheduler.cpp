// ServeScheduler (see zipmoe/serve/serve_scheduler.h): its public face and the engine thread's loop. The
// loop's state and steps are ServeScheduler::Loop (scheduler_loop.h: admission and memory in
// scheduler_admission.cpp, the forward step and the replies in scheduler_step.cpp); the request
// channel is request_ticket.cpp, the CoServe policy coserve_policy.h, the memory split
// memory_split.h. Each request's reply goes token by token through its own ReplyStream and its
// conversation is rendered by renderConversation (zipmoe/generation/conversation.h), so that a request's
// greedy tokens and text do not depend on which door it came through.
#include "zipmoe/serve/serve_scheduler.h"

#include <atomic>

#include "serve/scheduler_loop.h"
#include "zipmoe/base/error.h"

namespace zipmoe {

const char* schedulePolicyName(SchedulePolicy policy) { return policy == SchedulePolicy::CoServe ? "coserve" : "fcfs"; }

SchedulePolicy parseSchedulePolicy(const std::string& text) {
  if (text == "fcfs") return SchedulePolicy::Fcfs;
  if (text == "coserve") return SchedulePolicy::CoServe;
  throw Error("unknown schedule '" + text + "' (expected fcfs or coserve)");
}

ServeOptions ServeOptions::interactive() {
  ServeOptions o;
  // One conversation at a time, mostly: a prompt is prefilled in one forward (as many tokens as the
  // window holds), since every forward reads the experts its tokens need once; chunks would read
  // them again per chunk.
  o.prefillChunk = 1 << 20;
  o.maxStepTokens = (1 << 20) + 64;
  return o;
}

ServeScheduler::ServeScheduler(MoeModel& model, const Tokenizer& tokenizer, const ChatTemplate* chatTemplate,
                               ExpertRuntime* runtime, ServeOptions options)
    : options_(std::move(options)), shared_(std::make_shared<Shared>()) {
  if (options_.maxBatch < 1) throw Error("serve: max batch must be >= 1, got " + std::to_string(options_.maxBatch));
  if (options_.prefillChunk < 1) throw Error("serve: prefill chunk must be >= 1, got " + std::to_string(options_.prefillChunk));
  if (options_.maxStepTokens <= options_.maxBatch)
    throw Error("serve: max step tokens (" + std::to_string(options_.maxStepTokens) + ") must exceed max batch (" +
                std::to_string(options_.maxBatch) + "): every forward holds the batch's decode tokens and a prefill chunk");
  if (options_.agingSteps < 0) throw Error("serve: aging steps must be >= 0");
  if (options_.cachedSequences < 0) throw Error("serve: cached sequences must be >= 0");
  loop_ = std::make_unique<Loop>(model, tokenizer, chatTemplate, runtime, options_, *shared_);
  model.setRecordRouting(true);
  thread_ = std::thread([this] { run(); });
}

ServeScheduler::~ServeScheduler() { stop(); }

std::shared_ptr<RequestTicket> ServeScheduler::submit(GenerationRequest request, bool paused) {
  std::vector<GenerationRequest> one;
  one.push_back(std::move(request));
  return enqueue(std::move(one), paused).front();
}

std::vector<std::shared_ptr<RequestTicket>> ServeScheduler::submitAll(std::vector<GenerationRequest> requests) {
  return enqueue(std::move(requests), false);
}

std::vector<std::shared_ptr<RequestTicket>> ServeScheduler::enqueue(std::vector<GenerationRequest> requests, bool paused) {
  std::weak_ptr<Shared> weak = shared_;
  const auto wake = [weak] {
    if (const auto s = weak.lock()) {
      {
        std::lock_guard lock(s->mutex);
        s->wake = true;
      }
      s->cv.notify_all();
    }
  };
  std::vector<std::shared_ptr<RequestTicket>> tickets;
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopping) throw serve::shuttingDown();
    const size_t queued = shared_->inbox.size() + static_cast<size_t>(shared_->counters.waiting);
    if (queued + requests.size() > static_cast<size_t>(options_.maxQueued))
      throw ApiError(503, "server_error",
                     "The server is busy: " + std::to_string(queued) + " requests are waiting. Retry later.", {},
                     "server_busy");
    for (GenerationRequest& request : requests) {
      tickets.push_back(std::make_shared<RequestTicket>(shared_->nextId++, wake, paused));
      shared_->inbox.emplace_back(tickets.back(), std::move(request));
    }
  }
  shared_->cv.notify_all();
  return tickets;
}

void ServeScheduler::forget(uint64_t cacheOwner) {
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopping) return;
    shared_->forgotten.push_back(cacheOwner);
  }
  shared_->cv.notify_all();
}

uint64_t ServeScheduler::newCacheOwner() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1);
}

void ServeScheduler::setMemoryBudget(std::optional<MemoryLimit> limit) {
  std::unique_lock lock(shared_->mutex);
  if (shared_->stopping) return;
  shared_->limit = limit;
  const uint64_t ticket = ++shared_->limitsAsked;
  shared_->cv.notify_all();
  shared_->limitApplied.wait(lock, [&] { return shared_->limitsApplied >= ticket || shared_->stopping; });
  if (shared_->limitsApplied == ticket && !shared_->limitError.empty()) throw Error(shared_->limitError);
}

void ServeScheduler::stop() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
  }
  shared_->cv.notify_all();
  shared_->limitApplied.notify_all();
  if (thread_.joinable()) thread_.join();
}

ServeCounters ServeScheduler::counters() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->counters;
}

std::vector<int32_t> ServeScheduler::renderPrompt(const GenerationRequest& request) const {
  return loop_->renderPrompt(request).ids;
}

std::string ServeScheduler::decodeReply(const std::vector<int32_t>& ids) const {
  return loop_->tokenizer.decode(ids, /*skipSpecialTokens=*/true);  // as ReplyStream's decoder
}

void ServeScheduler::run() {
  Loop& e = *loop_;
  bool idle = false;  // the last iteration could run nothing: wait for an event from outside
  for (;;) {
    std::deque<std::pair<std::shared_ptr<RequestTicket>, GenerationRequest>> arrived;
    std::vector<uint64_t> forgotten;
    std::optional<std::optional<MemoryLimit>> limit;
    uint64_t limitTicket = 0;
    {
      std::unique_lock lock(shared_->mutex);
      const bool work = !idle && (!e.live.empty() || !e.waiting.empty());
      shared_->cv.wait(lock, [&] {
        return shared_->stopping || work || shared_->wake || !shared_->inbox.empty() || !shared_->forgotten.empty() ||
               shared_->limit;
      });
      if (shared_->stopping) break;
      shared_->wake = false;
      arrived.swap(shared_->inbox);
      forgotten.swap(shared_->forgotten);
      limit.swap(shared_->limit);
      limitTicket = shared_->limitsAsked;
    }
    if (limit) {
      // A new budget before anything else of this boundary, so that admission sees it.
      std::string error;
      try {
        e.applyLimit(*limit);
      } catch (const std::exception& ex) {
        error = ex.what();
      }
      e.publish();  // the caller reads the new budget in the counters once this returns
      {
        std::lock_guard lock(shared_->mutex);
        shared_->limitsApplied = limitTicket;
        shared_->limitError = error;
      }
      shared_->limitApplied.notify_all();
    }
    for (auto& [ticket, request] : arrived)
      e.waiting.push_back({std::move(ticket), std::move(request), e.step, serve::Clock::now()});
    try {
      for (const uint64_t owner : forgotten) e.forget(owner);
      e.dropCancelled();
      e.honourStops();
      e.retireFinished();
      e.admitWaiting();
      if (options_.policy == SchedulePolicy::CoServe) e.promoteParked();
      // A request may end on its first sampled token (coserve promotes with its prefill's logits).
      e.retireFinished();
      idle = !e.runStep();
    } catch (const std::exception& ex) {
      // Anything else that goes wrong (memory for a sequence's KV, say) fails the live requests —
      // their sequences may be half-written — and the loop goes on for the next ones: a client is
      // answered, never left waiting on a thread that has died.
      e.failLive(std::string("The engine failed: ") + ex.what());
      idle = false;
    }
    e.publish();
  }
  // Take in whatever arrived last, then fail everything still open.
  {
    std::lock_guard lock(shared_->mutex);
    for (auto& [ticket, request] : shared_->inbox) ticket->fail(serve::shuttingDown());
    shared_->inbox.clear();
  }
  e.shutdown();
  loop_->model.setRecordRouting(false);
  e.publish();
}

}  // namespace zipmoe
