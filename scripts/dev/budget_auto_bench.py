#!/usr/bin/env python3
"""`--budget auto` under a memory hog: does the budget follow, does anything get killed or swap?

Starts `zipmoe serve STORE --budget auto`, keeps one client generating (streamed, ignore_eos) the
whole time, and runs a second process — the hog — that takes memory in steps until the server's
budget can be only a given share of the experts, holds each step, then gives it all back. Every
token's arrival, every budget move the server logs (stderr "[t s] budget A -> B MiB: reason"),
MemAvailable, the server's RSS and the kernel's swap-out and OOM-kill counters are recorded.
Writes OUT/budget_auto.json (everything), OUT/budget_auto_tpot.json and OUT/budget_auto_budget.json
(figure specs for `zipmoe-plot --all OUT`). Development tool only: Python 3 standard library.

  scripts/dev/budget_auto_bench.py --zipmoe build/app/zipmoe --store out/bench/qwen8-nibble-store \
      --out docs/bench/run35/budget-auto --shares 0.75,0.5,0.25 --hold 40
"""
import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request

MiB = 1 << 20


def meminfo():
    out = {}
    with open("/proc/meminfo") as f:
        for line in f:
            k, v = line.split(":", 1)
            out[k] = int(v.split()[0]) * 1024
    return out


def vmstat(keys=("pswpout", "oom_kill")):
    out = {}
    with open("/proc/vmstat") as f:
        for line in f:
            k, v = line.split()
            if k in keys:
                out[k] = int(v)
    return out


