#!/usr/bin/env bash
# Soak: 100,000 requests over 1,000 origins at 200 concurrent keep-alive connections
# through a release robots-guard, checking that every request gets exactly one correct
# answer, every origin's robots.txt is fetched exactly once, and the proxy's memory
# stays bounded. Loopback only; stops by itself (a few minutes at most).
#
#   bash bench/soak.sh
#   REQUESTS=10000 ORIGINS=100 bash bench/soak.sh      # quick check
#
# The origins live in the driver (examples/soak.rs), one listener per origin on
# 127.1.X.Y:ORIGIN_PORT. The driver prints the figures and exits non-zero if a check
# fails; the output is also saved to bench/results/soak-<stamp>/.
#
# Knobs [defaults]: REQUESTS [100000] ORIGINS [1000] CONCURRENCY [200]
#   PORT [free port] ORIGIN_PORT [18080] BUILD [1]: cargo build --release first
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REQUESTS=${REQUESTS:-100000}
ORIGINS=${ORIGINS:-1000}
CONCURRENCY=${CONCURRENCY:-200}
ORIGIN_PORT=${ORIGIN_PORT:-18080}
BUILD=${BUILD:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}

# shellcheck source=bench/common.sh
source "$ROOT/bench/common.sh"

if [[ $BUILD == 1 ]]; then
    log "building robots-guard and the soak driver (release)"
    (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release --quiet \
        --bin robots-guard --example soak)
fi

WORK=$(mktemp -d /tmp/rg-soak.XXXXXX)
PIDS=()
trap cleanup EXIT

# Copies, so a concurrent build in the same target dir cannot swap them mid-run.
cp "$TARGET_DIR/release/robots-guard" "$TARGET_DIR/release/examples/soak" "$WORK/"

# 1,000 origins plus the proxy's upstream connections need more than 1024 descriptors.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"

PORT=${PORT:-$(free_port)}
ADMIN_PORT=$(free_port)
fill "$ROOT/bench/soak.toml" "$WORK/config.toml" PORT="$PORT" ADMIN_PORT="$ADMIN_PORT" DIR="$WORK"

"$WORK/robots-guard" serve --config "$WORK/config.toml" 2> "$WORK/proxy.log" &
PROXY_PID=$!
PIDS+=("$PROXY_PID")
for _ in $(seq 100); do
    curl -fs "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "http://127.0.0.1:$ADMIN_PORT/healthz" >/dev/null || {
    cat "$WORK/proxy.log" >&2
    die "the proxy did not start"
}
log "proxy pid $PROXY_PID on 127.0.0.1:$PORT"

OUT=$ROOT/bench/results/soak-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
status=0
"$WORK/soak" --proxy "127.0.0.1:$PORT" --pid "$PROXY_PID" --requests "$REQUESTS" \
    --origins "$ORIGINS" --concurrency "$CONCURRENCY" --origin-port "$ORIGIN_PORT" \
    | tee "$OUT/summary.txt" || status=$?
curl -fs "http://127.0.0.1:$ADMIN_PORT/metrics" > "$OUT/metrics.txt" || true
kill -0 "$PROXY_PID" 2>/dev/null || { log "the proxy died"; status=1; }
cp "$WORK/proxy.log" "$OUT/proxy.log"
{
    echo "machine  $(nproc) vCPU, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo "date     $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "loadavg  $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee -a "$OUT/summary.txt"
log "results in $OUT"
exit "$status"
