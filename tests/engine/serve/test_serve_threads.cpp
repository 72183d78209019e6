// The serving scheduler's threads (label `threads`: also run under ThreadSanitizer), on ToyModel
// (toy_model.h): many client threads submitting, streaming and cancelling at once; every ticket
// closes, no sequence is left behind, a batch really forms, continuation does not depend on the
// batch, coserve's aging bound admits every request, stop() fails what is still open, a ticket's
// pause and stop from other threads hold and end its reply, prompts render and replies decode from
// client threads while the engine serves.
#include <QtTest>

#include <atomic>
#include <filesystem>
#include <memory>
#include <thread>
#include <vector>

#include "engine/serve/toy_model.h"
#include "zipmoe/serve/serve_scheduler.h"

using namespace zipmoe;
using zipmoe::testing::ToyModel;

namespace {

std::filesystem::path demoTokenizer() {
  return std::filesystem::path(ZIPMOE_SOURCE_DIR) / "resources/demo-model/tokenizer.json";
}

GenerationRequest completion(const std::string& prompt, int maxTokens) {
  GenerationRequest r;
  r.endpoint = Endpoint::Completions;
  r.prompt = prompt;
  r.sampling.temperature = 0;
  r.sampling.maxTokens = maxTokens;
  return r;
}

struct Outcome {
  bool finished = false, failed = false;
  int status = 0;
  std::string text;
  GenerationStats info;
};

// Drains a ticket to its end (every wait is bounded; the loop ends when the ticket closes).
Outcome drain(RequestTicket& t, int cancelAfterPieces = -1) {
  Outcome o;
  int pieces = 0;
  std::vector<RequestTicket::Event> events;
  for (bool more = true; more;) {
    events.clear();
    more = t.wait(events, std::chrono::milliseconds(50));
    for (auto& e : events) {
      if (e.kind == RequestTicket::Event::Kind::Text) {
        o.text += e.text;
        if (++pieces == cancelAfterPieces) t.cancel();
      } else if (e.kind == RequestTicket::Event::Kind::Finished) {
        o.finished = true;
        o.info = e.finish;
      } else {
        o.failed = true;
        o.status = e.error->status();
      }
    }
  }
  return o;
}

}  // namespace

class TestServeThreads : public QObject {
  Q_OBJECT

 private:
  std::unique_ptr<Tokenizer> tokenizer_;

 private Q_SLOTS:
  void initTestCase() {
    if (!std::filesystem::exists(demoTokenizer())) QSKIP("resources/demo-model is absent");
    tokenizer_ = Tokenizer::fromFile(demoTokenizer());
  }

  void manyClientsStreamAndCancel_data() {
    QTest::addColumn<QString>("policy");
    QTest::newRow("fcfs") << "fcfs";
    QTest::newRow("coserve") << "coserve";
  }
  void manyClientsStreamAndCancel() {
    QFETCH(QString, policy);
    ToyModel model(tokenizer_->vocabSize());
    ServeOptions o;
    o.policy = parseSchedulePolicy(policy.toStdString());
    o.maxBatch = 4;
    o.prefillChunk = 5;
    o.maxStepTokens = 16;
    o.agingSteps = 8;
    o.cachedSequences = 3;
    ServeScheduler scheduler(model, *tokenizer_, nullptr, nullptr, o);

    // What each prompt gives when served alone (also fills the cache with unrelated sequences).
    const int kThreads = 8, kEach = 6;
    std::vector<std::string> alone(kThreads);
    for (int t = 0; t < kThreads; ++t) {
      auto ticket = scheduler.submit(completion("client " + std::to_string(t) + " says hello", 12));
      const Outcome out = drain(*ticket);
      QVERIFY(out.finished);
      alone[static_cast<size_t>(t)] = out.text;
    }

    std::atomic<int> finished{0}, cancelled{0}, mismatched{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < kThreads; ++t)
      clients.emplace_back([&, t] {
        for (int i = 0; i < kEach; ++i) {
          const bool cancel = (t + i) % 3 == 0;
          auto ticket = scheduler.submit(completion("client " + std::to_string(t) + " says hello", cancel ? 40 : 12));
          const Outcome out = drain(*ticket, cancel ? 2 : -1);
          if (out.finished) {
            ++finished;
            if (!cancel && out.text != alone[static_cast<size_t>(t)]) ++mismatched;
          }
          if (out.failed && out.status == 499) ++cancelled;
        }
      });
    for (auto& c : clients) c.join();

    QCOMPARE(mismatched.load(), 0);
    QCOMPARE(finished.load() + cancelled.load(), kThreads * kEach);
    QVERIFY(cancelled.load() > 0);
    // The counters are published after the engine's iteration that closed the last ticket.
    QTRY_VERIFY_WITH_TIMEOUT(scheduler.counters().running == 0, 600000);
    const ServeCounters c = scheduler.counters();
    QCOMPARE(c.waiting, 0);
    QCOMPARE(c.liveSequences, c.cachedSequences);
    QCOMPARE(c.cancelled, static_cast<uint64_t>(cancelled.load()));
    scheduler.stop();
    QCOMPARE(model.sequences(), size_t{0});  // stop frees the cached ones too
    QVERIFY2(model.maxBatchSeen() > 1, "requests were never batched together");
  }

