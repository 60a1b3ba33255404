#!/usr/bin/env python3
"""Summarise a bench/load.sh or bench/https-load.sh result directory as Markdown.

    python3 bench/summarise.py bench/results/<stamp>

Reads meta.txt, runs.jsonl (one line per measured run, from record.py) and, for HTTPS,
handshakes.jsonl and handshake-cpu.jsonl. Prints per mode a table of medians over the
rounds (req/s, p50, p99, the proxy's CPU per request and busy share of its core) with
the largest peak RSS seen, then the ratios and the goal checks.
"""
import json
import statistics
import sys
from pathlib import Path

LABEL = {
    "direct": "direct (nginx, no proxy)",
    "robots-guard": "robots-guard",
    "robots-guard-baseline": "robots-guard-baseline",
    "robots-guard-info": "robots-guard (log info)",
    "squid": "Squid",
    "tinyproxy": "tinyproxy",
    "privoxy": "Privoxy",
}
MODES = {
    "plain": {"keepalive": "keep-alive", "close": "new connection per request"},
    "https": {
        "keepalive": "keep-alive, HTTP/1.1",
        "newconn": "new connection per request (new CONNECT + TLS handshake), HTTP/1.1",
        "h2": "keep-alive, HTTP/2 (Squid does not offer h2 to clients)",
    },
}
SHORT = {"keepalive": "keep-alive", "close": "new connection", "newconn": "new connection",
         "h2": "HTTP/2"}
# Goals: robots-guard's keep-alive req/s against a peer's; p99 over direct; CPU per
# request over the baseline binary's.
PEER_GOAL = {"plain": ("privoxy", 2.0), "https": ("squid", 2.5)}
P99_GOAL_US = 1000
BASELINE_GOAL = 0.10


def med(values):
    return statistics.median(values) if values else None


def fmt_us(us):
    return f"{us / 1000:.2f} ms" if abs(us) >= 1000 else f"{us:.0f} µs"


def signed_us(us):
    return ("+" if us >= 0 else "-") + fmt_us(abs(us))


def read_jsonl(path):
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


