#!/usr/bin/env bash
# End-to-end: other spellings of a disallowed URL, against real Debian nginx
# and apache2. Each spelling is fetched straight from the server (does it
# resolve it to the secret file?) and through the release binary. Every
# spelling a server serves as the secret must get 403 robots-disallow from
# the proxy, or (the proxy forwards the RFC 3986 normal form, and where RFC
# and server disagree, as on /public//../private/x, that form is another
# page) be answered with something that is not the secret. No secret may
# ever come through the proxy.
# Nothing leaves 127.0.0.1. Does not build: scripts/test.sh runs tests/e2e.sh
# first, which does. Ends with a "N passed, M failed" line.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/robots-guard}
if [[ ! -x $BIN ]]; then
  echo "spellings-e2e: $BIN not found; build it first (cargo build --release)"
  exit 1
fi
find_server() { # name -> path, or nothing
  if command -v "$1" 2>/dev/null; then return; fi
  if [[ -x /usr/sbin/$1 ]]; then echo "/usr/sbin/$1"; fi
}
NGINX=$(find_server nginx)
APACHE=$(find_server apache2)
if [[ -z $NGINX || -z $APACHE ]]; then
  [[ -z $NGINX ]] && echo "spellings-e2e: nginx is not installed (apt-get install nginx; .ci/run does)"
  [[ -z $APACHE ]] && echo "spellings-e2e: apache2 is not installed (apt-get install apache2; .ci/run does)"
  exit 1
fi
APACHE_MODULES=/usr/lib/apache2/modules

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null; done
  wait 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT
