# Sourced by the scripts: create or reuse the project venv and install the project into it.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${LOOPPROBE_VENV:-$ROOT/.venv}"
PY="$VENV/bin/python"

if [ ! -x "$PY" ]; then
  echo "setup: creating $VENV" >&2
  python3 -m venv "$VENV"
fi
stamp="$VENV/.loopprobe-installed"
want="$(cat "$ROOT/pyproject.toml" | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing loopprobe with its test and docs dependencies into $VENV" >&2
  "$PY" -m pip install --quiet --disable-pip-version-check -e "$ROOT[test,docs]"
  echo "$want" > "$stamp"
fi
# every client run is contained by bubblewrap (probes refuse to run uncontained without
# --no-sandbox): install it where this user can
if ! command -v bwrap >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing bubblewrap (apt-get)" >&2
    apt-get install -y -qq bubblewrap >/dev/null 2>&1 \
      || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq bubblewrap >/dev/null; }
  else
    echo "setup: bubblewrap (bwrap) is missing; install it (e.g. sudo apt-get install" \
         "bubblewrap): probes refuse to run uncontained unless given --no-sandbox" >&2
  fi
fi
export PATH="$VENV/bin:$PATH"
cd "$ROOT"
