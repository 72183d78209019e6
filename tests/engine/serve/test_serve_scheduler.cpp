// The serving scheduler on the real demo model: greedy tokens of batched requests equal the same
// request served alone, byte for byte (fp32 and bf16, fcfs and coserve, chunked prefill mixed with
// decode steps; 32 concurrent bf16 requests), and in fp32 the lone run of generate() too; a
// conversation's next turn reuses its cached prefix and answers as if prefilled from scratch; a
// cancelled request's sequence is freed; under a memory budget (a ZipMoE store with its expert
// runtime) experts + KV capacity + activations stay within the budget at every step, admission
// waits for memory, and a request that can never fit is refused naming max_tokens; a budget set
// while the core runs (the app's local server) holds from the next step.
//
// No tolerance: a token's products, norms and attention do not depend on the other requests of a
// forward nor on how its prompt's chunks of at most kMaxGemvRows tokens were cut (model/linear.h,
// "Batch invariance"), so in bf16 too the batched reply is the lone one. generate() prefills a
// prompt in one forward, which for a prompt longer than kMaxGemvRows tokens is another product
// (at::linear): compared in fp32 only, where the greedy tokens agree.
#include <QtTest>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include "engine/serve/greedy_requests.h"
#include "serve/memory_split.h"
#include "test_support.h"
#include "zipmoe/chat_session.h"
#include "zipmoe/format/converter.h"
#include "zipmoe/engine.h"
#include "zipmoe/model/generator.h"
#include "zipmoe/serve/serve_scheduler.h"

using namespace zipmoe;
using zipmoe::testing::TempDir;

using zipmoe::testing::chat;
using zipmoe::testing::completion;

namespace {

std::filesystem::path demoModel() { return std::filesystem::path(ZIPMOE_FIXTURES_DIR) / "../../resources/demo-model"; }

SamplingParams greedyParams(int maxTokens) {
  SamplingParams p;
  p.temperature = 0;
  p.maxTokens = maxTokens;
  return p;
}

struct Outcome {
  bool finished = false;
  int status = 0;  // of a failure
  std::string param, code, message;
  std::string text;
  GenerationStats info;
};

Outcome drain(RequestTicket& t, bool cancelOnFirstText = false) {
  Outcome o;
  std::vector<RequestTicket::Event> events;
  for (bool more = true; more;) {
    events.clear();
    more = t.wait(events, std::chrono::milliseconds(100));
    for (auto& e : events) {
      if (e.kind == RequestTicket::Event::Kind::Text) {
        o.text += e.text;
        if (cancelOnFirstText) t.cancel();
      } else if (e.kind == RequestTicket::Event::Kind::Finished) {
        o.finished = true;
        o.info = e.finish;
      } else {
        o.status = e.error->status();
        o.param = e.error->param();
        o.code = e.error->code();
        o.message = e.error->message();
      }
    }
  }
  return o;
}

// Each prompt served alone (one request at a time, no prefix reuse) under options o: its tokens and text.
std::vector<Outcome> servedAlone(Engine& engine, ServeOptions o, const std::vector<std::string>& prompts, int maxTokens) {
  o.cachedSequences = 0;
  o.onStep = nullptr;
  ServeScheduler scheduler(engine.model(), engine.tokenizer(), engine.chatTemplate(), nullptr, o);
  std::vector<Outcome> out;
  for (const auto& p : prompts) out.push_back(drain(*scheduler.submit(completion(p, maxTokens))));
  scheduler.stop();
  return out;
}

// Every batched outcome against the lone one: the count of replies that differ in their tokens or text.
int differingReplies(const std::vector<Outcome>& batched, const std::vector<Outcome>& alone) {
  int differ = 0;
  for (size_t i = 0; i < batched.size(); ++i)
    if (batched[i].info.tokens != alone[i].info.tokens || batched[i].text != alone[i].text) {
      qInfo("prompt %zu: the batched reply differs from the lone one", i);
      ++differ;
    }
  return differ;
}

const std::vector<std::string> kPrompts = {"ROMEO:", "JULIET:\nO Romeo", "First Citizen:\nBefore we proceed",
                                           "MERCUTIO:\nNay, gentle Romeo", "KING RICHARD II:\nNow", "NURSE:\nFaith, I can tell"};

}  // namespace

