#!/usr/bin/env bash
# Peak resident memory of replacing one large partition (issue #7), then of
# compacting it (issue #5 target: under 512 MiB for a 5 GiB partition).
# Usage: benches/memory/compact.sh [GIB]   (from the repository root)
set -euo pipefail
gib="${1:-5}"
dir="${LOGBOOK_BENCH_DIR:-target/compact-memory}/big"
cargo build --release --example compact_memory
bin=target/release/examples/compact_memory
rm -rf "$dir" && mkdir -p "$dir"
echo "replace: $("$bin" prepare "$dir" "$gib")"
echo "compact: $("$bin" compact "$dir")"
rm -rf "$dir"
