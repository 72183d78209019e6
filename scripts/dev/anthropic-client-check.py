#!/usr/bin/env python3
"""Dev-time check of `zipmoe serve`'s /v1/messages with the official Anthropic Python SDK (pip:
anthropic, jsonschema; never needed by users or CI, whose test_serve_anthropic uses http.client).

  python3 -m venv /tmp/oai && /tmp/oai/bin/pip install anthropic jsonschema
  zipmoe serve resources/demo-model --port 8080 &
  /tmp/oai/bin/python scripts/dev/anthropic-client-check.py --base http://127.0.0.1:8080 > OUT.json

Checks: a message streamed with the SDK's stream helper (its text equals the message's); a forced
tool_use (tool_choice any) whose input validates against the tool's input_schema, whole and streamed;
then the round trip: the tool_result sent back gets an answer. Prints a JSON summary; exits 1 when
a check fails.
"""
import argparse
import json
import sys

import anthropic
import jsonschema

SCHEMA = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 16},
                                           "unit": {"enum": ["celsius", "fahrenheit"]}}, "required": ["city", "unit"]}
TOOLS = [{"name": "get_weather", "description": "Weather of a city", "input_schema": SCHEMA}]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="http://127.0.0.1:8080")
    ap.add_argument("--model", default="demo-model")
    a = ap.parse_args()
    client = anthropic.Anthropic(base_url=a.base, api_key="none")
    out = {"client": "anthropic " + anthropic.__version__}
    msgs = [{"role": "user", "content": "What news from Mantua?"}]
    whole = client.messages.create(model=a.model, max_tokens=40, extra_body={"temperature": 0}, messages=msgs)
    with client.messages.stream(model=a.model, max_tokens=40, extra_body={"temperature": 0}, messages=msgs) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == whole.content[0].text, (text, whole.content[0].text)
    out["stream"] = {"text": text, "stop_reason": final.stop_reason}
    ask = [{"role": "user", "content": "Weather in Verona?"}]
    m = client.messages.create(model=a.model, max_tokens=120, extra_body={"temperature": 0}, tools=TOOLS, tool_choice={"type": "any"}, messages=ask)
    assert m.stop_reason == "tool_use", m.stop_reason
    use = next(b for b in m.content if b.type == "tool_use")
    jsonschema.validate(use.input, SCHEMA)
    with client.messages.stream(model=a.model, max_tokens=120, extra_body={"temperature": 0}, tools=TOOLS, tool_choice={"type": "any"},
                                messages=ask) as s:
        streamed = s.get_final_message()
    suse = next(b for b in streamed.content if b.type == "tool_use")
    assert suse.input == use.input, (suse.input, use.input)
    out["tool_use"] = {"id": use.id, "name": use.name, "input": use.input}
    back = ask + [{"role": "assistant", "content": [{"type": "tool_use", "id": use.id, "name": use.name, "input": use.input}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "Sunny, 21 degrees."}]}]
    r = client.messages.create(model=a.model, max_tokens=30, extra_body={"temperature": 0}, tools=TOOLS, messages=back)
    out["round_trip"] = {"stop_reason": r.stop_reason, "content": [b.model_dump() for b in r.content]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    try:
        main()
    except (AssertionError, jsonschema.ValidationError, anthropic.APIError) as e:
        print("FAILED:", repr(e), file=sys.stderr)
        sys.exit(1)
