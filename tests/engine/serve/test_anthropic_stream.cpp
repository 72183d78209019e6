// The Anthropic endpoints' answers without a server: AnthropicStream turns synthetic RequestTicket
// events into Anthropic's server-sent events (text, text followed by two tool calls, calls reported
// only at the end, a stop sequence, a failure, an empty reply), every stream checked against the
// documented grammar; the non-streaming message object; which stop sequence matched; the error shape.
#include <QtTest>

#include <nlohmann/json.hpp>

#include "serve/anthropic_responses.h"
#include "serve/anthropic_stream.h"

using namespace zipmoe;
using namespace zipmoe::serve;
using nlohmann::json;
using Event = RequestTicket::Event;

namespace {

struct Sse {
  std::string name;
  json data;
};

// Splits SSE text into events; a malformed frame fails the test (returns what was read).
std::vector<Sse> parseSse(const std::string& text) {
  std::vector<Sse> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find("\n\n", pos);
    if (end == std::string::npos) {
      qWarning("unterminated frame: %s", text.substr(pos).c_str());
      return {};
    }
    const std::string frame = text.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = frame.find('\n');
    if (frame.rfind("event: ", 0) != 0 || nl == std::string::npos || frame.compare(nl + 1, 6, "data: ") != 0) {
      qWarning("malformed frame: %s", frame.c_str());
      return {};
    }
    out.push_back({frame.substr(7, nl - 7), json::parse(frame.substr(nl + 7))});
  }
  return out;
}

// The documented grammar: message_start, then blocks (content_block_start, its deltas of the block's
// kind, content_block_stop, indices 0, 1, …), then message_delta and message_stop — pings anywhere
// after message_start — or an error event ending the stream. Each data's type is its event's name.
// Returns the violation, or an empty string.
std::string grammarViolation(const std::vector<Sse>& events) {
  if (events.empty() || events[0].name != "message_start") return "does not open with message_start";
  int open = -1, next = 0;
  std::string kind;
  bool delta = false;
  for (size_t i = 0; i < events.size(); ++i) {
    const Sse& e = events[i];
    const std::string at = " (event " + std::to_string(i) + ": " + e.name + ")";
    if (e.data.value("type", "") != e.name) return "data.type differs from the event name" + at;
    if (i == 0 || e.name == "ping") continue;
    if (e.name == "error") return i + 1 == events.size() ? "" : "events after an error" + at;
    if (delta && e.name != "message_stop") return "events after message_delta" + at;
    if (e.name == "content_block_start") {
      if (open >= 0 || e.data["index"] != next) return "block opened out of order" + at;
      open = next++;
      kind = e.data["content_block"]["type"];
    } else if (e.name == "content_block_delta") {
      if (open < 0 || e.data["index"] != open) return "delta outside its block" + at;
      const std::string t = e.data["delta"]["type"];
      if ((kind == "text") != (t == "text_delta") || (kind == "tool_use") != (t == "input_json_delta"))
        return "delta of the wrong kind" + at;
    } else if (e.name == "content_block_stop") {
      if (open < 0 || e.data["index"] != open) return "stop of no open block" + at;
      open = -1;
    } else if (e.name == "message_delta") {
      if (open >= 0) return "message_delta with a block open" + at;
      delta = true;
    } else if (e.name == "message_stop") {
      if (!delta) return "message_stop before message_delta" + at;
      return i + 1 == events.size() ? "" : "events after message_stop" + at;
    } else {
      return "unknown event" + at;
    }
  }
  return "does not end with message_stop";
}

Event text(std::string t) {
  Event e;
  e.kind = Event::Kind::Text;
  e.text = std::move(t);
  return e;
}
Event begin(int index, std::string id, std::string name) {
  Event e;
  e.kind = Event::Kind::ToolCallBegin;
  e.toolIndex = index;
  e.call.id = std::move(id);
  e.call.name = std::move(name);
  return e;
}
Event piece(int index, std::string arguments) {
  Event e;
  e.kind = Event::Kind::ToolCallDelta;
  e.toolIndex = index;
  e.text = std::move(arguments);
  return e;
}
Event finished(StopReason reason, std::string replyText, std::vector<ToolCall> calls = {}) {
  Event e;
  e.kind = Event::Kind::Finished;
  e.finish.stopReason = reason;
  e.finish.text = std::move(replyText);
  e.finish.toolCalls = std::move(calls);
  e.finish.promptTokens = 20;
  e.finish.reusedTokens = 8;
  e.finish.generatedTokens = 5;
  return e;
}

// Runs `events` through a stream and parses what it wrote.
std::vector<Sse> run(const std::vector<Event>& events, AnthropicStream::StopSequenceOf stopOf = {}) {
  AnthropicStream s({"msg_1", "demo"}, std::move(stopOf));
  std::string out = s.open(20);
  for (const Event& e : events) out += s.onEvent(e);
  [&] { QVERIFY(s.ended()); }();
  return parseSse(out);
}

