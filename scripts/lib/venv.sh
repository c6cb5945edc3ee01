# Sourced by the installers of Python tools (schemathesis, kubernetes-validate): each gets a
# virtual environment of its own, from PyPI and pinned, so that no system Python package is
# touched.

# pinned_venv VENV PACKAGE VERSION: makes VENV hold PACKAGE==VERSION, and does nothing when
# it does already. Returns 0 when it installed, 1 when the version was there.
pinned_venv() {
	local venv=$1 package=$2 version=$3 python
	# grep reads to the end: with pipefail, -q would let pip die of SIGPIPE and fail the check.
	if [ -x "$venv/bin/pip" ] && "$venv/bin/pip" show "$package" 2>/dev/null | grep -x "Version: $version" >/dev/null; then
		return 1
	fi
	python="$(command -v python3 || true)"
	if [ -z "$python" ] || ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
		# Debian's python3 needs python3-venv for virtual environments.
		local sudo=""
		if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
		$sudo apt-get update -qq
		DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq python3 python3-venv >/dev/null
		python="$(command -v python3)"
	fi
	rm -rf "$venv"
	"$python" -m venv "$venv"
	"$venv/bin/pip" install --quiet --disable-pip-version-check "$package==$version"
}
