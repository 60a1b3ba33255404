#!/usr/bin/env bash
# HTTPS interception load benchmark: robots-guard (tls.mode = "intercept") against Squid
# with ssl_bump (Debian squid-openssl), with a TLS nginx as the loopback origin and oha as
# the load generator.
#
#   bash bench/https-load.sh                        # full run (3 rounds x 10 s, ~6 min; ~8 with a baseline)
#   ROUNDS=1 DURATION=3 bash bench/https-load.sh    # quick check
#   RG_BASELINE_BIN=/path/to/old/robots-guard bash bench/https-load.sh   # A/B
#
# Part 1 (load): for every target (direct HTTPS to nginx, then through each proxy) and
# mode (keep-alive; a new connection, so a new CONNECT and TLS handshake, per request;
# HTTP/2 keep-alive, not for Squid): req/s, p50/p99 latency, the proxy's CPU time per
# request (utime+stime of its processes over the measured run / requests), the share of
# its core it kept busy, and its peak RSS (VmHWM). The summary adds the ratios
# (robots-guard / Squid ssl_bump, p99 over direct, CPU per request vs the baseline) and
# checks the goals.
#
# Part 2 (new host): through each proxy, CONNECT sent -> TLS handshake done for NEWHOSTS
# hosts never seen before (127.0.0.2, 127.0.0.3, ..., all one nginx), so each makes the
# proxy mint a leaf; then the same hosts again (bench/handshake.py).
#
# The rig (PIN=1): the proxy under test, robots-guard (proxy.workers = 1) or Squid, runs
# alone on CPU 1; nginx, oha and the probes share CPU 0. Rounds are interleaved (round 1:
# every mode x target, round 2: again, ...; even rounds in reverse order) and each run
# starts a fresh proxy; the summary takes medians.
#
# Every server listens on loopback on a free port, runs in the foreground from its own
# config in a temp dir (throwaway CAs made there with openssl) and is stopped on exit.
# Raw output and summary.md go to bench/results/https-<stamp>/ (git-ignored). Missing
# tools are installed (apt-get; cargo install oha).
#
# Knobs [defaults]: ROUNDS [3] DURATION [10] s measured, WARMUP [2] s before each
#   CONNS [32]  PIN [1] (0: no pinning)  OHA_THREADS [1 pinned, else nproc]
#   TARGETS ["direct robots-guard squid"] (also: robots-guard-info, robots-guard-baseline,
#     which RG_BASELINE_BIN adds after robots-guard)
#   MODES ["keepalive newconn h2"]  NEWHOSTS [50] (0 skips part 2; at most 200)
#   BUILD [1]: cargo build --release first
#   RG_BIN [${CARGO_TARGET_DIR:-target}/release/robots-guard]  RG_BASELINE_BIN [unset]
#   INSTALL [1]  OHA [oha on PATH or in ~/.cargo/bin]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-10} WARMUP=${WARMUP:-2} CONNS=${CONNS:-32}
PIN=${PIN:-1}
if [[ $PIN == 1 ]]; then OHA_THREADS=${OHA_THREADS:-1}; else OHA_THREADS=${OHA_THREADS:-$(nproc)}; fi
TARGETS=${TARGETS:-"direct robots-guard squid"}
MODES=${MODES:-"keepalive newconn h2"}
NEWHOSTS=${NEWHOSTS:-50}
BUILD=${BUILD:-1} INSTALL=${INSTALL:-1}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
RG_BIN=${RG_BIN:-$TARGET_DIR/release/robots-guard}
RG_BASELINE_BIN=${RG_BASELINE_BIN:-}
((NEWHOSTS <= 200)) || { echo "NEWHOSTS must be at most 200" >&2; exit 2; }

# shellcheck source=bench/common.sh
source "$BENCH/common.sh"
export PATH=$PATH:/usr/sbin:/sbin
need nginx:nginx squid:squid-openssl curl:curl openssl:openssl taskset:util-linux python3:python3
# ssl_bump needs the OpenSSL build of Squid (Debian's plain "squid" is GnuTLS).
[[ $(squid -v 2>&1) == *--with-openssl* ]] || apt_install squid-openssl
CERTGEN=/usr/lib/squid/security_file_certgen
OHA=${OHA:-$(command -v oha || echo "${CARGO_HOME:-$HOME/.cargo}/bin/oha")}
if [[ ! -x $OHA ]]; then
    [[ $INSTALL == 1 ]] || die "no oha (cargo install oha, or set OHA)"
    log "cargo install oha (takes several minutes)"
    # --locked: the newest dependency versions may need a newer rustc than installed.
    cargo install --locked --quiet oha
fi
setup https-

# make_ca DIR NAME: DIR/NAME.pem + DIR/NAME.key, an ECDSA P-256 CA valid for 2 days.
make_ca() {
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
        -subj "/CN=$2 throwaway CA" -keyout "$1/$2.key" -out "$1/$2.pem" \
        -addext basicConstraints=critical,CA:TRUE \
        -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}

