# Helpers shared by bench/load.sh, bench/https-load.sh and bench/soak.sh (sourced, not
# run; soak.sh uses the logging, port, template and cleanup ones).
# The caller sets ROOT, BENCH, TARGETS, BUILD, INSTALL, PIN, TARGET_DIR and RG_BIN;
# start_run sets OUT, WORK (a temp dir removed on exit), PIDS (servers to stop) and the
# PIN0/PIN1 command prefixes.

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

# missing CMD:PACKAGE...: prints the package of each command found neither on PATH nor
# in /usr/sbin.
missing() {
    local pair cmd
    for pair in "$@"; do
        cmd=${pair%%:*}
        command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || echo "${pair#*:}"
    done
}

# apt_install PKG...: installs Debian packages (INSTALL=1), or dies naming them.
apt_install() {
    [[ $INSTALL == 1 ]] || die "missing: $* (INSTALL=0)"
    log "installing $*"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y "$@" >/dev/null 2>&1 ||
        { apt-get update >/dev/null && apt-get install -y "$@" >/dev/null; }
}

# build_robots_guard: cargo build --release when BUILD=1 and a robots-guard target runs
# (else RG_BIN=true), then checks the binary.
build_robots_guard() {
    case " $TARGETS " in *" robots-guard"*) ;; *) BUILD=0 RG_BIN=true ;; esac
    if [[ $BUILD == 1 ]]; then
        log "building robots-guard (release)"
        (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release --quiet)
    fi
    [[ $RG_BIN == true || -x $RG_BIN ]] || die "no robots-guard binary at $RG_BIN (set RG_BIN or BUILD=1)"
}

# start_run RESULTS_PREFIX WORK_PREFIX: OUT=bench/results/<prefix><stamp>, a temp WORK
# dir, an empty PIDS, the exit traps, and PIN0/PIN1: prefixes that pin a command to CPU
# 0 (servers) or 1 (load generator) when PIN=1 (taskset execs it, so $! is the server's
# own pid).
start_run() {
    STAMP=$(date +%Y%m%d-%H%M%S)
    OUT=$BENCH/results/$1$STAMP
    mkdir -p "$OUT"
    WORK=$(mktemp -d "/tmp/$2.XXXXXX")
    chmod 755 "$WORK"
    PIDS=()
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    PIN0=() PIN1=()
    if [[ $PIN == 1 ]]; then PIN0=(taskset -c 0) PIN1=(taskset -c 1); fi
}

# origin_site DIR: the origin's documents in DIR: a 612-byte /page (the size of nginx's
# old default index.html) and a robots.txt that allows it.
origin_site() {
    python3 - "$1/page" <<'PY'
import sys
head = "<!DOCTYPE html>\n<html>\n<head><title>loadbench</title></head>\n<body>\n<p>"
tail = "</p>\n</body>\n</html>\n"
body = head + "x" * (612 - len(head) - len(tail)) + tail
assert len(body) == 612
open(sys.argv[1], "w").write(body)
PY
    printf 'User-agent: *\nAllow: /\nDisallow: /private/\n' >"$1/robots.txt"
}

# machine_meta: the first lines of meta.txt (date, host, load, robots-guard build).
machine_meta() {
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: nproc=$(nproc), $(lscpu | sed -n 's/^Model name: *//p'), $(free -m | awk '/^Mem:/{print $2}') MiB RAM, kernel $(uname -r)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "robots-guard: $("$RG_BIN" --version) ($(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?'))"
}

# fresh_dir NAME: an empty WORK/NAME any server user can write to.
fresh_dir() {
    local dir=$WORK/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    chmod 1777 "$dir"
}

# stop_target NAME: stops the target started last (TPID; not for direct) and keeps its
# stderr (its own error lines) with the raw results.
stop_target() {
    local name=$1
    [[ $name == direct ]] && return 0
    stop_pid "$TPID"
    local keep=() pid
    for pid in "${PIDS[@]}"; do [[ $pid == "$TPID" ]] || keep+=("$pid"); done
    PIDS=("${keep[@]}")
    cp "$WORK/$name/stderr" "$OUT/$name.stderr.last" 2>/dev/null || true
}
