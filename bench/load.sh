#!/usr/bin/env bash
# Plain-HTTP forward-proxy load benchmark: robots-guard against Squid, tinyproxy and
# Privoxy, with nginx as a loopback origin and wrk as the load generator.
#
#   bash bench/load.sh                 # full run (3 rounds x 10 s, ~10 minutes)
#   ROUNDS=1 DURATION=3 bash bench/load.sh   # quick check
#
# For every target (direct to nginx, then through each proxy) and both connection
# modes (keep-alive; a new connection per request via "Connection: close") it reports
# requests/s, p50/p99 latency, the proxy's CPU time per request and its peak RSS.
# Rounds are interleaved (round 1: every mode x target, round 2: again, ...) so slow
# drifts in machine load hit every target alike; the summary takes medians.
#
# Every server listens on 127.0.0.1 on a free port, runs in the foreground from its own
# config in a temp dir and is stopped on exit. Raw output goes to bench/results/<stamp>/
# (git-ignored); the summary table is printed at the end and saved as summary.md there.
#
# Environment knobs (defaults in brackets):
#   ROUNDS [3]  DURATION [10] seconds per measured run  WARMUP [2] seconds before each
#   CONNS [32]  PIN [1]: proxy and origin on CPU 0, wrk on CPU 1 (0: no pinning)
#   WRK_THREADS [1 when pinned, else 2]
#   TARGETS ["direct robots-guard squid tinyproxy privoxy robots-guard-info"]
#   MODES ["keepalive close"]   BUILD [1]: cargo build --release first
#   RG_BIN [$CARGO_TARGET_DIR or ./target]/release/robots-guard
#   INSTALL [1]: apt-get install the peers when missing
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-32}
PIN=${PIN:-1}
if [[ $PIN == 1 ]]; then WRK_THREADS=${WRK_THREADS:-1}; else WRK_THREADS=${WRK_THREADS:-2}; fi
TARGETS=${TARGETS:-"direct robots-guard squid tinyproxy privoxy robots-guard-info"}
MODES=${MODES:-"keepalive close"}
BUILD=${BUILD:-1}
INSTALL=${INSTALL:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
RG_BIN=${RG_BIN:-$TARGET_DIR/release/robots-guard}

# shellcheck source=bench/common.sh
source "$BENCH/common.sh"

# --- tools --------------------------------------------------------------------------
need_install=()
for pair in nginx:nginx wrk:wrk squid:squid tinyproxy:tinyproxy privoxy:privoxy \
    curl:curl taskset:util-linux python3:python3; do
    cmd=${pair%%:*}
    command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || need_install+=("${pair#*:}")
done
if ((${#need_install[@]})); then
    [[ $INSTALL == 1 ]] || die "missing: ${need_install[*]} (INSTALL=0)"
    log "installing ${need_install[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y "${need_install[@]}" >/dev/null 2>&1 ||
        { apt-get update >/dev/null && apt-get install -y "${need_install[@]}" >/dev/null; }
fi
export PATH=$PATH:/usr/sbin:/sbin
# Debian's postinst scripts may start system instances; ours use their own ports, so
# those are left alone.

case " $TARGETS " in *" robots-guard"*) ;; *) BUILD=0 RG_BIN=true ;; esac
if [[ $BUILD == 1 ]]; then
    log "building robots-guard (release)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release --quiet)
fi
[[ $RG_BIN == true || -x $RG_BIN ]] || die "no robots-guard binary at $RG_BIN (set RG_BIN or BUILD=1)"

# --- work dirs, cleanup ---------------------------------------------------------------
STAMP=$(date +%Y%m%d-%H%M%S)
OUT=$BENCH/results/$STAMP
mkdir -p "$OUT"
WORK=$(mktemp -d /tmp/rg-loadbench.XXXXXX)
chmod 755 "$WORK"
PIDS=()

trap cleanup EXIT
trap 'exit 130' INT TERM

# Prefixes that pin a command (taskset execs it, so $! is the server's own pid).
PIN0=() PIN1=()
if [[ $PIN == 1 ]]; then PIN0=(taskset -c 0) PIN1=(taskset -c 1); fi


# --- origin ----------------------------------------------------------------------------
ORIGIN_PORT=$(free_port)
ODIR=$WORK/origin
mkdir -p "$ODIR/www" "$ODIR/tmp"
# A 612-byte page (the size of nginx's old default index.html) and a robots.txt that
# allows it.
python3 - "$ODIR/www/page" <<'EOF'
import sys
head = "<!DOCTYPE html>\n<html>\n<head><title>loadbench</title></head>\n<body>\n<p>"
tail = "</p>\n</body>\n</html>\n"
body = head + "x" * (612 - len(head) - len(tail)) + tail
assert len(body) == 612
open(sys.argv[1], "w").write(body)
EOF
printf 'User-agent: *\nAllow: /\nDisallow: /private/\n' >"$ODIR/www/robots.txt"
fill "$BENCH/nginx.conf" "$ODIR/nginx.conf" DIR="$ODIR" PORT="$ORIGIN_PORT"
"${PIN0[@]}" nginx -p "$ODIR" -c "$ODIR/nginx.conf" 2>"$ODIR/stderr" &
ORIGIN_PID=$!
PIDS+=("$ORIGIN_PID")
wait_port "$ORIGIN_PORT" || die "nginx did not start: $(cat "$ODIR/stderr" "$ODIR/nginx-error.log" 2>/dev/null)"
ORIGIN_URL=http://127.0.0.1:$ORIGIN_PORT/page
log "origin nginx on $ORIGIN_URL (pid $ORIGIN_PID)"

# --- machine and versions --------------------------------------------------------------
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: nproc=$(nproc), $(lscpu | sed -n 's/^Model name: *//p'), $(free -m | awk '/^Mem:/{print $2}') MiB RAM, kernel $(uname -r)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "robots-guard: $("$RG_BIN" --version) ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
    echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //')"
    echo "wrk: $(wrk -v 2>&1 | head -1 | awk '{print $2}')"
    echo "squid: $(squid -v | head -1 | sed 's/^Squid Cache: //')"
    echo "tinyproxy: $(tinyproxy -v 2>&1 | head -1)"
    echo "privoxy: $(privoxy --version | head -1 | sed 's/ (.*//')"
    echo "method: rounds=$ROUNDS duration=${DURATION}s warmup=${WARMUP}s connections=$CONNS wrk_threads=$WRK_THREADS pin=$PIN"
    echo "targets: $TARGETS"
    echo "modes: $MODES"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt" >&2

# --- targets -----------------------------------------------------------------------------
# start_target NAME: starts a fresh instance, sets TPID and TPORT (empty for direct).
start_target() {
    local name=$1 dir=$WORK/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    chmod 1777 "$dir"
    TPORT=$(free_port)
    case $name in
    direct)
        TPID=$ORIGIN_PID
        TPORT=
        return 0
        ;;
    robots-guard | robots-guard-info)
        local level=warn
        [[ $name == robots-guard-info ]] && level=info
        fill "$BENCH/robots-guard.toml" "$dir/config.toml" DIR="$dir" PORT="$TPORT" \
            ADMIN_PORT="$(free_port)" LEVEL="$level"
        "${PIN0[@]}" "$RG_BIN" serve --config "$dir/config.toml" 2>"$dir/stderr" &
        ;;
    squid)
        fill "$BENCH/squid.conf" "$dir/squid.conf" DIR="$dir" PORT="$TPORT"
        "${PIN0[@]}" squid -N -f "$dir/squid.conf" >"$dir/stdout" 2>"$dir/stderr" &
        ;;
    tinyproxy)
        fill "$BENCH/tinyproxy.conf" "$dir/tinyproxy.conf" DIR="$dir" PORT="$TPORT"
        "${PIN0[@]}" tinyproxy -d -c "$dir/tinyproxy.conf" >"$dir/stdout" 2>"$dir/stderr" &
        ;;
    privoxy)
        fill "$BENCH/privoxy.conf" "$dir/privoxy.conf" DIR="$dir" PORT="$TPORT"
        "${PIN0[@]}" privoxy --no-daemon "$dir/privoxy.conf" >"$dir/stdout" 2>"$dir/stderr" &
        ;;
    *) die "unknown target $name" ;;
    esac
    TPID=$!
    PIDS+=("$TPID")
    if ! wait_port "$TPORT"; then
        tail -5 "$dir"/* >&2 || true
        die "$name did not start"
    fi
    # One request through the proxy: it must answer 200 with the page.
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -A loadbench/1.0 \
        --proxy "http://127.0.0.1:$TPORT" "$ORIGIN_URL" || true)
    [[ $code == 200 ]] || { tail -5 "$dir"/* >&2 || true; die "$name answered $code to a probe"; }
}

stop_target() {
    local name=$1
    [[ $name == direct ]] && return 0
    stop_pid "$TPID"
    local keep=()
    for pid in "${PIDS[@]}"; do [[ $pid == "$TPID" ]] || keep+=("$pid"); done
    PIDS=("${keep[@]}")
    # Keep the proxy's own log lines (errors) with the raw results.
    cp "$WORK/$name/stderr" "$OUT/$name.stderr.last" 2>/dev/null || true
}

# run_wrk NAME MODE SECONDS OUTFILE
run_wrk() {
    local name=$1 mode=$2 secs=$3 outfile=$4
    local url=$ORIGIN_URL envs=(TARGET_URL= TARGET_HOST=)
    if [[ $name != direct ]]; then
        url=http://127.0.0.1:$TPORT/
        envs=(TARGET_URL="$ORIGIN_URL" TARGET_HOST="127.0.0.1:$ORIGIN_PORT")
    fi
    [[ $mode == close ]] && envs+=(CONN_CLOSE=1)
    env "${envs[@]}" "${PIN1[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${secs}s" --timeout 10s --latency \
        -s "$BENCH/wrk-proxy.lua" "$url" >"$outfile" 2>&1
}

# --- rounds ------------------------------------------------------------------------------
RUNS=$OUT/runs.jsonl
: >"$RUNS"
total=$((ROUNDS * $(wc -w <<<"$MODES") * $(wc -w <<<"$TARGETS")))
n=0
for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        for name in $TARGETS; do
            n=$((n + 1))
            load=$(cut -d' ' -f1 /proc/loadavg)
            start_target "$name"
            # Warm up: connection pools, robots.txt cache, allocator.
            run_wrk "$name" "$mode" "$WARMUP" "$OUT/warmup.txt"
            before=$(python3 "$BENCH/procstat.py" "$TPID")
            obefore=$(python3 "$BENCH/procstat.py" "$ORIGIN_PID")
            raw=$OUT/r${round}-${mode}-${name}.txt
            run_wrk "$name" "$mode" "$DURATION" "$raw"
            after=$(python3 "$BENCH/procstat.py" "$TPID")
            oafter=$(python3 "$BENCH/procstat.py" "$ORIGIN_PID")
            result=$(sed -n 's/^RESULT //p' "$raw")
            [[ -n $result ]] || { cat "$raw" >&2; die "no result from wrk for $name $mode"; }
            line=$(python3 - "$name" "$mode" "$round" "$load" "$result" "$before" "$after" \
                "$obefore" "$oafter" <<'EOF'
import json, sys
name, mode, rnd, load = sys.argv[1:5]
res, b, a, ob, oa = (json.loads(x) for x in sys.argv[5:10])
req = max(res["requests"], 1)
rec = {
    "target": name, "mode": mode, "round": int(rnd), "load1": float(load),
    "rps": res["requests"] / (res["duration_us"] / 1e6),
    "p50_us": res["p50_us"], "p99_us": res["p99_us"], "max_us": res["max_us"],
    "requests": res["requests"],
    "errors": {k[4:]: v for k, v in res.items() if k.startswith("err_") and v},
    "origin_cpu_us_per_req": (oa["cpu_s"] - ob["cpu_s"]) * 1e6 / req,
}
if name != "direct":
    rec["cpu_us_per_req"] = (a["cpu_s"] - b["cpu_s"]) * 1e6 / req
    rec["hwm_kib"] = a["hwm_kib"]
    rec["procs"] = a["procs"]
    rec["threads"] = a["threads"]
print(json.dumps(rec))
EOF
            )
            echo "$line" >>"$RUNS"
            stop_target "$name"
            log "[$n/$total] round $round $mode $name: $(python3 -c '
import json,sys; r=json.loads(sys.argv[1])
s="%.0f req/s p50 %d us p99 %d us" % (r["rps"], r["p50_us"], r["p99_us"])
if "cpu_us_per_req" in r: s += " cpu %.1f us/req rss %.1f MiB" % (r["cpu_us_per_req"], r["hwm_kib"]/1024)
if r["errors"]: s += " errors %s" % r["errors"]
print(s)' "$line") (load $load)"
        done
    done
done
rm -f "$OUT/warmup.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"

python3 "$BENCH/summarise.py" "$OUT" | tee "$OUT/summary.md"
log "raw results in $OUT"
