#!/usr/bin/env python3
"""Reference renderings of chat templates by Python jinja2, as transformers renders them.

Writes tests/fixtures/chat_templates/{generated,real,synthetic}.json, which
tests/engine/model/test_chat_template.cpp compares ZipMoE's Jinja interpreter against byte for byte.
Rendering goes through transformers' own `render_jinja_template` (an ImmutableSandboxedEnvironment
with trim_blocks, lstrip_blocks, loopcontrols, and transformers' raise_exception/tojson/namespace),
so the fixtures are exactly what `tokenizer.apply_chat_template(..., tokenize=False)` produces.

  * generated.json: the templates of the project's generated test models (one per family), with the
    template sources, taken from the tokenizer_config.json of models made by `zipmoe make-model`.
  * real.json: the real Qwen1.5-MoE and DeepSeek-V2-Lite templates. Only the conversations and the
    expected outputs are stored; the test reads the templates from the team's shared/ folder.
  * synthetic.json: templates written here to exercise every construct the interpreter supports.

Development tool only (CI never runs Python):
  python3 -m venv /tmp/venv-jinja && /tmp/venv-jinja/bin/pip install jinja2 transformers
  for f in mixtral qwen2_moe qwen3_moe olmoe deepseek_v2; do zipmoe make-model --family $f --preset tiny /tmp/gen-models/$f; done
  /tmp/venv-jinja/bin/python scripts/dev/make_template_fixtures.py --models /tmp/gen-models --shared ../shared
"""
import argparse
import json
import os
import sys

from transformers.utils.chat_template_utils import render_jinja_template

FAMILIES = ["mixtral", "qwen2_moe", "qwen3_moe", "olmoe", "deepseek_v2"]
REAL = {"qwen1.5-moe": "data/models/qwen1.5-moe/tokenizer_config.json",
        "deepseek-v2-lite": "data/models/deepseek-v2-lite/tokenizer_config.json"}

TRICKY = ("Ünïcødé — naïve café 🙂 你好 {{ not a tag }} {% if %} {# nor a comment #} 'single' \"double\" "
          "back\\slash\ttab\nsecond line  ")
CONVERSATIONS = {
    "user_only": [{"role": "user", "content": "Hello!"}],
    "system_user": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2+2?"}],
    "multi_turn": [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello! How can I help?"},
                   {"role": "user", "content": "Tell me a joke."}],
    "system_multi_turn": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "one"},
                          {"role": "assistant", "content": "two"}, {"role": "user", "content": "three"},
                          {"role": "assistant", "content": "four"}],
    "unicode_braces": [{"role": "user", "content": TRICKY}, {"role": "assistant", "content": "{}[]{{}} ok }} %} #}"},
                       {"role": "user", "content": "   padded   \n"}],
    "empty_content": [{"role": "user", "content": ""}],
}

# Extra variables the synthetic templates read (the generated/real templates ignore them).
EXTRAS = {
    "numbers": [3, 1, 2, 10, -4],
    "data": {"b": 1, "a": [1, 2.5, "x", None, True], "c": None, "d": {"nested": "é\"\n"}, "B": 2},
    "title_text": "hello world-wide (test) [x] <y> {z}",
    "empty": "",
    "ratio": 0.1,
    "big": 1e20,
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                                "parameters": {"type": "object", "properties": {
                                                    "city": {"type": "string"}}, "required": ["city"]}}}],
}
TOOL_CONVERSATION = [
    {"role": "system", "content": "You can call tools."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "name": "get_weather", "content": "{\"temp\": 21.5}"},
    {"role": "assistant", "content": "It is 21.5 °C."},
]

SYNTHETIC = {}

SYNTHETIC["loops"] = """{% for message in messages %}
[{{ loop.index }}/{{ loop.length }} i0={{ loop.index0 }} r={{ loop.revindex }} r0={{ loop.revindex0 }}
 {%- if loop.first %} first{% endif %}{% if loop.last %} last{% endif %} {{ loop.cycle('odd', 'even') }}]
 prev={{ loop.previtem.role if loop.previtem is defined else '-' }} next={{ loop.nextitem['role'] if loop.nextitem is defined else '-' }}
{% endfor %}
{% for m in messages if m.role != 'system' %}{{ loop.index }}:{{ m.role }}{{ ',' if not loop.last }}{% endfor %}

{% for n in numbers %}{% if n < 0 %}{% break %}{% endif %}{% if n == 1 %}{% continue %}{% endif %}{{ n }} {% endfor %}

{% for x in [] %}never{% else %}empty-else{% endfor %}
{% for k, v in data.items() %}{{ k }}={{ v }};{% endfor %}

{% for k, v in data|dictsort %}{{ k }} {% endfor %}|{% for k in data %}{{ k }}{% endfor %}
{% for a, b in [(1, 'x'), (2, 'y')] %}{{ a ~ b }}{% endfor %} {% for c in 'héllo' %}{{ c }}.{% endfor %}
{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }} {% endfor %}{% endfor %}
{% for i in range(10, 0, -3) %}{{ i }},{% endfor %}"""

