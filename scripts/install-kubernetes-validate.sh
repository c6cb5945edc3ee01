#!/usr/bin/env bash
# Installs kubernetes-validate, which checks manifests against the Kubernetes API's own
# schemas (shipped inside the package, so it needs no cluster and no network once
# installed), into a virtual environment of its own (from PyPI, pinned). Does nothing when
# that version is there already. scripts/check-kubernetes.sh runs it.
set -euo pipefail
VERSION=1.34.1
VENV="${KUBERNETES_VALIDATE_VENV:-$HOME/.cache/bookmarks-sharded/kubernetes-validate}"
if [ -x "$VENV/bin/kubernetes-validate" ] && "$VENV/bin/pip" show kubernetes-validate 2>/dev/null | grep -qx "Version: $VERSION"; then
    echo "install-kubernetes-validate: kubernetes-validate $VERSION present at $VENV/bin"
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
"$VENV/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$VERSION"
echo "install-kubernetes-validate: kubernetes-validate $VERSION installed at $VENV/bin"
