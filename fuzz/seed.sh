#!/usr/bin/env bash
# Seeds fuzz/corpus/request_target/ with request targets, CONNECT
# authorities and User-Agent values (written here), and
# fuzz/corpus/robots_parse_match/ (both ignored by git) from the
# robots.txt corpus. Input layout (see fuzz_targets/robots_parse_match.rs):
#   agent byte | robots.txt | 0xFF | url | 0xFF | pattern | 0xFF | path
# Each corpus file is copied twice: once behind agent byte 0 (Googlebot) with
# nothing after it, once behind agent byte 1 (FooBot) with a URL and a
# pattern/path pair appended.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

targets="$here/corpus/request_target"
mkdir -p "$targets"
i=0
while IFS= read -r seed; do
    printf '%s' "$seed" > "$targets/seed-$i"
    i=$((i + 1))
done <<'SEEDS'
http://example.com/
http://Example.COM:8080/a/b;p?q=1#frag
https://[::1]:8443/x/y
https://[::FFFF:192.0.2.1]/
http://user:pass@example.com:81/
http://example.com:/
http://example.com:99999/
http://[example.com]/
http://127.0.0.1:3128/a/b/a/b/a/b/a/b
ftp://example.com/
/just/a/path?x
*
example.com:443
[2001:db8::1]:443
localhost
//example.com/a/../b
http://example.com/%2e%2e/%zz?q=%41
Mozilla/5.0 (compatible; FooBot/2.1; +http://x)
curl/8.5.0
SEEDS
echo "seed.sh: wrote $i inputs to $targets"

src="$here/../tests/testdata/robots"
dst="$here/corpus/robots_parse_match"
if [ ! -d "$src" ]; then
    echo "seed.sh: robots.txt corpus not found at $src" >&2
    exit 1
fi
mkdir -p "$dst"
n=0
for f in "$src"/*.txt; do
    name="$(basename "$f" .txt)"
    { printf '\000'; cat "$f"; } > "$dst/$name"
    { printf '\001'; cat "$f"; printf '\377/search?q=robots\377/*.php$\377/a/index.php'; } \
        > "$dst/$name.url"
    n=$((n + 1))
done
echo "seed.sh: wrote $((2 * n)) inputs to $dst"
