#!/usr/bin/env bash
# The Iceberg mirror read by pyiceberg, DuckDB's iceberg and avro extensions
# and polars, pinned: tests/iceberg (see scripts/mirror-readers.sh).
# Usage: scripts/iceberg-readers.sh [PYTEST ARGS]   (from the repository root)
exec "$(dirname "$0")/mirror-readers.sh" iceberg "$@"
