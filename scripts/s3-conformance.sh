#!/usr/bin/env bash
# Run the storage conformance suite against an S3-compatible server on
# loopback: moto's server (pinned), installed into a virtual environment,
# started here and stopped on exit.
# Usage: scripts/s3-conformance.sh   (from the repository root)
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/venv.sh
start_moto
trap 'kill "$MOTO_PID" 2>/dev/null || true' EXIT
# --workspace: the same feature set as `cargo test --workspace`, so nothing is rebuilt.
LOGBOOK_TEST_S3_ENDPOINT="$MOTO_ENDPOINT" \
  cargo test --workspace --locked --test it conformance -- --include-ignored
