#!/usr/bin/env bash
# The project's test command (README): the Rust test suite, then the
# end-to-end script that drives the release binary with real clients.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test
if [[ -f tests/e2e.sh ]]; then
  bash tests/e2e.sh
fi
if [[ -f tests/spellings_e2e.sh ]]; then
  bash tests/spellings_e2e.sh
fi
