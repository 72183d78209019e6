#!/usr/bin/env python3
"""Hostile-but-bounded clients for the server's safety test, on raw sockets (stdlib only).

  raw_client.py slowloris PORT N       N connections that each send a request head one byte every 2 s,
                                       reconnecting when the server cuts them; prints "OPEN N" once
                                       all N have sent a byte, and "CUT STATUS" for each cut (the
                                       status of the reply that came before the close, 0 for none);
                                       runs until killed
  raw_client.py fire PORT N BODY_JSON  N connections that each send a whole chat completion request
                                       and close at once, without reading; prints "SENT N"
  raw_client.py declare PORT LENGTH    a POST that declares Content-Length LENGTH and sends no body;
                                       prints {"status", "body"} of the reply
"""
import json
import select
import socket
import sys
import time

HEAD = ("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Content-Length: 2\r\n\r\n{}")


def connect(port):
    return socket.create_connection(("127.0.0.1", port), timeout=120)


def status_of(reply):
    parts = reply.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[0].startswith(b"HTTP/") and parts[1].isdigit() else 0


def slowloris(port, n):
    socks = [connect(port) for _ in range(n)]
    sent = [0] * n
    opened = False
    while True:
        for i in range(n):
            readable, _, _ = select.select([socks[i]], [], [], 0)
            cut = bool(readable)
            if not cut:
                try:
                    socks[i].sendall(HEAD[sent[i] % len(HEAD)].encode())
                    sent[i] += 1
                except OSError:
                    cut = True
            if cut:  # the server replied or closed: report what it said, and come back
                try:
                    reply = socks[i].recv(65536)
                except OSError:
                    reply = b""
                print("CUT %d" % status_of(reply), flush=True)
                socks[i].close()
                socks[i] = connect(port)
                socks[i].sendall(HEAD[0].encode())
                sent[i] = 1
        if not opened:
            print("OPEN %d" % n, flush=True)
            opened = True
        time.sleep(2)


def fire(port, n, body):
    data = json.dumps(body).encode()
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    request = ("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n" % (path, port, len(data))).encode() + data
    for _ in range(n):
        s = connect(port)
        s.sendall(request)
        s.close()
    print("SENT %d" % n, flush=True)


def declare(port, length):
    s = connect(port)
    s.sendall(("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n" % (port, length)).encode())
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = s.recv(65536)
        if not chunk:
            break
        reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    length_header = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
    want = int(length_header[0].split(b":")[1]) if length_header else 0
    while len(body) < want:
        chunk = s.recv(65536)
        if not chunk:
            break
        body += chunk
    print(json.dumps({"status": status_of(head), "body": body.decode("utf-8", "replace")}))


def main():
    mode, port = sys.argv[1], int(sys.argv[2])
    if mode == "slowloris":
        slowloris(port, int(sys.argv[3]))
    elif mode == "fire":
        fire(port, int(sys.argv[3]), json.loads(sys.argv[4]))
    elif mode == "declare":
        declare(port, int(sys.argv[3]))
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
