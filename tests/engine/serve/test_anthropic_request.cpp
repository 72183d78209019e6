// Anthropic Messages request bodies → generation requests: what is mapped (system, text, tool_use and
// tool_result blocks, tools and tool_choice, sampling), what is refused, and that every refusal is a
// 400 naming the field (never another exception, never a crash).
#include <QtTest>

#include "zipmoe/serve/anthropic_request.h"

using namespace zipmoe;

namespace {

// The ApiError a body gets (status 0 when it parses).
ApiError refusal(const std::string& body, AnthropicEndpoint e = AnthropicEndpoint::Messages) {
  try {
    parseAnthropicRequest(e, body);
  } catch (const ApiError& err) {
    return err;
  }
  return ApiError(0, "", "");
}

}  // namespace

class TestAnthropicRequest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void fieldsAreMapped() {
    const GenerationRequest r = parseAnthropicRequest(
        AnthropicEndpoint::Messages,
        R"({"model":"m","max_tokens":7,"system":[{"type":"text","text":"be "},{"type":"text","text":"brief","cache_control":{"type":"ephemeral"}}],
            "messages":[{"role":"user","content":"hi"}],"temperature":0,"top_p":0.5,"top_k":3,
            "stop_sequences":["\n\n","END"],"stream":true,"metadata":{"user_id":"u"},"unknown_field":1})");
    QCOMPARE(r.model, std::string("m"));
    QCOMPARE(r.endpoint, Endpoint::ChatCompletions);
    QCOMPARE(r.messages.size(), size_t{2});
    QCOMPARE(r.messages[0].role, std::string("system"));
    QCOMPARE(r.messages[0].content, std::string("be brief"));
    QCOMPARE(r.messages[1].role, std::string("user"));
    QCOMPARE(r.messages[1].content, std::string("hi"));
    QCOMPARE(r.sampling.maxTokens, 7);
    QVERIFY(r.maxTokensGiven);
    QCOMPARE(r.sampling.temperature, 0.0);
    QCOMPARE(r.sampling.topP, 0.5);
    QCOMPARE(r.sampling.topK, 3);
    QCOMPARE(r.sampling.stopStrings, (std::vector<std::string>{"\n\n", "END"}));
    QVERIFY(r.stream);
    QVERIFY(r.output.tools.empty());
  }

  void defaults() {
    const GenerationRequest r =
        parseAnthropicRequest(AnthropicEndpoint::Messages, R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]})");
    QCOMPARE(r.sampling.temperature, 1.0);  // Anthropic's default
    QVERIFY(!r.stream);
    QCOMPARE(r.messages.size(), size_t{1});  // no system message
    // count_tokens: max_tokens is optional.
    const GenerationRequest c =
        parseAnthropicRequest(AnthropicEndpoint::CountTokens, R"({"model":"m","messages":[{"role":"user","content":"x"}]})");
    QCOMPARE(c.sampling.maxTokens, RequestLimits{}.defaultMaxTokens);
    QVERIFY(!c.maxTokensGiven);
  }

  // A tool round trip: the assistant's text and tool_use blocks become one message with its calls
  // (ids mapped back to the core's), the user's tool_result blocks one "tool" message each (named
  // after the call they answer, errors marked), then the user's text.
  void toolUseAndResultsAreMapped() {
    const GenerationRequest r = parseAnthropicRequest(AnthropicEndpoint::Messages, R"({
      "model":"m","max_tokens":50,
      "tools":[{"name":"get_weather","description":"Weather of a city","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}},
               {"name":"get_time","input_schema":{"type":"object","properties":{}},"cache_control":{"type":"ephemeral"}}],
      "tool_choice":{"type":"any","disable_parallel_tool_use":true},
      "messages":[
        {"role":"user","content":"Weather and time in Paris?"},
        {"role":"assistant","content":[{"type":"text","text":"Let me look."},
                                       {"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}},
                                       {"type":"tool_use","id":"mine_2","name":"get_time","input":{}}]},
        {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"18 C, sunny"},
                                  {"type":"tool_result","tool_use_id":"mine_2","content":[{"type":"text","text":"no clock"}],"is_error":true},
                                  {"type":"text","text":"Thanks!"}]}]})");
    QCOMPARE(r.messages.size(), size_t{5});
    const ChatMessage& a = r.messages[1];
    QCOMPARE(a.role, std::string("assistant"));
    QCOMPARE(a.content, std::string("Let me look."));
    QCOMPARE(a.toolCalls.size(), size_t{2});
    QCOMPARE(a.toolCalls[0].id, std::string("call_01"));
    QCOMPARE(a.toolCalls[0].name, std::string("get_weather"));
    QCOMPARE(a.toolCalls[0].argumentsJson, std::string(R"({"city":"Paris"})"));
    QCOMPARE(a.toolCalls[1].id, std::string("mine_2"));  // not ours: unchanged
    QCOMPARE(a.toolCalls[1].argumentsJson, std::string("{}"));
    QCOMPARE(r.messages[2].role, std::string("tool"));
    QCOMPARE(r.messages[2].toolCallId, std::string("call_01"));
    QCOMPARE(r.messages[2].name, std::string("get_weather"));
    QCOMPARE(r.messages[2].content, std::string("18 C, sunny"));
    QCOMPARE(r.messages[3].toolCallId, std::string("mine_2"));
    QCOMPARE(r.messages[3].content, std::string("Error: no clock"));
    QCOMPARE(r.messages[4].role, std::string("user"));
    QCOMPARE(r.messages[4].content, std::string("Thanks!"));

    QCOMPARE(r.output.tools.size(), size_t{2});
    QCOMPARE(r.output.tools[0].name, std::string("get_weather"));
    QCOMPARE(r.output.tools[0].description, std::string("Weather of a city"));
    QCOMPARE(r.output.tools[0].parametersJson,
             std::string(R"({"properties":{"city":{"type":"string"}},"required":["city"],"type":"object"})"));
    QCOMPARE(r.output.toolChoice.mode, ToolChoiceMode::Required);
    QVERIFY(!r.output.parallelToolCalls);
  }

  void toolChoices() {
    const std::string head =
        R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":)";
    GenerationRequest r = parseAnthropicRequest(AnthropicEndpoint::Messages, head + R"({"type":"tool","name":"f"}})");
    QCOMPARE(r.output.toolChoice.mode, ToolChoiceMode::Named);
    QCOMPARE(r.output.toolChoice.name, std::string("f"));
    QVERIFY(r.output.parallelToolCalls);
    r = parseAnthropicRequest(AnthropicEndpoint::Messages, head + R"({"type":"auto"}})");
    QCOMPARE(r.output.toolChoice.mode, ToolChoiceMode::Auto);
    r = parseAnthropicRequest(AnthropicEndpoint::Messages, head + R"({"type":"none"}})");
    QCOMPARE(r.output.toolChoice.mode, ToolChoiceMode::None);
    QVERIFY(!r.output.constrained());
  }

  void toolIdsRoundTrip() {
    QCOMPARE(anthropicToolUseId("call_abc"), std::string("toolu_abc"));
    QCOMPARE(coreToolCallId("toolu_abc"), std::string("call_abc"));
    QCOMPARE(coreToolCallId(anthropicToolUseId("call_x1")), std::string("call_x1"));
    QCOMPARE(anthropicToolUseId("other"), std::string("other"));
  }

  void badBodiesNameTheField_data() {
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("field");
    const QString msgs = R"("messages":[{"role":"user","content":"x"}])";
    const QString ok = R"("model":"m","max_tokens":5,)" + msgs;
    QTest::newRow("not JSON") << "{\"model\":" << "body";
    QTest::newRow("not an object") << "[1,2]" << "body";
    QTest::newRow("no model") << R"({"max_tokens":5,)" + msgs + "}" << "model";
    QTest::newRow("no max_tokens") << R"({"model":"m",)" + msgs + "}" << "max_tokens";
    QTest::newRow("max_tokens 0") << "{" + ok + R"(,"max_tokens":0})" << "max_tokens";
    QTest::newRow("no messages") << R"({"model":"m","max_tokens":5})" << "messages";
    QTest::newRow("empty messages") << R"({"model":"m","max_tokens":5,"messages":[]})" << "messages";
    QTest::newRow("system role") << R"({"model":"m","max_tokens":5,"messages":[{"role":"system","content":"x"}]})"
                                 << "messages[0].role";
    QTest::newRow("assistant last")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]})"
        << "messages[1].role";
    QTest::newRow("content a number") << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":3}]})"
                                      << "messages[0].content";
    QTest::newRow("image")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{}}]}]})"
        << "messages[0].content[0].type";
    QTest::newRow("document")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"document"}]}]})"
        << "messages[0].content[1].type";
    QTest::newRow("thinking block")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"thinking","thinking":"hm"}]},{"role":"user","content":"y"}]})"
        << "messages[1].content[0].type";
    QTest::newRow("tool_use from the user")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"f","input":{}}]}]})"
        << "messages[0].content[0].type";
    QTest::newRow("tool_use input not an object")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":[1]}]},{"role":"user","content":"y"}]})"
        << "messages[1].content[0].input";
    QTest::newRow("tool_result without id")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","content":"r"}]}]})"
        << "messages[0].content[0].tool_use_id";
    QTest::newRow("image in a tool_result")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","content":[{"type":"image"}]}]}]})"
        << "messages[0].content[0].content[0].type";
    QTest::newRow("block without type")
        << R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"text":"x"}]}]})"
        << "messages[0].content[0].type";
    QTest::newRow("system image") << "{" + ok + R"(,"system":[{"type":"image"}]})" << "system[0].type";
    QTest::newRow("system a number") << "{" + ok + R"(,"system":5})" << "system";
    QTest::newRow("temperature 1.5") << "{" + ok + R"(,"temperature":1.5})" << "temperature";
    QTest::newRow("top_p 0") << "{" + ok + R"(,"top_p":0})" << "top_p";
    QTest::newRow("top_k -1") << "{" + ok + R"(,"top_k":-1})" << "top_k";
    QTest::newRow("stop_sequences a string") << "{" + ok + R"(,"stop_sequences":"END"})" << "stop_sequences";
    QTest::newRow("stop_sequences empty string") << "{" + ok + R"(,"stop_sequences":[""]})" << "stop_sequences";
    QTest::newRow("stream a string") << "{" + ok + R"(,"stream":"yes"})" << "stream";
    QTest::newRow("metadata a string") << "{" + ok + R"(,"metadata":"x"})" << "metadata";
    QTest::newRow("thinking") << "{" + ok + R"(,"thinking":{"type":"enabled","budget_tokens":1024}})" << "thinking";
    QTest::newRow("mcp_servers") << "{" + ok + R"(,"mcp_servers":[{"type":"url"}]})" << "mcp_servers";
    QTest::newRow("tools an object") << "{" + ok + R"(,"tools":{}})" << "tools";
    QTest::newRow("server tool") << "{" + ok + R"(,"tools":[{"type":"web_search_20250305","name":"web_search"}]})"
                                 << "tools[0].type";
    QTest::newRow("tool without schema") << "{" + ok + R"(,"tools":[{"name":"f"}]})" << "tools[0].input_schema";
    QTest::newRow("tool schema not an object")
        << "{" + ok + R"(,"tools":[{"name":"f","input_schema":{"type":"string"}}]})" << "tools[0].input_schema.type";
    QTest::newRow("tool name") << "{" + ok + R"(,"tools":[{"name":"a b","input_schema":{}}]})" << "tools[0].name";
    QTest::newRow("tool names twice")
        << "{" + ok + R"(,"tools":[{"name":"f","input_schema":{}},{"name":"f","input_schema":{}}]})" << "tools[1].name";
    QTest::newRow("tool_choice type") << "{" + ok + R"(,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"all"}})"
                                      << "tool_choice.type";
    QTest::newRow("tool_choice unknown tool")
        << "{" + ok + R"(,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"g"}})"
        << "tool_choice.name";
    QTest::newRow("tool_choice without tools") << "{" + ok + R"(,"tool_choice":{"type":"any"}})" << "tool_choice";
    QTest::newRow("disable_parallel_tool_use a string")
        << "{" + ok + R"(,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":"yes"}})"
        << "tool_choice.disable_parallel_tool_use";
  }
  void badBodiesNameTheField() {
    QFETCH(QString, body);
    QFETCH(QString, field);
    const ApiError e = refusal(body.toStdString());
    QCOMPARE(e.status(), 400);
    QCOMPARE(QString::fromStdString(e.param()), field);
    QVERIFY(!e.message().empty());
  }

  // A value out of range is named with the field.
  void outOfRangeValuesAreNamed() {
    const std::string ok = R"("model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}])";
    QVERIFY(refusal("{" + ok + R"(,"temperature":1.5})").message().find("got 1.5") != std::string::npos);
    QVERIFY(refusal("{" + ok + R"(,"top_p":2})").message().find("got 2") != std::string::npos);
    QVERIFY(refusal("{" + ok + R"(,"max_tokens":-3})").message().find("got -3") != std::string::npos);
    QVERIFY(refusal("{" + ok + R"(,"tool_choice":{"type":"all"},"tools":[{"name":"f","input_schema":{}}]})")
                .message()
                .find("'all'") != std::string::npos);
  }

  void arbitraryBytesAreRefusedCleanly() {
    for (const char* body : {"", "\xff\xfe", "null", "{\"model\":1}", "{\"messages\":[null]}", "{\"model\":\"m\",\"max_tokens\":1e400}"}) {
      const ApiError e = refusal(body);
      QCOMPARE(e.status(), 400);
      QVERIFY(!e.param().empty());
    }
  }
};

QTEST_APPLESS_MAIN(TestAnthropicRequest)
#include "test_anthropic_request.moc"