# --- origin: TLS nginx on CPU 0 ------------------------------------------------------------
ORIGIN_PORT=$(free_port)
ODIR=$WORK/origin
mkdir -p "$ODIR/www" "$ODIR/tmp"
chmod 755 "$ODIR"
make_ca "$ODIR" origin-ca
# One leaf per origin address (127.0.0.1 for the load runs, 127.0.0.2.. for the new
# hosts), with CN and subjectAltName IP = its address: Squid 5 checks only CN and DNS
# names, rustls and curl only the IP address.
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
"${LOAD_CPU[@]}" nginx -p "$ODIR" -c "$ODIR/nginx.conf" 2>"$ODIR/stderr" &
ORIGIN_PID=$!
PIDS+=("$ORIGIN_PID")
wait_port "$ORIGIN_PORT" 150 || die "nginx did not start: $(cat "$ODIR/stderr" "$ODIR/nginx-error.log" 2>/dev/null)"
ORIGIN_URL=https://127.0.0.1:$ORIGIN_PORT/page
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$ORIGIN_CA" "$ORIGIN_URL" || true)
[[ $code == 200 ]] || die "origin answered $code to a probe"
log "origin nginx on $ORIGIN_URL (pid $ORIGIN_PID)"

{
    machine_meta
    echo "nginx: $(nginx -v 2>&1 | sed 's/^nginx version: //'), $(openssl version); oha: $("$OHA" --version | head -1) with $OHA_THREADS thread(s)"
    echo "squid: $(squid -v | head -1 | sed 's/^Squid Cache: //') ($(dpkg-query -W -f='${Package} ${Version}' squid-openssl 2>/dev/null || echo '?'))"
    echo "newhosts: $NEWHOSTS"
} >"$OUT/meta.txt"
cat "$OUT/meta.txt" >&2

# --- targets: each proxy on CPU 1 -----------------------------------------------------------
# start_target NAME: starts a fresh instance; sets TPID (the origin's for direct), TPORT
# and TCA (the CA clients must trust).
start_target() {
    local name=$1 dir=$WORK/$1
    fresh_dir "$name"
    TPORT=$(free_port)
    case $name in
    direct) TPID=$ORIGIN_PID TPORT='' TCA=$ORIGIN_CA; return 0 ;;
    robots-guard*)
        fill "$BENCH/robots-guard-tls.toml" "$dir/config.toml" DIR="$dir" PORT="$TPORT" \
            ADMIN_PORT="$(free_port)" LEVEL="$([[ $name == robots-guard-info ]] && echo info || echo warn)" \
            ORIGIN_CA="$ORIGIN_CA" ORIGIN_PORT="$ORIGIN_PORT"
        "${PROXY_CPU[@]}" "$(rg_bin "$name")" serve --config "$dir/config.toml" 2>"$dir/stderr" &
        TCA=$dir/certs/ca.pem
        ;;
    squid)
        make_ca "$dir" squid-ca
        chmod 644 "$dir/squid-ca.key"
        "$CERTGEN" -c -s "$dir/ssl_db" -M 4MB >/dev/null
        chown -R proxy: "$dir/ssl_db"
        fill "$BENCH/squid-bump.conf" "$dir/squid.conf" DIR="$dir" PORT="$TPORT" ORIGIN_CA="$ORIGIN_CA"
        "${PROXY_CPU[@]}" squid -N -f "$dir/squid.conf" >"$dir/stdout" 2>"$dir/stderr" &
        TCA=$dir/squid-ca.pem
        ;;
    *) die "unknown target $name" ;;
    esac
    started "$name" "$TCA"
}

# run_load NAME MODE SECONDS FILE: oha on CPU 0, verifying the target's CA with rustls
# (it resumes TLS sessions when the server offers them, like most clients).
run_load() {
    local name=$1 mode=$2 secs=$3 file=$4
    local args=(--no-tui --output-format json -c "$CONNS" -z "${secs}s" -t 10s
        --worker-threads "$OHA_THREADS" -H "User-Agent: loadbench/1.0" --cacert "$TCA")
    [[ $name == direct ]] || args+=(-x "http://127.0.0.1:$TPORT")
    case $mode in
    newconn) args+=(--disable-keepalive) ;;
    h2) args+=(--http2) ;;
    esac
    "${LOAD_CPU[@]}" "$OHA" "${args[@]}" "$ORIGIN_URL" >"$file" 2>"$file.stderr"
}

skip_run() { [[ $1 == squid && $2 == h2 ]]; }

# --- part 1: load -------------------------------------------------------------------------
rounds oha

# --- part 2: a new host's first handshake -------------------------------------------------
: >"$OUT/handshakes.jsonl"
: >"$OUT/handshake-cpu.jsonl"
if ((NEWHOSTS > 0)); then
    for name in $TARGETS; do
        start_target "$name"
        for pass in new cached; do
            before=$(python3 "$BENCH/procstat.py" "$TPID")
            "${LOAD_CPU[@]}" python3 "$BENCH/handshake.py" "${TPORT:--}" "$TCA" "$ORIGIN_PORT" \
                "$pass" 2 $((NEWHOSTS + 1)) "$name" >>"$OUT/handshakes.jsonl"
            after=$(python3 "$BENCH/procstat.py" "$TPID")
            python3 -c 'import json, sys
b, a = json.loads(sys.argv[3]), json.loads(sys.argv[4])
print(json.dumps({"target": sys.argv[1], "pass": sys.argv[2],
                  "cpu_us_per_probe": (a["cpu_s"] - b["cpu_s"]) * 1e6 / int(sys.argv[5])}))' \
                "$name" "$pass" "$before" "$after" "$NEWHOSTS" >>"$OUT/handshake-cpu.jsonl"
        done
        stop_target "$name"
        log "new-host handshakes through $name done"
    done
fi
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/meta.txt"
python3 "$BENCH/summarise.py" "$OUT" | tee "$OUT/summary.md"
log "raw results in $OUT"
