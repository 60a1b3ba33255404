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
mapfile -t need_install < <(missing nginx:nginx wrk:wrk squid:squid tinyproxy:tinyproxy \
    privoxy:privoxy curl:curl taskset:util-linux python3:python3)
((${#need_install[@]} == 0)) || apt_install "${need_install[@]}"
export PATH=$PATH:/usr/sbin:/sbin
# Debian's postinst scripts may start system instances; ours use their own ports, so
# those are left alone.

build_robots_guard

# --- work dirs, cleanup ---------------------------------------------------------------
start_run "" rg-loadbench


# --- origin ----------------------------------------------------------------------------
ORIGIN_PORT=$(free_port)
ODIR=$WORK/origin
mkdir -p "$ODIR/www" "$ODIR/tmp"
origin_site "$ODIR/www"
fill "$BENCH/nginx.conf" "$ODIR/nginx.conf" DIR="$ODIR" PORT="$ORIGIN_PORT"
"${PIN0[@]}" nginx -p "$ODIR" -c "$ODIR/nginx.conf" 2>"$ODIR/stderr" &
ORIGIN_PID=$!
PIDS+=("$ORIGIN_PID")
wait_port "$ORIGIN_PORT" || die "nginx did not start: $(cat "$ODIR/stderr" "$ODIR/nginx-error.log" 2>/dev/null)"
ORIGIN_URL=http://127.0.0.1:$ORIGIN_PORT/page
log "origin nginx on $ORIGIN_URL (pid $ORIGIN_PID)"

# --- machine and versions --------------------------------------------------------------
{
    machine_meta
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
    fresh_dir "$name"
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
            line=$(python3 "$BENCH/wrk-record.py" "$name" "$mode" "$round" "$load" "$result" \
                "$before" "$after" "$obefore" "$oafter")
            echo "$line" >>"$RUNS"
            stop_target "$name"
            log "[$n/$total] round $round $mode $name: $(python3 "$BENCH/benchlib.py" progress "$line") (load $load)"
        done
    done
done
rm -f "$OUT/warmup.txt"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"

python3 "$BENCH/summarise.py" "$OUT" | tee "$OUT/summary.md"
log "raw results in $OUT"