std::vector<std::string> names(const std::vector<Sse>& events) {
  std::vector<std::string> n;
  for (const Sse& e : events) n.push_back(e.name);
  return n;
}

}  // namespace

class TestAnthropicStream : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void textReply() {
    const auto ev = run({text("Hel"), text("lo"), finished(StopReason::Eos, "Hello")});
    QCOMPARE(grammarViolation(ev), std::string());
    QCOMPARE(names(ev), (std::vector<std::string>{"message_start", "content_block_start", "ping", "content_block_delta",
                                                  "content_block_delta", "content_block_stop", "message_delta",
                                                  "message_stop"}));
    const json& m = ev[0].data["message"];
    QCOMPARE(m["id"], "msg_1");
    QCOMPARE(m["type"], "message");
    QCOMPARE(m["role"], "assistant");
    QCOMPARE(m["model"], "demo");
    QVERIFY(m["content"].is_array() && m["content"].empty());
    QVERIFY(m["stop_reason"].is_null());
    QCOMPARE(m["usage"]["input_tokens"], 20);
    QCOMPARE(ev[1].data["content_block"], json({{"type", "text"}, {"text", ""}}));
    QCOMPARE(ev[3].data["delta"]["text"].get<std::string>() + ev[4].data["delta"]["text"].get<std::string>(),
             std::string("Hello"));
    const json& d = ev[6].data;
    QCOMPARE(d["delta"]["stop_reason"], "end_turn");
    QVERIFY(d["delta"]["stop_sequence"].is_null());
    QCOMPARE(d["usage"]["output_tokens"], 5);
    QCOMPARE(d["usage"]["input_tokens"], 12);  // prefilled; the 8 found in the cache are read from it
    QCOMPARE(d["usage"]["cache_read_input_tokens"], 8);
  }

  // Text, then two tool calls streamed piece by piece: three blocks, the calls' ids shown as toolu_…,
  // their partial_json pieces adding up to the arguments; Finished lists the calls again, which are
  // not sent twice.
  void textThenTwoToolCalls() {
    const std::vector<ToolCall> calls = {{"call_a", "get_weather", R"({"city":"Paris"})"}, {"call_b", "get_time", "{}"}};
    const auto ev = run({text("Checking."), begin(0, "call_a", "get_weather"), piece(0, R"({"city":)"),
                         piece(0, R"("Paris"})"), begin(1, "call_b", "get_time"), piece(1, "{}"),
                         finished(StopReason::ToolCalls, "Checking.", calls)});
    QCOMPARE(grammarViolation(ev), std::string());
    QCOMPARE(names(ev), (std::vector<std::string>{"message_start", "content_block_start", "ping", "content_block_delta",
                                                  "content_block_stop", "content_block_start", "content_block_delta",
                                                  "content_block_delta", "content_block_stop", "content_block_start",
                                                  "content_block_delta", "content_block_stop", "message_delta",
                                                  "message_stop"}));
    QCOMPARE(ev[5].data["index"], 1);
    QCOMPARE(ev[5].data["content_block"],
             json({{"type", "tool_use"}, {"id", "toolu_a"}, {"name", "get_weather"}, {"input", json::object()}}));
    QCOMPARE(ev[6].data["delta"]["type"], "input_json_delta");
    QCOMPARE(json::parse(ev[6].data["delta"]["partial_json"].get<std::string>() +
                         ev[7].data["delta"]["partial_json"].get<std::string>()),
             json({{"city", "Paris"}}));
    QCOMPARE(ev[9].data["index"], 2);
    QCOMPARE(ev[9].data["content_block"]["id"], "toolu_b");
    QCOMPARE(ev[10].data["delta"]["partial_json"], "{}");
    QCOMPARE(ev[12].data["delta"]["stop_reason"], "tool_use");
  }

  // A core that reports its calls only in Finished: each is sent whole, after the text.
  void callsReportedOnlyAtTheEnd() {
    const auto ev = run({finished(StopReason::ToolCalls, "", {{"call_z", "f", R"({"x":1})"}})});
    QCOMPARE(grammarViolation(ev), std::string());
    QCOMPARE(names(ev), (std::vector<std::string>{"message_start", "content_block_start", "ping", "content_block_delta",
                                                  "content_block_stop", "message_delta", "message_stop"}));
    QCOMPARE(ev[1].data["index"], 0);
    QCOMPARE(ev[3].data["delta"]["partial_json"], R"({"x":1})");
  }

  void stopSequenceIsNamed() {
    const auto ev = run({text("a"), finished(StopReason::StopString, "a")},
                        [](const GenerationStats&) { return std::optional<std::string>("END"); });
    QCOMPARE(grammarViolation(ev), std::string());
    QCOMPARE(ev.back().name, std::string("message_stop"));
    const json& d = ev[ev.size() - 2].data;
    QCOMPARE(d["delta"]["stop_reason"], "stop_sequence");
    QCOMPARE(d["delta"]["stop_sequence"], "END");
  }

  void emptyReplyHasNoBlocks() {
    const auto ev = run({finished(StopReason::MaxTokens, "")});
    QCOMPARE(grammarViolation(ev), std::string());
    QCOMPARE(names(ev), (std::vector<std::string>{"message_start", "message_delta", "message_stop"}));
    QCOMPARE(ev[1].data["delta"]["stop_reason"], "max_tokens");
  }

  void failureIsAnErrorEvent() {
    Event failed;
    failed.kind = Event::Kind::Failed;
    failed.error = ApiError(503, "server_error", "The server is shutting down.");
    const auto ev = run({text("par"), failed});
    QCOMPARE(grammarViolation(ev), std::string());
    QCOMPARE(ev.back().name, std::string("error"));
    QCOMPARE(ev.back().data, json({{"type", "error"},
                                   {"error", {{"type", "overloaded_error"}, {"message", "The server is shutting down."}}}}));
    // Nothing after the end.
    AnthropicStream s({"msg_2", "demo"}, {});
    (void)s.open(1);
    (void)s.onEvent(failed);
    QCOMPARE(s.onEvent(text("late")), std::string());
  }

  void messageObject() {
    GenerationStats info = finished(StopReason::ToolCalls, "Let me check.", {{"call_q", "lookup", R"({"q":"x"})"}}).finish;
    const json m = json::parse(anthropicMessageJson({"msg_9", "demo"}, info, std::nullopt));
    QCOMPARE(m["id"], "msg_9");
    QCOMPARE(m["type"], "message");
    QCOMPARE(m["role"], "assistant");
    QCOMPARE(m["content"], json::parse(R"([{"type":"text","text":"Let me check."},
                                           {"type":"tool_use","id":"toolu_q","name":"lookup","input":{"q":"x"}}])"));
    QCOMPARE(m["stop_reason"], "tool_use");
    QVERIFY(m["stop_sequence"].is_null());
    QCOMPARE(m["usage"], json::parse(R"({"input_tokens":12,"cache_creation_input_tokens":0,"cache_read_input_tokens":8,"output_tokens":5})"));
    info.toolCalls[0].argumentsJson = "[1";  // broken arguments are an error, not a silent {}
    bool threw = false;
    try {
      (void)anthropicMessageJson({"msg_9", "demo"}, info, std::nullopt);
    } catch (const ApiError& e) {
      threw = e.status() == 500 && std::string(e.message()).find("lookup") != std::string::npos;
    }
    QVERIFY(threw);
  }

  void stopReasons() {
    QCOMPARE(std::string(anthropicStopReason(StopReason::Eos)), std::string("end_turn"));
    QCOMPARE(std::string(anthropicStopReason(StopReason::Stopped)), std::string("end_turn"));
    QCOMPARE(std::string(anthropicStopReason(StopReason::MaxTokens)), std::string("max_tokens"));
    QCOMPARE(std::string(anthropicStopReason(StopReason::ContextWindow)), std::string("max_tokens"));
    QCOMPARE(std::string(anthropicStopReason(StopReason::StopString)), std::string("stop_sequence"));
    QCOMPARE(std::string(anthropicStopReason(StopReason::ToolCalls)), std::string("tool_use"));
  }

  // The reply's text stops where the stop string starts in its decoded tokens.
  void matchedStop() {
    const std::vector<std::string> stops = {"END", "\n\n", "\n"};
    QCOMPARE(matchedStopSequence(stops, "Hello", "HelloEND"), std::optional<std::string>("END"));
    QCOMPARE(matchedStopSequence(stops, "Hello", "Hello\n\n"), std::optional<std::string>("\n"));  // completed first
    QCOMPARE(matchedStopSequence(stops, "", "END of it"), std::optional<std::string>("END"));
    QCOMPARE(matchedStopSequence(stops, "Hello", "Hello there"), std::nullopt);
    QCOMPARE(matchedStopSequence(stops, "Hello", "Hel"), std::nullopt);
  }

  void errorShape() {
    const auto shape = [](const ApiError& e) { return json::parse(anthropicErrorJson(e)); };
    QCOMPARE(shape(invalidField("max_tokens", "'max_tokens' is a required property.")),
             json::parse(R"({"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 'max_tokens' is a required property."}})"));
    QCOMPARE(shape(ApiError(401, "x", "k"))["error"]["type"], "authentication_error");
    QCOMPARE(shape(ApiError(404, "x", "m"))["error"]["type"], "not_found_error");
    QCOMPARE(shape(ApiError(413, "x", "m"))["error"]["type"], "request_too_large");
    QCOMPARE(shape(ApiError(503, "x", "m"))["error"]["type"], "overloaded_error");
    QCOMPARE(shape(ApiError(500, "x", "m"))["error"]["type"], "api_error");
  }
};

QTEST_APPLESS_MAIN(TestAnthropicStream)
#include "test_anthropic_stream.moc"
