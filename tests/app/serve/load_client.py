#!/usr/bin/env python3
"""Bounded load on the server for the load test: CLIENTS threads for SECONDS seconds, each sending one
request after another (chat or completion, streaming or not, max_tokens 1-48, some with stop
strings) over Python's http.client, and checking every answer: status 200, a well-formed body or
event stream ending in [DONE], a finish_reason, usage that adds up. Stops by itself; prints a JSON
summary {"requests", "failures", "tokens", "first_failures"}.

  load_client.py PORT KEY MODEL CLIENTS SECONDS
"""
import http.client
import json
import random
import sys
import threading
import time

PROMPTS = ["ROMEO:", "JULIET:\nO Romeo, Romeo", "First Citizen:\nBefore we proceed any further",
           "What news from Mantua?", "KING RICHARD II:\nNow is the winter", "NURSE:\nFaith, I can tell"]


def one_request(port, key, model, rng):
    chat = rng.random() < 0.6
    stream = rng.random() < 0.6
    body = {"model": model, "max_tokens": rng.randint(1, 48), "temperature": rng.choice([0, 0.7, 1.0]),
            "seed": rng.randint(0, 1 << 30), "stream": stream}
    if stream and rng.random() < 0.5:
        body["stream_options"] = {"include_usage": True}
    if rng.random() < 0.2:
        body["stop"] = ["\n\n"]
    prompt = rng.choice(PROMPTS)
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = prompt
        path = "/v1/completions"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", "Authorization": "Bearer " + key})
    resp = conn.getresponse()
    if resp.status != 200:
        return "status %d: %s" % (resp.status, resp.read()[:300]), 0
    tokens = 0
    if not stream:
        j = json.loads(resp.read())
        c = j["choices"][0]
        u = j["usage"]
        if c["finish_reason"] not in ("stop", "length"):
            return "finish_reason %r" % c["finish_reason"], 0
        if u["prompt_tokens"] + u["completion_tokens"] != u["total_tokens"] or u["completion_tokens"] > body["max_tokens"]:
            return "usage %r" % u, 0
        conn.close()
        return None, u["completion_tokens"]
    done = False
    finish = None
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            done = True
            break
        j = json.loads(data)
        if "error" in j:
            return "stream error %r" % j["error"], 0
        if j.get("usage"):
            tokens = j["usage"]["completion_tokens"]
        for c in j["choices"]:
            if c.get("finish_reason"):
                finish = c["finish_reason"]
    conn.close()
    if not done or finish not in ("stop", "length"):
        return "stream ended without [DONE] or finish_reason (%r)" % finish, 0
    return None, tokens


def main():
    port, key, model, clients, seconds = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
    deadline = time.monotonic() + seconds
    lock = threading.Lock()
    summary = {"requests": 0, "failures": 0, "tokens": 0, "first_failures": []}

    def client(i):
        rng = random.Random(i)
        while time.monotonic() < deadline:
            try:
                err, tokens = one_request(port, key, model, rng)
            except Exception as e:  # a broken connection is a failed request
                err, tokens = repr(e), 0
            with lock:
                summary["requests"] += 1
                summary["tokens"] += tokens
                if err:
                    summary["failures"] += 1
                    if len(summary["first_failures"]) < 5:
                        summary["first_failures"].append(err)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
