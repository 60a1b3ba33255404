#!/usr/bin/env bash
# Seeds fuzz/corpus/robots_parse_match/ (ignored by git) from the shared
# robots.txt corpus. Input layout (see fuzz_targets/robots_parse_match.rs):
#   agent byte | robots.txt | 0xFF | url | 0xFF | pattern | 0xFF | path
# Each corpus file is copied twice: once behind agent byte 0 (Googlebot) with
# nothing after it, once behind agent byte 1 (FooBot) with a URL and a
# pattern/path pair appended.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/../../shared/corpus/robots"
dst="$here/corpus/robots_parse_match"
if [ ! -d "$src" ]; then
    echo "seed.sh: robots.txt corpus not found at $src" >&2
    echo "seed.sh: the shared/ directory must sit beside the repository" >&2
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
