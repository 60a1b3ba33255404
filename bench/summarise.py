#!/usr/bin/env python3
"""Summarise a bench/load.sh result directory as Markdown.

    python3 bench/summarise.py bench/results/<stamp>

Reads runs.jsonl (one line per measured run) and meta.txt; prints per connection mode a
table of medians over the rounds (requests/s, p50, p99, proxy CPU per request) and the
largest peak RSS seen, with ratios to direct and to the best peer, then the goal checks.
"""
import sys
from pathlib import Path

from benchlib import Goals, fmt_us, print_header, read_jsonl, summarise

PEERS = ["squid", "tinyproxy", "privoxy"]
ORDER = ["direct", "robots-guard", "robots-guard-info"] + PEERS
LABEL = {
    "direct": "direct (no proxy)",
    "robots-guard": "robots-guard (log warn)",
    "robots-guard-info": "robots-guard (log info)",
    "squid": "Squid",
    "tinyproxy": "tinyproxy",
    "privoxy": "Privoxy",
}
MODE_LABEL = {"keepalive": "keep-alive", "close": "new connection per request"}


def counts(rs):
    # wrk counts a "read error" when a server closes a connection it did not announce as
    # closing (tinyproxy does that after every response); the response was complete, so
    # these are reconnects, not failed requests.
    return {
        "reconnects": sum(r["errors"].get("read", 0) for r in rs),
        "errors": sum(v for r in rs for k, v in r["errors"].items() if k != "read"),
    }


def table(stats, mode):
    targets = [t for t in ORDER if (t, mode) in stats]
    direct = stats.get(("direct", mode))
    peers = [stats[(p, mode)] for p in PEERS if (p, mode) in stats]
    best = max(peers, key=lambda s: s["rps"]) if peers else None
    best_name = (
        next(p for p in PEERS if stats.get((p, mode)) is best) if best else None
    )
    lines = [
        f"**{MODE_LABEL.get(mode, mode)}**"
        + (f" (best peer: {LABEL[best_name]})" if best_name else ""),
        "",
        "| target | req/s (spread) | × direct | × best peer | p50 | p99 | p99 − direct "
        "| proxy CPU / req | origin CPU / req | peak RSS |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for t in targets:
        s = stats[(t, mode)]
        x_direct = f"{s['rps'] / direct['rps']:.2f}" if direct else "–"
        x_best = f"{s['rps'] / best['rps']:.2f}" if best and t != "direct" else "–"
        d99 = (
            f"+{fmt_us(s['p99_us'] - direct['p99_us'])}"
            if direct and t != "direct" and s["p99_us"] >= direct["p99_us"]
            else ("–" if t == "direct" or not direct else f"−{fmt_us(direct['p99_us'] - s['p99_us'])}")
        )
        cpu = f"{s['cpu']:.1f} µs" if "cpu" in s else "–"
        rss = f"{s['hwm_mib']:.1f} MiB" if "hwm_mib" in s else "–"
        err = f" ⚠ {s['errors']} errors" if s["errors"] else ""
        if s["reconnects"]:
            err += " ‡"
        lines.append(
            f"| {LABEL.get(t, t)} | {s['rps']:,.0f} (±{s['rps_spread'] * 50:.0f}%){err} | {x_direct} "
            f"| {x_best} | {fmt_us(s['p50_us'])} | {fmt_us(s['p99_us'])} | {d99} | {cpu} "
            f"| {s['origin_cpu']:.1f} µs | {rss} |"
        )
    if any(stats[(t, mode)]["reconnects"] for t in targets):
        lines += [
            "",
            "‡ the proxy closed connections without `Connection: close`; wrk counted "
            "each as a read error and reconnected (responses were complete, status 200).",
        ]
    return "\n".join(lines)


def goals(stats):
    rg = lambda m: stats.get(("robots-guard", m))
    out = Goals()
    check = out.check

    ka, pv = rg("keepalive"), stats.get(("privoxy", "keepalive"))
    if ka and pv:
        check(
            ka["rps"] >= 2 * pv["rps"],
            f"keep-alive req/s ≥ 2× Privoxy: {ka['rps']:,.0f} vs 2 × {pv['rps']:,.0f} "
            f"= {2 * pv['rps']:,.0f} ({ka['rps'] / pv['rps']:.2f}×)",
        )
    if ka:
        check(ka["cpu"] <= 15, f"keep-alive CPU ≤ ~15 µs/request: {ka['cpu']:.1f} µs")
    cl = rg("close")
    peers = [(p, stats[(p, "close")]) for p in PEERS if (p, "close") in stats]
    if cl and peers:
        name, best = max(peers, key=lambda kv: kv[1]["rps"])
        check(
            cl["rps"] >= 1.5 * best["rps"],
            f"new-connection req/s ≥ 1.5× best peer ({LABEL[name]}): {cl['rps']:,.0f} vs "
            f"1.5 × {best['rps']:,.0f} = {1.5 * best['rps']:,.0f} ({cl['rps'] / best['rps']:.2f}×)",
        )
    for m in ("keepalive", "close"):
        s, d = rg(m), stats.get(("direct", m))
        if s and d:
            check(
                s["p99_us"] - d["p99_us"] <= 1000,
                f"{MODE_LABEL[m]} p99 within 1 ms of direct: {fmt_us(s['p99_us'])} vs "
                f"{fmt_us(d['p99_us'])} (p50 {fmt_us(s['p50_us'])} vs {fmt_us(d['p50_us'])}; "
                f"on a busy machine p99 is mostly scheduler noise)",
            )
    hwm = [rg(m)["hwm_mib"] for m in ("keepalive", "close") if rg(m)]
    if hwm:
        check(max(hwm) < 20, f"peak RSS under load < 20 MiB: {max(hwm):.1f} MiB")
    return str(out)


def main():
    d = Path(sys.argv[1])
    runs = read_jsonl(d / "runs.jsonl")
    stats = summarise(runs, counts)
    modes = [m for m in ("keepalive", "close") if any(k[1] == m for k in stats)]
    print_header(d, runs)
    for m in modes:
        print(table(stats, m))
        print()
    info, warn = stats.get(("robots-guard-info", "keepalive")), stats.get(("robots-guard", "keepalive"))
    if info and warn:
        print(
            f"Logging every request (`level = \"info\"`) vs `warn`, keep-alive: "
            f"{info['rps']:,.0f} vs {warn['rps']:,.0f} req/s "
            f"({(info['rps'] / warn['rps'] - 1) * 100:+.0f}%), "
            f"{info['cpu']:.1f} vs {warn['cpu']:.1f} µs CPU per request "
            f"({info['cpu'] - warn['cpu']:+.1f} µs)."
        )
        print()
    print("Goals (robots-guard with log level warn):")
    print()
    print(goals(stats))


if __name__ == "__main__":
    main()
