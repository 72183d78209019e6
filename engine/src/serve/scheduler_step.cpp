// The serving scheduler's forward step and each request's reply (scheduler_loop.h): one forward
// holds every live request that is not held — each its one decode token or its next prefill chunk
// — then each samples and streams through its own ReplyStream; requests that ended (a stop rule,
// or their ticket's stop) are retired at the boundary and their sequences cached for reuse by
// later requests of the same owner (owner 0's also saved to the prompt cache on disk, if any).
#include <algorithm>

#include "serve/scheduler_loop.h"
#include "zipmoe/base/error.h"

namespace zipmoe {

using serve::Clock;
using serve::Live;

namespace {
double msBetween(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }
}  // namespace

// Samples the next token from `logits` and streams its text; on an end, finishes the reply.
void ServeScheduler::Loop::sampleNext(Live& r, const std::vector<float>& logits) {
  const ReplyStream::Token t = r.reply->next(logits);
  ++counters.generatedTokens;
  r.lastAt = Clock::now();
  if (!r.firstSampled) {
    r.firstSampled = true;
    r.firstAt = r.lastAt;
    r.info.timeToFirstTokenMs = msBetween(r.arrived, r.firstAt);
  }
  if (!t.text.empty()) {
    r.info.text += t.text;
    r.ticket->pushText(t.text);
  }
  for (const ToolCallEvent& e : t.calls) {
    if (e.begin) {
      r.ticket->pushToolCallBegin(e.index, e.id, e.name);
    } else {
      r.ticket->pushToolCallDelta(e.index, e.arguments);
    }
  }
  if (t.end == StopReason::None) {
    r.next = t.id;
    return;
  }
  endReply(r, t.end);
}

void ServeScheduler::Loop::endReply(Live& r, StopReason reason) {
  r.info.stopReason = reason;
  r.info.tokens = r.reply->tokens();
  r.info.toolCalls = r.reply->toolCalls();
  r.info.generatedTokens = static_cast<int>(r.info.tokens.size());
  if (r.info.generatedTokens > 1)
    r.info.timePerOutputTokenMs = msBetween(r.firstAt, r.lastAt) / static_cast<double>(r.info.generatedTokens - 1);
  r.next = -1;
  r.done = true;
}

// A ticket's stop (RequestTicket::stop) ends its reply before its next token, with what was held
// back flushed; its sequence stays cached like any finished conversation's.
void ServeScheduler::Loop::honourStops() {
  for (const auto& r : live) {
    if (r->done || !r->ticket->stopRequested()) continue;
    const std::string rest = r->reply->stop();
    if (!rest.empty()) {
      r->info.text += rest;
      r->ticket->pushText(rest);
    }
    endReply(*r, r->reply->stopReason());
  }
}

// A paused request is held once it has shown some text (a reply whose first tokens decode to
// nothing visible yet goes on until they do: the user sees where it stopped).
bool ServeScheduler::Loop::held(const Live& r) {
  return r.state == Live::State::Decoding && !r.info.text.empty() && r.ticket->paused();
}

void ServeScheduler::Loop::retireFinished() {
  for (auto it = live.begin(); it != live.end();) {
    auto next = std::next(it);
    if ((*it)->done) retire(it);
    it = next;
  }
}

// A finished request: its ticket gets the final event; its sequence is cached for reuse.
void ServeScheduler::Loop::retire(std::list<std::unique_ptr<Live>>::iterator it) {
  Live& r = **it;
  r.ticket->finish(r.info);
  ++counters.completed;
  if (options.routing) options.routing->release(r.ticket->id());
  if (promptCache && r.request.cacheOwner == 0) promptCache->save(model, r.seq, r.seqTokens);
  if (options.cachedSequences > 0) {
    cached.push_back({r.seq, std::move(r.seqTokens), r.capacity, std::move(r.usage), step, r.request.cacheOwner});
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

void ServeScheduler::Loop::dropCancelled() {
  const auto cancelled = [] {
    return ApiError(499, "invalid_request_error", "The client closed the request.", {}, "cancelled");
  };
  for (auto it = live.begin(); it != live.end();) {
    if ((*it)->ticket->cancelled()) {
      releaseSequence((*it)->seq, (*it)->capacity);
      if (options.routing) options.routing->release((*it)->ticket->id());
      (*it)->ticket->fail(cancelled());
      ++counters.cancelled;
      it = live.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = waiting.begin(); it != waiting.end();) {
    if (it->ticket->cancelled()) {
      it->ticket->fail(cancelled());
      ++counters.cancelled;
      it = waiting.erase(it);
    } else {
      ++it;
    }
  }
}

// ---- one forward step ------------------------------------------------------------------------

bool ServeScheduler::Loop::runStep() {
  std::vector<MoeModel::Step> steps;
  std::vector<Live*> members;
  int tokens = 0;
  // separatePrefill: while a request is prefilling, a forward holds its chunk alone.
  const bool prefillAlone =
      options.separatePrefill &&
      std::any_of(live.begin(), live.end(), [](const auto& r) { return r->state == Live::State::Prefilling && !r->done; });
  for (const auto& r : live)
    if (!prefillAlone && r->state == Live::State::Decoding && !r->done && !held(*r)) {
      steps.push_back({r->seq, {r->next}});
      members.push_back(r.get());
      r->chunk = 1;
      ++tokens;
    }
  // A prompt is cut into chunks of the same length whatever else the forward holds (a chunk that
  // does not fit waits for the next forward, and the ones behind it too, in order): its tokens then
  // go through the same products alone or batched (batch invariance, model/linear.h). The decode
  // tokens (at most maxBatch) always leave room for one chunk.
  const size_t chunkLimit = static_cast<size_t>(std::min(prefillChunk, stepTokens - options.maxBatch));
  for (const auto& r : live) {
    if (r->state != Live::State::Prefilling || r->done) continue;
    const size_t done = r->seqTokens.size();
    const int chunk = static_cast<int>(std::min(r->prompt.size() - done, chunkLimit));
    if (chunk > stepTokens - tokens && !steps.empty()) break;
    steps.push_back({r->seq, std::vector<int32_t>(r->prompt.begin() + static_cast<std::ptrdiff_t>(done),
                                                  r->prompt.begin() + static_cast<std::ptrdiff_t>(done) + chunk)});
    members.push_back(r.get());
    r->chunk = chunk;
    tokens += chunk;
    if (prefillAlone) break;
  }
  if (steps.empty()) return false;
  std::vector<StepReport::Member> reported;
  for (const Live* m : members) reported.push_back({m->ticket->id(), m->chunk, m->state == Live::State::Prefilling});

  if (options.routing) {
    std::vector<RequestRouting::Segment> segments;
    for (const Live* m : members) segments.push_back({m->ticket->id(), m->chunk});
    options.routing->setSegments(std::move(segments));
  }
  std::vector<std::vector<float>> logits;
  Clock::time_point forwardStart;
  try {
    forwardStart = Clock::now();
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
    return true;
  }
  const double forwardMs = msBetween(forwardStart, Clock::now());
  ++step;
  attributeRouting(members);

  const uint64_t weightBytes = model.lastForwardWeightBytes();
  for (size_t s = 0; s < members.size(); ++s) {
    Live& r = *members[s];
    if (r.state == Live::State::Decoding) {
      r.seqTokens.push_back(r.next);
      r.info.weightBytesPerToken = weightBytes;
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
  retireFinished();
  followSplit(waiting.empty());
  StepReport rep;
  rep.tokens = tokens;
  rep.members = std::move(reported);
  rep.forwardMs = forwardMs;
  rep.weightBytes = weightBytes;
  report(rep);
  return true;
}

void ServeScheduler::Loop::attributeRouting(const std::vector<Live*>& members) {
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

void ServeScheduler::Loop::report(StepReport& rep) {
  rep.step = step;
  rep.running = count(Live::State::Decoding);
  rep.prefilling = count(Live::State::Prefilling);
  rep.parked = count(Live::State::Parked);
  rep.waiting = static_cast<int>(waiting.size());
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

void ServeScheduler::Loop::publish() {
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

void ServeScheduler::Loop::failLive(const std::string& why) {
  for (auto& r : live) {
    r->ticket->fail(ApiError(500, "server_error", why));
    releaseSequence(r->seq, r->capacity);
    if (options.routing) options.routing->release(r->ticket->id());
    ++counters.failed;
  }
  live.clear();
}

void ServeScheduler::Loop::shutdown() {
  for (auto& r : live) {
    r->ticket->fail(serve::shuttingDown());
    releaseSequence(r->seq, r->capacity);
  }
  live.clear();
  for (auto& w : waiting) w.ticket->fail(serve::shuttingDown());
  waiting.clear();
  while (!cached.empty()) evictCached(cached.size() - 1);
}

}  // namespace zipmoe
