#!/usr/bin/env python3
"""One measured run of bench/https-load.sh as a JSON line.

    https-record.py TARGET MODE ROUND LOAD1 OHA_JSON BEFORE AFTER ORIGIN_BEFORE ORIGIN_AFTER

OHA_JSON is oha's `--output-format json` output; BEFORE/AFTER are procstat.py samples
of the proxy's process tree (for direct, the origin's), ORIGIN_* those of nginx.
Requests/s counts completed responses (any status) over the run's wall time; requests
that oha cut off at the deadline ("aborted due to deadline") are not errors.
"""
import json
import sys

from benchlib import add_cpu

name, mode, rnd, load, path = sys.argv[1:6]
with open(path) as f:
    res = json.load(f)
summary = res["summary"]
codes = {k: v for k, v in (res.get("statusCodeDistribution") or {}).items()}
responses = sum(codes.values())
if not responses:
    sys.exit(f"no responses in {path}")
errors = {
    k: v
    for k, v in (res.get("errorDistribution") or {}).items()
    if "aborted due to deadline" not in k
}
pct = res["latencyPercentiles"]
rec = {
    "target": name,
    "mode": mode,
    "round": int(rnd),
    "load1": float(load),
    "rps": responses / summary["total"],
    "p50_us": round(pct["p50"] * 1e6),
    "p99_us": round(pct["p99"] * 1e6),
    "max_us": round(summary["slowest"] * 1e6),
    "requests": responses,
    "non200": {k: v for k, v in codes.items() if k != "200"},
    "errors": errors,
}
print(json.dumps(add_cpu(rec, name, sys.argv[6:10], responses)))