class TestServeScheduler : public QObject {
  Q_OBJECT

 private:
  TempDir dir_;

 private Q_SLOTS:
  void initTestCase() {
    if (!std::filesystem::exists(demoModel() / "config.json")) QSKIP("resources/demo-model is absent");
  }

  void batchedTokensEqualAlone_data() {
    QTest::addColumn<int>("dtype");
    QTest::addColumn<QString>("policy");
    QTest::newRow("fp32 fcfs") << static_cast<int>(ComputeDtype::Float32) << "fcfs";
    QTest::newRow("fp32 coserve") << static_cast<int>(ComputeDtype::Float32) << "coserve";
    QTest::newRow("bf16 fcfs") << static_cast<int>(ComputeDtype::BFloat16) << "fcfs";
  }
  void batchedTokensEqualAlone() {
    QFETCH(int, dtype);
    QFETCH(QString, policy);
    EngineOptions eo;
    eo.model.dtype = static_cast<ComputeDtype>(dtype);
    auto engine = Engine::open(demoModel(), eo);
    ServeOptions o;
    o.policy = parseSchedulePolicy(policy.toStdString());
    o.maxBatch = 4;
    o.prefillChunk = 3;  // prompts are prefilled in several chunks, beside other requests' decode steps
    o.maxStepTokens = 12;
    const std::vector<Outcome> alone = servedAlone(*engine, o, kPrompts, 24);
    if (static_cast<ComputeDtype>(dtype) == ComputeDtype::Float32)
      for (size_t i = 0; i < kPrompts.size(); ++i)
        QCOMPARE(alone[i].info.tokens, generate(engine->model(), engine->tokenizer(),
                                                engine->tokenizer().encode(kPrompts[i], true), greedyParams(24), {})
                                           .tokens);

    int largestBatch = 0;
    o.onStep = [&](const StepReport& r) { largestBatch = std::max(largestBatch, r.running + r.prefilling); };
    ServeScheduler scheduler(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, o);
    std::vector<std::shared_ptr<RequestTicket>> tickets;
    for (const auto& p : kPrompts) tickets.push_back(scheduler.submit(completion(p, 24)));
    std::vector<Outcome> batched;
    for (const auto& t : tickets) batched.push_back(drain(*t));
    scheduler.stop();
    for (const Outcome& out : batched) QVERIFY(out.finished);
    QCOMPARE(differingReplies(batched, alone), 0);
    QVERIFY2(largestBatch >= 3, qPrintable(QString("largest batch %1").arg(largestBatch)));
  }

  // 32 different prompts at once in bf16 (maxBatch 32): prompts prefilled in chunks that the step
  // budget cuts, beside up to 31 other requests' decode steps; every greedy reply is byte-identical
  // to the same request served alone.
  void thirtyTwoConcurrentRepliesEqualTheirLoneRuns() {
    EngineOptions eo;
    eo.model.dtype = ComputeDtype::BFloat16;
    auto engine = Engine::open(demoModel(), eo);
    const std::vector<std::string> speakers = {"ROMEO", "JULIET", "MERCUTIO", "NURSE", "TYBALT", "CAPULET",
                                               "BENVOLIO", "FRIAR LAURENCE"};
    const std::vector<std::string> lines = {"", "\nO", "\nWhat say you", "\nNay, gentle sir, I pray you hear me speak"};
    std::vector<std::string> prompts;
    for (const auto& line : lines)
      for (const auto& speaker : speakers) prompts.push_back(speaker + ":" + line);
    QCOMPARE(prompts.size(), size_t{32});

    ServeOptions o;
    o.maxBatch = 32;
    o.prefillChunk = 4;
    o.maxStepTokens = 40;  // 32 decode tokens leave room for two chunks, or a cut one
    const std::vector<Outcome> alone = servedAlone(*engine, o, prompts, 20);

    int largestBatch = 0, mixedSteps = 0;
    o.onStep = [&](const StepReport& r) {
      largestBatch = std::max(largestBatch, r.running + r.prefilling);
      if (r.running > 0 && r.prefilling > 0) ++mixedSteps;
    };
    ServeScheduler scheduler(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, o);
    std::vector<std::shared_ptr<RequestTicket>> tickets;
    for (const auto& p : prompts) tickets.push_back(scheduler.submit(completion(p, 20)));
    std::vector<Outcome> batched;
    for (const auto& t : tickets) batched.push_back(drain(*t));
    scheduler.stop();
    for (const Outcome& out : batched) QVERIFY(out.finished);
    QCOMPARE(differingReplies(batched, alone), 0);
    QVERIFY2(largestBatch >= 16, qPrintable(QString("largest batch %1").arg(largestBatch)));
    QVERIFY2(mixedSteps > 0, "no forward mixed prefill chunks with decode steps");
  }

