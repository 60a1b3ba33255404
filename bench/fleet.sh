#!/usr/bin/env bash
# Fleet mode against a process alone: req/s, CPU per request and store round trips
# per request, for one hot host (delay 0) and for 1,000 hosts.
#
#   bench/fleet.sh                 # release binary of CARGO_TARGET_DIR (or target/)
#   RG_BIN=path/to/robots-guard DURATION=5 bench/fleet.sh
#
# Setups: "alone" is one robots-guard with in-process state; "fleet2" is two
# robots-guard processes sharing one redis-server ([fleet] store), the load split
# evenly between them. The proxies and redis-server run on CPU 1, nginx (the origin) and
# wrk on CPU 0 (PIN=0 runs unpinned), so both setups have the same one core to spend.
#
# Figures per run: req/s (all wrk runs together); CPU µs per request of the proxies and
# of redis-server (utime+stime from /proc/PID/stat over the measured run); store
# commands per request: the commands clients sent (INFO commandstats, less the commands
# the scripts run inside and INFO itself), each one round trip unless pipelined, and
# EVALSHA per request. About 1 minute with the defaults (4 runs of WARMUP + DURATION).
#
# The origin listens on 127.0.0.1 and 127.0.1.1 ... 127.0.4.250 (1,000 loopback
# addresses, each a host of its own to the proxy), all on one port.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BENCH=$ROOT/bench
# shellcheck source=bench/common.sh
source "$BENCH/common.sh"

TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
RG_BIN=${RG_BIN:-$TARGET_DIR/release/robots-guard}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-3}
CONNS=${CONNS:-32}
HOST_COUNTS=${HOST_COUNTS:-"1 1000"}
SETUPS=${SETUPS:-"alone fleet2"}
PIN=${PIN:-1}
INSTALL=${INSTALL:-1}

need nginx:nginx wrk:wrk redis-server:redis-server taskset:util-linux
[[ -x $RG_BIN ]] || die "no robots-guard binary at $RG_BIN (cargo build --release, or set RG_BIN)"

WORK=$(mktemp -d /tmp/rg-fleet-bench.XXXXXX)
chmod 755 "$WORK"
PIDS=()
trap cleanup EXIT
trap 'exit 130' INT TERM
PROXY_CPU=() LOAD_CPU=()
if [[ $PIN == 1 ]]; then
    (($(nproc) >= 2)) || die "PIN=1 needs 2 CPUs (PIN=0 runs unpinned)"
    PROXY_CPU=(taskset -c 1) LOAD_CPU=(taskset -c 0)
fi
TICK=$(getconf CLK_TCK)

host_of() { # the i-th host (0-based) of the wrk script's cycle
    local i=$1
    echo "127.0.$((1 + i / 250)).$((1 + i % 250))"
}

# The origin: nginx serving a 612-byte /page and an allowing robots.txt.
start_origin() {
    local dir=$WORK/nginx
    mkdir -p "$dir/www" "$dir/tmp"
    origin_site "$dir/www"
    ORIGIN_PORT=$(free_port)
    {
        echo "daemon off; master_process on; worker_processes 1; pid $dir/nginx.pid;"
        echo "error_log $dir/error.log error; worker_rlimit_nofile 65536;"
        echo "events { worker_connections 16384; multi_accept on; }"
        echo "http { access_log off; server_tokens off; sendfile on; tcp_nodelay on;"
        echo "  keepalive_requests 10000000; default_type text/html;"
        for p in body proxy fastcgi uwsgi scgi; do echo "  ${p}_temp_path $dir/tmp/$p;" | sed 's/^  body_/  client_body_/'; done
        echo "  server {"
        echo "    listen 127.0.0.1:$ORIGIN_PORT backlog=4096;"
        for ((i = 0; i < 1000; i++)); do echo "    listen $(host_of "$i"):$ORIGIN_PORT;"; done
        echo "    root $dir/www; location / { }"
        echo "  }"
        echo "}"
    } >"$dir/nginx.conf"
    "${LOAD_CPU[@]}" nginx -p "$dir" -c "$dir/nginx.conf" &
    PIDS+=($!)
    wait_port "$ORIGIN_PORT" || die "nginx did not start"
}

start_redis() {
    REDIS_PORT=$(free_port)
    "${PROXY_CPU[@]}" redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' \
        --appendonly no --loglevel warning >"$WORK/redis.log" 2>&1 &
    REDIS_PID=$!
    PIDS+=("$REDIS_PID")
    wait_port "$REDIS_PORT" || die "redis-server did not start"
}

# start_proxy NAME [STORE_URL]: a robots-guard on a port of its own; sets PROXY_PORT, PROXY_PID.
start_proxy() {
    local name=$1 store=${2:-}
    PROXY_PORT=$(free_port)
    local admin
    admin=$(free_port)
    {
        echo "[proxy]"
        echo "listen = \"127.0.0.1:$PROXY_PORT\""
        echo "allow_clients = [\"127.0.0.0/8\"]"
        echo "workers = 1"
        echo "[identity]"
        echo "user_agent = \"pass\""
        echo "from = \"pass\""
        echo "[rate_limit]"
        echo "default_delay = \"0s\""
        echo "max_per_host = 100000"
        echo "max_wait = \"60s\""
        echo "[robots]"
        echo "cache_capacity = 4096"
        echo "[tls]"
        echo "mode = \"tunnel\""
        echo "[admin]"
        echo "listen = \"127.0.0.1:$admin\""
        echo "[log]"
        echo "level = \"warn\""
        if [[ -n $store ]]; then
            echo "[fleet]"
            echo "store = \"$store\""
        fi
    } >"$WORK/$name.toml"
    "${PROXY_CPU[@]}" "$RG_BIN" serve --config "$WORK/$name.toml" >"$WORK/$name.log" 2>&1 &
    PROXY_PID=$!
    PIDS+=("$PROXY_PID")
    wait_port "$PROXY_PORT" || die "robots-guard $name did not start (see $WORK/$name.log)"
}

