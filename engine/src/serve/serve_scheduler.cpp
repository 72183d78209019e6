// ServeScheduler (see zipmoe/serve_scheduler.h): the engine thread's loop. Its pieces: the request
// channel (request_ticket.cpp), the CoServe policy (coserve_policy.h), the memory split
// (memory_split.h); the per-request decoding below mirrors generate() (model/generator.cpp) step by
// step, so that a request's greedy tokens do not depend on what it was batched with.
#include "zipmoe/serve_scheduler.h"

#include <algorithm>
#include <list>

#include "serve/coserve_policy.h"
#include "serve/memory_split.h"
#include "text/stop_string_filter.h"
#include "zipmoe/error.h"
#include "zipmoe/sampler.h"

namespace zipmoe {

using Clock = std::chrono::steady_clock;

const char* schedulePolicyName(SchedulePolicy policy) { return policy == SchedulePolicy::CoServe ? "coserve" : "fcfs"; }

SchedulePolicy parseSchedulePolicy(const std::string& text) {
  if (text == "fcfs") return SchedulePolicy::Fcfs;
  if (text == "coserve") return SchedulePolicy::CoServe;
  throw Error("unknown schedule '" + text + "' (expected fcfs or coserve)");
}

// What the HTTP threads and the engine thread share; tickets hold it weakly (a ticket may outlive
// the scheduler in a handler's hands).
struct ServeScheduler::Shared {
  std::mutex mutex;
  std::condition_variable cv;
  std::deque<std::pair<std::shared_ptr<RequestTicket>, GenerationRequest>> inbox;
  bool stopping = false;
  bool wake = false;  // a ticket was cancelled
  uint64_t nextId = 1;
  ServeCounters counters;
};

namespace {

// A request admitted to the model: its sequence, its own sampler, decoder and stop strings.
struct Live {
  enum class State { Prefilling, Parked, Decoding };
  Live(std::shared_ptr<RequestTicket> t, GenerationRequest r, const Tokenizer& tokenizer)
      : ticket(std::move(t)), request(std::move(r)), sampler(request.sampling), decoder(tokenizer, true),
        stops(request.sampling.stopStrings) {}
  std::shared_ptr<RequestTicket> ticket;
  GenerationRequest request;  // owns the stop strings `stops` reads
  Sampler sampler;
  StreamingDecoder decoder;
  StopStringFilter stops;
  std::vector<int32_t> prompt, history, seqTokens;
  MoeModel::SequenceId seq = 0;
  int64_t capacity = 0;  // KV tokens reserved for the sequence
  State state = State::Prefilling;
  std::vector<float> logits;  // Parked: the prompt's last logits
  int32_t next = -1;          // Decoding: the token to feed
  int chunk = 0;              // tokens of this request in the current forward
  FinishInfo info;
  serve::UsageProfile usage;
  uint64_t arrivedStep = 0;
  Clock::time_point arrived;
  bool firstSampled = false;
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
  serve::UsageProfile usage;  // what its conversation used so far
  uint64_t lastUsed = 0;
};

ApiError shuttingDown() { return ApiError(503, "server_error", "The server is shutting down.", {}, "shutting_down"); }

}  // namespace

struct ServeScheduler::Engine {
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
  serve::BatchFootprint footprint;
  uint64_t step = 0;
  std::deque<Waiting> waiting;
  std::list<std::unique_ptr<Live>> live;
  std::vector<Cached> cached;
  uint64_t lastMisses = 0, lastBytesRead = 0;
  ServeCounters counters;  // the engine's copy, published after each iteration

