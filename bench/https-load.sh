#!/usr/bin/env bash
# HTTPS interception load benchmark: robots-guard (tls.mode = "intercept") against Squid
# with ssl_bump (Debian squid-openssl) and mitmproxy (mitmdump), with a TLS nginx as the
# loopback origin and oha as the load generator.
#
#   bash bench/https-load.sh                        # full run (~9 minutes on 2 vCPUs)
#   ROUNDS=1 DURATION=3 bash bench/https-load.sh    # quick check
#
# Part 1 (load): for every target (direct HTTPS to nginx, then through each proxy) and
# every mode (keep-alive; a new connection, i.e. a new CONNECT and a new TLS handshake
# with the proxy, per request; optionally HTTP/2 keep-alive) it reports requests/s,
# p50/p99 latency, the proxy's CPU time per request and its peak RSS. Rounds are
# interleaved (round 1: every mode x target, round 2: again, ...) so slow drifts in
# machine load hit every target alike; the summary takes medians.
#
# Part 2 (new host): through each proxy, the time from sending CONNECT to the end of the
# TLS handshake for NEWHOSTS distinct hosts never seen before (127.0.0.2, 127.0.0.3, ...,
# all served by the same nginx), so each one makes the proxy mint a leaf certificate;
# then the same hosts again (leaf cached). Measured by bench/handshake.py (Python ssl,
# i.e. OpenSSL, context built once; TCP connect to the proxy excluded). Direct TLS
# handshakes to nginx give the client's and origin's own share.
#
# Every server listens on loopback on a free port, runs in the foreground from its own
# config in a temp dir (throwaway CAs made there with openssl) and is stopped on exit.
# Raw output goes to bench/results/https-<stamp>/ (git-ignored); the summary table is
# printed at the end and saved as summary.md there.
#
# Environment knobs (defaults in brackets):
#   ROUNDS [3]  DURATION [10] seconds per measured run  WARMUP [2] seconds before each
#   CONNS [32]  PIN [1]: proxy and origin on CPU 0, oha/curl on CPU 1 (0: no pinning)
#   OHA_THREADS [1 when pinned, else nproc]
#   TARGETS ["direct robots-guard squid mitmdump"]
#   MODES ["keepalive newconn h2"] (h2: oha --http2, keep-alive; skipped for Squid,
#         which does not speak HTTP/2 to clients)
#   NEWHOSTS [50] distinct hosts for part 2 (0 skips it; at most 200)
#   PERF [0]: 1 records robots-guard with `perf record -F 999 -g` during each measured run
#         (PERF_CALLGRAPH="--call-graph dwarf" for call chains through Rust code)
#         (bench/results/.../perf-*.data; perf adds some overhead to those runs)
#   BUILD [1]: cargo build --release first   RG_BIN [$CARGO_TARGET_DIR or ./target]/release/robots-guard
#   INSTALL [1]: install missing tools (apt: nginx squid-openssl curl openssl;
#         cargo install oha; a venv with mitmproxy 11)
#   TOOLS [$CARGO_TARGET_DIR or ./target]/bench-tools: where oha and the venv go
#   OHA [oha on PATH, else $TOOLS/bin/oha]  MITMDUMP [$TOOLS/mitm-venv/bin/mitmdump]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
WARMUP=${WARMUP:-2}
CONNS=${CONNS:-32}
PIN=${PIN:-1}
TARGETS=${TARGETS:-"direct robots-guard squid mitmdump"}
MODES=${MODES:-"keepalive newconn h2"}
NEWHOSTS=${NEWHOSTS:-50}
PERF=${PERF:-0}
BUILD=${BUILD:-1}
INSTALL=${INSTALL:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
RG_BIN=${RG_BIN:-$TARGET_DIR/release/robots-guard}
TOOLS=${TOOLS:-$TARGET_DIR/bench-tools}
((NEWHOSTS <= 200)) || { echo "NEWHOSTS must be at most 200" >&2; exit 2; }

# shellcheck source=bench/common.sh
source "$BENCH/common.sh"

# --- tools --------------------------------------------------------------------------
export PATH=$PATH:/usr/sbin:/sbin
mapfile -t need_install < <(missing nginx:nginx curl:curl openssl:openssl taskset:util-linux \
    python3:python3)
case " $TARGETS " in *" mitmdump "*) python3 -c 'import venv, ensurepip' 2>/dev/null ||
    need_install+=(python3-venv) ;; esac