  // What the benchmarks send (BenchWorkload): prompts as token ids, greedy, ignoreEos, requests
  // submitted together with separatePrefill. Each request's tokens are the reference loop's
  // (generate() on the same ids; past an EOS generate() would stop at, the lone greedy loop's),
  // exactly maxTokens of them; every prefill has its forward alone, then both decode in lockstep;
  // the step reports' members add up to each forward's tokens and to each request's prompt plus
  // its decode tokens, and carry the forward's weight bytes. Ids outside the vocabulary are
  // refused naming prompt_ids.
  void promptIdsIgnoreEosGreedyGivesTheReferenceTokens() {
    EngineOptions eo;
    eo.model.dtype = ComputeDtype::Float32;
    auto engine = Engine::open(demoModel(), eo);
    MoeModel& model = engine->model();
    const int maxTokens = 40;
    const int32_t vocab = static_cast<int32_t>(model.config().vocabSize);
    const std::vector<std::vector<int32_t>> prompts = {engine->tokenizer().encode(kPrompts[1], true),
                                                       {7 % vocab, 1009 % vocab, 2018 % vocab, 11 % vocab, 5 % vocab}};
    // The reference: generate()'s greedy tokens, and past an EOS (where generate() stops) the same
    // loop going on — prefill in one forward, then one token per forward.
    std::vector<std::vector<int32_t>> reference;
    for (const auto& ids : prompts) {
      const GenerationStats ref = generate(model, engine->tokenizer(), ids, greedyParams(maxTokens), {});
      const auto seq = model.addSequence();
      std::vector<float> logits = model.forward({MoeModel::Step{seq, ids}}).at(0);
      std::vector<int32_t> tokens;
      for (;;) {
        tokens.push_back(static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
        if (static_cast<int>(tokens.size()) == maxTokens) break;
        logits = model.forward({MoeModel::Step{seq, {tokens.back()}}}).at(0);
      }
      model.removeSequence(seq);
      QCOMPARE(std::vector<int32_t>(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(ref.tokens.size())), ref.tokens);
      reference.push_back(std::move(tokens));
    }

    ServeOptions o = ServeOptions::interactive();
    o.maxBatch = 2;
    o.cachedSequences = 0;
    o.separatePrefill = true;
    std::map<uint64_t, int> prefillTokens, decodeTokens;
    std::vector<StepReport> reports;
    o.onStep = [&](const StepReport& r) { reports.push_back(r); };
    ServeScheduler scheduler(model, engine->tokenizer(), engine->chatTemplate(), nullptr, o);
    std::vector<GenerationRequest> requests;
    for (const auto& ids : prompts) {
      GenerationRequest r;
      r.endpoint = Endpoint::Completions;
      r.promptIds = ids;
      r.ignoreEos = true;
      r.sampling = greedyParams(maxTokens);
      r.sampling.stopStrings = {"e"};  // ignoreEos: no stop string ends the reply either
      r.maxTokensGiven = true;
      requests.push_back(std::move(r));
    }
    GenerationRequest bad = requests.front();
    bad.promptIds->back() = vocab;
    requests.push_back(std::move(bad));
    const auto tickets = scheduler.submitAll(std::move(requests));
    QCOMPARE(tickets.size(), size_t{3});
    QVERIFY(tickets[0]->id() < tickets[1]->id() && tickets[1]->id() < tickets[2]->id());
    for (size_t i = 0; i < prompts.size(); ++i) {
      const Outcome out = drain(*tickets[i]);
      QVERIFY2(out.finished, qPrintable(QString::fromStdString(out.message)));
      QCOMPARE(out.info.stopReason, StopReason::MaxTokens);
      QCOMPARE(out.info.promptTokens, static_cast<int>(prompts[i].size()));
      QCOMPARE(out.info.tokens, reference[i]);
    }
    const Outcome refused = drain(*tickets[2]);
    QVERIFY(!refused.finished);
    QCOMPARE(refused.status, 400);
    QCOMPARE(refused.param, std::string("prompt_ids"));
    QVERIFY2(refused.message.find(std::to_string(vocab)) != std::string::npos, refused.message.c_str());
    scheduler.stop();

    // Two prefill forwards, each alone, then maxTokens - 1 decode forwards holding both requests.
    QCOMPARE(static_cast<int>(reports.size()), 2 + maxTokens - 1);
    for (size_t s = 0; s < reports.size(); ++s) {
      const StepReport& r = reports[s];
      int tokens = 0;
      for (const auto& m : r.members) {
        tokens += m.tokens;
        (m.prefill ? prefillTokens : decodeTokens)[m.request] += m.tokens;
        QCOMPARE(m.prefill, s < 2);
        if (!m.prefill) QCOMPARE(m.tokens, 1);
      }
      QCOMPARE(tokens, r.tokens);
      QCOMPARE(r.members.size(), size_t{s < 2 ? 1u : 2u});
      QVERIFY(r.weightBytes > 0);
      QVERIFY(r.forwardMs >= 0);
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      QCOMPARE(prefillTokens[tickets[i]->id()], static_cast<int>(prompts[i].size()));
      QCOMPARE(decodeTokens[tickets[i]->id()], maxTokens - 1);  // the first token came from the prefill
    }
  }

  void conversationReusesItsPrefix() {
    auto engine = Engine::open(demoModel(), EngineOptions{});
    ServeOptions o;
    ServeScheduler scheduler(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, o);
    const std::vector<ChatMessage> first = {{"system", "You are a herald of Verona."}, {"user", "What news from Mantua?"}};
    const Outcome a = drain(*scheduler.submit(chat(first, 16)));
    QVERIFY(a.finished);
    QCOMPARE(a.info.reusedTokens, 0);
    std::vector<ChatMessage> second = first;
    second.push_back({"assistant", a.text});
    second.push_back({"user", "And of my lady?"});
    const Outcome b = drain(*scheduler.submit(chat(second, 16)));
    QVERIFY(b.finished);
    QVERIFY2(b.info.reusedTokens > a.info.promptTokens / 2,
             qPrintable(QString("reused %1 of %2").arg(b.info.reusedTokens).arg(b.info.promptTokens)));
    scheduler.stop();

    ServeOptions fresh;
    fresh.cachedSequences = 0;
    ServeScheduler scratch(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, fresh);
    const Outcome c = drain(*scratch.submit(chat(second, 16)));
    QCOMPARE(c.info.reusedTokens, 0);
    QCOMPARE(c.info.tokens, b.info.tokens);
  }

  // A conversation twice as long as the demo's 256-token context: the scheduler leaves out its
  // oldest turns as ChatSession does (the same code: zipmoe/generation/conversation.h), so both give the same
  // ids, the same dropped count and the same reply; with ContextOverflow::Error it is refused with
  // 400 context_length_exceeded naming the limit.
  void aConversationTwiceTheContextDropsItsOldestTurns() {
    EngineOptions eo;
    eo.model.dtype = ComputeDtype::Float32;  // the scheduler prefills in chunks: equal in fp32 (see above)
    auto engine = Engine::open(demoModel(), eo);
    const int context = engine->model().config().maxPositionEmbeddings;
    std::vector<ChatMessage> conversation = {{"system", "You are a herald of Verona."}};
    for (int turn = 0; static_cast<int>(engine->tokenizer().encode(engine->chatTemplate()->render(conversation, true)).size()) < 2 * context; ++turn) {
      conversation.push_back({"user", "What news from Mantua, good Balthasar? Tell me of turn " + std::to_string(turn) + "."});
      conversation.push_back({"assistant", "My lord, I bring you word of Juliet, and of the tomb, and of the friar's letter."});
    }
    conversation.push_back({"user", "And what of Romeo?"});

    ChatSession session(*engine);
    session.setSystemPrompt(conversation.front().content);
    session.setMessages(std::vector<ChatMessage>(conversation.begin() + 1, conversation.end()));
    const GenerationStats alone = session.reply(greedyParams(24), {});
    QVERIFY(alone.droppedMessages > 0);
    QVERIFY(alone.promptTokens < context);

    ServeOptions o;
    ServeScheduler scheduler(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, o);
    const Outcome served = drain(*scheduler.submit(chat(conversation, 24)));
    QVERIFY(served.finished);
    QCOMPARE(served.info.droppedMessages, alone.droppedMessages);
    QCOMPARE(served.info.promptTokens, alone.promptTokens);
    QCOMPARE(served.info.prefilledTokens, alone.prefilledTokens);
    QCOMPARE(served.info.reusedTokens, 0);
    QCOMPARE(served.text, alone.text);
    QCOMPARE(served.info.text, alone.text);
    QCOMPARE(served.info.tokens, alone.tokens);
    QCOMPARE(served.info.stopReason, alone.stopReason);
    scheduler.stop();

    ServeOptions strict;
    strict.contextOverflow = ContextOverflow::Error;
    ServeScheduler refusing(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, strict);
    const Outcome refused = drain(*refusing.submit(chat(conversation, 24)));
    QVERIFY(!refused.finished);
    QCOMPARE(refused.status, 400);
    QCOMPARE(refused.param, std::string("messages"));
    QCOMPARE(refused.code, std::string("context_length_exceeded"));
    QVERIFY2(refused.message.find("context holds " + std::to_string(context) + " tokens") != std::string::npos,
             refused.message.c_str());
    refusing.stop();
  }

  void cancelFreesTheSequence() {
    auto engine = Engine::open(demoModel(), EngineOptions{});
    ServeOptions o;
    o.cachedSequences = 0;
    ServeScheduler scheduler(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, o);
    const Outcome out = drain(*scheduler.submit(completion("ROMEO:", 200)), /*cancelOnFirstText=*/true);
    QVERIFY(!out.finished);
    QCOMPARE(out.status, 499);
    QTRY_VERIFY_WITH_TIMEOUT(scheduler.counters().cancelled == 1, 600000);
    QCOMPARE(scheduler.counters().liveSequences, 0);
    QVERIFY(drain(*scheduler.submit(completion("JULIET:", 4))).finished);  // and it goes on serving
    scheduler.stop();
    QCOMPARE(engine->model().kvCacheBytes(), uint64_t{0});
  }

  // An engine opened with serving's memory budget (EngineOptions::serve, as `zipmoe serve --budget`
  // does) opens its runtime with the experts' part of it — the budget less the activations' reserve
  // while no request holds KV — so starting the core plans nothing again.
  void aServingBudgetIsPlannedOnceAtStart() {
    const auto store = dir_ / "store";
    if (!std::filesystem::exists(store / "manifest.json")) convertCheckpoint(demoModel(), store, ConvertOptions{});
    EngineOptions eo;
    eo.runtime = RuntimeOptions{};
    eo.runtime->budget = MemoryBudget::shareOfExperts(0.6);
    eo.profileSamples = 4;
    eo.serve = ServeOptions{};
    eo.serve.maxBatch = 4;
    eo.serve.maxStepTokens = 32;  // a small forward: its activations' reserve leaves the experts room
    eo.serve.memoryBudget = MemoryBudget::shareOfExperts(0.6);
    auto engine = Engine::open(store, eo);
    ExpertRuntime& rt = *engine->runtime();
    const uint64_t total = MemoryBudget::shareBytes(0.6, rt.expertBytes());
    const uint64_t act = serve::servingActivationBytes(engine->model().config(), eo.serve.maxStepTokens,
                                                       eo.serve.maxBatch, engine->model().config().maxPositionEmbeddings,
                                                       total, eo.serve.expertFloorShare);
    rt.waitForPlan();
    const RuntimeStats opened = rt.stats();
    QCOMPARE(opened.budgetBytes, total - act);
    ServeScheduler& core = engine->scheduler();
    rt.waitForPlan();
    QCOMPARE(rt.stats().replans, opened.replans);  // the core found the plan it needs
    QCOMPARE(rt.stats().budgetBytes, opened.budgetBytes);
    QVERIFY(drain(*core.submit(completion("ROMEO:", 4))).finished);  // then the budget follows requests
    QCOMPARE(core.counters().budgetBytes, total);
  }

  // The app's local server (Engine::serveWithinBudget): the engine's core, started without a memory
  // budget, takes the user's budget as the whole memory of serving while it runs — from the next
  // step on, experts + KV capacity + activations stay within it at every step and the runtime holds
  // the experts' part; the slider's moves (Engine::setBudget) move the whole of it; off, the runtime
  // gets the whole budget back. Replies are the same tokens throughout (the budget is lossless).
  void aBudgetSetWhileServingHoldsFromTheNextStep() {
    const auto store = dir_ / "store";
    if (!std::filesystem::exists(store / "manifest.json")) convertCheckpoint(demoModel(), store, ConvertOptions{});
    EngineOptions eo;
    eo.runtime = RuntimeOptions{};
    eo.runtime->budget = MemoryBudget::shareOfExperts(0.9);
    eo.profileSamples = 4;
    std::atomic<int> limitedSteps{0}, violations{0};
    eo.serve.onStep = [&](const StepReport& r) {
      if (r.totalBudgetBytes == 0) return;
      ++limitedSteps;
      if (r.expertHeldBytes + r.kvCapacityBytes + r.activationBytes > r.totalBudgetBytes) ++violations;
    };
    auto engine = Engine::open(store, eo);
    ExpertRuntime& rt = *engine->runtime();
    rt.waitForPlan();
    const uint64_t budget = rt.stats().budgetBytes;
    QCOMPARE(engine->budget(), budget);
    ServeScheduler& core = engine->scheduler();
    const Outcome before = drain(*core.submit(completion("ROMEO:", 16)));
    QVERIFY(before.finished);
    QCOMPARE(limitedSteps.load(), 0);

    engine->serveWithinBudget(true);
    QVERIFY(engine->servingWithinBudget());
    QCOMPARE(engine->budget(), budget);
    QCOMPARE(core.counters().budgetBytes, budget);
    QVERIFY2(rt.stats().budgetBytes < budget, "the experts kept the whole budget beside the activations");
    std::vector<std::shared_ptr<RequestTicket>> tickets;
    for (const auto& p : kPrompts) tickets.push_back(core.submit(completion(p, 24)));
    for (auto& t : tickets) QVERIFY(drain(*t).finished);
    const Outcome within = drain(*core.submit(completion("ROMEO:", 16)));
    QVERIFY(within.finished);
    QCOMPARE(within.info.tokens, before.info.tokens);
    QVERIFY(limitedSteps.load() > 0);
    QCOMPARE(violations.load(), 0);

    // The slider moves the whole budget; below what the split needs it becomes that minimum.
    const uint64_t lower = budget * 7 / 8;
    QCOMPARE(engine->setBudget(MemoryBudget::bytes(lower)), lower);
    QCOMPARE(engine->budget(), lower);
    QCOMPARE(core.counters().budgetBytes, lower);
    QVERIFY(rt.stats().budgetBytes < lower);
    QVERIFY(drain(*core.submit(completion("JULIET:", 24))).finished);
    QCOMPARE(violations.load(), 0);
    QVERIFY(engine->setBudget(MemoryBudget::bytes(1)) > rt.minimumBudget());
    QVERIFY(engine->setBudget(MemoryBudget::bytes(lower)) == lower);

    // Off: the experts get the whole budget back, and the slider moves the runtime's again.
    engine->serveWithinBudget(false);
    QVERIFY(!engine->servingWithinBudget());
    rt.waitForPlan();
    QCOMPARE(rt.stats().budgetBytes, lower);
    QCOMPARE(engine->budget(), lower);
    QCOMPARE(engine->setBudget(MemoryBudget::bytes(budget)), budget);
    rt.waitForPlan();
    QCOMPARE(rt.stats().budgetBytes, budget);
    const int stepsWithin = limitedSteps.load();
    const Outcome after = drain(*core.submit(completion("ROMEO:", 16)));
    QCOMPARE(after.info.tokens, before.info.tokens);
    QCOMPARE(limitedSteps.load(), stepsWithin);
  }

  void budgetHoldsAtEveryStep_data() {
    QTest::addColumn<QString>("policy");
    QTest::newRow("fcfs") << "fcfs";
    QTest::newRow("coserve") << "coserve";
  }
  void budgetHoldsAtEveryStep() {
    QFETCH(QString, policy);
    const auto store = dir_ / "store";
    if (!std::filesystem::exists(store / "manifest.json")) convertCheckpoint(demoModel(), store, ConvertOptions{});
    EngineOptions eo;
    eo.runtime = RuntimeOptions{};
    eo.runtime->budget = MemoryBudget::bytes(64ull << 20);  // moved by the scheduler at once
    eo.runtime->eviction = EvictionPolicy::UsageProbability;
    eo.profileSamples = 4;
    auto engine = Engine::open(store, eo);
    ExpertRuntime& rt = *engine->runtime();

    ServeOptions o;
    o.policy = parseSchedulePolicy(policy.toStdString());
    o.maxBatch = 6;
    o.maxStepTokens = 32;
    o.expertFloorShare = 0;  // the floor is the runtime's minimum
    o.cachedSequences = 2;
    const int maxTokens = 60;
    const ModelConfig& c = engine->model().config();
    const uint64_t act = serve::activationBytes(c, o.maxStepTokens, 2 * o.maxBatch, c.maxPositionEmbeddings);
    const uint64_t perRequest = static_cast<uint64_t>(maxTokens + 12) * engine->model().kvBytesPerToken();
    // Room for three requests' KV beside the experts' minimum (not four, not the whole context
    // window): six requests must take turns.
    o.memoryBudget = MemoryBudget::bytes(act + rt.minimumBudget() + perRequest * 16 / 5);
    // This budget's KV room reaches the whole window: the reserve is the window's.
    QCOMPARE(serve::servingActivationBytes(c, o.maxStepTokens, o.maxBatch, c.maxPositionEmbeddings,
                                           act + rt.minimumBudget() + perRequest * 16 / 5, o.expertFloorShare),
             act);

    int violations = 0, kvOverReserved = 0, waitedForMemory = 0;
    uint64_t steps = 0, lowestExperts = UINT64_MAX, highestExperts = 0;
    QString first;
    o.onStep = [&](const StepReport& r) {
      ++steps;
      const uint64_t used = r.expertHeldBytes + r.kvCapacityBytes + r.activationBytes;
      if (used > r.totalBudgetBytes) {
        if (violations++ == 0)
          first = QString("step %1: experts %2 + KV %3 + activations %4 > %5")
                      .arg(r.step).arg(r.expertHeldBytes).arg(r.kvCapacityBytes).arg(r.activationBytes).arg(r.totalBudgetBytes);
      }
      if (r.kvCapacityBytes > r.kvReservedBytes) ++kvOverReserved;
      if (r.waiting > 0 && r.running + r.prefilling + r.parked > 0) ++waitedForMemory;
      lowestExperts = std::min(lowestExperts, r.expertBudgetBytes);
      highestExperts = std::max(highestExperts, r.expertBudgetBytes);
    };
    ServeScheduler scheduler(engine->model(), engine->tokenizer(), engine->chatTemplate(), &rt, o);
    std::vector<std::shared_ptr<RequestTicket>> tickets;
    for (const auto& p : kPrompts) tickets.push_back(scheduler.submit(completion(p, maxTokens)));
    for (auto& t : tickets) {
      const Outcome out = drain(*t);
      QVERIFY2(out.finished, qPrintable(QString("failed with %1").arg(out.status)));
    }
    // A request that can never fit (KV for the whole context window) is refused, naming max_tokens.
    const Outcome huge = drain(*scheduler.submit(completion("ROMEO:", 250)));
    QCOMPARE(huge.status, 400);
    QCOMPARE(huge.param, std::string("max_tokens"));
    scheduler.stop();

    QVERIFY(steps > 0);
    QVERIFY2(violations == 0, qPrintable(first));
    QCOMPARE(kvOverReserved, 0);
    QVERIFY2(waitedForMemory > 0, "six requests with room for three: some must have waited");
    QVERIFY2(lowestExperts < highestExperts, "the expert budget never moved with the KV cache");
  }

  // bench serve's trace workloads: with per-request trace routing (RequestTraceRouting) every request
  // of a batched forward draws the experts of its own trace prompt — the n-th admitted request prompt
  // n mod the trace's prompts. The trace's two prompts use disjoint experts (0-3 and 4-7), so the
  // model's per-forward routing record shows whose experts each token got.
  void eachRequestReplaysItsOwnTracePrompt() {
    const auto tracePath = dir_ / "two-prompts.tsv";
    {
      std::ofstream f(tracePath);
      f << "# expert-activation trace: model=test top_k=2 experts=8 layers=1; prompt 0 uses experts 0-3, prompt 1 4-7\n";
      f << "prompt\tlayer\te0\te1\te2\te3\te4\te5\te6\te7\n";
      f << "0\t0\t5\t5\t5\t5\t0\t0\t0\t0\n";
      f << "1\t0\t0\t0\t0\t0\t5\t5\t5\t5\n";
    }
    EngineOptions eo;
    eo.model.dtype = ComputeDtype::Float32;
    eo.replayTrace = tracePath;
    eo.replayPerRequest = true;
    auto engine = Engine::open(demoModel(), eo);
    QVERIFY(engine->requestRouting() != nullptr);
    QVERIFY(engine->traceRouting() == nullptr);

    ServeOptions o;
    o.maxBatch = 4;
    o.prefillChunk = 3;  // prompts in several chunks, beside other requests' decode steps
    o.maxStepTokens = 12;
    o.cachedSequences = 0;
    o.routing = engine->requestRouting();
    std::map<uint64_t, int> promptOf;  // request → the prompt it must replay (order of first appearance)
    std::map<uint64_t, int64_t> routedTokens;
    int mixedForwards = 0, wrong = 0;
    QString firstWrong;
    const MoeModel& model = engine->model();
    o.onStep = [&](const StepReport&) {
      const auto& segments = engine->requestRouting()->segments();
      const auto& routing = model.lastForwardRouting();
      std::set<int> prompts;
      size_t offset = 0;
      for (const auto& s : segments) {
        if (!promptOf.count(s.request)) {
          const int n = static_cast<int>(promptOf.size());
          promptOf[s.request] = n % 2;
        }
        const int prompt = promptOf[s.request];
        prompts.insert(prompt);
        routedTokens[s.request] += s.tokens;
        const size_t end = offset + static_cast<size_t>(s.tokens) * 2;
        for (const auto& layer : routing) {
          if (layer.size() < end && wrong++ == 0) firstWrong = "the routing record is shorter than the forward";
          for (size_t i = offset; i < end && i < layer.size(); ++i)
            if ((layer[i] < 4 ? 0 : 1) != prompt && wrong++ == 0)
              firstWrong = QString("request %1 (prompt %2) got expert %3").arg(s.request).arg(prompt).arg(layer[i]);
        }
        offset = end;
      }
      if (prompts.size() == 2) ++mixedForwards;
    };
    ServeScheduler scheduler(engine->model(), engine->tokenizer(), engine->chatTemplate(), nullptr, o);
    std::vector<std::shared_ptr<RequestTicket>> tickets;
    for (size_t i = 0; i < 4; ++i) tickets.push_back(scheduler.submit(completion(kPrompts[i], 8)));
    for (auto& t : tickets) {
      const Outcome out = drain(*t);
      QVERIFY2(out.finished, qPrintable(QString("failed with %1").arg(out.status)));
      QVERIFY(routedTokens[t->id()] >= out.info.promptTokens);
    }
    scheduler.stop();

    QCOMPARE(static_cast<int>(promptOf.size()), 4);
    QCOMPARE(engine->requestRouting()->requestsSeen(), uint64_t{4});
    QVERIFY2(wrong == 0, qPrintable(firstWrong));
    QVERIFY2(mixedForwards > 0, "no forward held requests of both prompts");
  }
};

QTEST_GUILESS_MAIN(TestServeScheduler)
#include "test_serve_scheduler.moc"
