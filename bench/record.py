#!/usr/bin/env python3
"""One measured run of bench/load.sh or bench/https-load.sh as a JSON line.

    record.py wrk|oha TARGET MODE ROUND LOAD1 RAW BEFORE AFTER
    record.py progress RECORD_JSON      # the one-line log of a record

RAW is wrk's output (with the line bench/wrk-proxy.lua prints after `RESULT `) or oha's
`--output-format json` output. BEFORE/AFTER are procstat.py samples of the proxy's
process tree around the run; from them come the proxy's CPU time per request, the share
of one core it kept busy, and its peak RSS (not for direct, where the sample is nginx's).

wrk counts a "read error" when a server closes a connection it did not announce as
closing (tinyproxy does that); the response was complete, so these are reconnects, not
errors. oha's requests cut off at the deadline are not errors either.
"""
import json
import sys


def wrk(path):
    line = next(l for l in open(path) if l.startswith("RESULT "))
    r = json.loads(line[7:])
    errors = {k[4:]: v for k, v in r.items() if k.startswith("err_") and v and k != "err_read"}
    return {
        "requests": r["requests"],
        "seconds": r["duration_us"] / 1e6,
        "p50_us": r["p50_us"],
        "p99_us": r["p99_us"],
        "errors": sum(errors.values()),
        "reconnects": r["err_read"],
    }


def oha(path):
    r = json.load(open(path))
    codes = r.get("statusCodeDistribution") or {}
    errors = {
        k: v for k, v in (r.get("errorDistribution") or {}).items()
        if "aborted due to deadline" not in k
    }
    pct = r["latencyPercentiles"]
    return {
        "requests": sum(codes.values()),
        "seconds": r["summary"]["total"],
        "p50_us": round(pct["p50"] * 1e6),
        "p99_us": round(pct["p99"] * 1e6),
        "errors": sum(errors.values()) + sum(v for k, v in codes.items() if k != "200"),
        "error_kinds": list(errors)[:3] + [f"status {k}" for k in codes if k != "200"],
    }


def record(kind, name, mode, rnd, load, raw, before, after):
    rec = {"kind": {"wrk": "plain", "oha": "https"}[kind], "target": name, "mode": mode,
           "round": int(rnd), "load1": float(load)}
    rec.update({"wrk": wrk, "oha": oha}[kind](raw))
    if not rec["requests"]:
        sys.exit(f"no responses in {raw}")
    rec["rps"] = rec["requests"] / rec["seconds"]
    if name != "direct":
        b, a = json.loads(before), json.loads(after)
        cpu = a["cpu_s"] - b["cpu_s"]
        rec["cpu_us_per_req"] = cpu * 1e6 / rec["requests"]
        rec["busy"] = cpu / rec["seconds"]
        rec["hwm_kib"] = a["hwm_kib"]
        rec["threads"] = a["threads"]
    return rec


def progress(r):
    s = "%.0f req/s p50 %d us p99 %d us" % (r["rps"], r["p50_us"], r["p99_us"])
    if "cpu_us_per_req" in r:
        s += " cpu %.1f us/req (%.0f%% busy) rss %.1f MiB" % (
            r["cpu_us_per_req"], r["busy"] * 100, r["hwm_kib"] / 1024)
    if r["errors"]:
        s += " ERRORS %d %s" % (r["errors"], r.get("error_kinds", ""))
    return s


if __name__ == "__main__":
    if sys.argv[1:2] == ["progress"]:
        print(progress(json.loads(sys.argv[2])))
    elif len(sys.argv) == 9 and sys.argv[1] in ("wrk", "oha"):
        print(json.dumps(record(*sys.argv[1:])))
    else:
        sys.exit(__doc__)