  // renderPrompt and decodeReply (the Anthropic endpoints' count_tokens and stop sequences) from
  // client threads while the engine thread serves: the ids admission runs, the text the reply showed.
  void promptsAndRepliesFromClientThreads() {
    ToyModel model(tokenizer_->vocabSize());
    ServeOptions o;
    o.maxBatch = 4;
    ServeScheduler scheduler(model, *tokenizer_, nullptr, nullptr, o);
    std::atomic<int> wrong{0};
    std::vector<std::thread> clients;
    for (int t = 0; t < 4; ++t)
      clients.emplace_back([&, t] {
        for (int i = 0; i < 4; ++i) {
          const GenerationRequest r = completion("client " + std::to_string(t) + " counts " + std::to_string(i), 8);
          if (scheduler.renderPrompt(r) != tokenizer_->encode(r.prompt, true)) ++wrong;
          auto ticket = scheduler.submit(r);
          const Outcome out = drain(*ticket);
          if (!out.finished || static_cast<int>(scheduler.renderPrompt(r).size()) != out.info.promptTokens) ++wrong;
          if (out.info.stopReason == StopReason::MaxTokens && scheduler.decodeReply(out.info.tokens) != out.text) ++wrong;
        }
      });
    for (auto& c : clients) c.join();
    QCOMPARE(wrong.load(), 0);
    GenerationRequest empty = completion("", 4);
    bool refused = false;
    try {
      (void)scheduler.renderPrompt(empty);
    } catch (const ApiError& e) {
      refused = e.status() == 400 && e.param() == "prompt";
    }
    QVERIFY(refused);
  }

