#!/usr/bin/env bash
# Remakes crates/logbook-cli/symbol-order.txt, the order the release
# binary's linker lays out the functions a query runs (see the build
# script, crates/logbook-cli/build.rs): every function of the binary that
# the analyst workload's queries execute, under valgrind's callgrind
# (which sees every function run, once or not, unlike a sampling profiler).
# Usage: scripts/symbol-order.sh   (from the repository root, after
# benches/compare/analyst_cli.sh has written its warehouse; then build
# the release binary again and re-run that benchmark to see the effect).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q valgrind >/dev/null; }
cargo build --release --locked -p logbook-cli
binary="${CARGO_TARGET_DIR:-target}/release/logbook"
data="${LOGBOOK_BENCH_DIR:-target/compare}/analyst-9000000-90-200000"
[ -f "$data/files.json" ] || { echo "no warehouse at $data: run benches/compare/analyst_cli.sh first" >&2; exit 1; }
profiles="$(mktemp -d)"
trap 'rm -rf "$profiles"' EXIT
queries=$(python3 -c "import json; print(' '.join(k for k in json.load(open('benches/compare/analyst_queries.json')) if not k.startswith('_')))")
for q in $queries; do
  python3 - "$q" "$binary" "$data" <<'PY' | xargs -0 valgrind --tool=callgrind --demangle=no --callgrind-out-file="$profiles/$q.out" >/dev/null 2>&1
import json, sys
sys.path.insert(0, "benches/compare")
import analyst_cli
name, binary, data = sys.argv[1:]
query = json.load(open("benches/compare/analyst_queries.json"))[name]
files = json.load(open(f"{data}/files.json"))
print("\0".join(analyst_cli.logbook_cmd(binary, data, query, files)), end="")
PY
done
python3 - "$binary" "$profiles"/*.out > "$profiles/order.txt" <<'PY'
import re, subprocess, sys
# The binary's functions (mangled names, as the linker sees them).
functions = {}
for line in subprocess.run(["nm", "-S", sys.argv[1]], capture_output=True, text=True, check=True).stdout.splitlines():
    parts = line.split()
    if len(parts) == 4 and parts[2] in "tTwW":
        functions[parts[3]] = int(parts[1], 16)
# Every function callgrind names (as caller or callee), first seen first.
order, seen = [], set()
for profile in sys.argv[2:]:
    for line in open(profile):
        m = re.match(r"c?fn=\(\d+\) (.+)$", line)
        if m and m.group(1) in functions and m.group(1) not in seen:
            seen.add(m.group(1))
            order.append(m.group(1))
print("\n".join(order))
print(f"{len(order)} functions, {sum(functions[n] for n in order) / 1e6:.1f} MB of code", file=sys.stderr)
PY
mv "$profiles/order.txt" crates/logbook-cli/symbol-order.txt
