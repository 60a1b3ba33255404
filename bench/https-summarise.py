#!/usr/bin/env python3
"""Summarise a bench/https-load.sh result directory as Markdown.

    python3 bench/https-summarise.py bench/results/https-<stamp>

Reads runs.jsonl (one line per measured load run), handshakes.jsonl (one line per
new-host probe) and meta.txt; prints per mode a table of medians over the rounds
(requests/s, p50, p99, proxy CPU per request) and the largest peak RSS seen, with ratios
to direct and to Squid, then the new-host handshake table and the goal checks.
"""
import sys
from pathlib import Path

from benchlib import Goals, fmt_us, med, print_header, read_jsonl, summarise

ORDER = ["direct", "robots-guard", "robots-guard-info", "squid", "mitmdump"]
LABEL = {
    "direct": "direct (no proxy)",
    "robots-guard": "robots-guard (intercept, log warn)",
    "robots-guard-info": "robots-guard (intercept, log info)",
    "squid": "Squid ssl_bump",
    "mitmdump": "mitmdump",
}
MODE_LABEL = {
    "keepalive": "keep-alive, HTTP/1.1",
    "newconn": "new connection per request (new CONNECT + TLS handshake), HTTP/1.1",
    "h2": "keep-alive, HTTP/2 (Squid does not offer h2 to clients)",
}


def pctl(values, q):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def counts(rs):
    return {
        "errors": sum(sum(r["errors"].values()) for r in rs),
        "non200": sum(sum(r["non200"].values()) for r in rs),
    }


def table(stats, mode):
    targets = [t for t in ORDER if (t, mode) in stats]
    direct = stats.get(("direct", mode))
    squid = stats.get(("squid", mode))
    lines = [
        f"**{MODE_LABEL.get(mode, mode)}**",
        "",
        "| target | req/s (spread) | × direct | × Squid | p50 | p99 "
        "| proxy CPU / req | origin CPU / req | peak RSS |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for t in targets:
        s = stats[(t, mode)]
        x_direct = f"{s['rps'] / direct['rps']:.2f}" if direct else "–"
        x_squid = f"{s['rps'] / squid['rps']:.2f}" if squid and t != "direct" else "–"
        cpu = f"{s['cpu']:.0f} µs" if "cpu" in s else "–"
        rss = f"{s['hwm_mib']:.1f} MiB" if "hwm_mib" in s else "–"
        err = ""
        if s["errors"]:
            err += f" ⚠ {s['errors']} errors"
        if s["non200"]:
            err += f" ⚠ {s['non200']} non-200"
        lines.append(
            f"| {LABEL.get(t, t)} | {s['rps']:,.0f} (±{s['rps_spread'] * 50:.0f}%){err} | {x_direct} "
            f"| {x_squid} | {fmt_us(s['p50_us'])} | {fmt_us(s['p99_us'])} | {cpu} "
            f"| {s['origin_cpu']:.0f} µs | {rss} |"
        )
    return "\n".join(lines)


def handshakes(hs):
    """{(target, pass): [CONNECT→handshake-done µs]} over probes answered 200."""
    out, failed = {}, {}
    for h in hs:
        key = (h["target"], h["pass"])
        if h["code"] != 200:
            failed[key] = failed.get(key, 0) + 1
            continue
        out.setdefault(key, []).append(h["handshake_us"])
    return out, failed


def hs_table(hs, cpu):
    data, failed = handshakes(hs)
    cpu = {(c["target"], c["pass"]): c["cpu_us_per_probe"] for c in cpu}
    targets = [t for t in ORDER if (t, "new") in data or (t, "new") in failed]
    lines = [
        "| target | new host: min | median | p90 | max | CPU / probe "
        "| same hosts again: min | median | p90 | CPU / probe | failed |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for t in targets:
        f = failed.get((t, "new"), 0) + failed.get((t, "cached"), 0)
        cells = []
        for p, cols in (("new", 4), ("cached", 3)):
            v = data.get((t, p), [])
            qs = [min(v), med(v), pctl(v, 0.9), max(v)][:cols] if v else []
            cells.append(" | ".join(fmt_us(x) for x in qs) if v else " | ".join(["–"] * cols))
            cells.append(f"{cpu[(t, p)]:,.0f} µs" if (t, p) in cpu else "–")
        lines.append(f"| {LABEL.get(t, t)} | {' | '.join(cells)} | {f or ''} |")
    return "\n".join(lines)


def goals(stats, hs):
    out = Goals()
    check = out.check

    for mode, factor in (("keepalive", 2), ("newconn", 3)):
        rg, sq = stats.get(("robots-guard", mode)), stats.get(("squid", mode))
        if rg and sq:
            check(
                rg["rps"] >= factor * sq["rps"],
                f"{MODE_LABEL[mode].split(',')[0].split(' (')[0]} req/s ≥ {factor}× Squid ssl_bump: "
                f"{rg['rps']:,.0f} vs {factor} × {sq['rps']:,.0f} = {factor * sq['rps']:,.0f} "
                f"({rg['rps'] / sq['rps']:.2f}×); CPU/request {rg['cpu']:.0f} vs {sq['cpu']:.0f} µs "
                f"({sq['cpu'] / rg['cpu']:.2f}× less)",
            )
    data, _ = handshakes(hs)
    new = data.get(("robots-guard", "new"))
    if new:
        check(
            med(new) < 2000,
            f"a new host's first handshake (leaf mint included) < 2 ms: median "
            f"{fmt_us(med(new))}, p90 {fmt_us(pctl(new, 0.9))}, max {fmt_us(max(new))} "
            f"over {len(new)} hosts (CONNECT sent → TLS handshake done, client side; direct TLS "
            f"handshake with nginx: median {fmt_us(med(data[('direct', 'new')]))})"
            if ("direct", "new") in data else
            f"over {len(new)} hosts (CONNECT sent → TLS handshake done, client side)",
        )
    return str(out)


def main():
    d = Path(sys.argv[1])
    runs, hs, hs_cpu = (read_jsonl(d / n) for n in ("runs.jsonl", "handshakes.jsonl", "handshake-cpu.jsonl"))
    stats = summarise(runs, counts)
    modes = [m for m in ("keepalive", "newconn", "h2") if any(k[1] == m for k in stats)]
    print_header(d, runs)
    for m in modes:
        print(table(stats, m))
        print()
    if hs:
        print("**A new host's first handshake**: CONNECT sent → TLS handshake with the proxy "
              "done (bench/handshake.py, client side, TCP connect to the proxy excluded), one "
              "connection per host, hosts 127.0.0.2, 127.0.0.3, … never seen before by the "
              "fresh proxy, one after another; then the same "
              "hosts again. For direct: the TLS handshake with nginx alone. CPU / probe: the "
              "proxy's (for direct: nginx's) CPU time per probe, the whole request included "
              "(for a new host also its robots.txt fetch and a new upstream connection).")
        print()
        print(hs_table(hs, hs_cpu))
        print()
    print("Goals (robots-guard with log level warn):")
    print()
    print(goals(stats, hs))


if __name__ == "__main__":
    main()
