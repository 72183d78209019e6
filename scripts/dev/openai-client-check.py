#!/usr/bin/env python3
"""Dev-time check of `zipmoe serve` with the official OpenAI Python client (pip: openai, jsonschema;
never needed by users or CI, whose test_serve_tools uses curl and http.client).

  python3 -m venv /tmp/oai && /tmp/oai/bin/pip install openai jsonschema
  zipmoe serve resources/demo-model --port 8080 &
  /tmp/oai/bin/python scripts/dev/openai-client-check.py --base http://127.0.0.1:8080/v1 --calls 200 > OUT.json

Checks: a forced tool call (tool_choice "required" and a named function), whole and streamed, whose
arguments validate against the tool's schema; response_format json_schema content that validates;
then N sampled tool-call requests in a row, each of whose arguments must parse and validate. Prints a
JSON summary; exits 1 when any check fails.
"""
import argparse
import json
import sys

import jsonschema
import openai

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 16},
                                           "unit": {"enum": ["celsius", "fahrenheit"]}, "days": {"type": "integer"}},
           "required": ["city", "unit"]}
ADD = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "add", "description": "Adds two numbers", "parameters": ADD}}]
SCHEMAS = {"get_weather": WEATHER, "add": ADD}


def check_calls(calls):
    assert calls, "no tool calls"
    for c in calls:
        jsonschema.validate(json.loads(c["arguments"]), SCHEMAS[c["name"]])


def whole(client, **kw):
    r = client.chat.completions.create(**kw)
    m = r.choices[0].message
    return r.choices[0].finish_reason, [{"name": t.function.name, "arguments": t.function.arguments} for t in m.tool_calls or []]


def streamed(client, **kw):
    calls, finish = {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        ch = chunk.choices[0]
        finish = ch.finish_reason or finish
        for t in ch.delta.tool_calls or []:
            c = calls.setdefault(t.index, {"name": None, "arguments": ""})
            if t.function and t.function.name:
                c["name"] = t.function.name
            if t.function and t.function.arguments:
                c["arguments"] += t.function.arguments
    return finish, [calls[i] for i in sorted(calls)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="http://127.0.0.1:8080/v1")
    ap.add_argument("--model", default="demo-model")
    ap.add_argument("--calls", type=int, default=200)
    a = ap.parse_args()
    client = openai.OpenAI(base_url=a.base, api_key="none")
    msgs = [{"role": "user", "content": "What is the weather in Verona?"}]
    out = {"client": "openai " + openai.__version__, "checks": {}}
    for label, choice in (("required", "required"), ("named", {"type": "function", "function": {"name": "add"}})):
        for mode, fn in (("whole", whole), ("stream", streamed)):
            finish, calls = fn(client, model=a.model, messages=msgs, tools=TOOLS, tool_choice=choice, temperature=0, max_tokens=120)
            check_calls(calls)
            assert finish == "tool_calls", finish
            out["checks"][f"{label}/{mode}"] = calls
    schema = {"type": "object", "properties": {"speaker": {"type": "string", "maxLength": 20}, "mood": {"enum": ["glad", "sad"]}},
              "required": ["speaker", "mood"], "additionalProperties": False}
    r = client.chat.completions.create(model=a.model, messages=[{"role": "user", "content": "Who speaks?"}], max_tokens=80,
                                       response_format={"type": "json_schema", "json_schema": {"name": "who", "strict": True, "schema": schema}})
    content = json.loads(r.choices[0].message.content)
    jsonschema.validate(content, schema)
    out["checks"]["json_schema"] = content
    valid = 0
    for i in range(a.calls):
        finish, calls = whole(client, model=a.model, messages=[{"role": "user", "content": "Add three and four." if i % 2 else "Rain in Mantua?"}],
                              tools=TOOLS, tool_choice="required", temperature=1.0, seed=i, max_tokens=128)
        check_calls(calls)
        valid += 1
    out["sampled_calls"] = {"requests": a.calls, "valid": valid}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, jsonschema.ValidationError, json.JSONDecodeError) as e:
        print("FAILED:", repr(e), file=sys.stderr)
        sys.exit(1)
