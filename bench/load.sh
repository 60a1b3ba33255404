#!/usr/bin/env bash
# Plain-HTTP forward-proxy load benchmark: robots-guard against Squid, tinyproxy and
# Privoxy, with nginx as a loopback origin and wrk as the load generator.
#
#   bash bench/load.sh                              # full run (3 rounds x 10 s, ~7 min; ~8 with a baseline)
#   ROUNDS=1 DURATION=3 bash bench/load.sh          # quick check
#   RG_BASELINE_BIN=/path/to/old/robots-guard bash bench/load.sh   # A/B against a baseline
#
# Measures, for every target (direct to nginx, then through each proxy) and both
# connection modes (keep-alive; a new connection per request via "Connection: close"):
# req/s, p50/p99 latency, the proxy's CPU time per request (utime+stime of its processes
# over the measured run / requests), the share of its core it kept busy, and its peak RSS
# (VmHWM). The summary adds the ratios (robots-guard / Privoxy, p99 over direct, CPU per
# request vs the baseline) and checks the goals.
#
# The rig (PIN=1): the proxy under test, robots-guard (proxy.workers = 1) or a peer, runs
# alone on CPU 1; nginx and wrk share CPU 0. Rounds are interleaved (round 1: every mode x
# target, round 2: again, ...; even rounds in reverse order) and each run starts a fresh
# proxy, so slow drifts hit every target alike; the summary takes medians.
#
# Every server listens on 127.0.0.1 on a free port, runs in the foreground from its own
# config in a temp dir and is stopped on exit. Raw output and summary.md go to
# bench/results/<stamp>/ (git-ignored). Missing tools are apt-get installed.
#
# Knobs [defaults]: ROUNDS [3] DURATION [10] s measured, WARMUP [2] s before each
#   CONNS [32]  PIN [1] (0: no pinning)  WRK_THREADS [1 pinned, else 2]
#   TARGETS ["direct robots-guard squid tinyproxy privoxy"] (also: robots-guard-info,
#     robots-guard-baseline, which RG_BASELINE_BIN adds after robots-guard)
#   MODES ["keepalive close"]  BUILD [1]: cargo build --release first
#   RG_BIN [${CARGO_TARGET_DIR:-target}/release/robots-guard]  RG_BASELINE_BIN [unset]
#   INSTALL [1]: apt-get install missing tools
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-10} WARMUP=${WARMUP:-2} CONNS=${CONNS:-32}
PIN=${PIN:-1}
if [[ $PIN == 1 ]]; then WRK_THREADS=${WRK_THREADS:-1}; else WRK_THREADS=${WRK_THREADS:-2}; fi
TARGETS=${TARGETS:-"direct robots-guard squid tinyproxy privoxy"}
MODES=${MODES:-"keepalive close"}
BUILD=${BUILD:-1} INSTALL=${INSTALL:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
RG_BIN=${RG_BIN:-$TARGET_DIR/release/robots-guard}
RG_BASELINE_BIN=${RG_BASELINE_BIN:-}

# shellcheck source=bench/common.sh
source "$BENCH/common.sh"
export PATH=$PATH:/usr/sbin:/sbin
need nginx:nginx wrk:wrk squid:squid-openssl tinyproxy:tinyproxy privoxy:privoxy \
    curl:curl taskset:util-linux python3:python3
setup ""

# --- origin: nginx on CPU 0 ------------------------------------------------------------
ORIGIN_PORT=$(free_port)
ODIR=$WORK/origin
mkdir -p "$ODIR/www" "$ODIR/tmp"
origin_site "$ODIR/www"
fill "$BENCH/nginx.conf" "$ODIR/nginx.conf" DIR="$ODIR" PORT="$ORIGIN_PORT"
"${LOAD_CPU[@]}" nginx -p "$ODIR" -c "$ODIR/nginx.conf" 2>"$ODIR/stderr" &
ORIGIN_PID=$!
PIDS+=("$ORIGIN_PID")
wait_port "$ORIGIN_PORT" || die "nginx did not start: $(cat "$ODIR/stderr" "$ODIR/nginx-error.log" 2>/dev/null)"
ORIGIN_URL=http://127.0.0.1:$ORIGIN_PORT/page
log "origin nginx on $ORIGIN_URL (pid $ORIGIN_PID)"

{
    machine_meta
    echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //'); wrk: $(wrk -v 2>&1 | head -1 | awk '{print $2}') with $WRK_THREADS thread(s)"
    echo "squid: $(squid -v | head -1 | sed 's/^Squid Cache: //'); tinyproxy: $(tinyproxy -v 2>&1 | head -1); privoxy: $(privoxy --version | head -1 | sed 's/ (.*//')"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt" >&2

# --- targets: each proxy on CPU 1 -------------------------------------------------------
# start_target NAME: starts a fresh instance; sets TPID (the origin's for direct), TPORT.
start_target() {
    local name=$1 dir=$WORK/$1
    fresh_dir "$name"
    TPORT=$(free_port)
    case $name in
    direct) TPID=$ORIGIN_PID TPORT=''; return 0 ;;
    robots-guard*)
        fill "$BENCH/robots-guard.toml" "$dir/config.toml" DIR="$dir" PORT="$TPORT" \
            ADMIN_PORT="$(free_port)" LEVEL="$([[ $name == robots-guard-info ]] && echo info || echo warn)"
        "${PROXY_CPU[@]}" "$(rg_bin "$name")" serve --config "$dir/config.toml" 2>"$dir/stderr" &
        ;;
    squid)
        fill "$BENCH/squid.conf" "$dir/squid.conf" DIR="$dir" PORT="$TPORT"
        "${PROXY_CPU[@]}" squid -N -f "$dir/squid.conf" >"$dir/stdout" 2>"$dir/stderr" &
        ;;
    tinyproxy)
        fill "$BENCH/tinyproxy.conf" "$dir/tinyproxy.conf" DIR="$dir" PORT="$TPORT"
        "${PROXY_CPU[@]}" tinyproxy -d -c "$dir/tinyproxy.conf" >"$dir/stdout" 2>"$dir/stderr" &
        ;;
    privoxy)
        fill "$BENCH/privoxy.conf" "$dir/privoxy.conf" DIR="$dir" PORT="$TPORT"
        "${PROXY_CPU[@]}" privoxy --no-daemon "$dir/privoxy.conf" >"$dir/stdout" 2>"$dir/stderr" &
        ;;
    *) die "unknown target $name" ;;
    esac
    started "$name"
}

# run_load NAME MODE SECONDS FILE: wrk on CPU 0 (absolute-form requests via a proxy).
run_load() {
    local name=$1 mode=$2 secs=$3 file=$4 url=$ORIGIN_URL envs=(TARGET_URL= TARGET_HOST=)
    if [[ $name != direct ]]; then
        url=http://127.0.0.1:$TPORT/
        envs=(TARGET_URL="$ORIGIN_URL" TARGET_HOST="127.0.0.1:$ORIGIN_PORT")
    fi
    [[ $mode == close ]] && envs+=(CONN_CLOSE=1)
    env "${envs[@]}" "${LOAD_CPU[@]}" wrk -t"$WRK_THREADS" -c"$CONNS" -d"${secs}s" --timeout 10s \
        --latency -s "$BENCH/wrk-proxy.lua" "$url" >"$file" 2>&1
}

skip_run() { false; }

rounds wrk
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
python3 "$BENCH/summarise.py" "$OUT" | tee "$OUT/summary.md"
log "raw results in $OUT"
