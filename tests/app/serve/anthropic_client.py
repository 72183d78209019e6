#!/usr/bin/env python3
"""A client of the Anthropic Messages API for the server tests, on Python's http.client (stdlib
only: the anthropic SDK is not assumed). It sends the key as `x-api-key` with `anthropic-version`.

  anthropic_client.py stream PORT KEY BODY_JSON   one streaming /v1/messages: prints a JSON summary
The summary: {"status", "content_type", "events" (their names, pings left out), "text" (the text
deltas concatenated), "message" (message_start's), "stop_reason", "stop_sequence", "usage"
(message_delta's), "grammar" (null, or what breaks Anthropic's documented event order), "error"}, and
"tool_uses": [{"id", "name", "input_json"}] (the input_json_deltas put together) when it used tools.
"""
import http.client
import json
import sys


def frames(resp):
    """Yields (event, data) of a server-sent event stream."""
    event, data = None, []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line == "":
            if event is not None or data:
                yield event, "\n".join(data)
            event, data = None, []
        elif line.startswith(":"):
            continue
        elif line.startswith("event: "):
            event = line[len("event: "):]
        elif line.startswith("data: "):
            data.append(line[len("data: "):])


def grammar(events):
    """The documented order: message_start; blocks (content_block_start, its deltas, content_block_stop,
    indices 0, 1, …); message_delta; message_stop. Pings anywhere after message_start; an error event
    ends a stream. Each data's type is its event's name. Returns the violation or None."""
    if not events or events[0][0] != "message_start":
        return "does not open with message_start"
    open_block, next_index, kind, delta_seen = None, 0, None, False
    for i, (name, data) in enumerate(events):
        where = " (event %d: %s)" % (i, name)
        if data.get("type") != name:
            return "data.type differs from the event name" + where
        if i == 0 or name == "ping":
            continue
        if name == "error":
            return None if i + 1 == len(events) else "events after an error" + where
        if delta_seen and name != "message_stop":
            return "events after message_delta" + where
        if name == "content_block_start":
            if open_block is not None or data["index"] != next_index:
                return "block opened out of order" + where
            open_block, next_index, kind = next_index, next_index + 1, data["content_block"]["type"]
        elif name == "content_block_delta":
            if data["index"] != open_block:
                return "delta outside its block" + where
            want = {"text": "text_delta", "tool_use": "input_json_delta"}.get(kind)
            if data["delta"]["type"] != want:
                return "delta of the wrong kind" + where
        elif name == "content_block_stop":
            if data["index"] != open_block:
                return "stop of no open block" + where
            open_block = None
        elif name == "message_delta":
            if open_block is not None:
                return "message_delta with a block open" + where
            delta_seen = True
        elif name == "message_stop":
            if not delta_seen:
                return "message_stop before message_delta" + where
            return None if i + 1 == len(events) else "events after message_stop" + where
        else:
            return "unknown event" + where
    return "does not end with message_stop"


def stream(port, key, body):
    out = {"status": 0, "content_type": None, "events": [], "text": "", "message": None, "stop_reason": None,
           "stop_sequence": None, "usage": None, "grammar": None, "error": None}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {"Content-Type": "application/json", "anthropic-version": "2023-06-01"}
    if key:
        headers["x-api-key"] = key
    conn.request("POST", "/v1/messages", json.dumps(body), headers)
    resp = conn.getresponse()
    out["status"] = resp.status
    out["content_type"] = resp.getheader("Content-Type", "")
    if resp.status != 200:
        out["error"] = json.loads(resp.read().decode("utf-8"))
        return out
    events = []
    for name, data in frames(resp):
        payload = json.loads(data)
        events.append((name, payload))
        if name != "ping":
            out["events"].append(name)
        if name == "message_start":
            out["message"] = payload["message"]
        elif name == "content_block_delta" and payload["delta"]["type"] == "text_delta":
            out["text"] += payload["delta"]["text"]
        elif name == "content_block_start" and payload["content_block"]["type"] == "tool_use":
            block = payload["content_block"]
            out.setdefault("tool_uses", []).append({"id": block["id"], "name": block["name"], "input_json": ""})
        elif name == "content_block_delta" and payload["delta"]["type"] == "input_json_delta":
            out["tool_uses"][-1]["input_json"] += payload["delta"]["partial_json"]
        elif name == "message_delta":
            out["stop_reason"] = payload["delta"]["stop_reason"]
            out["stop_sequence"] = payload["delta"]["stop_sequence"]
            out["usage"] = payload["usage"]
        elif name == "error":
            out["error"] = payload
    conn.close()
    out["grammar"] = grammar(events)
    return out


def main():
    mode, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "stream":
        print(json.dumps(stream(port, key, json.loads(sys.argv[4]))))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
