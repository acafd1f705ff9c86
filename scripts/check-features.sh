#!/usr/bin/env bash
# Every package selection a newcomer or CI builds must resolve the same
# features for every dependency they share: one differing feature (tokio's
# `net` in one crate, arrow's `ffi` in another) gives that dependency and
# everything built on it, DataFusion included, a second compilation.
# Compares `cargo tree`'s resolved features across the selections below and
# fails naming each dependency whose features differ. No build needed.
# Usage: scripts/check-features.sh   (from anywhere in the repository)
set -euo pipefail
cd "$(dirname "$0")/.."

# name|cargo tree arguments: what `cargo build [--release]`, the README's
# two commands, the Python module's build (maturin builds the one package),
# the benchmarks and each crate that builds DataFusion select. Not covered:
# what changes a build without changing features (another profile, or
# environment a build script reads).
selections=(
  "cargo build|-e normal,build"
  "cargo run -p logbook-cli|-p logbook-cli -e normal,build"
  "cargo test --workspace|--workspace -e normal,build,dev"
  "cargo build --workspace|--workspace -e normal,build"
  "maturin build (logbook-python)|-p logbook-python -e normal,build"
  "benches (logbook, dev)|-p logbook -e normal,build,dev"
  "cargo test -p logbook-datafusion|-p logbook-datafusion -e normal,build,dev"
  "cargo test -p logbook-flight|-p logbook-flight -e normal,build,dev"
)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# What a difference would compile again: DataFusion and everything it is
# built from (arrow, parquet, tokio, chrono...).
cargo tree --locked -p datafusion -e normal,build --prefix none -f '{p}' \
  | sed 's/ (\*)$//; s/ (proc-macro)$//' | sort -u >"$out/closure"
for entry in "${selections[@]}"; do
  name="${entry%%|*}"
  read -r -a args <<<"${entry#*|}"
  # A package built for the host too (a build script's dependency) may be
  # listed twice with its two sets: one line per package, sets joined.
  cargo tree --locked "${args[@]}" --prefix none -f '{p}|{f}' \
    | sed 's/ (\*)$//; s/ (proc-macro)|/|/' | sort -u \
    | awk -F'|' -v sel="$name" '
        FNR == NR { keep[$0] = 1; next }
        $1 in keep { sets[$1] = sets[$1] (sets[$1] == "" ? "" : " + ") "[" $2 "]" }
        END { for (p in sets) print sel "|" p "|" sets[p] }' "$out/closure" - >>"$out/all"
done
# Lines are selection|package|features: report every package seen with
# more than one feature set, and which selections resolve each.
awk -F'|' '
  { if (!(($2, $3) in where)) { count[$2]++; feats[$2] = feats[$2] SUBSEP $3 }
    where[$2, $3] = where[$2, $3] (where[$2, $3] == "" ? "" : "; ") $1 }
  END {
    bad = 0
    for (p in count) if (count[p] > 1) {
      bad = 1; print p " resolves differently:"
      n = split(substr(feats[p], 2), fs, SUBSEP)
      for (i = 1; i <= n; i++) print "    " fs[i] " in: " where[p, fs[i]]
    }
    exit bad
  }' "$out/all" || {
  echo "check-features: declare these features once, in [workspace.dependencies] (see its comment)"
  exit 1
}
echo "check-features: ${#selections[@]} selections, one feature set for each of DataFusion's $(wc -l <"$out/closure") crates"
