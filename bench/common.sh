# shellcheck shell=bash
# Helpers shared by bench/load.sh and bench/https-load.sh (sourced, not run; soak.sh
# uses log, die, cleanup, free_port and fill).
#
# The rig (PIN=1): the proxy under test runs alone on CPU 1; the origin (nginx) and the
# load generator share CPU 0. Every proxy, robots-guard or peer, gets the same core, so
# nothing is measured that only helps when the origin shares the proxy's core.
#
# The caller sets ROOT, BENCH, TARGETS, MODES, ROUNDS, DURATION, WARMUP, BUILD, INSTALL,
# PIN, TARGET_DIR, RG_BIN, RG_BASELINE_BIN, and defines start_target NAME (sets TPID and
# TPORT), run_load NAME MODE SECONDS FILE and skip_run NAME MODE; see rounds below.

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

# need CMD:PACKAGE...: installs the package of each command found neither on PATH nor in
# /usr/sbin.
need() {
    local pair missing=()
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null 2>&1 || [[ -x /usr/sbin/${pair%%:*} ]] ||
            missing+=("${pair#*:}")
    done
    ((${#missing[@]} == 0)) || apt_install "${missing[@]}"
}

# apt_install PKG...: apt-get installs (INSTALL=1; else dies naming them), with an
# apt-get update when the first try fails. Debian's policy-rc.d in containers keeps the
# packages' own services from starting; ours use their own ports anyway.
apt_install() {
    [[ $INSTALL == 1 ]] || die "missing: $* (INSTALL=0)"
    log "installing $*"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y "$@" >/dev/null 2>&1 ||
        { apt-get update >/dev/null && apt-get install -y "$@" >/dev/null; }
}

# setup RESULTS_PREFIX: builds robots-guard (BUILD=1), adds robots-guard-baseline to
# TARGETS after robots-guard when RG_BASELINE_BIN is set, makes OUT (the results dir),
# WORK (a temp dir removed on exit, holding copies of the binaries so a concurrent build
# cannot swap them mid-run), PIDS (servers to stop) and the pinning prefixes PROXY_CPU
# (CPU 1) and LOAD_CPU (CPU 0: origin, load generator, probes); taskset execs the
# command, so $! is the server's own pid.
setup() {
    if [[ -n ${RG_BASELINE_BIN:-} && " $TARGETS " != *" robots-guard-baseline "* ]]; then
        local t list=()
        for t in $TARGETS; do
            list+=("$t")
            [[ $t == robots-guard ]] && list+=(robots-guard-baseline)
        done
        [[ " ${list[*]} " == *" robots-guard-baseline "* ]] || list+=(robots-guard-baseline)
        TARGETS=${list[*]}
    fi
    local uses_rg=0
    case " $TARGETS " in *" robots-guard "* | *" robots-guard-info "*) uses_rg=1 ;; esac
    if [[ $BUILD == 1 && $uses_rg == 1 ]]; then
        log "building robots-guard (release)"
        (cd "$ROOT" && CARGO_TARGET_DIR=$TARGET_DIR cargo build --release --quiet --bin robots-guard)
    fi
    STAMP=$(date +%Y%m%d-%H%M%S)
    OUT=$BENCH/results/$1$STAMP
    mkdir -p "$OUT"
    WORK=$(mktemp -d /tmp/rg-bench.XXXXXX)
    chmod 755 "$WORK"
    PIDS=()
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    mkdir "$WORK/bin"
    if [[ $uses_rg == 1 ]]; then
        [[ -x $RG_BIN ]] || die "no robots-guard binary at $RG_BIN (set RG_BIN or BUILD=1)"
        cp "$RG_BIN" "$WORK/bin/robots-guard"
    fi
    if [[ " $TARGETS " == *" robots-guard-baseline "* ]]; then
        [[ -x ${RG_BASELINE_BIN:-} ]] || die "robots-guard-baseline needs RG_BASELINE_BIN"
        cp "$RG_BASELINE_BIN" "$WORK/bin/robots-guard-baseline"
    fi
    PROXY_CPU=() LOAD_CPU=()
    if [[ $PIN == 1 ]]; then
        (($(nproc) >= 2)) || die "PIN=1 needs 2 CPUs (PIN=0 runs unpinned)"
        PROXY_CPU=(taskset -c 1) LOAD_CPU=(taskset -c 0)
    fi
}

# rg_bin NAME: the binary a robots-guard target runs.
rg_bin() {
    if [[ $1 == robots-guard-baseline ]]; then echo "$WORK/bin/robots-guard-baseline"; else echo "$WORK/bin/robots-guard"; fi
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

# machine_meta: the first lines of meta.txt (date, host, load, rig, robots-guard builds).
machine_meta() {
    local t
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "host: nproc=$(nproc), $(lscpu | sed -n 's/^Model name: *//p'), $(free -m | awk '/^Mem:/{print $2}') MiB RAM, kernel $(uname -r)"
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    if [[ $PIN == 1 ]]; then
        echo "rig: proxy alone on CPU 1; origin and load generator on CPU 0"
    else
        echo "rig: no pinning"
    fi
    for t in robots-guard robots-guard-baseline; do
        [[ -x $WORK/bin/$t ]] || continue
        echo "$t: $("$WORK/bin/$t" --version), sha256 $(sha256sum "$WORK/bin/$t" | cut -c1-12)," \
            "from $([[ $t == robots-guard ]] && echo "$RG_BIN" || echo "$RG_BASELINE_BIN")"
    done
    echo "source tree: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo '?')$(cd "$ROOT" && git diff --quiet HEAD -- src Cargo.toml Cargo.lock 2>/dev/null || echo ' (src modified)'), BUILD=$BUILD"
    echo "method: rounds=$ROUNDS duration=${DURATION}s warmup=${WARMUP}s connections=$CONNS pin=$PIN"
    echo "targets: $TARGETS"
    echo "modes: $MODES"
}

# fresh_dir NAME: an empty WORK/NAME any server user can write to.
fresh_dir() {
    local dir=$WORK/$1
    rm -rf "$dir"
    mkdir -p "$dir"
    chmod 1777 "$dir"
}

# started NAME CA: registers the server started last ($!) as TPID, waits for TPORT, and
# sends one request through it (trusting CA for https): it must answer 200.
started() {
    local name=$1 ca=${2:-} dir=$WORK/$1 code
    TPID=$!
    PIDS+=("$TPID")
    wait_port "$TPORT" 150 || { tail -n 5 "$dir"/* >&2 || true; die "$name did not start"; }
    [[ -z $ca ]] || for _ in $(seq 50); do [[ -s $ca ]] && break; sleep 0.1; done
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -A loadbench/1.0 \
        --proxy "http://127.0.0.1:$TPORT" ${ca:+--cacert "$ca"} "$ORIGIN_URL" || true)
    [[ $code == 200 ]] || { tail -n 5 "$dir"/* >&2 || true; die "$name answered $code to a probe"; }
}

# stop_target NAME: stops the target started last (not for direct) and keeps its logs.
stop_target() {
    local name=$1 keep=() pid f
    [[ $name == direct ]] && return 0
    stop_pid "$TPID"
    for pid in "${PIDS[@]}"; do [[ $pid == "$TPID" ]] || keep+=("$pid"); done
    PIDS=("${keep[@]}")
    for f in stderr squid-cache.log; do
        [[ -s $WORK/$name/$f ]] && cp "$WORK/$name/$f" "$OUT/$name.$f.last"
    done
    return 0
}

# rounds KIND: ROUNDS interleaved rounds (round 1: every mode x target, round 2: again,
# ...; even rounds take the targets in reverse order, so the A/B pair alternates who goes
# first). Each run: a fresh target, a warm-up, then a measured run of DURATION seconds
# with the proxy's process tree sampled before and after (procstat.py); record.py KIND
# turns it into one line of OUT/runs.jsonl.
rounds() {
    local kind=$1 round mode name targets n=0 total=0 load before after raw line
    RUNS=$OUT/runs.jsonl
    : >"$RUNS"
    for mode in $MODES; do for name in $TARGETS; do
        skip_run "$name" "$mode" || total=$((total + ROUNDS))
    done; done
    for round in $(seq "$ROUNDS"); do
        targets=$TARGETS
        ((round % 2)) || targets=$(tr ' ' '\n' <<<"$TARGETS" | tac | xargs)
        for mode in $MODES; do
            for name in $targets; do
                skip_run "$name" "$mode" && continue
                n=$((n + 1))
                load=$(cut -d' ' -f1 /proc/loadavg)
                start_target "$name"
                run_load "$name" "$mode" "$WARMUP" "$WORK/warmup" || true
                raw=$OUT/r$round-$mode-$name.$kind
                before=$(python3 "$BENCH/procstat.py" "$TPID")
                run_load "$name" "$mode" "$DURATION" "$raw" || true
                after=$(python3 "$BENCH/procstat.py" "$TPID")
                line=$(python3 "$BENCH/record.py" "$kind" "$name" "$mode" "$round" "$load" \
                    "$raw" "$before" "$after") ||
                    { cat "$raw" "$raw.stderr" >&2 || true; die "no result for $name $mode"; }
                echo "$line" >>"$RUNS"
                stop_target "$name"
                log "[$n/$total] round $round $mode $name: $(python3 "$BENCH/record.py" progress "$line") (load $load)"
            done
        done
    done
}
