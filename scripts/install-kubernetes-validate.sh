#!/usr/bin/env bash
# Installs kubernetes-validate, which checks manifests against the Kubernetes API's own
# schemas (shipped inside the package, so it needs no cluster and no network once
# installed), into a virtual environment of its own (from PyPI, pinned). Does nothing when
# that version is there already. scripts/check-kubernetes.sh runs it.
set -euo pipefail
. "$(dirname "$0")/lib/venv.sh"
VERSION=1.34.1
VENV="${KUBERNETES_VALIDATE_VENV:-$HOME/.cache/bookmarks-sharded/kubernetes-validate}"
if pinned_venv "$VENV" kubernetes-validate "$VERSION"; then
	echo "install-kubernetes-validate: kubernetes-validate $VERSION installed at $VENV/bin"
else
	echo "install-kubernetes-validate: kubernetes-validate $VERSION present at $VENV/bin"
fi