((${#need_install[@]} == 0)) || apt_install "${need_install[@]}"
# ssl_bump needs the OpenSSL build of Squid (Debian's plain "squid" is GnuTLS and has no
# ssl_bump); squid-openssl replaces it and provides the same /usr/sbin/squid.
if [[ " $TARGETS " == *" squid "* ]] && ! squid -v 2>/dev/null | grep -q -- --with-openssl; then
    apt_install squid-openssl
fi
CERTGEN=/usr/lib/squid/security_file_certgen

OHA=${OHA:-$(command -v oha || echo "$TOOLS/bin/oha")}
if [[ ! -x $OHA ]]; then
    [[ $INSTALL == 1 ]] || die "no oha (cargo install oha, or set OHA)"
    log "cargo install oha (takes several minutes)"
    # --locked: the newest dependency versions may need a newer rustc than installed.
    cargo install --locked --quiet --root "$TOOLS" oha
    OHA=$TOOLS/bin/oha
fi
MITMDUMP=${MITMDUMP:-$TOOLS/mitm-venv/bin/mitmdump}
if [[ " $TARGETS " == *" mitmdump "* && ! -x $MITMDUMP ]]; then
    [[ $INSTALL == 1 ]] || die "no mitmdump at $MITMDUMP (set MITMDUMP)"
    log "installing mitmproxy 11 in a venv"
    python3 -m venv "$TOOLS/mitm-venv"
    "$TOOLS/mitm-venv/bin/pip" install -q 'mitmproxy>=11,<12'
    MITMDUMP=$TOOLS/mitm-venv/bin/mitmdump
fi

build_robots_guard

# --- work dirs, cleanup ---------------------------------------------------------------
start_run https- rg-httpsbench
# oha's tokio threads: 1 when it has one CPU, else one per CPU.
if [[ $PIN == 1 ]]; then OHA_THREADS=${OHA_THREADS:-1}; else OHA_THREADS=${OHA_THREADS:-$(nproc)}; fi


# --- throwaway CAs ---------------------------------------------------------------------
# make_ca DIR NAME: DIR/NAME.pem + DIR/NAME.key, an ECDSA P-256 CA valid for 2 days.
make_ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj "/CN=$2 throwaway CA" -keyout "$1/$2.key" -out "$1/$2.pem" \
        -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}

# --- origin ----------------------------------------------------------------------------
ORIGIN_PORT=$(free_port)
ODIR=$WORK/origin
mkdir -p "$ODIR/www" "$ODIR/tmp"
chmod 755 "$ODIR"
make_ca "$ODIR" origin-ca
# One leaf per origin address (127.0.0.1 for the load runs, 127.0.0.2.. for the new
# hosts), each with CN and subjectAltName IP = its address: Squid 5 checks only CN and
# DNS names, rustls and curl only the IP address.
servers=""
for i in $(seq 1 $((NEWHOSTS + 1))); do
    ip=127.0.0.$i
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$ip" \
        -keyout "$ODIR/$ip.key" -out "$ODIR/$ip.csr" 2>/dev/null
    openssl x509 -req -in "$ODIR/$ip.csr" -CA "$ODIR/origin-ca.pem" -CAkey "$ODIR/origin-ca.key" \
        -CAcreateserial -days 2 -out "$ODIR/$ip.pem" 2>/dev/null \
        -extfile <(printf 'subjectAltName=IP:%s%s\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' \
            "$ip" "$([[ $i == 1 ]] && echo ,DNS:localhost)")
    opts="ssl http2"
    [[ $i == 1 ]] && opts+=" backlog=4096 reuseport"
    servers+="    server { listen $ip:$ORIGIN_PORT $opts; ssl_certificate $ODIR/$ip.pem; ssl_certificate_key $ODIR/$ip.key; location / { } }\\n"
done
chmod 644 "$ODIR"/*.pem "$ODIR"/*.key
ORIGIN_CA=$ODIR/origin-ca.pem
origin_site "$ODIR/www"
fill "$BENCH/nginx-tls.conf" "$ODIR/nginx.conf" DIR="$ODIR" PORT="$ORIGIN_PORT" SERVERS="$servers"
"${PIN0[@]}" nginx -p "$ODIR" -c "$ODIR/nginx.conf" 2>"$ODIR/stderr" &
ORIGIN_PID=$!
PIDS+=("$ORIGIN_PID")
wait_port "$ORIGIN_PORT" 150 || die "nginx did not start: $(cat "$ODIR/stderr" "$ODIR/nginx-error.log" 2>/dev/null)"
ORIGIN_URL=https://127.0.0.1:$ORIGIN_PORT/page
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$ORIGIN_CA" "$ORIGIN_URL" || true)
[[ $code == 200 ]] || die "origin answered $code to a probe"
log "origin nginx on $ORIGIN_URL (pid $ORIGIN_PID)"

# --- machine and versions --------------------------------------------------------------
{
    machine_meta
    echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(openssl version)"
    echo "oha: $("$OHA" --version | head -1)"
    echo "curl: $(curl --version | head -1 | cut -d' ' -f1-5)"
    squid -v >/dev/null 2>&1 && echo "squid: $(squid -v | head -1 | sed 's/^Squid Cache: //') ($(dpkg-query -W -f='${Package} ${Version}' squid-openssl 2>/dev/null || echo '?'))"
    [[ -x $MITMDUMP ]] && echo "mitmdump: $("$MITMDUMP" --version | head -1)"
    echo "method: rounds=$ROUNDS duration=${DURATION}s warmup=${WARMUP}s connections=$CONNS oha_threads=$OHA_THREADS pin=$PIN newhosts=$NEWHOSTS"
    echo "targets: $TARGETS"
    echo "modes: $MODES"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt" >&2

# --- targets -----------------------------------------------------------------------------
# start_target NAME: starts a fresh instance; sets TPID, TPORT (empty for direct) and
# TCA (the CA file clients must trust).
start_target() {
    local name=$1 dir=$WORK/$1
    fresh_dir "$name"
    TPORT=$(free_port)
    case $name in
    direct)
        TPID=$ORIGIN_PID
        TPORT=
        TCA=$ORIGIN_CA
        return 0
        ;;
    robots-guard | robots-guard-info)
        local level=warn
        [[ $name == robots-guard-info ]] && level=info
        fill "$BENCH/robots-guard-tls.toml" "$dir/config.toml" DIR="$dir" PORT="$TPORT" \
            ADMIN_PORT="$(free_port)" LEVEL="$level" ORIGIN_CA="$ORIGIN_CA" ORIGIN_PORT="$ORIGIN_PORT"
        "${PIN0[@]}" "$RG_BIN" serve --config "$dir/config.toml" 2>"$dir/stderr" &
        TCA=$dir/certs/ca.pem
        ;;
    squid)
        make_ca "$dir" squid-ca
        chmod 644 "$dir/squid-ca.key"
        "$CERTGEN" -c -s "$dir/ssl_db" -M 4MB >/dev/null
        chown -R proxy: "$dir/ssl_db"
        fill "$BENCH/squid-bump.conf" "$dir/squid.conf" DIR="$dir" PORT="$TPORT" ORIGIN_CA="$ORIGIN_CA"
        "${PIN0[@]}" squid -N -f "$dir/squid.conf" >"$dir/stdout" 2>"$dir/stderr" &
        TCA=$dir/squid-ca.pem
        ;;
    mitmdump)
        "${PIN0[@]}" "$MITMDUMP" --listen-host 127.0.0.1 --listen-port "$TPORT" \
            --set ssl_verify_upstream_trusted_ca="$ORIGIN_CA" --set confdir="$dir" -q \
            >"$dir/stdout" 2>"$dir/stderr" &
        TCA=$dir/mitmproxy-ca-cert.pem
        ;;
    *) die "unknown target $name" ;;
    esac
    TPID=$!
    PIDS+=("$TPID")
    if ! wait_port "$TPORT" 150; then
        tail -n 5 "$dir"/*.log "$dir"/std* >&2 || true
        die "$name did not start"
    fi
    for _ in $(seq 50); do [[ -s $TCA ]] && break; sleep 0.1; done
    # One request through the proxy, trusting its CA: it must answer 200 with the page.
    local code
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -A loadbench/1.0 \
        --proxy "http://127.0.0.1:$TPORT" --cacert "$TCA" "$ORIGIN_URL" || true)
    [[ $code == 200 ]] || { tail -n 5 "$dir"/*.log "$dir"/std* >&2 || true; die "$name answered $code to a probe"; }
}

# stop_tls_target NAME: stop_target, keeping Squid's cache.log (its TLS errors) too.
stop_tls_target() {
    stop_target "$1"
    [[ $1 == squid ]] && cp "$WORK/$1/squid-cache.log" "$OUT/squid-cache.log.last" 2>/dev/null || true
}

# run_oha NAME MODE SECONDS OUTFILE
run_oha() {
    local name=$1 mode=$2 secs=$3 outfile=$4
    local args=(--no-tui --output-format json -c "$CONNS" -z "${secs}s" -t 10s
        --worker-threads "$OHA_THREADS" -H "User-Agent: loadbench/1.0")
    if [[ $name != direct ]]; then
        args+=(-x "http://127.0.0.1:$TPORT")
    fi
    # oha verifies the certificate against --cacert (the target's CA) with rustls; it
    # resumes TLS sessions when the server offers tickets or session IDs, like most clients.
    args+=(--cacert "$TCA")
    case $mode in
    keepalive) ;;
    newconn) args+=(--disable-keepalive) ;;
    h2) args+=(--http2) ;;
    esac
    "${PIN1[@]}" "$OHA" "${args[@]}" "$ORIGIN_URL" >"$outfile" 2>"$outfile.stderr"
}

# --- part 1: rounds ----------------------------------------------------------------------
RUNS=$OUT/runs.jsonl
: >"$RUNS"
skip() { [[ $1 == squid && $2 == h2 ]]; }
total=0
for mode in $MODES; do for name in $TARGETS; do skip "$name" "$mode" || total=$((total + ROUNDS)); done; done
n=0
for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        for name in $TARGETS; do
            skip "$name" "$mode" && continue
            n=$((n + 1))
            load=$(cut -d' ' -f1 /proc/loadavg)
            start_target "$name"
            # Warm up: leaf cache, connection pools, robots.txt cache, allocator.
            run_oha "$name" "$mode" "$WARMUP" "$OUT/warmup.json"
            before=$(python3 "$BENCH/procstat.py" "$TPID")
            obefore=$(python3 "$BENCH/procstat.py" "$ORIGIN_PID")
            raw=$OUT/r${round}-${mode}-${name}.json
            perf_pid=
            if [[ $PERF == 1 && $name == robots-guard* ]]; then
                perf record -F 999 ${PERF_CALLGRAPH:--g} -p "$TPID" -o "$OUT/perf-r${round}-${mode}-${name}.data" \
                    -- sleep "$DURATION" >/dev/null 2>&1 &
                perf_pid=$!
            fi
            run_oha "$name" "$mode" "$DURATION" "$raw" || true
            [[ -z $perf_pid ]] || wait "$perf_pid" || true
            after=$(python3 "$BENCH/procstat.py" "$TPID")
            oafter=$(python3 "$BENCH/procstat.py" "$ORIGIN_PID")
            line=$(python3 "$BENCH/https-record.py" "$name" "$mode" "$round" "$load" "$raw" \
                "$before" "$after" "$obefore" "$oafter") ||
                { cat "$raw" "$raw.stderr" >&2; die "no result from oha for $name $mode"; }
            echo "$line" >>"$RUNS"
            stop_tls_target "$name"
            log "[$n/$total] round $round $mode $name: $(python3 "$BENCH/benchlib.py" progress "$line") (load $load)"
        done
    done
done
rm -f "$OUT/warmup.json" "$OUT/warmup.json.stderr"

# --- part 2: a new host's first handshake ------------------------------------------------
HS=$OUT/handshakes.jsonl
: >"$HS"
: >"$OUT/handshake-cpu.jsonl"
if ((NEWHOSTS > 0)); then
    for name in $TARGETS; do
        start_target "$name"
        for pass in new cached; do
            hbefore=$(python3 "$BENCH/procstat.py" "$TPID")
            "${PIN1[@]}" python3 "$BENCH/handshake.py" "${TPORT:--}" "$TCA" "$ORIGIN_PORT" \
                "$pass" 2 $((NEWHOSTS + 1)) "$name" >>"$HS"
            # The proxy's CPU time per probe (whole request: CONNECT, handshake, for a new
            # host also its robots.txt fetch and a new upstream connection).
            hafter=$(python3 "$BENCH/procstat.py" "$TPID")
            python3 -c '
import json, sys
b, a = json.loads(sys.argv[3]), json.loads(sys.argv[4])
print(json.dumps({"target": sys.argv[1], "pass": sys.argv[2],
                  "cpu_us_per_probe": (a["cpu_s"] - b["cpu_s"]) * 1e6 / int(sys.argv[5])}))' \
                "$name" "$pass" "$hbefore" "$hafter" "$NEWHOSTS" >>"$OUT/handshake-cpu.jsonl"
        done
        if [[ $name == robots-guard* ]]; then
            admin=$(sed -n 's/^listen = "\(127.0.0.1:[0-9]*\)"$/\1/p' "$WORK/$name/config.toml" | tail -n 1)
            curl -s "http://$admin/metrics" | grep -E '^robots_guard_tls_leaf' >"$OUT/$name-leaf-metrics.txt" || true
        fi
        stop_tls_target "$name"
        log "new-host handshakes through $name done"
    done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"

python3 "$BENCH/https-summarise.py" "$OUT" | tee "$OUT/summary.md"
log "raw results in $OUT"