SYNTHETIC["scoping"] = """{% set outer = 'outer' %}
{% set ns = namespace(count=0, last_role=none, found=false) %}
{% for message in messages %}
  {% set outer = 'inner' %}
  {% set ns.count = ns.count + 1 %}
  {% if loop.first %}{% set seen = 'first-only' %}{% endif %}
  {{ seen | default('unset') }}
  {% set ns.last_role = message['role'] %}
  {% if message.role == 'system' %}{% set ns.found = true %}{% endif %}
{% endfor %}
outer={{ outer }} count={{ ns.count }} last={{ ns.last_role }} found={{ ns.found }}
{% if true %}{% set in_if = 'visible' %}{% endif %}in_if={{ in_if }}
{% set captured %}Captured {{ messages|length }} message(s){% endset %}
{{ captured }}|{{ captured|upper }}
{% set trimmed | trim %}   padded block   {% endset %}[{{ trimmed }}]
{% macro render(role, content, suffix='!', upper=false) -%}
<{{ role|upper if upper else role }}>{{ content }}{{ suffix }}
{%- endmacro %}
{% for m in messages %}{{ render(m.role, m.content) }}{{ render(m['role'], 'x', suffix='?', upper=true) }}{% endfor %}
{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = (1, 'two', 3.0) %}{{ t }} {{ t[1] }}
{% filter upper %}filtered {{ messages[0].role }}{% endfilter %}
{{ ns }}"""

SYNTHETIC["whitespace"] = """<start>
  {% if add_generation_prompt %}
    gen
  {% endif %}
  {%- for m in messages -%}
    {{- m.role -}}
  {%- endfor -%}
  |
  {%+ if true %}kept-indent{% endif %}
  {% if true +%}
kept-newline
  {% endif %}
  {# a comment #}
  {#- stripped comment -#}
  after
    {{ 'var lines keep indentation' }}
{% raw %}{{ raw }} {% if %}{% endraw %}
{%- raw -%}   {{ stripped raw }}   {%- endraw %}
	{% if true %}tab-indented{% endif %}
{{ 'x' }}   {{- 'y' }}
{% if true -%}


  left
{%- endif %}
end
"""

SYNTHETIC["expressions"] = """{{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 + 2 * 3 - 4 }}
{{ 7.5 // 2 }} {{ 0.1 + 0.2 }} {{ ratio }} {{ big }} {{ 1e-5 }} {{ 1.0 }} {{ 3 * 1.0 }} {{ -0.0 }} {{ 1_000 }}
{{ 'a' + 'b' }} {{ 'n' ~ 1 ~ none ~ true ~ missing }} {{ 'ab' * 3 }} {{ [1, 2] + [3] }}
{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ none == none }}
{{ 'ell' in 'hello' }} {{ 2 in [1, 2] }} {{ 'b' in data }} {{ 'z' not in data }} {{ not none }}
{{ 'yes' if messages else 'no' }} {{ 'x' if false }}|{{ none or 'fallback' }} {{ 0 and 'never' }} {{ 'a' and 'b' }}
{{ messages[0]['role'] }} {{ messages[0].role }} {{ messages[-1].content[:5] }} {{ messages[1:]|length }}
{{ numbers[1:3] }} {{ numbers[::-1] }} {{ numbers[::2] }} {{ numbers[-2:] }} {{ numbers[10:] }} {{ 'héllo'[1:4] }} {{ 'héllo'[-1] }}
{{ messages[0].missing is defined }} {{ messages[0]['missing'] is defined }} {{ missing is defined }} {{ missing is not defined }}
[{{ missing }}] [{{ messages[0].missing }}] [{{ messages[99] }}] {{ data.c }} {{ data.c is none }} {{ none }} {{ true }}
{{ data }} {{ data.a }} {{ (1,) }} {{ () }} {{ {'k': 'v', 'q': "it's"} }} {{ ['a"b', "c'd", 'e\\nf'] }}
{{ "esc: \\t|\\x41|\\u00e9|\\101|\\q" }} {{ 'adj' 'acent' }} {{ -numbers[0] }} {{ +3 }} {{ (1 + 2) * 3 }}
{{ data['d']['nested'] }} {{ data.d.nested|length }} {{ data.items is defined }} {{ data.get('zz', 'dflt') }} {{ data.get('b') }}"""

