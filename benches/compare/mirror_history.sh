# Sourced by delta_open.sh and iceberg_open.sh: the tables whose open cost
# they compare.
#
# mirror_open_setup MIRROR: the pinned readers' venv (`venv`), the workspace's
# debug CLI (`bin`) and the three tables under `work` ($target/MIRROR-open),
# built once. Run from the repository root.
mirror_open_setup() {
  local mirror="$1" target="${CARGO_TARGET_DIR:-target}"
  . scripts/venv.sh
  venv=$("${mirror}_venv")
  cargo build --workspace --locked
  bin="$(cd "$target/debug" && pwd)/logbook"
  work="$target/$mirror-open"
  mirror_history "$work" "$mirror" "$bin"
}
# mirror_history WORK MIRROR BIN builds, once, under WORK:
#   h10/t     10 commits;
#   h3000/t   3,000 commits (the same 10 dates rewritten: only history differs);
#   h3000v/t  the same 3,000 commits, then `expire --keep-last 10` and `vacuum`
#             (built on its own, not copied from h3000: Iceberg metadata names
#             files by absolute path, so a copy would start a new history).
# Each table keeps the mirror MIRROR (delta or iceberg). One CLI process per commit.
mirror_history() {
  local work="$1" mirror="$2" bin="$3" commits wh i day
  for name in h10 h3000 h3000v; do
    commits=${name#h}; commits=${commits%v}
    wh="$work/$name"
    [ -f "$wh/done" ] && continue
    rm -rf "$wh"; mkdir -p "$wh"
    "$bin" --warehouse "$wh" create t --schema date:date,n:int64 --partition-by date --mirror "$mirror" > /dev/null
    for i in $(seq "$commits"); do
      day=$(date -d "2026-01-01 + $((i % 10)) days" +%F)
      printf 'date,n\n%s,%s\n' "$day" "$i" > "$wh/rows.csv"
      "$bin" --warehouse "$wh" write t --date "$day" "$wh/rows.csv" --run-id "r$i" > /dev/null
    done
    touch "$wh/done"
  done
  if [ ! -f "$work/h3000v/expired" ]; then
    "$bin" --warehouse "$work/h3000v" expire t --keep-last 10 > /dev/null
    "$bin" --warehouse "$work/h3000v" vacuum t --retention 0s --force > /dev/null
    touch "$work/h3000v/expired"
  fi
}