  // A ticket's pause and stop, from other threads: a held request stops generating once it has shown
  // text while the others go on; resumed, it ends as it would alone; stopped, it ends at once as
  // "stopped" with what it showed, and its sequence is cached like any finished one.
  void pauseAndStopFromOtherThreads() {
    ToyModel model(tokenizer_->vocabSize());
    ServeOptions o;
    o.maxBatch = 4;
    o.prefillChunk = 8;
    o.maxStepTokens = 16;
    o.cachedSequences = 4;
    ServeScheduler scheduler(model, *tokenizer_, nullptr, nullptr, o);
    const Outcome lone = drain(*scheduler.submit(completion("a held story", 40)));
    QVERIFY(lone.finished && lone.info.generatedTokens == 40);

    // Held from the start: it shows its first text, then waits while another request runs to its end.
    auto held = scheduler.submit(completion("a held story", 40), /*paused=*/true);
    std::string shown;
    std::vector<RequestTicket::Event> events;
    // Waits for the first text (each wait is bounded; the loop ends when the ticket closes).
    for (bool open = true; shown.empty() && open;) {
      events.clear();
      open = held->wait(events, std::chrono::milliseconds(50));
      for (auto& e : events)
        if (e.kind == RequestTicket::Event::Kind::Text) shown += e.text;
    }
    QVERIFY(!shown.empty());
    QVERIFY(drain(*scheduler.submit(completion("meanwhile", 12))).finished);
    std::thread stopper([&] { held->stop(); });
    stopper.join();
    Outcome rest = drain(*held);
    QVERIFY(rest.finished);
    QCOMPARE(rest.info.stopReason, StopReason::Stopped);
    QCOMPARE(shown + rest.text, rest.info.text);  // the flush after the stop is the rest of what it shows
    // Nothing was generated while it was held: its tokens end where its first text appeared.
    QVERIFY(rest.info.generatedTokens < 40);
    QCOMPARE(rest.info.tokens, std::vector<int32_t>(lone.info.tokens.begin(), lone.info.tokens.begin() + rest.info.generatedTokens));
    QCOMPARE(rest.info.text, lone.text.substr(0, rest.info.text.size()));

    // Held, then resumed from another thread: the whole reply, as alone.
    auto resumed = scheduler.submit(completion("a held story", 40), /*paused=*/true);
    shown.clear();
    // Waits for the first text (each wait is bounded; the loop ends when the ticket closes).
    for (bool open = true; shown.empty() && open;) {
      events.clear();
      open = resumed->wait(events, std::chrono::milliseconds(50));
      for (auto& e : events)
        if (e.kind == RequestTicket::Event::Kind::Text) shown += e.text;
    }
    QVERIFY(!shown.empty());
    std::thread resumer([&] { resumed->setPaused(false); });
    resumer.join();
    const Outcome whole = drain(*resumed);
    QVERIFY(whole.finished);
    QCOMPARE(shown + whole.text, lone.text);
    QCOMPARE(whole.info.tokens, lone.info.tokens);
    QTRY_VERIFY_WITH_TIMEOUT(scheduler.counters().running == 0, 600000);
    QCOMPARE(scheduler.counters().completed, uint64_t{4});
    QCOMPARE(scheduler.counters().cancelled, uint64_t{0});
    scheduler.stop();
    QCOMPARE(model.sequences(), size_t{0});
  }

  void stopFailsWhatIsOpen() {
    ToyModel model(tokenizer_->vocabSize());
    ServeOptions o;
    o.maxBatch = 2;
    o.maxStepTokens = 8;
    auto scheduler = std::make_unique<ServeScheduler>(model, *tokenizer_, nullptr, nullptr, o);
    std::vector<std::shared_ptr<RequestTicket>> tickets;
    for (int i = 0; i < 6; ++i) tickets.push_back(scheduler->submit(completion("a long story " + std::to_string(i), 200)));
    std::vector<RequestTicket::Event> first;
    while (first.empty()) tickets[0]->wait(first, std::chrono::milliseconds(50));  // something runs
    scheduler->stop();
    int shutdown = 0;
    for (auto& t : tickets) {
      const Outcome out = drain(*t);
      shutdown += out.failed && out.status == 503 ? 1 : 0;
    }
    QVERIFY(shutdown >= 4);  // at most the two running could have ended on their own
    QCOMPARE(model.sequences(), size_t{0});
    bool refused = false;
    try {
      scheduler->submit(completion("late", 4));
    } catch (const ApiError& e) {
      refused = e.status() == 503;
    }
    QVERIFY(refused);
    scheduler.reset();  // a ticket may outlive its scheduler: cancelling it then is harmless
    tickets[5]->cancel();
  }

  void coserveAgingAdmitsEveryone() {
    ToyModel model(tokenizer_->vocabSize());
    ServeOptions o;
    o.policy = SchedulePolicy::CoServe;
    o.maxBatch = 2;
    o.prefillChunk = 64;
    o.maxStepTokens = 64;
    o.agingSteps = 4;
    o.cachedSequences = 0;
    ServeScheduler scheduler(model, *tokenizer_, nullptr, nullptr, o);
    std::vector<std::shared_ptr<RequestTicket>> tickets;
    for (int i = 0; i < 10; ++i) tickets.push_back(scheduler.submit(completion("prompt number " + std::to_string(i), 10)));
    for (auto& t : tickets) QVERIFY(drain(*t).finished);
    QTRY_VERIFY_WITH_TIMEOUT(scheduler.counters().completed == 10, 600000);
    const ServeCounters c = scheduler.counters();
    QCOMPARE(c.completed, uint64_t{10});
    QVERIFY2(c.agedAdmissions > 0, "with 10 requests on 2 slots and an aging bound of 4 steps, some must age");
  }
};

QTEST_GUILESS_MAIN(TestServeThreads)
#include "test_serve_threads.moc"
