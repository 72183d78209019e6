// Tests of chat_template.h: the Jinja interpreter against Python jinja2's renderings, byte for byte.
//
// The fixtures (tests/fixtures/chat_templates/*.json) were rendered by transformers' own chat-template
// code (scripts/dev/make_template_fixtures.py): the templates of our synthetic models, synthetic
// templates covering every supported construct, and the real Qwen1.5-MoE / DeepSeek-V2-Lite templates,
// which the test reads from the team's shared/ folder at run time (skipped when it is absent). Each
// case is a set of variables and either the expected text or the error jinja2 raised.
#include <nlohmann/json.hpp>

#include "hf/synthetic_tokenizer.h"
#include "test_support.h"
#include "zipmoe/text/chat_template.h"
#include "zipmoe/base/error.h"
#include "tools/synthetic/synthetic_model.h"

using namespace zipmoe;
using nlohmann::ordered_json;

namespace {

std::filesystem::path fixtureDir() { return std::filesystem::path(ZIPMOE_FIXTURES_DIR) / "chat_templates"; }

ordered_json readFixture(const std::string& name) {
  return ordered_json::parse(zipmoe::testing::readText(fixtureDir() / name));
}

std::string optionalText(const ordered_json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

// Renders every case of one template, counting them in `checked`.
void checkCases(const ChatTemplate& tmpl, const ordered_json& entry, int& checked) {
  const std::string name = entry["name"].get<std::string>();
  for (const auto& c : entry["cases"]) {
    const std::string where = name + " / " + c["name"].get<std::string>();
    if (c.contains("expected")) {
      std::string got;
      try {
        got = tmpl.renderContext(c["variables"]);
      } catch (const Error& e) {
        QFAIL(qPrintable(QString::fromStdString(where + ": unexpected error: " + e.what())));
      }
      const std::string expected = c["expected"].get<std::string>();
      if (got != expected) {
        size_t at = 0;
        while (at < got.size() && at < expected.size() && got[at] == expected[at]) ++at;
        QFAIL(qPrintable(QString::fromStdString(where + ": differs at byte " + std::to_string(at) + "\n--- got:\n" + got +
                                                "\n--- expected:\n" + expected)));
      }
    } else {
      bool thrown = false;
      try {
        tmpl.renderContext(c["variables"]);
      } catch (const Error& e) {
        thrown = true;
        const std::string message = e.what();
        // The template's own raise_exception message must come through verbatim.
        if (c["error_type"] == "TemplateError")
          QVERIFY2(message.find(c["error"].get<std::string>()) != std::string::npos,
                   qPrintable(QString::fromStdString(where + ": message '" + message + "' lacks '" +
                                                     c["error"].get<std::string>() + "'")));
      }
      QVERIFY2(thrown, qPrintable(QString::fromStdString(where + ": expected an error like jinja2's: " +
                                                         c["error"].get<std::string>())));
    }
    ++checked;
  }
}

}  // namespace

class TestChatTemplate : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void generatedModelTemplatesMatchJinja2() {
    const ordered_json fixture = readFixture("generated.json");
    QCOMPARE(fixture["templates"].size(), size_t{5});
    int cases = 0;
    for (const auto& entry : fixture["templates"]) {
      const ChatTemplate tmpl(entry["source"].get<std::string>(), optionalText(entry, "bos_token"),
                              optionalText(entry, "eos_token"));
      checkCases(tmpl, entry, cases);
      if (QTest::currentTestFailed()) return;
    }
    QVERIFY(cases >= 50);
  }

  // The fixture's template sources are the ones the generated models really carry.
  void generatedSourcesAreCurrent() {
    const ordered_json fixture = readFixture("generated.json");
    for (const auto& entry : fixture["templates"]) {
      const auto family = familyFromName(entry["name"].get<std::string>());
      QVERIFY(family.has_value());
      SyntheticModelOptions options;
      options.family = *family;
      const auto files = hf::makeSyntheticTokenizer(*family, syntheticModelConfig(options));
      QCOMPARE(files.tokenizerConfig["chat_template"].get<std::string>(), entry["source"].get<std::string>());
    }
  }

  void syntheticTemplatesMatchJinja2() {
    const ordered_json fixture = readFixture("synthetic.json");
    int cases = 0;
    for (const auto& entry : fixture["templates"]) {
      const ChatTemplate tmpl(entry["source"].get<std::string>(), optionalText(entry, "bos_token"),
                              optionalText(entry, "eos_token"));
      checkCases(tmpl, entry, cases);
      if (QTest::currentTestFailed()) return;
    }
    QVERIFY(cases >= 100);
  }