cpu_ticks() { # utime + stime of each pid, summed
    local total=0 pid
    for pid in "$@"; do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}

# store_commands: "CLIENT_COMMANDS EVALSHA" from INFO commandstats.
store_commands() {
    [[ -n ${REDIS_PORT:-} ]] || { echo "0 0"; return; }
    redis-cli -p "$REDIS_PORT" info commandstats | tr -d '\r' | awk -F'[:=,]' '
        /^cmdstat_/ {
            name = substr($1, 9); calls = $3
            if (name == "evalsha") ev += calls
            if (name !~ /^(time|zrem|zremrangebyscore|hmget|hset|hget|zcard|zrange|zadd|pexpire|pttl|hgetall|set|get|del|info)$/) all += calls
        }
        END { printf "%d %d\n", all, ev }'
}

# load SECONDS HOSTS PORT...: one wrk per proxy port, side by side; prints total requests.
load() {
    local seconds=$1 hosts=$2
    shift 2
    local n=$# i=0 port files=() jobs=()
    for port in "$@"; do
        local f=$WORK/wrk-$i.out
        files+=("$f")
        ORIGIN_PORT=$ORIGIN_PORT HOSTS=$hosts OFFSET=$((i * 500)) "${LOAD_CPU[@]}" \
            wrk -t1 -c$((CONNS / n)) -d"${seconds}s" -s "$BENCH/wrk-fleet.lua" \
            "http://127.0.0.1:$port/" >"$f" 2>&1 &
        jobs+=($!)
        i=$((i + 1))
    done
    local job
    for job in "${jobs[@]}"; do wait "$job" || true; done
    local total=0 errors=0 f
    for f in "${files[@]}"; do
        local line
        line=$(sed -n 's/^RESULT //p' "$f")
        [[ -n $line ]] || die "wrk failed: $(cat "$f")"
        total=$((total + $(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["requests"])' "$line")))
        errors=$((errors + $(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); print(d["err_connect"]+d["err_read"]+d["err_write"]+d["err_status"]+d["err_timeout"])' "$line")))
    done
    ((errors == 0)) || log "note: $errors wrk errors (non-2xx answers count here)"
    echo "$total"
}

run() { # run SETUP HOSTS: prints one result line
    local setup=$1 hosts=$2 ports=() proxies=()
    REDIS_PORT='' REDIS_PID=''
    local before_pids=("${PIDS[@]}")
    case $setup in
        alone)
            start_proxy alone
            ports+=("$PROXY_PORT") proxies+=("$PROXY_PID")
            ;;
        fleet2)
            start_redis
            for m in a b; do
                start_proxy "fleet-$m" "redis://127.0.0.1:$REDIS_PORT/0"
                ports+=("$PROXY_PORT") proxies+=("$PROXY_PID")
            done
            ;;
    esac
    # Warm-up: robots.txt fetched for every host, connections made.
    load "$WARMUP" "$hosts" "${ports[@]}" >/dev/null
    local p0 r0 c0 e0
    p0=$(cpu_ticks "${proxies[@]}")
    r0=$([[ -n $REDIS_PID ]] && cpu_ticks "$REDIS_PID" || echo 0)
    read -r c0 e0 < <(store_commands)
    local requests
    requests=$(load "$DURATION" "$hosts" "${ports[@]}")
    local p1 r1 c1 e1
    p1=$(cpu_ticks "${proxies[@]}")
    r1=$([[ -n $REDIS_PID ]] && cpu_ticks "$REDIS_PID" || echo 0)
    read -r c1 e1 < <(store_commands)
    python3 - "$setup" "$hosts" "$requests" "$DURATION" "$TICK" \
        "$((p1 - p0))" "$((r1 - r0))" "$((c1 - c0))" "$((e1 - e0))" <<'PY'
import sys
setup, hosts, requests, seconds, tick, pt, rt, cmds, ev = sys.argv[1:]
requests, seconds, tick = int(requests), float(seconds), int(tick)
per = lambda ticks: int(ticks) * 1e6 / tick / max(requests, 1)
print(f"{setup:<8} {hosts:>6} {requests / seconds:>10.0f} {per(pt):>14.1f} {per(rt):>13.1f} "
      f"{int(cmds) / max(requests, 1):>11.3f} {int(ev) / max(requests, 1):>12.3f}")
PY
    # Stop this run's servers.
    local pid
    for pid in "${proxies[@]}" ${REDIS_PID:+"$REDIS_PID"}; do stop_pid "$pid"; done
    PIDS=("${before_pids[@]}")
}

start_origin
log "robots-guard $("$RG_BIN" --version); $(redis-server --version | cut -d' ' -f1-3);" \
    "pinning: $([[ $PIN == 1 ]] && echo 'proxies+redis CPU 1, nginx+wrk CPU 0' || echo none)"
log "each run: ${WARMUP}s warm-up, ${DURATION}s measured, $CONNS connections in all"
printf '%-8s %6s %10s %14s %13s %11s %12s\n' setup hosts "req/s" "proxy_cpu_us" "redis_cpu_us" \
    "store_cmd/r" "evalsha/req"
for hosts in $HOST_COUNTS; do
    for setup in $SETUPS; do
        run "$setup" "$hosts"
    done
done
