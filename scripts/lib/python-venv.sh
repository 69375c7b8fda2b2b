# Sourced by the scripts that run pinned Python tools (schemathesis, the generated-client check).
#
#   python_venv VENV PACKAGE==VERSION...
#
# makes VENV hold these exact versions: when any is missing or at another version, VENV is
# created afresh and they are installed from PyPI with pip. Installs python3 / python3-venv
# through apt-get (as root) when `python3 -m venv` cannot work.

python_venv() {
  local venv=$1
  shift
  local missing=()
  command -v python3 >/dev/null 2>&1 || missing+=(python3)
  # Debian's python3 ships `venv` without `ensurepip` unless python3-venv is installed.
  python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || missing+=(python3-venv)
  if ((${#missing[@]})); then
    printf '\n== installing %s\n' "${missing[*]}" >&2
    if [ "$(id -u)" -ne 0 ]; then
      echo "missing system packages: ${missing[*]} (run as root or install them)" >&2
      return 1
    fi
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
  if ! "$venv/bin/python" - "$@" 2>/dev/null <<'PY'; then
import importlib.metadata as m, sys
pins = [arg.split("==", 1) for arg in sys.argv[1:]]
sys.exit(0 if all(m.version(name) == version for name, version in pins) else 1)
PY
    printf '\n== installing %s into %s\n' "$*" "$venv" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
  fi
}
