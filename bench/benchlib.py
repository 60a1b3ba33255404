#!/usr/bin/env python3
"""What bench/load.sh and bench/https-load.sh share in Python: one run's record, the
per-run progress line, and the summaries' medians, formatting and header.

Imported by summarise.py, https-summarise.py, wrk-record.py and https-record.py (all in
this directory). Run as a script it prints the progress line of a record:

    python3 bench/benchlib.py progress RECORD_JSON
"""
import json
import statistics
import sys


def med(values):
    return statistics.median(values) if values else None


def fmt_us(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def read_jsonl(path):
    """The JSON lines of `path`; none when it does not exist."""
    if not path.exists():
        return []
    return [json.loads(l) for l in path.read_text().splitlines() if l.strip()]


# --- one run's record ----------------------------------------------------------------------


def add_cpu(rec, name, samples, requests):
    """Adds the CPU and memory fields to a run's record, in the order the summaries
    expect. `samples` are procstat.py's JSON samples: proxy before/after (for direct, the
    origin's), origin before/after."""
    b, a, ob, oa = (json.loads(x) for x in samples)
    req = max(requests, 1)
    rec["origin_cpu_us_per_req"] = (oa["cpu_s"] - ob["cpu_s"]) * 1e6 / req
    if name != "direct":
        rec["cpu_us_per_req"] = (a["cpu_s"] - b["cpu_s"]) * 1e6 / req
        rec["hwm_kib"] = a["hwm_kib"]
        rec["procs"] = a["procs"]
        rec["threads"] = a["threads"]
    return rec


def progress(r):
    """One line on a finished run, for the scripts' log."""
    s = "%.0f req/s p50 %d us p99 %d us" % (r["rps"], r["p50_us"], r["p99_us"])
    if "cpu_us_per_req" in r:
        s += " cpu %.1f us/req rss %.1f MiB" % (r["cpu_us_per_req"], r["hwm_kib"] / 1024)
    if r["errors"]:
        s += " errors %s" % r["errors"]
    if r.get("non200"):
        s += " non-200 %s" % r["non200"]
    return s


# --- summaries -----------------------------------------------------------------------------


def summarise(runs, counts):
    """{(target, mode): medians over the rounds}. `counts(rs)` adds the error fields,
    which each load generator reports its own way."""
    groups = {}
    for r in runs:
        groups.setdefault((r["target"], r["mode"]), []).append(r)
    out = {}
    for key, rs in groups.items():
        rps = [r["rps"] for r in rs]
        s = {
            "n": len(rs),
            "rps": med(rps),
            "rps_spread": (max(rps) - min(rps)) / med(rps) if med(rps) else 0,
            "p50_us": med([r["p50_us"] for r in rs]),
            "p99_us": med([r["p99_us"] for r in rs]),
            "origin_cpu": med([r["origin_cpu_us_per_req"] for r in rs]),
            **counts(rs),
            "requests": sum(r["requests"] for r in rs),
        }
        if "cpu_us_per_req" in rs[0]:
            s["cpu"] = med([r["cpu_us_per_req"] for r in rs])
            s["hwm_mib"] = max(r["hwm_kib"] for r in rs) / 1024
        out[key] = s
    return out


def print_header(d, runs):
    """meta.txt and the load averages, in a code block."""
    meta = (d / "meta.txt").read_text().strip() if (d / "meta.txt").exists() else ""
    loads = [r["load1"] for r in runs]
    print("```")
    print(meta)
    if loads:
        print(f"1-min load average at run starts: min {min(loads):.2f}, median "
              f"{statistics.median(loads):.2f}, max {max(loads):.2f}")
    print("```")
    print()


class Goals:
    """The goal checks, as `- MET: ...` / `- MISSED: ...` lines."""

    def __init__(self):
        self.lines = []

    def check(self, ok, text):
        self.lines.append(f"- {'MET' if ok else 'MISSED'}: {text}")

    def __str__(self):
        return "\n".join(self.lines)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "progress":
        sys.exit(__doc__)
    print(progress(json.loads(sys.argv[2])))