  Engine(MoeModel& m, const Tokenizer& t, const ChatTemplate* tpl, ExpertRuntime* rt, const ServeOptions& o, Shared& s)
      : model(m), tokenizer(t), chatTemplate(tpl), runtime(rt), options(o), shared(s) {
    const ModelConfig& c = model.config();
    layers = static_cast<int>(std::count(c.layerIsMoe.begin(), c.layerIsMoe.end(), true));  // numMoeLayers(), which lives with libtorch
    experts = c.numExperts;
    k = c.numExpertsPerTok;
    context = c.maxPositionEmbeddings > 0 ? c.maxPositionEmbeddings : (1 << 30);
    kvPerToken = model.kvBytesPerToken();
    footprint = serve::BatchFootprint(layers, experts);
    if (options.memoryBudget > 0) {
      if (!runtime)
        throw Error("serve: a memory budget needs the expert runtime (a ZipMoE store opened with --budget); "
                    "with every expert resident there is nothing to split");
      split = serve::MemorySplit(options.memoryBudget, serve::activationBytes(c, options.maxStepTokens, context),
                                 runtime->minimumBudget(), options.expertFloorShare);
      expertBudget = split.experts();
      runtime->setBudget(MemoryBudget::bytes(expertBudget));
      runtime->waitForPlan();
    }
    if (runtime) {
      const RuntimeStats st = runtime->stats();
      lastMisses = st.misses;
      lastBytesRead = st.bytesRead;
    }
  }

  // ---- memory ----------------------------------------------------------------------------------

  // Moves the runtime's budget to what the split leaves the experts. A shrink waits until the new
  // plan is applied (the pools evicted down to it) so that the KV memory about to be allocated is
  // never held twice; a grow is lazy (applied once it is worth a replan).
  void followSplit(bool force) {
    if (!runtime || !split.limited()) return;
    const uint64_t target = split.experts();
    if (target == expertBudget) return;
    const bool shrink = target < expertBudget;
    if (!shrink && !force && target - expertBudget < split.total() / 32) return;
    runtime->setBudget(MemoryBudget::bytes(target));
    expertBudget = target;
    if (shrink) runtime->waitForPlan();
  }

  void releaseSequence(MoeModel::SequenceId seq, int64_t capacity) {
    try {
      model.removeSequence(seq);
    } catch (const Error&) {  // already gone with a failed forward: nothing to free
    }
    split.releaseKv(static_cast<uint64_t>(capacity) * kvPerToken);
  }

  void evictCached(size_t i) {
    releaseSequence(cached[i].seq, cached[i].capacity);
    cached.erase(cached.begin() + static_cast<std::ptrdiff_t>(i));
  }

  // Frees cached conversations (least recently used first, never `keep`) until `bytes` more KV fit.
  bool makeRoom(uint64_t bytes, std::optional<MoeModel::SequenceId> keep) {
    while (!split.fits(bytes)) {
      std::optional<size_t> victim;
      for (size_t i = 0; i < cached.size(); ++i)
        if ((!keep || cached[i].seq != *keep) && (!victim || cached[i].lastUsed < cached[*victim].lastUsed)) victim = i;
      if (!victim) return false;
      evictCached(*victim);
    }
    return true;
  }

  // ---- admission -------------------------------------------------------------------------------

  std::vector<int32_t> render(const GenerationRequest& r) const {
    if (r.endpoint == Endpoint::Completions) return tokenizer.encode(r.prompt, true);
    if (chatTemplate) return tokenizer.encode(chatTemplate->render(r.messages, true), false);
    std::string text;
    for (size_t i = 0; i < r.messages.size(); ++i) text += (i ? "\n" : "") + r.messages[i].content;
    return tokenizer.encode(text, true);
  }

  enum class Admit { Started, Failed, NoRoom };

