#!/usr/bin/env python3
"""A real OpenAI-API client for the server tests, on Python's http.client (stdlib only).

  sse_client.py stream PORT KEY BODY_JSON         one streaming request: prints a JSON summary
  sse_client.py concurrent PORT KEY BODIES_JSON   one thread per body, all streaming at once
  sse_client.py pool PORT KEY @FILE N             every body of the JSON list in FILE streamed, N at a
                                                  time: a list of summaries
  sse_client.py hang PORT KEY BODY_JSON           opens a stream, prints STREAMING after the first
                                                  chunk, then waits to be killed (mid-stream)
The summary: {"status", "content", "finish_reason", "usage", "done", "chunks", "error"}, and
"tool_calls": [{"id", "name", "arguments"}] put together from the deltas when the reply made calls.
"""
import http.client
import json
import sys
import threading


def open_stream(port, key, body):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = "Bearer " + key
    conn.request("POST", "/v1/chat/completions" if "messages" in body else "/v1/completions",
                 json.dumps(body), headers)
    return conn, conn.getresponse()


def events(resp):
    """Yields the data payloads of a server-sent event stream."""
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data: "):
            yield line[len("data: "):]


def stream(port, key, body):
    out = {"status": 0, "content": "", "finish_reason": None, "usage": None, "done": False, "chunks": 0, "error": None}
    conn, resp = open_stream(port, key, body)
    out["status"] = resp.status
    if resp.status != 200:
        out["error"] = json.loads(resp.read().decode("utf-8"))
        return out
    if not resp.getheader("Content-Type", "").startswith("text/event-stream"):
        out["error"] = "content type " + str(resp.getheader("Content-Type"))
        return out
    for data in events(resp):
        if data == "[DONE]":
            out["done"] = True
            break
        chunk = json.loads(data)
        if "error" in chunk:
            out["error"] = chunk["error"]
            continue
        out["chunks"] += 1
        if chunk.get("usage"):
            out["usage"] = chunk["usage"]
        for choice in chunk["choices"]:
            if "delta" in choice:
                out["content"] += choice["delta"].get("content") or ""
                for call in choice["delta"].get("tool_calls") or []:
                    calls = out.setdefault("tool_calls", [])
                    while len(calls) <= call["index"]:
                        calls.append({"id": None, "name": None, "arguments": ""})
                    if "id" in call:
                        calls[call["index"]]["id"] = call["id"]
                        calls[call["index"]]["name"] = call["function"]["name"]
                    calls[call["index"]]["arguments"] += call["function"].get("arguments") or ""
            else:
                out["content"] += choice.get("text") or ""
            if choice.get("finish_reason"):
                out["finish_reason"] = choice["finish_reason"]
    conn.close()
    return out


def main():
    mode, port, key = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "stream":
        print(json.dumps(stream(port, key, json.loads(sys.argv[4]))))
    elif mode == "concurrent":
        bodies = json.loads(sys.argv[4])
        results = [None] * len(bodies)

        def run(i):
            try:
                results[i] = stream(port, key, bodies[i])
            except Exception as e:  # reported, not raised: the test names the client that failed
                results[i] = {"status": -1, "error": repr(e)}

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps(results))
    elif mode == "pool":  # @FILE WORKERS: every body of the JSON list in FILE streamed, WORKERS at a time
        with open(sys.argv[4][1:], encoding="utf-8") as f:
            bodies = json.load(f)
        workers = int(sys.argv[5])
        results = [None] * len(bodies)
        lock = threading.Lock()
        pending = list(range(len(bodies)))

        def work():
            while True:
                with lock:
                    if not pending:
                        return
                    i = pending.pop(0)
                try:
                    results[i] = stream(port, key, bodies[i])
                except Exception as e:
                    results[i] = {"status": -1, "error": repr(e)}

        threads = [threading.Thread(target=work) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(json.dumps(results))
    elif mode == "hang":
        conn, resp = open_stream(port, key, json.loads(sys.argv[4]))
        for data in events(resp):
            if data == "[DONE]":
                break
            choices = json.loads(data).get("choices") or [{}]
            if (choices[0].get("delta") or {}).get("content") or choices[0].get("text"):
                print("STREAMING", flush=True)  # a token arrived: the request holds its sequence
                break
        sys.stdin.read()  # until killed
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