def summarise(runs):
    """{(target, mode): medians over the rounds}."""
    groups = {}
    for r in runs:
        groups.setdefault((r["target"], r["mode"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        rps = [r["rps"] for r in rs]
        s = {
            "n": len(rs),
            "rps": med(rps),
            "spread": (max(rps) - min(rps)) / med(rps) / 2,
            "p50_us": med([r["p50_us"] for r in rs]),
            "p99_us": med([r["p99_us"] for r in rs]),
            "errors": sum(r["errors"] for r in rs),
            "reconnects": sum(r.get("reconnects", 0) for r in rs),
        }
        if "cpu_us_per_req" in rs[0]:
            s["cpu"] = med([r["cpu_us_per_req"] for r in rs])
            s["busy"] = med([r["busy"] for r in rs])
            s["hwm_mib"] = max(r["hwm_kib"] for r in rs) / 1024
        out[key] = s
    return out


def label(kind, t):
    return "Squid ssl_bump" if kind == "https" and t == "squid" else LABEL.get(t, t)


def table(stats, kind, mode):
    direct = stats.get(("direct", mode))
    lines = [
        f"**{MODES[kind][mode]}**",
        "",
        "| target | req/s (spread) | × direct | p50 | p99 | p99 − direct "
        "| proxy CPU / req | proxy core busy | peak RSS |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    reconnects = False
    for t in [t for t in LABEL if (t, mode) in stats] + sorted(
        t for t, m in stats if m == mode and t not in LABEL
    ):
        s = stats[(t, mode)]
        note = f" ⚠ {s['errors']} errors" if s["errors"] else ""
        if s["reconnects"]:
            note += " ‡"
            reconnects = True
        cells = [
            label(kind, t),
            f"{s['rps']:,.0f}" + (f" (±{s['spread'] * 100:.0f}%)" if s["n"] > 1 else "") + note,
            f"{s['rps'] / direct['rps']:.2f}" if direct else "–",
            fmt_us(s["p50_us"]),
            fmt_us(s["p99_us"]),
            signed_us(s["p99_us"] - direct["p99_us"]) if direct and t != "direct" else "–",
        ]
        if "cpu" in s:
            cells += [f"{s['cpu']:.1f} µs", f"{s['busy'] * 100:.0f}%", f"{s['hwm_mib']:.1f} MiB"]
        else:
            cells += ["–"] * 3
        lines.append("| " + " | ".join(cells) + " |")
    if reconnects:
        lines += ["", "‡ the proxy closed connections without `Connection: close`; wrk "
                  "reconnected (responses complete, not counted as errors)."]
    return "\n".join(lines)


def ratios_and_goals(stats, kind):
    """The ratio lines and the goal lines."""
    ratios, goals = [], []

    def goal(ok, text):
        goals.append(f"- {'MET' if ok else 'MISSED'}: {text}")

    rg = lambda m: stats.get(("robots-guard", m))
    peer, factor = PEER_GOAL[kind]
    ka, pk = rg("keepalive"), stats.get((peer, "keepalive"))
    if ka and pk:
        x = ka["rps"] / pk["rps"]
        ratios.append(f"- robots-guard / {label(kind, peer)}, keep-alive req/s: **{x:.2f}×** "
                      f"({ka['rps']:,.0f} vs {pk['rps']:,.0f}); CPU per request "
                      f"{ka['cpu']:.1f} vs {pk['cpu']:.1f} µs")
        goal(x >= factor, f"{kind} keep-alive req/s ≥ {factor:g}× {label(kind, peer)}: {x:.2f}×")
    for m in MODES[kind]:
        s, d = rg(m), stats.get(("direct", m))
        if s and d:
            ratios.append(f"- robots-guard p99 over direct, {SHORT[m]}: "
                          f"{signed_us(s['p99_us'] - d['p99_us'])} ({fmt_us(s['p99_us'])} vs "
                          f"{fmt_us(d['p99_us'])}, {s['p99_us'] / d['p99_us']:.2f}×); "
                          f"direct {d['rps']:,.0f} req/s")
    s, d = rg("keepalive"), stats.get(("direct", "keepalive"))
    if s and d:
        goal(s["p99_us"] - d["p99_us"] <= P99_GOAL_US,
             f"{kind} keep-alive p99 within {P99_GOAL_US / 1000:g} ms of direct: "
             f"{signed_us(s['p99_us'] - d['p99_us'])}")
    for m in MODES[kind]:
        s, b = rg(m), stats.get(("robots-guard-baseline", m))
        if s and b:
            dc = s["cpu"] / b["cpu"] - 1
            ratios.append(f"- CPU per request vs baseline, {SHORT[m]}: "
                          f"**{dc * 100:+.1f}%** ({s['cpu']:.2f} vs {b['cpu']:.2f} µs); req/s "
                          f"{(s['rps'] / b['rps'] - 1) * 100:+.1f}%, p99 "
                          f"{signed_us(s['p99_us'] - b['p99_us'])}")
            goal(dc <= BASELINE_GOAL, f"{kind} {SHORT[m]} CPU per request vs "
                 f"baseline ≤ +{BASELINE_GOAL * 100:.0f}%: {dc * 100:+.1f}%")
    return ratios, goals


def pctl(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def handshake_table(kind, hs, cpu):
    """A new host's first handshake (https-load.sh part 2), per target."""
    data, failed = {}, {}
    for h in hs:
        key = (h["target"], h["pass"])
        if h["code"] == 200:
            data.setdefault(key, []).append(h["handshake_us"])
        else:
            failed[key] = failed.get(key, 0) + 1
    cpu = {(c["target"], c["pass"]): c["cpu_us_per_probe"] for c in cpu}
    lines = [
        "**A new host's first handshake**: CONNECT sent → TLS handshake with the proxy done "
        "(bench/handshake.py, client side), for hosts 127.0.0.2, 127.0.0.3, … never seen by "
        "the fresh proxy (a leaf certificate minted for each), then the same hosts again. "
        "For direct: the TLS handshake with nginx alone. CPU / probe: the proxy's CPU per "
        "probe, whole request included.",
        "",
        "| target | new host: median | p90 | max | CPU / probe | again: median | p90 "
        "| CPU / probe | failed |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for t in dict.fromkeys(h["target"] for h in hs):
        cells = [label(kind, t)]
        for p, qs in (("new", (0.5, 0.9, 1.0)), ("cached", (0.5, 0.9))):
            v = data.get((t, p))
            cells += [fmt_us(pctl(v, q)) if v else "–" for q in qs]
            cells.append(f"{cpu[(t, p)]:,.0f} µs" if (t, p) in cpu and t != "direct" else "–")
        cells.append(str(failed.get((t, "new"), 0) + failed.get((t, "cached"), 0) or ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    d = Path(sys.argv[1])
    runs = read_jsonl(d / "runs.jsonl")
    if not runs:
        sys.exit(f"no runs in {d}")
    kind = runs[0]["kind"]
    stats = summarise(runs)
    print("```")
    print((d / "meta.txt").read_text().strip())
    loads = [r["load1"] for r in runs]
    print(f"1-min load average at run starts: min {min(loads):.2f}, median "
          f"{med(loads):.2f}, max {max(loads):.2f}")
    print("```")
    print()
    for m in MODES[kind]:
        if any(k[1] == m for k in stats):
            print(table(stats, kind, m))
            print()
    print("Proxy CPU / req: user+system CPU of the proxy's processes over the measured run "
          "/ requests. Proxy core busy: that CPU time / the run's wall time; well under "
          "100% means the proxy was not the bottleneck (pinned: CPU 0, shared by the origin "
          "and the load generator, was), so its req/s understates it and CPU / req compares "
          "better.")
    print()
    hs = read_jsonl(d / "handshakes.jsonl")
    if hs:
        print(handshake_table(kind, hs, read_jsonl(d / "handshake-cpu.jsonl")))
        print()
    ratios, goals = ratios_and_goals(stats, kind)
    if ratios:
        print("Ratios (medians over the rounds):")
        print()
        print("\n".join(ratios))
        print()
    if goals:
        print("Goals:")
        print()
        print("\n".join(goals))


if __name__ == "__main__":
    main()
