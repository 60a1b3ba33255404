#!/usr/bin/env bash
# End-to-end: the release binary, driven by curl, wget and Python requests
# through HTTP_PROXY/http_proxy, against a loopback origin. Nothing leaves
# 127.0.0.1. Ends with a "N passed, M failed" line.
set -uo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet || { echo "e2e: build failed"; exit 1; }
TARGET=${CARGO_TARGET_DIR:-target}
BIN=$TARGET/release/robots-guard
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
unset NO_PROXY no_proxy HTTPS_PROXY https_proxy ALL_PROXY all_proxy

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# The origin.
python3 tests/e2e_origin.py > "$WORK/origin.port" &
PIDS+=($!)
for _ in $(seq 50); do [[ -s $WORK/origin.port ]] && break; sleep 0.1; done
ORIGIN_PORT=$(cat "$WORK/origin.port")
ORIGIN="http://127.0.0.1:$ORIGIN_PORT"

# An HTTPS origin with a certificate from a throwaway CA the proxy trusts
# through tls.extra_roots.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -keyout "$WORK/origin-ca.key" -out "$WORK/origin-ca.pem" -subj "/CN=e2e origin CA" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$WORK/origin.key" -out "$WORK/origin.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$WORK/origin.ext"
openssl x509 -req -in "$WORK/origin.csr" -CA "$WORK/origin-ca.pem" -CAkey "$WORK/origin-ca.key" \
  -CAcreateserial -days 2 -extfile "$WORK/origin.ext" -out "$WORK/origin.pem" 2>/dev/null
python3 tests/e2e_origin.py --tls "$WORK/origin.pem" "$WORK/origin.key" > "$WORK/tls-origin.port" &
PIDS+=($!)
for _ in $(seq 50); do [[ -s $WORK/tls-origin.port ]] && break; sleep 0.1; done
TLS_PORT=$(cat "$WORK/tls-origin.port")
SECURE="https://127.0.0.1:$TLS_PORT"

