# Sourced by the scripts that test with Python packages.
# ensure_venv DIR "PINS": a virtual environment at DIR holding exactly the
# pinned packages; rebuilt only when the pins change.
ensure_venv() {
  local venv="$1" pins="$2"
  [ -f "$venv/.pins" ] && [ "$(cat "$venv/.pins")" = "$pins" ] && return 0
  rm -rf "$venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086
  "$venv/bin/pip" install -q $pins
  echo "$pins" > "$venv/.pins"
}
