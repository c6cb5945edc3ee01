#!/usr/bin/env bash
# Installs schemathesis, the third-party fuzzer the API tests point at the running app,
# into a virtual environment of its own (from PyPI, pinned), so that no system Python
# package is touched. Does nothing when that version is there already. The tests find it
# at the path printed (or at $BOOKMARKS_SCHEMATHESIS).
set -euo pipefail
VERSION=4.32.5
VENV="${SCHEMATHESIS_VENV:-$HOME/.cache/bookmarks-sharded/schemathesis}"
if [ -x "$VENV/bin/st" ] && "$VENV/bin/st" --version 2>/dev/null | grep -q "$VERSION"; then
    echo "install-schemathesis: schemathesis $VERSION present at $VENV/bin/st"
    exit 0
fi
PYTHON="$(command -v python3 || true)"
if [ -z "$PYTHON" ] || ! "$PYTHON" -c 'import venv, ensurepip' 2>/dev/null; then
    # Debian's python3 needs python3-venv for virtual environments.
    SUDO=""
    if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3 python3-venv >/dev/null
    PYTHON="$(command -v python3)"
fi
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$VERSION"
echo "install-schemathesis: $("$VENV/bin/st" --version) installed at $VENV/bin/st"