unset NO_PROXY no_proxy HTTP_PROXY http_proxy HTTPS_PROXY https_proxy ALL_PROXY all_proxy

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_port() { # port, pid: true once it accepts, false if the process died or 10 s passed
  for _ in $(seq 100); do
    (echo > "/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# The docroot, readable by the servers' unprivileged workers (nobody, www-data).
chmod 755 "$WORK"
DOCROOT=$WORK/www
mkdir -p "$DOCROOT/private" "$DOCROOT/docs" "$DOCROOT/public"
printf 'User-agent: *\nDisallow: /private/\nDisallow: /*.secret$\n' > "$DOCROOT/robots.txt"
echo 'TOP-SECRET-PRIVATE' > "$DOCROOT/private/secret.html"
echo 'TOP-SECRET-DOCS' > "$DOCROOT/docs/a.secret"
echo 'public page' > "$DOCROOT/public/index.html"
echo 'read me' > "$DOCROOT/docs/readme.html"
chmod -R a+rX "$DOCROOT"
MARKER='TOP-SECRET-'

# nginx: its defaults (merge_slashes on, ...), with every file inside $WORK.
NGINX_PORT=$(free_port)
NG=$WORK/nginx
mkdir -p "$NG"
cat > "$NG/nginx.conf" <<CONF
daemon off;
worker_processes 1;
pid $NG/nginx.pid;
error_log $NG/error.log;
events { worker_connections 64; }
http {
  types { text/html html; text/plain txt; }
  default_type application/octet-stream;
  access_log $NG/access.log;
  client_body_temp_path $NG/body;
  proxy_temp_path $NG/proxy;
  fastcgi_temp_path $NG/fastcgi;
  uwsgi_temp_path $NG/uwsgi;
  scgi_temp_path $NG/scgi;
  server {
    listen 127.0.0.1:$NGINX_PORT;
    root $DOCROOT;
  }
}
CONF
"$NGINX" -p "$NG" -e "$NG/error.log" -c "$NG/nginx.conf" > "$NG/stdout.log" 2>&1 &
NGINX_PID=$!
PIDS+=("$NGINX_PID")

# apache2: a self-contained config with Debian's default behaviour
# (AllowEncodedSlashes Off, MergeSlashes On, no MultiViews).
APACHE_PORT=$(free_port)
AP=$WORK/apache2
mkdir -p "$AP"
APACHE_USER=""
if [[ $(id -u) == 0 ]]; then
  APACHE_USER=$'User www-data\nGroup www-data'
fi
cat > "$AP/apache2.conf" <<CONF
ServerRoot $AP
ServerName 127.0.0.1
DefaultRuntimeDir $AP
PidFile $AP/apache2.pid
ErrorLog $AP/error.log
LogLevel warn
Mutex file:$AP default
Listen 127.0.0.1:$APACHE_PORT
LoadModule mpm_event_module $APACHE_MODULES/mod_mpm_event.so
LoadModule authz_core_module $APACHE_MODULES/mod_authz_core.so
LoadModule mime_module $APACHE_MODULES/mod_mime.so
LoadModule dir_module $APACHE_MODULES/mod_dir.so
$APACHE_USER
StartServers 1
ServerLimit 1
ThreadsPerChild 16
MaxRequestWorkers 16
TypesConfig /etc/mime.types
LogFormat "%h %l %u %t \"%r\" %>s %O" common
CustomLog $AP/access.log common
DocumentRoot $DOCROOT
<Directory />
  Options FollowSymLinks
  AllowOverride None
  Require all denied
</Directory>
<Directory $DOCROOT>
  Options FollowSymLinks
  AllowOverride None
  Require all granted
</Directory>
CONF
"$APACHE" -f "$AP/apache2.conf" -DFOREGROUND > "$AP/stdout.log" 2>&1 &
APACHE_PID=$!
PIDS+=("$APACHE_PID")

# The proxy.
PROXY_PORT=$(free_port)
ADMIN_PORT=$(free_port)
cat > "$WORK/config.toml" <<TOML
[proxy]
listen = "127.0.0.1:$PROXY_PORT"
[identity]
user_agent = "fill"
[rate_limit]
default_delay = "0s"
[admin]
listen = "127.0.0.1:$ADMIN_PORT"
[tls]
ca_cert = "$WORK/certs/ca.pem"
ca_key = "$WORK/certs/ca.key"
TOML
"$BIN" serve --config "$WORK/config.toml" > "$WORK/proxy.log" 2>&1 &
PROXY_PID=$!
PIDS+=("$PROXY_PID")

startup_failed=0
wait_port "$NGINX_PORT" "$NGINX_PID" ||
  { echo "spellings-e2e: nginx did not start"; cat "$NG/stdout.log" "$NG/error.log" 2>/dev/null; startup_failed=1; }
wait_port "$APACHE_PORT" "$APACHE_PID" ||
  { echo "spellings-e2e: apache2 did not start"; cat "$AP/stdout.log" "$AP/error.log" 2>/dev/null; startup_failed=1; }
if ! wait_port "$PROXY_PORT" "$PROXY_PID" || ! wait_port "$ADMIN_PORT" "$PROXY_PID"; then
  echo "spellings-e2e: the proxy did not start"; tail -20 "$WORK/proxy.log"; startup_failed=1
fi
((startup_failed)) && exit 1
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

# fetch OUT URL [curl args...]: sets STATUS (000 if curl could not, with the
# exit code as :N), REASON (x-robots-guard-reason or -) and SECRET (SECRET or -).
fetch() {
  local out=$WORK/fetch
  rm -f "$out.body" "$out.head"
  local code
  code=$(curl -s --path-as-is --max-time 10 -o "$out.body" -D "$out.head" -w '%{http_code}' "$@")
  local rc=$?
  STATUS=$code
  ((rc != 0)) && STATUS="$code:curl$rc"
  REASON=$(tr -d '\r' < "$out.head" 2>/dev/null | sed -n 's/^[Xx]-[Rr]obots-[Gg]uard-[Rr]eason: //p' | tail -1)
  REASON=${REASON:--}
  SECRET=-
  grep -q "$MARKER" "$out.body" 2>/dev/null && SECRET=SECRET
  return 0
}

# Spellings of /private/secret.html and /docs/a.secret (the canonical two
# first). No query strings: a query makes a different URL, and "$" rules
# deliberately let /docs/a.secret?x=1 through.
SPELLINGS=(
  '/private/secret.html'
  '/docs/a.secret'
  # percent-encoded unreserved characters
  '/%70rivate/secret.html'
  '/privat%65/secret.html'
  '/priv%61te/secret.html'
  '/%70%72%69%76%61%74%65/secret.html'
  '/private/secret%2Ehtml'
  # dot segments, plain and encoded
  '/./private/secret.html'
  '/private/./secret.html'
  '/%2e/private/secret.html'
  '/%2E/private/secret.html'
  '/private/%2e/secret.html'
  '/public/../private/secret.html'
  '/public/%2e%2e/private/secret.html'
  '/public/%2E%2E/private/secret.html'
  '/public/.%2e/private/secret.html'
  '/private/x/../secret.html'
  '/../private/secret.html'
  # slashes
  '//private/secret.html'
  '/private//secret.html'
  '/public//../private/secret.html'
  '/public/..//private/secret.html'
  '/public/%2e%2e//private/secret.html'
  '/%2Fprivate/secret.html'
  '/private%2Fsecret.html'
  '/private%2fsecret.html'
  '/public/..%2Fprivate/secret.html'
  '/public/..%2fprivate/secret.html'
  '/public/%2e%2e%2fprivate/secret.html'
  '/public/%2e%2e%2Fprivate%2Fsecret.html'
  '/public%2F..%2Fprivate/secret.html'
  # ;params (Tomcat), backslashes (IIS)
  '/private;x=1/secret.html'
  '/public/..;/private/secret.html'
  '/private/secret.html;x=1'
  '/private\secret.html'
  '/private%5Csecret.html'
  '/public/..%5Cprivate/secret.html'
  # case, trailing slash
  '/PRIVATE/secret.html'
  '/private/secret.html/'
  '/private/secret.html/..'
  # the "/*.secret$" rule
  '/docs/a.s%65cret'
  '/docs/a%2Esecret'
  '/docs/a%2esecret'
  '/docs/a.secre%74'
  '/docs//a.secret'
  '/docs/./a.secret'
  '/docs/x/../a.secret'
  '/docs%2Fa.secret'
  '/docs/a.secret/%2e%2e/a.secret'
  '/docs/a.secret;x=1'
  '/docs/a.secret/'
  '/docs/a.SECRET'
)
MIN_SERVED=5

echo "server  spelling                                   direct          proxy"
for server in nginx apache2; do
  case $server in
    nginx) ORIGIN="http://127.0.0.1:$NGINX_PORT" ;;
    apache2) ORIGIN="http://127.0.0.1:$APACHE_PORT" ;;
  esac
  ROWS=()
  served=0
  for path in "${SPELLINGS[@]}"; do
    fetch "$ORIGIN$path"
    d_status=$STATUS d_secret=$SECRET
    fetch -x "$PROXY" "$ORIGIN$path"
    p_status=$STATUS p_reason=$REASON p_secret=$SECRET
    printf '%-7s %-42s %-15s %s\n' "$server" "$path" "$d_status $d_secret" "$p_status $p_reason $p_secret"
    ROWS+=("$path|$d_status|$d_secret|$p_status|$p_reason|$p_secret")
  done
  for row in "${ROWS[@]}"; do
    IFS='|' read -r path d_status d_secret p_status p_reason p_secret <<<"$row"
    case $path in
      /private/secret.html | /docs/a.secret)
        check "$server $path: served directly (sanity)" "200 SECRET" "$d_status $d_secret"
        check "$server $path: refused by the proxy" "403 robots-disallow -" "$p_status $p_reason $p_secret"
        ;;
      *)
        if [[ $d_secret == SECRET ]]; then
          served=$((served + 1))
          if [[ "$p_status $p_reason" == "403 robots-disallow" ]]; then
            check "$server $path: served as the secret directly, refused by the proxy" \
              "403 robots-disallow -" "$p_status $p_reason $p_secret"
          else
            normal=$("$BIN" check --robots "$DOCROOT/robots.txt" --agent curl --as-proxy "$path" |
              sed -n 's/.*forwarded as //p')
            check "$server $path: served as the secret directly; the proxy forwards ${normal:-?}, not the secret" \
              "yes -" "$([[ -n $normal ]] && echo yes || echo no) $p_secret"
          fi
        else
          check "$server $path: no secret through the proxy" "-" "$p_secret"
        fi
        ;;
    esac
  done
  check "$server serves the secret for at least $MIN_SERVED other spellings ($served)" "yes" \
    "$( ((served >= MIN_SERVED)) && echo yes || echo no)"

  # An allowed page still comes through, with its body.
  fetch -x "$PROXY" "$ORIGIN/public/index.html"
  check "$server /public/index.html through the proxy" "200 -" "$STATUS $REASON"
  check "$server /public/index.html body" "public page" "$(cat "$WORK/fetch.body" 2>/dev/null)"
done

echo
echo "spellings-e2e: $passed passed, $failed failed"
if ((failed > 0)); then
  echo "--- proxy log ---"; tail -50 "$WORK/proxy.log"
  exit 1
fi
