#!/usr/bin/env bash
# Checks deploy/kubernetes offline: the committed manifests are what docker-compose.yml and
# autumn.toml render (scripts/render-kubernetes.py --check), every manifest is valid against
# the Kubernetes API's schemas (kubernetes-validate, strict: an unknown field fails), and,
# where kubectl is installed, every overlay builds with kustomize and its output is valid
# too. Needs scripts/install-kubernetes-validate.sh first.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${KUBERNETES_VALIDATE_VENV:-$HOME/.cache/bookmarks-sharded/kubernetes-validate}"
# The oldest Kubernetes version the manifests are for (a field newer than it fails), and a
# current one.
VERSIONS=(1.30.0 1.34.0)

validate() {
	for version in "${VERSIONS[@]}"; do
		"$VENV/bin/kubernetes-validate" --strict --quiet -k "$version" "$@"
	done
}

"$VENV/bin/python" scripts/render-kubernetes.py --check
validate deploy/kubernetes/base/{web,worker,migrate}.yaml deploy/kubernetes/jobs/*.yaml
echo "check-kubernetes: rendered manifests current and valid for Kubernetes ${VERSIONS[*]}"

if ! command -v kubectl >/dev/null; then
	echo "check-kubernetes: no kubectl here, so the overlays were not built with kustomize"
	exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cp -r deploy/kubernetes "$work/"
for overlay in "$work"/kubernetes/overlays/*/; do
	name="$(basename "$overlay")"
	for example in "$overlay"/*.env.example; do cp "$example" "${example%.example}"; done
	kubectl kustomize "$overlay" >"$work/$name.yaml"
	# Custom resources (the operator's Clusters) have no schema here and are passed over.
	validate "$work/$name.yaml" 2>&1 | { grep -v "Couldn't find schema for kind" || true; }
	echo "check-kubernetes: overlay $name builds and is valid"
done
