// OpenAI request bodies → generation requests: what is mapped, what is refused, and that every
// refusal is a 400 naming the field (never another exception, never a crash).
#include <QtTest>

#include "zipmoe/serve/openai_request.h"

using namespace zipmoe;

namespace {

// The ApiError a body gets (status 0 when it parses).
ApiError refusal(Endpoint e, const std::string& body) {
  try {
    parseGenerationRequest(e, body);
  } catch (const ApiError& err) {
    return err;
  }
  return ApiError(0, "", "");
}

}  // namespace

class TestOpenAiRequest : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void chatFieldsAreMapped() {
    const GenerationRequest r = parseGenerationRequest(
        Endpoint::ChatCompletions,
        R"({"model":"m","messages":[{"role":"developer","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi "},{"type":"text","text":"there"}]}],
            "max_tokens":7,"temperature":0,"top_p":0.5,"seed":42,"stop":["\n\n","END"],"stream":true,
            "stream_options":{"include_usage":true},"n":1,"user":"u","presence_penalty":0,"top_k":3,"min_p":0.1,
            "repetition_penalty":1.2,"ignore_eos":true,"unknown_field":{"ignored":true}})");
    QCOMPARE(r.model, std::string("m"));
    QCOMPARE(r.messages.size(), size_t{2});
    QCOMPARE(r.messages[0].role, std::string("system"));
    QCOMPARE(r.messages[1].content, std::string("hi there"));
    QCOMPARE(r.sampling.maxTokens, 7);
    QVERIFY(r.maxTokensGiven);
    QCOMPARE(r.sampling.temperature, 0.0);
    QCOMPARE(r.sampling.topP, 0.5);
    QCOMPARE(r.sampling.seed, uint64_t{42});
    QCOMPARE(r.sampling.stopStrings.size(), size_t{2});
    QCOMPARE(r.sampling.topK, 3);
    QCOMPARE(r.sampling.minP, 0.1);
    QCOMPARE(r.sampling.repetitionPenalty, 1.2);
    QVERIFY(r.ignoreEos);
    QVERIFY(r.stream);
    QVERIFY(r.includeUsage);
  }

  void toolsAndFormatsAreMapped() {
    const GenerationRequest r = parseGenerationRequest(
        Endpoint::ChatCompletions,
        R"({"model":"m","messages":[{"role":"user","content":"weather?"},
            {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get","arguments":)" "\"{\\\"c\\\":\\\"Rome\\\"}\"" R"(}}]},
            {"role":"tool","tool_call_id":"call_1","content":"sunny"}],
            "tools":[{"type":"function","function":{"name":"get","description":"d","parameters":{"type":"object","properties":{"c":{"type":"string"}}}}},
                     {"type":"function","function":{"name":"put"}}],
            "tool_choice":{"type":"function","function":{"name":"get"}},"parallel_tool_calls":false})");
    QCOMPARE(r.messages.size(), size_t{3});
    QCOMPARE(r.messages[1].toolCalls.size(), size_t{1});
    QCOMPARE(r.messages[1].toolCalls[0].argumentsJson, std::string("{\"c\":\"Rome\"}"));
    QCOMPARE(r.messages[2].role, std::string("tool"));
    QCOMPARE(r.messages[2].toolCallId, std::string("call_1"));
    QCOMPARE(r.messages[2].name, std::string("get"));
    QCOMPARE(r.output.tools.size(), size_t{2});
    QCOMPARE(r.output.tools[0].description, std::string("d"));
    QVERIFY(r.output.toolChoice.mode == ToolChoiceMode::Named);
    QCOMPARE(r.output.toolChoice.name, std::string("get"));
    QVERIFY(!r.output.parallelToolCalls);
    const GenerationRequest j = parseGenerationRequest(
        Endpoint::ChatCompletions, R"({"model":"m","messages":[{"role":"user","content":"x"}],
            "response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,"schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}})");
    QVERIFY(j.output.responseFormat.kind == ResponseFormatKind::JsonSchema);
    QVERIFY(j.output.responseFormat.strict);
    QVERIFY(j.output.constrained());
  }

  void completionDefaults() {
    const GenerationRequest r = parseGenerationRequest(Endpoint::Completions, R"({"model":"m","prompt":["once upon"]})");
    QCOMPARE(r.prompt, std::string("once upon"));
    QCOMPARE(r.sampling.temperature, 1.0);  // OpenAI's default
    QCOMPARE(r.sampling.maxTokens, RequestLimits{}.defaultMaxTokens);
    QVERIFY(!r.maxTokensGiven);
    QVERIFY(!r.stream);
  }

  void refusalsNameTheField_data() {
    QTest::addColumn<int>("endpoint");
    QTest::addColumn<QString>("body");
    QTest::addColumn<QString>("param");
    const int chat = static_cast<int>(Endpoint::ChatCompletions), comp = static_cast<int>(Endpoint::Completions);
    QTest::newRow("not json") << chat << "{\"model\": " << "body";
    QTest::newRow("not an object") << chat << "[1,2]" << "body";
    QTest::newRow("no model") << chat << R"({"messages":[{"role":"user","content":"x"}]})" << "model";
    QTest::newRow("model not a string") << chat << R"({"model":3,"messages":[{"role":"user","content":"x"}]})" << "model";
    QTest::newRow("no messages") << chat << R"({"model":"m"})" << "messages";
    QTest::newRow("empty messages") << chat << R"({"model":"m","messages":[]})" << "messages";
    QTest::newRow("tool without id") << chat << R"({"model":"m","messages":[{"role":"tool","content":"x"}]})" << "messages[0].tool_call_id";
    QTest::newRow("unknown role") << chat << R"({"model":"m","messages":[{"role":"function","content":"x"}]})" << "messages[0].role";
    QTest::newRow("image part") << chat << R"({"model":"m","messages":[{"role":"user","content":[{"type":"image_url"}]}]})"
                                << "messages[0].content[0].type";
    QTest::newRow("ends with assistant") << chat << R"({"model":"m","messages":[{"role":"assistant","content":"x"}]})" << "messages";
    QTest::newRow("negative max_tokens") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":-5})"
                                         << "max_tokens";
    QTest::newRow("zero max_tokens") << comp << R"({"model":"m","prompt":"x","max_tokens":0})" << "max_tokens";
    QTest::newRow("fractional max_tokens") << comp << R"({"model":"m","prompt":"x","max_tokens":2.5})" << "max_tokens";
    QTest::newRow("string max_tokens") << comp << R"({"model":"m","prompt":"x","max_tokens":"9"})" << "max_tokens";
    QTest::newRow("temperature") << comp << R"({"model":"m","prompt":"x","temperature":3})" << "temperature";
    QTest::newRow("top_p") << comp << R"({"model":"m","prompt":"x","top_p":0})" << "top_p";
    QTest::newRow("n") << comp << R"({"model":"m","prompt":"x","n":2})" << "n";
    QTest::newRow("presence_penalty") << comp << R"({"model":"m","prompt":"x","presence_penalty":0.5})" << "presence_penalty";
    QTest::newRow("frequency_penalty") << comp << R"({"model":"m","prompt":"x","frequency_penalty":-1})" << "frequency_penalty";
    QTest::newRow("logprobs") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"logprobs":true})" << "logprobs";
    QTest::newRow("tool without function") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function"}]})" << "tools[0].function";
    QTest::newRow("tool name") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]})" << "tools[0].function.name";
    QTest::newRow("tool schema") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"q":{"type":"string","pattern":"a+"}}}}}]})" << "tools";
    QTest::newRow("unknown tool choice") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"g"}}})" << "tool_choice.function.name";
    QTest::newRow("choice without tools") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required"})" << "tool_choice";
    QTest::newRow("tools on completions") << comp << R"({"model":"m","prompt":"x","tools":[]})" << "tools";
    QTest::newRow("assistant calls not a list") << chat << R"({"model":"m","messages":[{"role":"assistant","tool_calls":{}},{"role":"user","content":"x"}]})" << "messages[0].tool_calls";
    QTest::newRow("logit_bias") << comp << R"({"model":"m","prompt":"x","logit_bias":{"1":5}})" << "logit_bias";
    QTest::newRow("format type") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"yaml"}})"
                                 << "response_format.type";
    QTest::newRow("schema name") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{}}}})"
                                 << "response_format.json_schema.name";
    QTest::newRow("schema keyword") << chat << R"({"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"integer","minimum":1}}}})"
                                    << "response_format";
    QTest::newRow("empty stop") << comp << R"({"model":"m","prompt":"x","stop":""})" << "stop";
    QTest::newRow("five stops") << comp << R"({"model":"m","prompt":"x","stop":["a","b","c","d","e"]})" << "stop";
    QTest::newRow("stop not a string") << comp << R"({"model":"m","prompt":"x","stop":[1]})" << "stop[0]";
    QTest::newRow("stream not bool") << comp << R"({"model":"m","prompt":"x","stream":"yes"})" << "stream";
    QTest::newRow("ignore_eos not bool") << comp << R"({"model":"m","prompt":"x","ignore_eos":1})" << "ignore_eos";
    QTest::newRow("options without stream") << comp << R"({"model":"m","prompt":"x","stream_options":{"include_usage":true}})"
                                            << "stream_options";
    QTest::newRow("token prompt") << comp << R"({"model":"m","prompt":[1,2,3]})" << "prompt";
    QTest::newRow("empty prompt") << comp << R"({"model":"m","prompt":""})" << "prompt";
    QTest::newRow("huge seed") << comp << R"({"model":"m","prompt":"x","seed":1e300})" << "seed";
  }
  void refusalsNameTheField() {
    QFETCH(int, endpoint);
    QFETCH(QString, body);
    QFETCH(QString, param);
    const ApiError e = refusal(static_cast<Endpoint>(endpoint), body.toStdString());
    QCOMPARE(e.status(), 400);
    QCOMPARE(e.type(), std::string("invalid_request_error"));
    QCOMPARE(QString::fromStdString(e.param()), param);
    QVERIFY(!e.message().empty());
    QVERIFY(e.toJson().find("\"param\":\"" + param.toStdString() + "\"") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestOpenAiRequest)
#include "test_openai_request.moc"
