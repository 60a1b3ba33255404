#!/usr/bin/env python3
"""One measured run of bench/load.sh as a JSON line.

    wrk-record.py TARGET MODE ROUND LOAD1 RESULT_JSON BEFORE AFTER ORIGIN_BEFORE ORIGIN_AFTER

RESULT_JSON is the line bench/wrk-proxy.lua prints after `RESULT `; BEFORE/AFTER are
procstat.py samples of the proxy's process tree (for direct, the origin's), ORIGIN_*
those of nginx.
"""
import json
import sys

from benchlib import add_cpu

name, mode, rnd, load, result = sys.argv[1:6]
res = json.loads(result)
rec = {
    "target": name,
    "mode": mode,
    "round": int(rnd),
    "load1": float(load),
    "rps": res["requests"] / (res["duration_us"] / 1e6),
    "p50_us": res["p50_us"],
    "p99_us": res["p99_us"],
    "max_us": res["max_us"],
    "requests": res["requests"],
    "errors": {k[4:]: v for k, v in res.items() if k.startswith("err_") and v},
}
print(json.dumps(add_cpu(rec, name, sys.argv[6:10], res["requests"])))