# The proxy.
PROXY_PORT=$(free_port)
ADMIN_PORT=$(free_port)
cat > "$WORK/config.toml" <<TOML
[proxy]
listen = "127.0.0.1:$PROXY_PORT"
[identity]
user_agent = "require"
from = "fill"
[rate_limit]
default_delay = "0s"
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
[tls]
ca_cert = "$WORK/certs/ca.pem"
ca_key = "$WORK/certs/ca.key"
extra_roots = ["$WORK/origin-ca.pem"]
connect_ports = [443, $TLS_PORT, $ORIGIN_PORT]
TOML
"$BIN" serve --config "$WORK/config.toml" > "$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
PIDS+=($PROXY_PID)
for port in "$PROXY_PORT" "$ADMIN_PORT"; do
  for _ in $(seq 100); do
    (echo > "/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
  done
done
PROXY="http://127.0.0.1:$PROXY_PORT"

passed=0
failed=0
check() { # name, expected, actual
  if [[ "$2" == "$3" ]]; then
    passed=$((passed + 1)); echo "ok   $1"
  else
    failed=$((failed + 1)); echo "FAIL $1: expected [$2], got [$3]"
  fi
}

# curl, with -x and with http_proxy.
check "curl -x allowed page" "200" "$(curl -s -o /dev/null -w '%{http_code}' -x "$PROXY" "$ORIGIN/page")"
check "curl http_proxy allowed body" "hello from /page" "$(http_proxy=$PROXY curl -s "$ORIGIN/page")"
check "curl disallowed is 403" "403" "$(curl -s -o /dev/null -w '%{http_code}' -x "$PROXY" "$ORIGIN/private/x")"
check "curl 403 names the rule" "disallow: /private" \
  "$(curl -s -D - -o /dev/null -x "$PROXY" "$ORIGIN/private/x" | tr -d '\r' | sed -n 's/^x-robots-guard-rule: //p')"
check "curl allow inside disallow" "200" "$(curl -s -o /dev/null -w '%{http_code}' -x "$PROXY" "$ORIGIN/private/open/a")"
check "curl robots.txt always allowed" "200" "$(curl -s -o /dev/null -w '%{http_code}' -x "$PROXY" -A StrictBot/1.0 "$ORIGIN/robots.txt")"
check "curl StrictBot group" "403" "$(curl -s -o /dev/null -w '%{http_code}' -x "$PROXY" -A 'Mozilla/5.0 (compatible; StrictBot/2.0)' "$ORIGIN/page")"
check "curl without User-Agent refused" "identity" \
  "$(curl -s -D - -o /dev/null -x "$PROXY" -H 'User-Agent:' "$ORIGIN/page" | tr -d '\r' | sed -n 's/^x-robots-guard-reason: //p')"
check "From filled in" "robots-admin@example.invalid" \
  "$(curl -s -x "$PROXY" "$ORIGIN/echo-headers" | grep -i '^from:' | sed 's/^[^:]*: //')"
check "Via added" "1" "$(curl -s -x "$PROXY" "$ORIGIN/echo-headers" | grep -ci '^via: 1.1 robots-guard')"
check "POST body streamed" "got hello=1" "$(curl -s -x "$PROXY" -d hello=1 "$ORIGIN/post")"
check "origin-form to the proxy is 400" "400" "$(curl -s -o /dev/null -w '%{http_code}' "$PROXY/page")"
check "loop to the proxy is 508" "508" "$(curl -s -o /dev/null -w '%{http_code}' -x "$PROXY" "$PROXY/page")"

# A 1 GiB download streams through in bounded memory.
GIB=$((1 << 30))
check "1 GiB download passes whole" "$GIB" \
  "$(curl -s -o /dev/null -w '%{size_download}' -x "$PROXY" "$ORIGIN/big?bytes=$GIB")"
PEAK_KIB=$(awk '/VmHWM/ {print $2}' "/proc/$PROXY_PID/status")
check "proxy peak RSS after 1 GiB stays under 64 MiB (${PEAK_KIB} KiB)" "yes" \
  "$( ((PEAK_KIB < 65536)) && echo yes || echo no)"

# wget through http_proxy.
check "wget allowed page" "hello from /w" "$(http_proxy=$PROXY wget -q -O - "$ORIGIN/w")"
http_proxy=$PROXY wget -q -O /dev/null "$ORIGIN/private/w"
check "wget disallowed exits 8 (server error)" "8" "$?"

# Python requests through HTTP_PROXY.
py() {
  HTTP_PROXY=$PROXY python3 - "$@" <<'PY'
import sys, requests
r = requests.get(sys.argv[1], timeout=10)
print(r.status_code, r.headers.get("x-robots-guard-reason", "-"))
PY
}
check "requests allowed" "200 -" "$(py "$ORIGIN/req")"
check "requests disallowed" "403 robots-disallow" "$(py "$ORIGIN/private/req")"

# HTTPS through interception: clients trust the proxy's CA (created on first start).
CA="$WORK/certs/ca.pem"
check "CA created on first start, key 0600" "600" "$(stat -c %a "$WORK/certs/ca.key")"
check "curl https allowed" "200 hello from /s" \
  "$(curl -s -w ' %{http_code}' --proxy "$PROXY" --cacert "$CA" "$SECURE/s" | tr -d '\n' | awk '{print $NF" "$1" "$2" "$3}')"
check "curl https disallowed" "403" "$(curl -s -o /dev/null -w '%{http_code}' --proxy "$PROXY" --cacert "$CA" "$SECURE/private/s")"
check "curl --http2 https allowed over h2" "200 2" \
  "$(curl -s -o /dev/null -w '%{http_code} %{http_version}' --http2 --proxy "$PROXY" --cacert "$CA" "$SECURE/h2")"
check "curl without our CA fails its handshake" "60" \
  "$(curl -s -o /dev/null --proxy "$PROXY" "$SECURE/s"; echo $?)"
check "proxy still serves after a refused handshake" "200" \
  "$(curl -s -o /dev/null -w '%{http_code}' --proxy "$PROXY" --cacert "$CA" "$SECURE/again")"
pys() {
  HTTPS_PROXY=$PROXY REQUESTS_CA_BUNDLE=$CA python3 - "$@" <<'PY'
import sys, requests
r = requests.get(sys.argv[1], timeout=10)
print(r.status_code, r.headers.get("x-robots-guard-reason", "-"))
PY
}
check "requests https allowed (REQUESTS_CA_BUNDLE)" "200 -" "$(pys "$SECURE/req")"
check "requests https disallowed" "403 robots-disallow" "$(pys "$SECURE/private/req")"

# Node's undici: its ProxyAgent tunnels every request through CONNECT, http://
# ones included, and the tunnel's first bytes tell the proxy what to do.
NODE_DIR=${CARGO_TARGET_DIR:-target}/e2e-node
undici() { # url -> "status reason body"
  NODE_PATH=$NODE_DIR/node_modules PROXY=$PROXY CA=$CA node - "$1" <<'JS'
const { ProxyAgent, fetch } = require('undici');
const fs = require('fs');
const agent = new ProxyAgent({ uri: process.env.PROXY, requestTls: { ca: fs.readFileSync(process.env.CA) } });
fetch(process.argv[2], { dispatcher: agent, headers: { 'user-agent': 'UndiciBot/1.0' } })
  .then(async (r) => console.log(r.status, r.headers.get('x-robots-guard-reason') || '-', (await r.text()).trim().split('\n')[0]))
  .catch((e) => console.log('error', e.cause ? e.cause.code || e.cause.message : e.message));
JS
}
if [[ ! -d $NODE_DIR/node_modules/undici ]]; then
  check "undici is installed (npm install --prefix $NODE_DIR undici; .ci/run does)" "yes" "no"
else
  check "undici http:// through a CONNECT tunnel" "200 - hello from /u" "$(undici "$ORIGIN/u")"
  check "undici http:// disallowed in the tunnel" "403 robots-disallow 403 Forbidden by robots.txt" \
    "$(undici "$ORIGIN/private/u")"
  check "undici https:// intercepted" "200 - hello from /us" "$(undici "$SECURE/us")"
fi

# One robots.txt fetch by the proxy served all of the above; the other one is
# the client's own request for /robots.txt, which is forwarded.
check "robots.txt fetched once by the proxy" "2" "$(curl -s --noproxy '*' "$ORIGIN/__robots_fetches")"

# The admin listener: health, metrics, and the status page in a real browser.
ADMIN="http://127.0.0.1:$ADMIN_PORT"
check "admin /healthz" "ok" "$(curl -s --noproxy '*' "$ADMIN/healthz")"
METRICS=$(curl -s --noproxy '*' "$ADMIN/metrics")
check "metrics: one robots.txt fetch per origin" "2" \
  "$(sed -n 's/^robots_guard_robots_fetches_total{outcome="ok"} //p' <<<"$METRICS")"
check "metrics: disallowed requests counted" "yes" \
  "$(grep -q '^robots_guard_requests_total{outcome="robots-disallow",status="403",profile="default"} [1-9]' <<<"$METRICS" && echo yes || echo no)"
# Read by real parsers: Prometheus' classic text format by default, OpenMetrics
# when the scraper asks for it. Each must see the counter as a counter.
OPENMETRICS=$(curl -s --noproxy '*' -H 'Accept: application/openmetrics-text; version=1.0.0' "$ADMIN/metrics")
parsed() { # parser (classic|openmetrics), exposition -> "type value" of the disallowed-requests counter
  EXPOSITION=$2 python3 - "$1" <<'PY'
import os, sys
kind = sys.argv[1]
text = os.environ["EXPOSITION"] + "\n"
if kind == "classic":
    from prometheus_client.parser import text_string_to_metric_families
else:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families
for family in text_string_to_metric_families(text):
    if family.name == "robots_guard_requests":
        for s in family.samples:
            if s.name == "robots_guard_requests_total" and s.labels.get("outcome") == "robots-disallow":
                print(family.type, "counted" if s.value >= 1 else "zero")
PY
}
check "metrics: classic text parsed by prometheus_client" "counter counted" \
  "$(parsed classic "$METRICS" 2>&1 | tail -1)"
check "metrics: OpenMetrics parsed by prometheus_client" "counter counted" \
  "$(parsed openmetrics "$OPENMETRICS" 2>&1 | tail -1)"
check "metrics: leaf certificates minted" "yes" \
  "$(grep -q '^robots_guard_tls_leaf_certificates_minted_total [1-9]' <<<"$METRICS" && echo yes || echo no)"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $CHROMIUM ]]; then
  echo "skip status page in Chromium: chromium is not installed (apt-get install chromium; .ci/run does)"