  void realTemplatesMatchJinja2() {
    const auto shared = zipmoe::testing::sharedDir();
    if (shared.empty()) QSKIP("shared/ folder not found");
    const ordered_json fixture = readFixture("real.json");
    for (const auto& entry : fixture["templates"]) {
      const auto config = shared / entry["shared_config"].get<std::string>();
      if (!std::filesystem::exists(config)) QSKIP(qPrintable(QString::fromStdString(config.string() + " not found")));
      QVERIFY(ChatTemplate::hasChatTemplate(config));
      const ChatTemplate tmpl = ChatTemplate::fromTokenizerConfig(config);
      int cases = 0;
      checkCases(tmpl, entry, cases);
      if (QTest::currentTestFailed()) return;
      QVERIFY(cases >= 12);
    }
  }

  // render(messages) is renderContext with {messages, add_generation_prompt}.
  void renderMessagesApi() {
    const ChatTemplate tmpl(
        "{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<assistant>{% endif %}{{ eos_token is defined }}{{ tools is none }}",
        "<s>", "");
    const std::vector<ChatMessage> messages{{"system", "S"}, {"user", "U {{x}}"}};
    QCOMPARE(tmpl.render(messages, true), std::string("<s><system>S<user>U {{x}}<assistant>FalseTrue"));
    QCOMPARE(tmpl.render(messages, false), std::string("<s><system>S<user>U {{x}}FalseTrue"));
  }

  void fromTokenizerConfigForms() {
    zipmoe::testing::TempDir dir;
    const auto write = [&](const std::string& name, const nlohmann::json& j) {
      std::ofstream(dir / name) << j.dump();
      return dir / name;
    };
    // AddedToken objects for special tokens.
    const auto a = write("a.json", {{"chat_template", "{{ bos_token }}|{{ eos_token }}"},
                                    {"bos_token", {{"__type", "AddedToken"}, {"content", "<B>"}}},
                                    {"eos_token", "<E>"}});
    QCOMPARE(ChatTemplate::fromTokenizerConfig(a).render({}, false), std::string("<B>|<E>"));
    // The list form: the "default" entry is used.
    const auto b = write("b.json", {{"chat_template", {{{"name", "tool_use"}, {"template", "tools"}},
                                                       {{"name", "default"}, {"template", "plain"}}}},
                                    {"bos_token", nullptr}});
    QCOMPARE(ChatTemplate::fromTokenizerConfig(b).render({}, false), std::string("plain"));
    // No template: a clear error naming the file.
    const auto c = write("c.json", {{"eos_token", "</s>"}});
    QVERIFY(!ChatTemplate::hasChatTemplate(c));
    ZIPMOE_EXPECT_ERROR(ChatTemplate::fromTokenizerConfig(c), c.string(), "no chat_template");
    QVERIFY(!ChatTemplate::hasChatTemplate(dir / "missing.json"));
    // A syntax error in the file's template names the file and the place.
    const auto d = write("d.json", {{"chat_template", "{% if %}"}});
    ZIPMOE_EXPECT_ERROR(ChatTemplate::fromTokenizerConfig(d), d.string(), "line 1:");
  }

