#!/usr/bin/env python3
"""How much should a chat's own routing be trusted over stored history? Fits the runtime's
kSessionPriorTokens (engine/src/experts/planner_inputs.h) on a real activation trace.

For every held-out prompt and layer: the stored history is the summed counts of H other prompts
(as `zipmoe bench suite budget --history H` builds it); the session is the first n of the prompt's
tokens, drawn without replacement from its activations (the trace has counts, not token order, so
this treats a prompt's tokens as exchangeable: real chats drift, which favours more history than
this finds); the rest of the prompt's activations are scored. The predicted share of expert e is
cache::SessionBlend's: w * session_e / session_total + (1 - w) * history_e / history_total with
w = n / (n + tau), floored at 1e-9. Prints, per n and tau, the mean cross-entropy in nats per
activation (lower is better) and the share of the rest's activations that fall on the top-C experts
of the prediction (the cover a pool of C experts would give), as JSON. It also prints the share of
the rest's activations that go to experts the first n tokens did not route to (`novel_share`), and
the same share when the rest is drawn instead from the Pólya urn that `zipmoe bench suite
--trace-continuation TAU` replays after a prompt (`urn_novel_share`, k distinct experts a token in
proportion to the counts so far plus TAU tokens of the history's shares): the TAU whose urn matches
the trace's novelty is the one to replay with. Standard library only.

With --uniform it fits instead the runtime's kSmoothingTokens (RuntimeOptions::smoothingTokens): a
session with no history, its first n tokens' counts smoothed toward uniform by TAU tokens, predicted
share (session_e + TAU * k / N) / (k * (n + TAU)), scored the same way on the rest of the prompt.

usage: fit_session_weight.py TRACE.tsv [--history 100] [--prompts 200] [--seed 1] [--uniform]
"""
import argparse
import json
import math
import random


def read_trace(path):
    top_k, rows = None, {}
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                for part in line.split():
                    if part.startswith("top_k="):
                        top_k = int(part.split("=")[1])
                continue
            if line.startswith("prompt"):
                continue
            cells = line.split()
            rows.setdefault(int(cells[0]), {})[int(cells[1])] = [int(c) for c in cells[2:]]
    if top_k is None:
        raise SystemExit(f"{path}: no top_k= in the comment line")
    return top_k, rows


def first_tokens(counts, n, top_k, rng):
    """The first n tokens' counts and the rest's, drawing the prompt's activations in a random order."""
    pool = [e for e in range(len(counts)) for _ in range(counts[e])]
    rng.shuffle(pool)
    session = [0] * len(counts)
    for e in pool[: n * top_k]:
        session[e] += 1
    return session, [counts[e] - session[e] for e in range(len(counts))]


def fit_uniform(rows, held, layers, experts, top_k, taus, sessions, rng):
    result = []
    for n in [int(x) for x in sessions.split(",")]:
        loss = {t: 0.0 for t in taus}
        scored = 0
        for p in held:
            for l in layers:
                counts = rows[p][l]
                if sum(counts) // top_k <= n:
                    continue
                session, rest = first_tokens(counts, n, top_k, rng)
                scored += sum(rest)
                for t in taus:
                    pred = [(session[e] + t * top_k / experts) / (top_k * (n + t)) for e in range(experts)]
                    loss[t] += -sum(rest[e] * math.log(max(pred[e], 1e-12)) for e in range(experts))
        if scored:
            result.append({"session_tokens": n, "activations_scored": scored,
                           "nats_per_activation": {str(t): round(loss[t] / scored, 4) for t in taus},
                           "uniform_nats": round(math.log(experts), 4)})
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--history", type=int, default=100)
    ap.add_argument("--prompts", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--taus", default="0.5,1,2,4,8,16,32,64,256")
    ap.add_argument("--sessions", default="16,64,256")
    ap.add_argument("--cover", type=int, default=30, help="experts in the cover figure")
    ap.add_argument("--uniform", action="store_true", help="fit the smoothing toward uniform (no history)")
    a = ap.parse_args()
    top_k, rows = read_trace(a.trace)
    prompts = sorted(rows)
    rng = random.Random(a.seed)
    held = prompts[: a.prompts]
    history_ids = prompts[a.prompts : a.prompts + a.history]
    if len(history_ids) < a.history:
        raise SystemExit(f"{a.trace}: {len(prompts)} prompts, fewer than --prompts + --history")
    layers = sorted(rows[prompts[0]])
    experts = len(rows[prompts[0]][layers[0]])
    history = {l: [sum(rows[p][l][e] for p in history_ids) for e in range(experts)] for l in layers}
    taus = [float(t) for t in a.taus.split(",")]
    if a.uniform:
        print(json.dumps({"trace": a.trace, "top_k": top_k, "experts": experts, "held_out_prompts": len(held),
                          "smoothing_toward_uniform": fit_uniform(rows, held, layers, experts, top_k, taus,
                                                                  a.sessions, rng)}, indent=1))
        return
    result = []
    for n in [int(x) for x in a.sessions.split(",")]:
        loss = {t: 0.0 for t in taus}
        cover = {t: 0.0 for t in taus}
        urn_novel = {t: 0 for t in taus}
        urn_drawn = {t: 0 for t in taus}
        scored = novel = 0
        for p in held:
            for l in layers:
                counts = rows[p][l]
                total = sum(counts)
                if total == 0 or sum(history[l]) == 0 or total // top_k <= n:
                    continue
                session, rest = first_tokens(counts, n, top_k, rng)
                rest_total = sum(rest)
                novel += sum(rest[e] for e in range(experts) if session[e] == 0)
                h_total = sum(history[l])
                for t in taus:
                    w = n / (n + t)
                    pred = [w * session[e] / (n * top_k) + (1 - w) * history[l][e] / h_total for e in range(experts)]
                    loss[t] += -sum(rest[e] * math.log(max(pred[e], 1e-9)) for e in range(experts))
                    best = sorted(range(experts), key=lambda e: -pred[e])[: a.cover]
                    cover[t] += sum(rest[e] for e in best)
                    # The urn's version of the rest: as many tokens, k distinct experts each.
                    seen = list(session)
                    for _ in range(rest_total // top_k):
                        picked = set()
                        while len(picked) < top_k:
                            weights = [0.0 if e in picked else seen[e] + t * top_k * (history[l][e] + 1) /
                                       (h_total + experts) for e in range(experts)]
                            r = rng.random() * sum(weights)
                            for e in range(experts):
                                r -= weights[e]
                                if r < 0 and e not in picked:
                                    break
                            picked.add(e)
                        for e in picked:
                            seen[e] += 1
                            urn_novel[t] += session[e] == 0
                            urn_drawn[t] += 1
                scored += rest_total
        result.append({"session_tokens": n, "activations_scored": scored,
                       "nats_per_activation": {str(t): round(loss[t] / scored, 4) for t in taus},
                       f"top{a.cover}_cover": {str(t): round(cover[t] / scored, 4) for t in taus},
                       "novel_share": round(novel / scored, 4),
                       "urn_novel_share": {str(t): round(urn_novel[t] / max(1, urn_drawn[t]), 4) for t in taus}})
    print(json.dumps({"trace": a.trace, "top_k": top_k, "experts": experts, "history_prompts": a.history,
                      "held_out_prompts": len(held), "results": result}, indent=1))


if __name__ == "__main__":
    main()
