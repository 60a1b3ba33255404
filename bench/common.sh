# Helpers shared by bench/load.sh and bench/https-load.sh (sourced, not run).
# The caller sets WORK (a temp dir removed on exit) and PIDS (servers to stop).

log() { printf '[%(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

# stop_pid PID: TERM, wait up to 5 s, then KILL.
stop_pid() {
    local pid=$1
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# Stops every server the script started and removes its temp dir.
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do stop_pid "$pid"; done
    rm -rf "$WORK"
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# fill TEMPLATE DEST key=value...: copy TEMPLATE with each @key@ replaced.
fill() {
    local template=$1 dest=$2
    shift 2
    local expr=()
    for kv in "$@"; do expr+=(-e "s|@${kv%%=*}@|${kv#*=}|g"); done
    sed "${expr[@]}" "$template" >"$dest"
}

# wait_port PORT [TENTHS]: until something listens on 127.0.0.1:PORT (default 10 s).
wait_port() {
    local port=$1 tries=${2:-100}
    for _ in $(seq "$tries"); do
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}
