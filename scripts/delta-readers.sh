#!/usr/bin/env bash
# The Delta Lake mirror read by deltalake (delta-rs), DuckDB's delta extension
# and polars, pinned: tests/delta (see scripts/mirror-readers.sh).
# Usage: scripts/delta-readers.sh [PYTEST ARGS]   (from the repository root)
exec "$(dirname "$0")/mirror-readers.sh" delta "$@"