SYNTHETIC["filters"] = """{{ '  x  '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ messages|length }} {{ 'héllo'|length }} {{ data|count }}
{{ 'MiXed'|upper }} {{ 'MiXed'|lower }} {{ title_text|title }} {{ 'hello WORLD'|capitalize }}
{{ missing|default('dflt') }} {{ empty|default('dflt') }} {{ empty|default('dflt', true) }} {{ none|d('nd') }}
{{ numbers|first }} {{ numbers|last }} {{ 'abc'|first }} {{ numbers|join(', ') }} {{ messages|map(attribute='role')|join('/') }}
{{ 'a-b-c'|replace('-', '+') }} {{ 'a-b-c'|replace('-', '+', 1) }} {{ 42|string ~ 'x' }} {{ '<b>'|safe }} {{ '<a href="x">'|e }}
{{ '42'|int + 1 }} {{ '3.9'|int }} {{ 'x'|int }} {{ 'x'|int(7) }} {{ 3.7|int }} {{ '2.5'|float }} {{ -3|abs }} {{ numbers|sum }}
{{ numbers|sort }} {{ numbers|sort(reverse=true) }} {{ ['b', 'A', 'c']|sort }} {{ numbers|min }} {{ numbers|max }}
{{ [1, 2, 1, 3, 2]|unique|list }} {{ numbers|reverse|list }} {{ 'abc'|reverse }} {{ 'ab'|list }} {{ data|list }}
{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', 'equalto', 'user')|map(attribute='role')|list }}
{{ numbers|select('odd')|list }} {{ numbers|reject('even')|list }} {{ numbers|map('string')|join }} {{ messages|selectattr('role')|list|length }}
{{ data|items|list }} {{ data|dictsort(reverse=true) }}
{{ "line1\\nline2\\n\\nline4"|indent(2) }}
{{ "line1\\nline2"|indent(4, true) }}|{{ "a\\n\\nb"|indent(2, blank=true) }}
{{ data|tojson }}
{{ data|tojson(indent=2) }}
{{ data|tojson(sort_keys=true) }} {{ 'é"\\n\\u0001'|tojson }} {{ 'é'|tojson(ensure_ascii=true) }} {{ [1.5, 1e20, 2]|tojson(separators=(',', ':')) }}
{{ messages|tojson }}
{{ tools|tojson(indent=4) }}"""

SYNTHETIC["methods_tests"] = """{% for m in messages %}{{ m.content.strip() }}|{{ m.content.startswith('Hi') }}|{{ m.content.endswith(('?', '.')) }}|{{ m.content.split()|length }}|{{ m.content.lstrip('H') }}
{% endfor %}
{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'xxaxx'.rstrip('x') }} {{ 'hello'.replace('l', 'L') }}
{{ 'Hello World'.upper() }} {{ 'Hello World'.lower() }} {{ 'hello world'.title() }} {{ 'abcabc'.find('c') }} {{ 'abcabc'.count('bc') }} {{ '-'.join(['a', 'b']) }}
{% for k, v in data.items() %}{{ k }}{% endfor %} {{ data.keys()|list }} {{ data.values()|list|length }}
{{ none is none }} {{ 'x' is string }} {{ data is mapping }} {{ numbers is iterable }} {{ 3 is number }} {{ 3.0 is integer }} {{ 3 is integer }}
{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ true is boolean }} {{ 1 is boolean }}
{{ messages[0].role is equalto 'user' }} {{ 2 is eq(2) }} {{ 2 is ne 3 }} {{ 1 is lt 2 }} {{ 3 is ge 3 }} {{ 2 is in [1, 2] }}
{{ none is sameas none }} {{ true is sameas true }} {{ data is sequence }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ range is callable }}"""

SYNTHETIC["tool_style"] = """{%- set system_message = messages[0]['content'] if messages[0]['role'] == 'system' else none -%}
{%- set loop_messages = messages[1:] if system_message is not none else messages -%}
{%- if tools -%}
<|tools|>
{%- for tool in tools %}
{{ tool.function.name }}: {{ tool.function.description }}
{{ tool | tojson }}
{%- endfor %}
{% endif -%}
{%- if system_message is not none %}<|system|>{{ system_message | trim }}<|end|>
{% endif -%}
{%- for message in loop_messages -%}
    {%- if message.role == 'user' -%}
<|user|>{{ message.content | trim }}<|end|>
    {%- elif message.role == 'assistant' -%}
<|assistant|>
        {%- if message.tool_calls is defined and message.tool_calls -%}
            {%- for call in message.tool_calls -%}
<call>{{ {'name': call.function.name, 'arguments': call.function.arguments} | tojson }}</call>
            {%- endfor -%}
        {%- else -%}
{{ message.content }}
        {%- endif -%}
<|end|>
    {%- elif message.role == 'tool' -%}
<|tool name="{{ message.name | default('unknown') }}"|>{{ message.content }}<|end|>
    {%- else -%}
{{ raise_exception('Unknown role: ' ~ message.role) }}
    {%- endif %}

{% endfor -%}
{%- if add_generation_prompt %}<|assistant|>{% endif -%}"""