def rss(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except FileNotFoundError:
        return None
    return None




def hog_steps(steps):
    """The hog's memory as a step line: what it held until each step began, then what it took."""
    points, held = [[0.0, 0.0]], 0.0
    for p in steps:
        points += [[p["t"], held], [p["taken_t"], p["hog_mib"]]]
        held = p["hog_mib"]
    return points


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zipmoe", default="build/app/zipmoe")
    ap.add_argument("--store", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--shares", default="0.75,0.5,0.25", help="the budget, as shares of the expert bytes, each step leaves")
    ap.add_argument("--hold", type=float, default=40, help="seconds each step is held")
    ap.add_argument("--port", type=int, default=18763)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    t0 = time.monotonic()
    now = lambda: time.monotonic() - t0

    cmd = [args.zipmoe, "serve", args.store, "--budget", "auto", "--port", str(args.port), "--max-batch", "1"]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    print("$", " ".join(cmd), flush=True)
    # Its own activation history, so that earlier runs on this machine do not change what it plans.
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(os.path.abspath(args.out), "state"))
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1, env=env)
    moves, log, ready = [], [], threading.Event()
    limits = {}

    def read_err():
        for line in server.stderr:
            log.append([now(), line.rstrip()])
            m = re.search(r"\] budget (\d+) -> (\d+) MiB: (.*)$", line)
            if m:
                moves.append({"t": now(), "from_mib": int(m.group(1)), "to_mib": int(m.group(2)), "reason": m.group(3)})
            m = re.search(r"--budget auto: (\d+) MiB now .* between (\d+) and (\d+) MiB", line)
            if m:
                limits.update(start_mib=int(m.group(1)), floor_mib=int(m.group(2)), ceiling_mib=int(m.group(3)))

    def read_out():
        for line in server.stdout:
            log.append([now(), line.rstrip()])
            if "listening on" in line:
                ready.set()

    threading.Thread(target=read_err, daemon=True).start()
    threading.Thread(target=read_out, daemon=True).start()
    if not ready.wait(600):
        server.kill()
        sys.exit("the server did not start:\n" + "\n".join(l for _, l in log[-20:]))

    stop, tokens, requests = threading.Event(), [], []

    def model_id():
        with urllib.request.urlopen(f"http://127.0.0.1:{args.port}/v1/models", timeout=60) as r:
            return json.load(r)["data"][0]["id"]

    def client():
        body = {"model": model_id(), "messages": [{"role": "user", "content": "Tell me the story of Romeo and Juliet."}],
                "max_tokens": args.max_tokens, "stream": True, "ignore_eos": True, "temperature": 0}
        while not stop.is_set():
            req = urllib.request.Request(f"http://127.0.0.1:{args.port}/v1/chat/completions",
                                         data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
            start, times = now(), []
            try:
                with urllib.request.urlopen(req, timeout=600) as r:
                    for raw in r:
                        line = raw.decode().strip()
                        if line.startswith("data: ") and line != "data: [DONE]":
                            times.append(now())
            except Exception as e:  # the run records it; a dead server ends the loop below
                requests.append({"start": start, "error": str(e)})
                if server.poll() is not None:
                    return
                time.sleep(1)
                continue
            tokens.extend(times)
            gaps = [b - a for a, b in zip(times, times[1:])]
            requests.append({"start": start, "end": now(), "tokens": len(times),
                             "ttft_s": times[0] - start if times else None,
                             "tpot_ms": 1e3 * sum(gaps[1:]) / max(1, len(gaps) - 1) if len(gaps) > 1 else None})

    samples = []

    def sampler():
        while not stop.is_set():
            mi = meminfo()
            samples.append({"t": now(), "available_mib": mi["MemAvailable"] / MiB, "server_rss_mib": (rss(server.pid) or 0) / MiB,
                            **vmstat()})
            time.sleep(0.5)

    threading.Thread(target=client, daemon=True).start()
    threading.Thread(target=sampler, daemon=True).start()
    hog = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "memory_hog.py"), "--stdin"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    before = vmstat()
    steps = []
    # Settle: the server fills its starting budget (its RSS stops growing: under 1 % in 10 s), so that
    # the available memory the steps are computed from is what it leaves once full.
    time.sleep(args.hold)
    while True:
        before_rss = rss(server.pid) or 0
        time.sleep(10)
        if (rss(server.pid) or 0) <= before_rss * 1.01:
            break
    expert_mib = limits["ceiling_mib"] - limits["floor_mib"]
    start_available = meminfo()["MemAvailable"]
    start_budget = (moves[-1]["to_mib"] if moves else limits["start_mib"]) * MiB
    margin = max(512 * MiB, meminfo()["MemTotal"] // 16)
    for share in [float(s) for s in args.shares.split(",")]:
        target = int((limits["floor_mib"] + share * expert_mib) * MiB)
        # What the server frees going from its budget to `target` comes back as available memory.
        want = max(0, start_available + (start_budget - target) - margin)
        steps.append({"t": now(), "share": share, "hog_mib": want / MiB, "target_budget_mib": target / MiB})
        hog.stdin.write(f"{want}\n")
        hog.stdin.flush()
        hog.stdout.readline()
        steps[-1]["taken_t"] = now()
        time.sleep(args.hold)
    steps.append({"t": now(), "share": None, "hog_mib": 0})
    hog.stdin.write("0\n")
    hog.stdin.flush()
    hog.stdout.readline()
    steps[-1]["taken_t"] = now()
    time.sleep(args.hold)
    stop.set()
    hog.stdin.close()
    hog.wait()
    server.terminate()
    server.wait(60)
    after = vmstat()
    result = {
        "command": cmd, "args": vars(args), "limits": limits, "steps": steps, "moves": moves, "requests": requests,
        "samples": samples, "server_exit": server.returncode, "hog_exit": hog.returncode,
        "swapped_out_pages": after.get("pswpout", 0) - before.get("pswpout", 0),
        "oom_kills": after.get("oom_kill", 0) - before.get("oom_kill", 0), "log_tail": log[-40:],
    }
    with open(os.path.join(args.out, "budget_auto.json"), "w") as f:
        json.dump(result, f, indent=1)
    shown = [r for r in requests if r.get("tpot_ms")]
    tpot = {"kind": "line", "title": "--budget auto: time per output token while another program takes memory",
            "subtitle": f"{args.store}; the hog leaves the budget {args.shares} of the experts, {args.hold:.0f} s each, then frees it",
            "x": {"label": "time", "unit": "s"}, "y": {"label": "TPOT", "unit": "ms", "from_zero": True},
            "series": [{"name": "TPOT (per request)", "points": [[r["end"], r["tpot_ms"]] for r in shown]}]}
    budget_points = [[0.0, limits.get("start_mib", 0)]]
    for m in moves:
        budget_points.append([m["t"], m["from_mib"]])
        budget_points.append([m["t"], m["to_mib"]])
    budget_points.append([now(), moves[-1]["to_mib"] if moves else limits.get("start_mib", 0)])
    memory = {"kind": "line", "title": "--budget auto: the budget follows available memory",
              "subtitle": tpot["subtitle"], "x": {"label": "time", "unit": "s"}, "y": {"label": "memory", "unit": "MiB", "from_zero": True},
              "series": [{"name": "budget", "points": budget_points, "markers": False},
                         {"name": "MemAvailable", "points": [[s["t"], s["available_mib"]] for s in samples], "markers": False},
                         {"name": "server RSS", "points": [[s["t"], s["server_rss_mib"]] for s in samples], "markers": False},
                         {"name": "hog", "points": hog_steps(steps), "markers": False}]}
    for name, fig in (("budget_auto_tpot.json", tpot), ("budget_auto_budget.json", memory)):
        with open(os.path.join(args.out, name), "w") as f:
            json.dump(fig, f, indent=1)
    print(json.dumps({"moves": len(moves), "oom_kills": result["oom_kills"], "swapped_out_pages": result["swapped_out_pages"],
                      "server_exit": server.returncode, "requests": len(requests)}))


if __name__ == "__main__":
    main()