else
  chrome() { # args...: headless, throwaway profile, console messages to stderr
    timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
      --no-first-run --disable-background-networking --disable-component-update --disable-sync \
      --user-data-dir="$(mktemp -d -p "$WORK")" --enable-logging=stderr --v=0 "$@"
  }
  chrome --dump-dom "$ADMIN/" > "$WORK/status.html" 2> "$WORK/chrome.log"
  check "status page loads in Chromium" "yes" \
    "$(grep -q '<h1>robots-guard</h1>' "$WORK/status.html" && echo yes || echo no)"
  check "status page shows the origin host" "yes" \
    "$(grep -q '<td class="mono">127.0.0.1</td>' "$WORK/status.html" && echo yes || echo no)"
  check "status page shows a denial and its rule" "yes" \
    "$(grep -q 'disallow: /private <span class="muted">line 2</span>' "$WORK/status.html" && echo yes || echo no)"
  # The chart is drawn after traffic: one bar segment per outcome per minute.
  check "status page draws the requests-per-minute chart" "yes" \
    "$(grep -q '<svg id="chart"' "$WORK/status.html" && grep -q '<rect class="bar"' "$WORK/status.html" && echo yes || echo no)"
  check "status page lists the profiles in force" "yes" \
    "$(grep -q '<table id="profiles">' "$WORK/status.html" && echo yes || echo no)"
  chrome --dump-dom "$ADMIN/?profile=default" > "$WORK/status-default.html" 2>> "$WORK/chrome.log"
  check "status page filtered by profile" "yes" \
    "$(grep -q '<strong>default</strong>' "$WORK/status-default.html" && grep -q '<rect class="bar"' "$WORK/status-default.html" && echo yes || echo no)"
  # Chromium logs every console message (errors, CSP violations, uncaught
  # exceptions) as a CONSOLE line.
  check "status page has no console errors" "" \
    "$(grep -E ':CONSOLE|Uncaught' "$WORK/chrome.log")"
  chrome --window-size=1400,1800 --screenshot="$TARGET/e2e-status.png" "$ADMIN/" 2>/dev/null >/dev/null
  check "status page screenshot ($TARGET/e2e-status.png)" "yes" \
    "$([[ -s $TARGET/e2e-status.png ]] && echo yes || echo no)"
fi

# The proxy logged one line per request.
check "requests logged" "yes" "$(grep -q 'profile="default" outcome="robots-disallow" rule_line=2 status=403' "$WORK/proxy.log" && echo yes || echo no)"

echo
echo "e2e: $passed passed, $failed failed"
if ((failed > 0)); then
  echo "--- proxy log ---"; tail -50 "$WORK/proxy.log"
  exit 1
fi