SYNTHETIC["strict_alternation"] = """{{- bos_token -}}
{%- if messages[0]['role'] == 'system' -%}
    {%- set offset = 1 -%}{%- set sys = messages[0]['content'] + '\\n\\n' -%}
{%- else -%}
    {%- set offset = 0 -%}{%- set sys = '' -%}
{%- endif -%}
{%- for message in messages[offset:] -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') -}}
    {%- endif -%}
    {%- if message['role'] == 'user' -%}
        {{- '[INST] ' + (sys if loop.first else '') + message['content'] | trim + ' [/INST]' -}}
    {%- else -%}
        {{- ' ' + message['content'] | trim + eos_token -}}
    {%- endif -%}
{%- endfor -%}"""

SYNTHETIC["undefined_errors"] = """{% if messages|length > 2 %}{{ messages[0].content + undefined_name }}{% endif %}ok {{ messages|length }}"""


def token_text(value):
    if isinstance(value, dict):
        return value.get("content")
    return value


def render(source, variables, bos, eos):
    kwargs = {k: v for k, v in variables.items() if k not in ("messages", "add_generation_prompt", "tools")}
    if bos is not None:
        kwargs["bos_token"] = bos
    if eos is not None:
        kwargs["eos_token"] = eos
    try:
        out, _ = render_jinja_template(conversations=[variables["messages"]], tools=variables.get("tools"),
                                       documents=None, chat_template=source,
                                       add_generation_prompt=variables["add_generation_prompt"], **kwargs)
        return {"expected": out[0]}
    except Exception as e:  # the C++ side must fail too; raise_exception messages must match
        kind = type(e).__name__
        return {"error": str(e), "error_type": kind}


def cases(source, bos, eos, conversations, extras=None):
    out = []
    for name, messages in conversations.items():
        for gen in (True, False):
            variables = {"messages": messages, "add_generation_prompt": gen}
            if extras:
                variables.update(extras)
            case = {"name": f"{name}/{'gen' if gen else 'nogen'}", "variables": variables}
            case.update(render(source, variables, bos, eos))
            out.append(case)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True, help="directory with one generated tiny model per family")
    ap.add_argument("--shared", required=True, help="the team's shared/ folder")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "..", "tests", "fixtures",
                                                  "chat_templates"))
    args = ap.parse_args()

    generated = []
    for family in FAMILIES:
        config = json.load(open(os.path.join(args.models, family, "tokenizer_config.json"), encoding="utf-8"))
        bos, eos = token_text(config.get("bos_token")), token_text(config.get("eos_token"))
        generated.append({"name": family, "source": config["chat_template"], "bos_token": bos, "eos_token": eos,
                          "cases": cases(config["chat_template"], bos, eos, CONVERSATIONS)})

    real = []
    for name, rel in REAL.items():
        config = json.load(open(os.path.join(args.shared, rel), encoding="utf-8"))
        bos, eos = token_text(config.get("bos_token")), token_text(config.get("eos_token"))
        real.append({"name": name, "shared_config": rel,
                     "cases": cases(config["chat_template"], bos, eos, CONVERSATIONS)})

    synthetic = []
    convs = dict(CONVERSATIONS)
    convs["tool_calls"] = TOOL_CONVERSATION
    for name, source in SYNTHETIC.items():
        synthetic.append({"name": name, "source": source, "bos_token": "<s>", "eos_token": "</s>",
                          "cases": cases(source, "<s>", "</s>", convs, EXTRAS)})

    os.makedirs(args.out, exist_ok=True)
    total = 0
    for fname, data in (("generated.json", generated), ("real.json", real), ("synthetic.json", synthetic)):
        with open(os.path.join(args.out, fname), "w", encoding="utf-8") as f:
            json.dump({"generator": "scripts/dev/make_template_fixtures.py", "templates": data}, f,
                      ensure_ascii=False, indent=1)
            f.write("\n")
        n = sum(len(t["cases"]) for t in data)
        errors = sum(1 for t in data for c in t["cases"] if "error" in c)
        total += n
        print(f"{fname}: {len(data)} templates, {n} cases ({errors} expected errors)")
    print(f"total {total} cases")


if __name__ == "__main__":
    sys.exit(main())