  // Starts the request's prefill: renders and encodes it, finds a cached prefix, reserves its KV.
  Admit admit(Waiting& w) {
    const char* field = w.request.endpoint == Endpoint::Completions ? "prompt" : "messages";
    std::vector<int32_t> prompt;
    try {
      prompt = render(w.request);
    } catch (const Error& e) {
      w.ticket->fail(invalidField(field, std::string("The conversation cannot be rendered: ") + e.what()));
      return Admit::Failed;
    }
    if (prompt.empty()) {
      w.ticket->fail(invalidField(field, "The prompt encodes to no tokens."));
      return Admit::Failed;
    }
    if (static_cast<int64_t>(prompt.size()) >= context) {
      w.ticket->fail(ApiError(400, "invalid_request_error",
                              "This model's maximum context length is " + std::to_string(context) + " tokens; the " +
                                  field + " take " + std::to_string(prompt.size()) + " tokens and leave no room for a reply.",
                              field, "context_length_exceeded"));
      return Admit::Failed;
    }
    const int room = context - static_cast<int>(prompt.size());
    SamplingParams& p = w.request.sampling;
    p.maxTokens = std::min(p.maxTokens, room);  // beyond the window: "length" there, as llama.cpp does
    const int64_t need = static_cast<int64_t>(prompt.size()) + p.maxTokens;

    // The cached sequence sharing the longest prefix with this prompt.
    std::optional<size_t> reuse;
    size_t reuseKeep = 0;
    for (size_t i = 0; i < cached.size(); ++i) {
      size_t keep = 0;
      const auto& t = cached[i].tokens;
      while (keep < t.size() && keep < prompt.size() && t[keep] == prompt[keep]) ++keep;
      keep = std::min(keep, prompt.size() - 1);
      if (keep > reuseKeep) {
        reuse = i;
        reuseKeep = keep;
      }
    }
    const int64_t have = reuse ? cached[*reuse].capacity : 0;
    const MoeModel::SequenceId reuseSeq = reuse ? cached[*reuse].seq : -1;
    const uint64_t extra = static_cast<uint64_t>(std::max<int64_t>(0, need - have)) * kvPerToken;
    if (!makeRoom(extra, reuse ? std::optional(reuseSeq) : std::nullopt)) {
      if (!live.empty()) return Admit::NoRoom;
      w.ticket->fail(ApiError(400, "invalid_request_error",
                              "The request needs " + std::to_string(extra) + " bytes of KV cache (" +
                                  std::to_string(need) + " tokens), more than the memory budget leaves beside the "
                                  "experts' floor (" + std::to_string(split.kvLimit() - split.kv()) + " bytes).",
                              "max_tokens", "insufficient_memory"));
      return Admit::Failed;
    }
    if (reuse) {  // makeRoom may have erased entries before it
      for (size_t i = 0; i < cached.size(); ++i)
        if (cached[i].seq == reuseSeq) reuse = i;
    }

    std::unique_ptr<Live> r;
    try {
      r = std::make_unique<Live>(w.ticket, std::move(w.request), tokenizer);
    } catch (const Error& e) {
      w.ticket->fail(invalidField("max_tokens", e.what()));
      return Admit::Failed;
    }
    r->prompt = std::move(prompt);
    r->history = r->prompt;
    r->arrivedStep = w.arrivedStep;
    r->arrived = w.arrived;
    r->info.promptTokens = static_cast<int>(r->prompt.size());
    if (reuse) {
      Cached c = std::move(cached[*reuse]);
      cached.erase(cached.begin() + static_cast<std::ptrdiff_t>(*reuse));
      r->seq = c.seq;
      r->capacity = c.capacity;
      r->usage = std::move(c.usage);
      model.truncateSequence(r->seq, static_cast<int64_t>(reuseKeep));
      r->seqTokens.assign(r->prompt.begin(), r->prompt.begin() + static_cast<std::ptrdiff_t>(reuseKeep));
      r->info.reusedTokens = static_cast<int>(reuseKeep);
    } else {
      r->seq = model.addSequence();
      r->usage = serve::UsageProfile(layers, experts);
    }
    split.addKv(extra);
    followSplit(false);
    r->capacity = std::max(r->capacity, need);
    model.reserveSequence(r->seq, r->capacity);
    counters.reusedPromptTokens += static_cast<uint64_t>(r->info.reusedTokens);
    live.push_back(std::move(r));
    return Admit::Started;
  }

  int count(Live::State s) const {
    int n = 0;
    for (const auto& r : live) n += r->state == s ? 1 : 0;
    return n;
  }

  void admitWaiting() {
    for (;;) {
      if (waiting.empty()) return;
      const int prefilling = count(Live::State::Prefilling);
      const int busy = options.policy == SchedulePolicy::CoServe ? prefilling + count(Live::State::Parked)
                                                                 : prefilling + count(Live::State::Decoding);
      if (busy >= options.maxBatch) return;
      Admit a = admit(waiting.front());
      if (a == Admit::NoRoom) return;  // waits for memory: finished requests free it
      if (a == Admit::Failed) ++counters.failed;
      waiting.pop_front();
    }
  }

