// The serving scheduler's admission and memory (scheduler_loop.h): a waiting request is rendered
// and fitted to the context window (renderConversation, the policy every door shares), its longest
// cached prefix is found among the conversations its owner left behind (or, for the HTTP server's
// owner 0, in the prompt cache on disk: serve/prompt_cache.h), its KV cache is reserved
// within the memory split, and the expert runtime's budget follows what the split leaves.
#include <algorithm>

#include "serve/scheduler_loop.h"
#include "zipmoe/generation/conversation.h"
#include "zipmoe/base/error.h"

namespace zipmoe {

namespace serve {
ApiError shuttingDown() { return ApiError(503, "server_error", "The server is shutting down.", {}, "shutting_down"); }
}  // namespace serve

using serve::Live;

ServeScheduler::Loop::Loop(MoeModel& m, const Tokenizer& t, const ChatTemplate* tpl, ExpertRuntime* rt,
                           const ServeOptions& o, Shared& s)
    : model(m), tokenizer(t), chatTemplate(tpl), runtime(rt), options(o), shared(s) {
  const ModelConfig& c = model.config();
  layers = static_cast<int>(std::count(c.layerIsMoe.begin(), c.layerIsMoe.end(), true));  // numMoeLayers(), which lives with libtorch
  experts = c.numExperts;
  k = c.numExpertsPerTok;
  context = c.maxPositionEmbeddings > 0 ? c.maxPositionEmbeddings : (1 << 30);
  kvPerToken = model.kvBytesPerToken();
  footprint = serve::BatchFootprint(layers, experts);
  stepTokens = options.maxStepTokens;
  prefillChunk = options.prefillChunk;
  if (options.memoryBudget.isSet()) {
    if (!runtime) throw Error(noRuntimeForBudget());
    const uint64_t total = options.memoryBudget.resolve(0, runtime->expertBytes());
    split = makeSplit(total, stepTokens);
    expertBudget = split.experts();
    // An engine opened with this budget (EngineOptions::serve) planned the experts' part already.
    if (runtime->stats().budgetBytes != expertBudget) {
      runtime->setBudget(MemoryBudget::bytes(expertBudget));
      runtime->waitForPlan();
    }
  }
  if (runtime) {
    const RuntimeStats st = runtime->stats();
    lastMisses = st.misses;
    lastBytesRead = st.bytesRead;
  }
  if (!options.promptCacheDir.empty())
    promptCache = std::make_unique<serve::PromptCache>(options.promptCacheDir, options.promptCacheBytes, model);
}

// ---- memory ----------------------------------------------------------------------------------

std::string ServeScheduler::Loop::noRuntimeForBudget() {
  return "serve: a memory budget needs the expert runtime (a ZipMoE store opened with --budget); "
         "with every expert resident there is nothing to split";
}

serve::MemorySplit ServeScheduler::Loop::makeSplit(uint64_t total, int tokens) const {
  return serve::MemorySplit(total,
                            serve::servingActivationBytes(model.config(), tokens, options.maxBatch, context, total,
                                                          options.expertFloorShare),
                            runtime->minimumBudget(), options.expertFloorShare);
}

void ServeScheduler::Loop::applyLimit(const std::optional<MemoryLimit>& limit) {
  if (!limit) {
    if (!split.limited()) return;
    // The experts get the whole budget back; the KV held is counted on, unlimited.
    const uint64_t total = split.total(), kv = split.kv();
    split = serve::MemorySplit();
    split.addKv(kv);
    stepTokens = options.maxStepTokens;
    prefillChunk = options.prefillChunk;
    runtime->setBudget(MemoryBudget::bytes(total).clamped());
    expertBudget = 0;
    counters.budgetBytes = 0;
    return;
  }
  if (!runtime) throw Error(noRuntimeForBudget());
  if (limit->prefillChunk < 1) throw Error("serve: prefill chunk must be >= 1, got " + std::to_string(limit->prefillChunk));
  if (limit->maxStepTokens <= options.maxBatch)
    throw Error("serve: max step tokens (" + std::to_string(limit->maxStepTokens) + ") must exceed max batch (" +
                std::to_string(options.maxBatch) + ")");
  serve::MemorySplit next = makeSplit(limit->totalBytes, limit->maxStepTokens);
  next.addKv(split.kv());
  split = next;
  stepTokens = limit->maxStepTokens;
  prefillChunk = limit->prefillChunk;
  counters.budgetBytes = split.total();
  counters.peakUsedBytes = 0;
  counters.overBudgetSteps = 0;
  makeRoom(0, std::nullopt);  // cached conversations go until the KV fits, where they can
  expertBudget = runtime->stats().budgetBytes;
  followSplit(true);
}

// Moves the runtime's budget to what the split leaves the experts. A shrink waits until the new
// plan is applied (the pools evicted down to it) so that the KV memory about to be allocated is
// never held twice; a grow is lazy (applied once it is worth a replan).
void ServeScheduler::Loop::followSplit(bool force) {
  if (!runtime || !split.limited()) return;
  const uint64_t target = split.experts();
  if (target == expertBudget) return;
  const bool shrink = target < expertBudget;
  if (!shrink && !force && target - expertBudget < split.total() / 32) return;
  runtime->setBudget(MemoryBudget::bytes(target));
  expertBudget = target;
  if (shrink) runtime->waitForPlan();
}

void ServeScheduler::Loop::releaseSequence(MoeModel::SequenceId seq, int64_t capacity) {
  try {
    model.removeSequence(seq);
  } catch (const Error&) {  // already gone with a failed forward: nothing to free
  }
  split.releaseKv(static_cast<uint64_t>(capacity) * kvPerToken);
}

void ServeScheduler::Loop::evictCached(size_t i) {
  releaseSequence(cached[i].seq, cached[i].capacity);
  cached.erase(cached.begin() + static_cast<std::ptrdiff_t>(i));
}

// Frees cached conversations (least recently used first, never `keep`) until `bytes` more KV fit.
bool ServeScheduler::Loop::makeRoom(uint64_t bytes, std::optional<MoeModel::SequenceId> keep) {
  while (!split.fits(bytes)) {
    std::optional<size_t> victim;
    for (size_t i = 0; i < cached.size(); ++i)
      if ((!keep || cached[i].seq != *keep) && (!victim || cached[i].lastUsed < cached[*victim].lastUsed)) victim = i;
    if (!victim) return false;
    evictCached(*victim);
  }
  return true;
}

void ServeScheduler::Loop::forget(uint64_t owner) {
  for (size_t i = cached.size(); i-- > 0;)
    if (cached[i].owner == owner) evictCached(i);
}

// ---- admission -------------------------------------------------------------------------------

// The request's prompt ids: given, or its conversation rendered and fitted to the context window, or
// its completion prompt encoded. Const (ServeScheduler::renderPrompt calls it from other threads).
RenderedConversation ServeScheduler::Loop::renderPrompt(const GenerationRequest& request) const {
  const bool chat = request.endpoint != Endpoint::Completions;
  const char* field = chat ? "messages" : "prompt";
  RenderedConversation out;
  try {
    if (request.promptIds) {
      out.ids = *request.promptIds;
      const int32_t vocab = static_cast<int32_t>(model.config().vocabSize);
      for (size_t i = 0; i < out.ids.size(); ++i)
        if (out.ids[i] < 0 || out.ids[i] >= vocab)
          throw invalidField("prompt_ids", "prompt_ids[" + std::to_string(i) + "] = " + std::to_string(out.ids[i]) +
                                               " is outside the model's vocabulary (0 to " + std::to_string(vocab - 1) +
                                               ").");
      field = "prompt_ids";
    } else if (chat) {
      const ContextFit fit{context, replyReserve(request.sampling.maxTokens, context),
                           request.contextOverflow.value_or(options.contextOverflow)};
      out = renderConversation(tokenizer, request.useChatTemplate ? chatTemplate : nullptr, request.messages, fit,
                               request.output.tools);
    } else {
      out.ids = tokenizer.encode(request.prompt, true);
    }
    if (!chat || request.promptIds) {
      if (static_cast<int64_t>(out.ids.size()) >= context)
        throw ApiError(400, "invalid_request_error",
                       "This model's maximum context length is " + std::to_string(context) + " tokens; the prompt takes " +
                           std::to_string(out.ids.size()) + " tokens and leaves no room for a reply.",
                       field, "context_length_exceeded");
    }
  } catch (const ContextOverflowError& e) {
    throw ApiError(400, "invalid_request_error", e.what(), field, "context_length_exceeded");
  } catch (const Error& e) {
    throw invalidField(field, std::string("The conversation cannot be rendered: ") + e.what());
  }
  if (out.ids.empty()) throw invalidField(field, "The prompt encodes to no tokens.");
  return out;
}

// Starts the request's prefill: renders and encodes it, finds a cached prefix, reserves its KV.
ServeScheduler::Loop::Admit ServeScheduler::Loop::admit(serve::Waiting& w) {
  try {
    validate(w.request.sampling);
  } catch (const Error& e) {
    w.ticket->fail(invalidField("max_tokens", e.what()));
    return Admit::Failed;
  }
  std::vector<int32_t> prompt;
  int dropped = 0;
  try {
    RenderedConversation rendered = renderPrompt(w.request);
    prompt = std::move(rendered.ids);
    dropped = rendered.droppedMessages;
  } catch (const ApiError& e) {
    w.ticket->fail(e);
    return Admit::Failed;
  }
  const int room = context - static_cast<int>(prompt.size());
  SamplingParams& p = w.request.sampling;
  p.maxTokens = std::min(p.maxTokens, room);  // beyond the window: "length" there, as llama.cpp does
  const int64_t need = static_cast<int64_t>(prompt.size()) + p.maxTokens;

  // The cached sequence of the same owner sharing the longest prefix with this prompt — or, for
  // owner 0, a file on disk (the prompt cache) that covers more of it than any sequence in memory.
  std::optional<serve::PromptCache::Hit> disk;
  if (promptCache && w.request.cacheOwner == 0) disk = promptCache->find(prompt, 0);
  std::optional<size_t> reuse;
  size_t reuseKeep = disk ? static_cast<size_t>(disk->keep) - 1 : 0;  // memory wins a tie
  for (size_t i = 0; i < cached.size(); ++i) {
    if (cached[i].owner != w.request.cacheOwner) continue;
    size_t keep = 0;
    const auto& t = cached[i].tokens;
    while (keep < t.size() && keep < prompt.size() && t[keep] == prompt[keep]) ++keep;
    keep = std::min(keep, prompt.size() - 1);
    if (keep > reuseKeep) {
      reuse = i;
      reuseKeep = keep;
    }
  }
  if (reuse) disk.reset();
  const int64_t have = reuse ? cached[*reuse].capacity : 0;
  const MoeModel::SequenceId reuseSeq = reuse ? cached[*reuse].seq : -1;
  const uint64_t extra = static_cast<uint64_t>(std::max<int64_t>(0, need - have)) * kvPerToken;
  if (!makeRoom(extra, reuse ? std::optional(reuseSeq) : std::nullopt)) {
    if (!live.empty()) return Admit::NoRoom;
    w.ticket->fail(ApiError(400, "invalid_request_error",
                            "The request needs " + std::to_string(extra) + " bytes of KV cache (" +
                                std::to_string(need) + " tokens), more than the memory budget leaves beside the "
                                "experts' floor (" + std::to_string(split.kvRoom()) + " bytes).",
                            "max_tokens", "insufficient_memory"));
    return Admit::Failed;
  }
  if (reuse) {  // makeRoom may have erased entries before it
    for (size_t i = 0; i < cached.size(); ++i)
      if (cached[i].seq == reuseSeq) reuse = i;
  }

  ReplyConstraint constraint;
  try {
    constraint.spec = constrain::ConstraintSpec::compile(w.request.output);
  } catch (const Error& e) {  // parseGenerationRequest refuses these first; other doors may not
    w.ticket->fail(invalidField("response_format", std::string("Cannot constrain the reply: ") + e.what()));
    return Admit::Failed;
  }
  if (constraint.spec) {
    if (!tokenIndex) tokenIndex = std::make_shared<const constrain::TokenIndex>(tokenizer);
    constraint.index = tokenIndex;
  }
  auto r = std::make_unique<Live>(w.ticket, std::move(w.request));
  if (r->request.ignoreEos) r->request.sampling.stopStrings.clear();
  r->reply.emplace(tokenizer, r->request.sampling, prompt,
                   r->request.ignoreEos ? std::span<const int32_t>() : std::span<const int32_t>(model.config().eosTokenIds),
                   context, std::move(constraint));
  r->prompt = std::move(prompt);
  r->arrivedStep = w.arrivedStep;
  r->arrived = w.arrived;
  r->info.promptTokens = static_cast<int>(r->prompt.size());
  r->info.droppedMessages = dropped;
  if (reuse) {
    serve::Cached c = std::move(cached[*reuse]);
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
  try {
    model.reserveSequence(r->seq, r->capacity);
  } catch (const std::exception& e) {  // its KV cache could not be allocated: this request fails alone
    releaseSequence(r->seq, r->capacity);
    w.ticket->fail(ApiError(500, "server_error", std::string("The request's KV cache could not be reserved: ") + e.what()));
    return Admit::Failed;
  }
  if (disk && promptCache->load(*disk, model, r->seq)) {  // a file that does not check out: prefill it all
    r->seqTokens.assign(r->prompt.begin(), r->prompt.begin() + disk->keep);
    r->info.reusedTokens = static_cast<int>(disk->keep);
    ++counters.promptCacheHits;
    counters.promptCacheTokens += static_cast<uint64_t>(disk->keep);
  }
  r->info.prefilledTokens = r->info.promptTokens - r->info.reusedTokens;
  counters.reusedPromptTokens += static_cast<uint64_t>(r->info.reusedTokens);
  live.push_back(std::move(r));
  return Admit::Started;
}

int ServeScheduler::Loop::count(Live::State s) const {
  int n = 0;
  for (const auto& r : live) n += r->state == s ? 1 : 0;
  return n;
}

void ServeScheduler::Loop::admitWaiting() {
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
void ServeScheduler::Loop::promoteParked() {
  const int slots = options.maxBatch - count(Live::State::Decoding);
  if (slots <= 0) return;
  std::vector<Live*> parked;
  std::vector<serve::Candidate> candidates;
  for (const auto& r : live)
    if (r->state == Live::State::Parked && !r->done) {
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

}  // namespace zipmoe