  void syntaxErrorsHaveLineAndColumn() {
    ZIPMOE_EXPECT_ERROR(ChatTemplate("ok\n  {{ foo( }}", "", ""), "syntax error", "line 2:11", "unexpected '}'");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{% for m in messages %}\n{{ m }}", "", ""), "line 2:", "endfor");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("a\nb {% endif %}", "", ""), "line 2:6", "endif");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ 'unterminated }}", "", ""), "line 1:4", "unterminated string");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("x\n\n   {% include 'other' %}", "", ""), "line 3:7", "include");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ 1 +", "", ""), "line 1:", "end of template");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{# open comment", "", ""), "line 1:1", "comment");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ a ] }}", "", ""), "line 1:6", "']'");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{% set %}", "", ""), "line 1:8");
  }

  void runtimeErrors() {
    const ChatTemplate raising("{% if messages|length == 0 %}{{ raise_exception('need at least one message!') }}{% endif %}",
                               "", "");
    ZIPMOE_EXPECT_ERROR(raising.render({}, true), "need at least one message!", "line 1:");
    QCOMPARE(raising.render({{"user", "x"}}, true), std::string());
    ZIPMOE_EXPECT_ERROR(ChatTemplate("line\n{{ 1 + 'a' }}", "", "").render({}, false), "line 2:", "+");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ nope.attr }}", "", "").render({}, false), "'nope' is undefined");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ 1 | nofilter }}", "", "").render({}, false), "nofilter");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ x is notatest }}", "", "").render({}, false), "notatest");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ 1 / 0 }}", "", "").render({}, false), "division by zero");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ range(1000000)|length }}", "", "").render({}, false), "Range too big");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{% set x = 1 %}{% set x.y = 2 %}", "", "").render({}, false), "namespace");
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ messages|tojson }}{{ x|tojson }}", "", "").render({}, false), "JSON");
  }

  // A chat template is untrusted code from a model's files: what would hang, exhaust memory,
  // overflow the stack or compute wrong 64-bit numbers fails with an error instead.
  void untrustedTemplatesAreBounded() {
    auto render = [](const std::string& source) { return ChatTemplate(source, "", "").render({}, false); };
    ZIPMOE_EXPECT_ERROR(ChatTemplate("{{ " + std::string(300, '(') + "1" + std::string(300, ')') + " }}", "", ""),
                        "nested deeper than 200");
    std::string chain = "{{ 1";
    for (int i = 0; i < 300; ++i) chain += " + 1";
    ZIPMOE_EXPECT_ERROR(ChatTemplate(chain + " }}", "", ""), "nested deeper than 200");
    std::string blocks;
    for (int i = 0; i < 250; ++i) blocks += "{% if true %}";
    ZIPMOE_EXPECT_ERROR(ChatTemplate(blocks, "", ""), "nested deeper than 200");
    QCOMPARE(render("{{ " + std::string(100, '(') + "7" + std::string(100, ')') + " }}"), std::string("7"));
    ZIPMOE_EXPECT_ERROR(render("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"),
                        "more than 2000000 steps");
    ZIPMOE_EXPECT_ERROR(render("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), "recursion depth");
    ZIPMOE_EXPECT_ERROR(render("{{ 'x' * 100000000 }}"), "string of more than");
    ZIPMOE_EXPECT_ERROR(render("{% set s = 'x' * 1000000 %}{% for i in range(100) %}{{ s }}{% endfor %}"), "output grows past");
    // Widths, separators, replacements and indents are bounded before they are allocated or repeated.
    ZIPMOE_EXPECT_ERROR(render("{{ 'a' | indent(999999999999999) }}"), "string of more than");
    ZIPMOE_EXPECT_ERROR(render("{{ ('a\\n' * 1000) | indent(100000) }}"), "string of more than");
    ZIPMOE_EXPECT_ERROR(render("{{ [1, [2]] | tojson(indent=999999999999999) }}"), "string of more than");
    ZIPMOE_EXPECT_ERROR(render("{{ [[[[[[1]]]]]] | tojson(indent='x' * 4000000) }}"), "string of more than");
    ZIPMOE_EXPECT_ERROR(render("{{ range(4000) | join('x' * 10000) }}"), "string of more than");
    ZIPMOE_EXPECT_ERROR(render("{{ ('x' * 10000).join(['a'] * 4000) }}"), "string of more than");
    ZIPMOE_EXPECT_ERROR(render("{{ ('a' * 1000).replace('', 'y' * 100000) }}"), "string of more than");
    ZIPMOE_EXPECT_ERROR(render("{{ ('ab' * 1000) | replace('a', 'y' * 100000) }}"), "string of more than");
    QCOMPARE(render("{{ 'a\n\nb' | indent(2) }}|{{ 'a\n\nb' | indent(2, true, true) }}|{{ 'a' | indent(-3) }}"),
             std::string("a\n\n  b|  a\n  \n  b|a"));
    ZIPMOE_EXPECT_ERROR(render("{{ 4611686018427387904 * 2 }}"), "integer overflow");
    ZIPMOE_EXPECT_ERROR(render("{{ 2 ** 64 }}"), "integer overflow");
    QCOMPARE(render("{{ 2 ** 62 }} {{ -9223372036854775807 - 1 }} {{ 7 // -2 }} {{ -7 % 3 }}"),
             std::string("4611686018427387904 -9223372036854775808 -4 2"));
    ZIPMOE_EXPECT_ERROR(render("{{ 2 ** 1000000000000 }}"), "integer overflow");  // not a trillion multiplications
    ZIPMOE_EXPECT_ERROR(render("{% set ns = namespace(a=[1]) %}{% for i in range(40) %}{% set ns.a = [ns.a, ns.a] %}{% endfor %}"
                               "{{ ns.a }}"),
                        "more than");
    ZIPMOE_EXPECT_ERROR(render("{% set ns = namespace(x=1) %}{% set ns.x = [ns] %}{{ ns }}"), "nested deeper");
    ZIPMOE_EXPECT_ERROR(render("{{ 'a b'.split(' ', 'many') }}"), "expected int", "'str'");
    QCOMPARE(render("{{ 1e300 | int }}"), std::string("0"));
  }

  void renderIsRepeatableAndMovable() {
    ChatTemplate a("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
                   "", "");
    const std::vector<ChatMessage> two{{"user", "a"}, {"assistant", "b"}};
    QCOMPARE(a.render(two, false), std::string("2"));
    QCOMPARE(a.render(two, false), std::string("2"));  // namespaces are per render
    ChatTemplate b = std::move(a);
    QCOMPARE(b.render({}, false), std::string("0"));
  }
};

QTEST_APPLESS_MAIN(TestChatTemplate)
#include "test_chat_template.moc"