  // coserve: which prefilled requests take the free decode slots.
  void promoteParked() {
    const int slots = options.maxBatch - count(Live::State::Decoding);
    if (slots <= 0) return;
    std::vector<Live*> parked;
    std::vector<serve::Candidate> candidates;
    for (const auto& r : live)
      if (r->state == Live::State::Parked) {
        parked.push_back(r.get());
        candidates.push_back({&r->usage, step - r->arrivedStep});
      }
    if (parked.empty()) return;
    for (size_t i : serve::chooseGroup(candidates, footprint, slots, static_cast<uint64_t>(options.agingSteps), k,
                                       &counters.agedAdmissions)) {
      Live& r = *parked[i];
      r.state = Live::State::Decoding;
      const std::vector<float> logits = std::move(r.logits);
      sampleNext(r, logits);
    }
  }

  // ---- decoding (generate()'s loop, one token at a time) ---------------------------------------

  void emit(Live& r, const std::string& text) {
    if (text.empty()) return;
    r.ticket->pushText(text);
  }

  // Samples the next token from `logits` and streams its text; on an end, finishes the request.
  void sampleNext(Live& r, const std::vector<float>& logits) {
    const int32_t token = r.sampler.sample(logits, r.history);
    r.info.tokens.push_back(token);
    ++counters.generatedTokens;
    const auto& eos = model.config().eosTokenIds;
    const bool isEos = std::find(eos.begin(), eos.end(), token) != eos.end();
    bool hit = false;
    emit(r, r.stops.push(isEos ? std::string() : r.decoder.push(token), hit));
    if (!r.firstSampled) {
      r.firstSampled = true;
      r.info.timeToFirstTokenMs = std::chrono::duration<double, std::milli>(Clock::now() - r.arrived).count();
    }
    std::string reason;
    if (hit) {
      reason = "stop";
    } else if (isEos) {
      reason = "stop";
    } else if (static_cast<int>(r.info.tokens.size()) >= r.request.sampling.maxTokens) {
      reason = "length";
    } else if (static_cast<int64_t>(r.history.size()) + 1 > context) {
      reason = "length";
    }
    if (reason.empty()) {
      r.history.push_back(token);
      r.next = token;
      return;
    }
    if (!hit) {
      emit(r, r.stops.push(r.decoder.finish(), hit));
      if (!hit) emit(r, r.stops.release());
    }
    r.info.finishReason = "stop";
    if (!hit && reason == "length") r.info.finishReason = "length";
    r.info.completionTokens = static_cast<int>(r.info.tokens.size());
    r.next = -1;  // marks it finished
  }

  bool finished(const Live& r) const { return r.firstSampled && r.next < 0; }

  // A finished request: its ticket gets the final event; its sequence is cached for reuse.
  void retire(std::list<std::unique_ptr<Live>>::iterator it) {
    Live& r = **it;
    r.ticket->finish(r.info);
    ++counters.completed;
    if (options.routing) options.routing->release(r.ticket->id());
    if (options.cachedSequences > 0) {
      cached.push_back({r.seq, std::move(r.seqTokens), r.capacity, std::move(r.usage), step});
      while (static_cast<int>(cached.size()) > options.cachedSequences) {
        size_t oldest = 0;
        for (size_t i = 1; i < cached.size(); ++i)
          if (cached[i].lastUsed < cached[oldest].lastUsed) oldest = i;
        evictCached(oldest);
      }
    } else {
      releaseSequence(r.seq, r.capacity);
    }
    live.erase(it);
  }

