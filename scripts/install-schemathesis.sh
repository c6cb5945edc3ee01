#!/usr/bin/env bash
# Installs schemathesis, the third-party fuzzer the API tests point at the running app,
# into a virtual environment of its own (from PyPI, pinned), so that no system Python
# package is touched. Does nothing when that version is there already. The tests find it
# at the path printed (or at $BOOKMARKS_SCHEMATHESIS).
set -euo pipefail
. "$(dirname "$0")/lib/venv.sh"
VERSION=4.32.5
VENV="${SCHEMATHESIS_VENV:-$HOME/.cache/bookmarks-sharded/schemathesis}"
if pinned_venv "$VENV" schemathesis "$VERSION"; then
	echo "install-schemathesis: $("$VENV/bin/st" --version) installed at $VENV/bin/st"
else
	echo "install-schemathesis: schemathesis $VERSION present at $VENV/bin/st"
fi
