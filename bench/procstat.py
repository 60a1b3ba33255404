#!/usr/bin/env python3
"""Process-tree counters for bench/load.sh and bench/https-load.sh.

    procstat.py PID    -> one JSON line for PID and all its descendants:
    {"cpu_s": user+system CPU seconds (including reaped children),
     "hwm_kib": sum of VmHWM (peak RSS), "rss_kib": sum of VmRSS,
     "procs": processes, "threads": threads}

CPU time comes from /proc/PID/stat: utime+stime of every live process of the tree
(each covers all of its threads) plus cutime+cstime (children that already exited and
were waited for), so a worker that exits between two samples is still counted.
"""
import json
import os
import sys

TICK = os.sysconf("SC_CLK_TCK")


def stat(pid):
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = data[data.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state); ppid is field 4, utime 14, stime 15, cutime 16,
    # cstime 17, num_threads 20.
    return {
        "ppid": int(fields[1]),
        "ticks": sum(int(fields[i]) for i in (11, 12, 13, 14)),
        "threads": int(fields[17]),
    }


def status_kib(pid, key):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def tree(root):
    children = {}
    stats = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            s = stat(int(name))
        except (OSError, ValueError):
            continue
        stats[int(name)] = s
        children.setdefault(s["ppid"], []).append(int(name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            out.append(pid)
            todo.extend(children.get(pid, []))
    return out, stats


def sample(root):
    pids, stats = tree(root)
    ticks = hwm = rss = threads = 0
    for pid in pids:
        try:
            hwm += status_kib(pid, "VmHWM")
            rss += status_kib(pid, "VmRSS")
        except OSError:
            continue
        ticks += stats[pid]["ticks"]
        threads += stats[pid]["threads"]
    return {
        "cpu_s": ticks / TICK,
        "hwm_kib": hwm,
        "rss_kib": rss,
        "procs": len(pids),
        "threads": threads,
    }


if __name__ == "__main__":
    print(json.dumps(sample(int(sys.argv[1]))))