  void dropCancelled() {
    for (auto it = live.begin(); it != live.end();) {
      if ((*it)->ticket->cancelled()) {
        releaseSequence((*it)->seq, (*it)->capacity);
        if (options.routing) options.routing->release((*it)->ticket->id());
        (*it)->ticket->fail(ApiError(499, "invalid_request_error", "The client closed the request.", {}, "cancelled"));
        ++counters.cancelled;
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = waiting.begin(); it != waiting.end();) {
      if (it->ticket->cancelled()) {
        it->ticket->fail(ApiError(499, "invalid_request_error", "The client closed the request.", {}, "cancelled"));
        ++counters.cancelled;
        it = waiting.erase(it);
      } else {
        ++it;
      }
    }
  }

  // ---- one forward step ------------------------------------------------------------------------

  void runStep() {
    std::vector<MoeModel::Step> steps;
    std::vector<Live*> members;
    int tokens = 0;
    for (const auto& r : live)
      if (r->state == Live::State::Decoding && r->next >= 0) {
        steps.push_back({r->seq, {r->next}});
        members.push_back(r.get());
        r->chunk = 1;
        ++tokens;
      }
    for (const auto& r : live) {
      if (r->state != Live::State::Prefilling) continue;
      const int left = options.maxStepTokens - tokens;
      if (left <= 0) break;
      const size_t done = r->seqTokens.size();
      const int chunk = static_cast<int>(std::min<size_t>({r->prompt.size() - done,
                                                           static_cast<size_t>(options.prefillChunk),
                                                           static_cast<size_t>(left)}));
      steps.push_back({r->seq, std::vector<int32_t>(r->prompt.begin() + static_cast<std::ptrdiff_t>(done),
                                                    r->prompt.begin() + static_cast<std::ptrdiff_t>(done) + chunk)});
      members.push_back(r.get());
      r->chunk = chunk;
      tokens += chunk;
    }
    if (steps.empty()) return;

    if (options.routing) {
      std::vector<RequestRouting::Segment> segments;
      for (const Live* m : members) segments.push_back({m->ticket->id(), m->chunk});
      options.routing->setSegments(std::move(segments));
    }
    std::vector<std::vector<float>> logits;
    try {
      logits = model.forward(steps);
    } catch (const std::exception& e) {
      // Every request of this forward fails (its sequence may hold a half-written step).
      for (Live* m : members) {
        m->ticket->fail(ApiError(500, "server_error", std::string("The forward step failed: ") + e.what()));
        m->next = -2;
        ++counters.failed;
      }
      for (auto it = live.begin(); it != live.end();)
        if ((*it)->next == -2) {
          releaseSequence((*it)->seq, (*it)->capacity);
          if (options.routing) options.routing->release((*it)->ticket->id());
          it = live.erase(it);
        } else {
          ++it;
        }
      return;
    }
    ++step;
    attributeRouting(members);

    for (size_t s = 0; s < members.size(); ++s) {
      Live& r = *members[s];
      if (r.state == Live::State::Decoding) {
        r.seqTokens.push_back(r.next);
        sampleNext(r, logits[s]);
      } else {
        r.seqTokens.insert(r.seqTokens.end(), steps[s].tokens.begin(), steps[s].tokens.end());
        if (r.seqTokens.size() < r.prompt.size()) continue;
        if (options.policy == SchedulePolicy::CoServe) {
          r.state = Live::State::Parked;
          r.logits = std::move(logits[s]);
        } else {
          r.state = Live::State::Decoding;
          sampleNext(r, logits[s]);
        }
      }
    }
    for (auto it = live.begin(); it != live.end();) {
      auto next = std::next(it);
      if (finished(**it)) retire(it);
      it = next;
    }
    followSplit(waiting.empty());
    report(tokens);
  }

  void attributeRouting(const std::vector<Live*>& members) {
    const auto& routing = model.lastForwardRouting();
    if (static_cast<int>(routing.size()) != layers || k <= 0) return;
    for (int l = 0; l < layers; ++l) {
      const auto& ids = routing[static_cast<size_t>(l)];
      size_t offset = 0;
      for (Live* m : members) {
        const size_t n = static_cast<size_t>(m->chunk) * static_cast<size_t>(k);
        if (offset + n > ids.size()) break;
        const std::span<const int32_t> part(ids.data() + offset, n);
        m->usage.observe(l, part, k);
        footprint.observe(l, part);
        offset += n;
      }
    }
    footprint.endStep();
  }

  void report(int tokens) {
    StepReport rep;
    rep.step = step;
    rep.running = count(Live::State::Decoding);
    rep.prefilling = count(Live::State::Prefilling);
    rep.parked = count(Live::State::Parked);
    rep.waiting = static_cast<int>(waiting.size());
    rep.tokens = tokens;
    rep.totalBudgetBytes = split.total();
    rep.kvCapacityBytes = model.kvCacheBytes();
    rep.kvReservedBytes = split.kv();
    rep.activationBytes = split.activations();
    if (runtime) {
      const RuntimeStats s = runtime->stats();
      rep.expertBudgetBytes = s.budgetBytes;
      rep.expertHeldBytes = s.heldBytes;
      rep.expertLoads = s.misses - lastMisses;
      rep.bytesRead = s.bytesRead - lastBytesRead;
      lastMisses = s.misses;
      lastBytesRead = s.bytesRead;
    }
    if (split.limited()) {
      const uint64_t used = rep.expertHeldBytes + rep.kvCapacityBytes + rep.activationBytes;
      counters.budgetBytes = split.total();
      counters.peakUsedBytes = std::max(counters.peakUsedBytes, used);
      if (used > split.total()) ++counters.overBudgetSteps;
    }
    if (options.onStep) options.onStep(rep);
  }

  void publish() {
    std::lock_guard lock(shared.mutex);
    ServeCounters& c = shared.counters;
    const ServeCounters mine = counters;
    c = mine;
    c.running = static_cast<int>(live.size());
    c.waiting = static_cast<int>(waiting.size() + shared.inbox.size());
    c.cachedSequences = static_cast<int>(cached.size());
    c.liveSequences = static_cast<int>(live.size() + cached.size());
    c.steps = step;
  }

  void shutdown() {
    for (auto& r : live) {
      r->ticket->fail(shuttingDown());
      releaseSequence(r->seq, r->capacity);
    }
    live.clear();
    for (auto& w : waiting) w.ticket->fail(shuttingDown());
    waiting.clear();
    while (!cached.empty()) evictCached(cached.size() - 1);
  }
};

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
  engine_ = std::make_unique<Engine>(model, tokenizer, chatTemplate, runtime, options_, *shared_);
  model.setRecordRouting(true);
  thread_ = std::thread([this] { run(); });
}

ServeScheduler::~ServeScheduler() { stop(); }

std::shared_ptr<RequestTicket> ServeScheduler::submit(GenerationRequest request) {
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
  std::shared_ptr<RequestTicket> ticket;
  {
    std::lock_guard lock(shared_->mutex);
    if (shared_->stopping) throw shuttingDown();
    const size_t queued = shared_->inbox.size() + static_cast<size_t>(shared_->counters.waiting);
    if (queued >= static_cast<size_t>(options_.maxQueued))
      throw ApiError(503, "server_error",
                     "The server is busy: " + std::to_string(queued) + " requests are waiting. Retry later.", {},
                     "server_busy");
    ticket = std::make_shared<RequestTicket>(shared_->nextId++, wake);
    shared_->inbox.emplace_back(ticket, std::move(request));
  }
  shared_->cv.notify_all();
  return ticket;
}

void ServeScheduler::stop() {
  {
    std::lock_guard lock(shared_->mutex);
    shared_->stopping = true;
  }
  shared_->cv.notify_all();
  if (thread_.joinable()) thread_.join();
}

ServeCounters ServeScheduler::counters() const {
  std::lock_guard lock(shared_->mutex);
  return shared_->counters;
}

void ServeScheduler::run() {
  Engine& e = *engine_;
  for (;;) {
    std::deque<std::pair<std::shared_ptr<RequestTicket>, GenerationRequest>> arrived;
    {
      std::unique_lock lock(shared_->mutex);
      const bool work = !e.live.empty() || !e.waiting.empty();
      shared_->cv.wait(lock, [&] { return shared_->stopping || work || shared_->wake || !shared_->inbox.empty(); });
      if (shared_->stopping) break;
      shared_->wake = false;
      arrived.swap(shared_->inbox);
    }
    for (auto& [ticket, request] : arrived)
      e.waiting.push_back({std::move(ticket), std::move(request), e.step, Clock::now()});
    e.dropCancelled();
    e.admitWaiting();
    if (options_.policy == SchedulePolicy::CoServe) e.promoteParked();
    // A request may end on its first sampled token (coserve promotes with its prefill's logits).
    for (auto it = e.live.begin(); it != e.live.end();) {
      auto next = std::next(it);
      if (e.finished(**it)) e.retire(it);
      it = next;
    }
    e.runStep();
    e.publish();
  }
  // Take in whatever arrived last, then fail everything still open.
  {
    std::lock_guard lock(shared_->mutex);
    for (auto& [ticket, request] : shared_->inbox) ticket->fail(shuttingDown());
    shared_->inbox.clear();
  }
  e.shutdown();
  engine_->model.setRecordRouting(false);
  e.publish();
}

}  // namespace zipmoe
