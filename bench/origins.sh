#!/usr/bin/env bash
# One process, many origins: first contact with ORIGINS distinct origins
# (http://127.X.Y.Z:PORT/, each new), every one needing its robots.txt fetched, through
# a release robots-guard and then through tinyproxy, with the same driver.
#
#   bash bench/origins.sh
#   ORIGINS=20000 bash bench/origins.sh                 # quick check
#   ORIGINS=150000 CAPACITY=100000 bash bench/origins.sh   # past the cache cap
#
# Measures the rate of new origins per second, the proxy's peak RSS (VmHWM) and its RSS
# sampled against the origins visited (series CSV), so the plateau once the robots.txt
# cache is full shows. The proxy runs alone on CPU 1; the driver (examples/origins.rs,
# which also serves the origins, one listener on 0.0.0.0 for all of 127.0.0.0/8) on
# CPU 0 (PIN=1).
#
# Knobs [defaults]: ORIGINS [100000] CAPACITY [100000]: robots.cache_capacity
#   CONCURRENCY [64] TARGETS ["robots-guard tinyproxy"] PIN [1] BUILD [1]
#   OUT [bench/results/origins-<stamp>]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ORIGINS=${ORIGINS:-100000}
CAPACITY=${CAPACITY:-100000}
CONCURRENCY=${CONCURRENCY:-64}
TARGETS=${TARGETS:-"robots-guard tinyproxy"}
PIN=${PIN:-1}
BUILD=${BUILD:-1}
INSTALL=${INSTALL:-0}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"

if [[ $BUILD == 1 ]]; then
    log "building robots-guard and the origins driver (release)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release --quiet \
        --bin robots-guard --example origins)
fi

WORK=$(mktemp -d /tmp/rg-origins.XXXXXX)
chmod 755 "$WORK"
PIDS=()
trap cleanup EXIT
trap 'exit 130' INT TERM
cp "$TARGET_DIR/release/robots-guard" "$TARGET_DIR/release/examples/origins" "$WORK/"

# The driver's client connections and tinyproxy's per-request ones.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

# taskset execs the command, so $! is the server's own pid (a shell function would
# put a subshell in between).
PROXY_CPU=() LOAD_CPU=()
if [[ $PIN == 1 ]]; then PROXY_CPU=(taskset -c 1) LOAD_CPU=(taskset -c 0); fi

OUT=${OUT:-$ROOT/bench/results/origins-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
status=0
for target in $TARGETS; do
    PORT=$(free_port)
    case $target in
    robots-guard)
        ADMIN_PORT=$(free_port)
        fill "$ROOT/bench/origins.toml" "$WORK/config.toml" PORT="$PORT" \
            ADMIN_PORT="$ADMIN_PORT" DIR="$WORK" CAPACITY="$CAPACITY"
        "${PROXY_CPU[@]}" "$WORK/robots-guard" serve --config "$WORK/config.toml" 2>"$WORK/proxy.log" &
        ;;
    tinyproxy)
        need tinyproxy:tinyproxy
        fill "$ROOT/bench/tinyproxy.conf" "$WORK/tinyproxy.conf" DIR="$WORK" PORT="$PORT"
        "${PROXY_CPU[@]}" tinyproxy -d -c "$WORK/tinyproxy.conf" 2>"$WORK/proxy.log" &
        ;;
    *) die "unknown target $target" ;;
    esac
    TPID=$!
    PIDS+=("$TPID")
    wait_port "$PORT" || { cat "$WORK/proxy.log" >&2; die "$target did not start"; }
    log "$target (pid $TPID) on 127.0.0.1:$PORT: $ORIGINS new origins at $CONCURRENCY connections"
    "${LOAD_CPU[@]}" "$WORK/origins" --proxy "127.0.0.1:$PORT" --pid "$TPID" --origins "$ORIGINS" \
        --concurrency "$CONCURRENCY" --series "$OUT/$target-rss.csv" \
        | tee "$OUT/$target.txt" || status=$?
    if [[ $target == robots-guard ]]; then
        curl -fs "http://127.0.0.1:$ADMIN_PORT/metrics" >"$OUT/$target-metrics.txt" || true
        grep -E '^robots_guard_(robots_cache_entries|paced_hosts|upstream_idle_connections|robots_fetches_total)' \
            "$OUT/$target-metrics.txt" | tee -a "$OUT/$target.txt" || true
    fi
    kill -0 "$TPID" 2>/dev/null || { log "$target died"; status=1; }
    cp "$WORK/proxy.log" "$OUT/$target.log"
    stop_pid "$TPID"
done
{
    echo "origins  $ORIGINS, robots.cache_capacity $CAPACITY, concurrency $CONCURRENCY, pinned $PIN"
    echo "machine  $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo "date     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
} | tee "$OUT/machine.txt"
log "results in $OUT"
exit "$status"
