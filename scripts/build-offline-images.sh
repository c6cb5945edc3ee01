#!/usr/bin/env bash
# Builds local stand-ins for the public postgres:15, nginx and debian:bookworm-slim images out of
# Debian packages, because machines of this project cannot pull from any container registry: the
# only reachable package source is the Debian mirror configured in the host's apt sources.
# Recipes live in docker/offline/ (see its README.md).
#
# Usage: scripts/build-offline-images.sh [--force] [debian|postgres|nginx ...]
#   With no names, builds all three. An image whose recipe-hash label matches the current recipe
#   is reused; --force rebuilds anyway.
set -euo pipefail

SCRIPT_PATH="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")"
REPO_ROOT="$(cd "$(dirname "$SCRIPT_PATH")/.." && pwd)"
RECIPES="$REPO_ROOT/docker/offline"
SUITE="${OFFLINE_IMAGES_SUITE:-bookworm}"
LABEL_KEY="org.bookmarks-offline.recipe-sha256"

ALL_IMAGES=(debian postgres nginx)
declare -A TAG=(
	[debian]="bookmarks-offline/debian:bookworm-slim"
	[postgres]="bookmarks-offline/postgres:15"
	[nginx]="bookmarks-offline/nginx:stable"
)
# Packages on top of the "apt" variant (Essential:yes + apt); dependencies come along, recommends
# don't. The merged-usr hook sets up /usr-merge directly instead of pulling in usrmerge (and perl).
declare -A PACKAGES=(
	[debian]="ca-certificates curl"
	[postgres]="postgresql-15 locales xz-utils zstd"
	[nginx]="nginx gettext-base ca-certificates curl"
)

log() { printf '[build-offline-images] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

usage() { sed -n '2,9p' "$SCRIPT_PATH" | sed 's/^# \{0,1\}//'; }

FORCE=0
WANTED=()
while [[ $# -gt 0 ]]; do
	case "$1" in
		--force) FORCE=1 ;;
		-h|--help) usage; exit 0 ;;
		debian|postgres|nginx) WANTED+=("$1") ;;
		*) usage >&2; die "unknown argument: $1" ;;
	esac
	shift
done
[[ ${#WANTED[@]} -gt 0 ]] || WANTED=("${ALL_IMAGES[@]}")

[[ "$REPO_ROOT" != *[[:space:]]* ]] || die "mmdebstrap hooks cannot take a repository path with spaces: $REPO_ROOT"
[[ $(id -u) -eq 0 ]] || die "must run as root (mmdebstrap root mode, docker)"
command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "docker daemon is not reachable"
if ! command -v mmdebstrap >/dev/null; then
	log "mmdebstrap missing: apt-get install -y mmdebstrap"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mmdebstrap >/dev/null
fi

# Prints "URI|SUITE|COMPONENTS|SIGNED-BY" for every Debian archive entry in the host's apt
# configuration (one-line .list and deb822 .sources). Third-party repositories are dropped: an
# entry is kept only if its suite is $SUITE, $SUITE-updates or $SUITE-security, its components are
# Debian's, and it is signed by the Debian archive keyring (or names no key at all).
debian_apt_entries() {
	local SRCLIST SRCPARTS files=()
	eval "$(apt-config shell SRCLIST Dir::Etc::sourcelist/f SRCPARTS Dir::Etc::sourceparts/d)"
	[[ -f "$SRCLIST" ]] && files+=("$SRCLIST")
	shopt -s nullglob
	files+=("$SRCPARTS"*.list "$SRCPARTS"*.sources)
	shopt -u nullglob
	[[ ${#files[@]} -gt 0 ]] || return 0
	awk -v suite="$SUITE" '
		function ok_suite(s) { return s == suite || s == suite "-updates" || s == suite "-security" }
		function ok_comps(c,   n, a, i) {
			n = split(c, a, /[ \t]+/)
			if (n == 0) return 0
			for (i = 1; i <= n; i++) if (a[i] !~ /^(main|contrib|non-free|non-free-firmware)$/) return 0
			return 1
		}
		function ok_key(k) { return k == "" || k ~ /^[^ \t]*debian-archive-keyring[^ \t]*$/ }
		function trim(s) { gsub(/^[ \t]+|[ \t]+$/, "", s); return s }
		function emit(uris, suites, comps, key,   nu, u, ns, s, i, j) {
			comps = trim(comps); key = trim(key)
			if (!ok_comps(comps) || !ok_key(key)) return
			nu = split(trim(uris), u, /[ \t]+/); ns = split(trim(suites), s, /[ \t]+/)
			for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++)
				if (ok_suite(s[j])) print u[i] "|" s[j] "|" comps "|" key
		}
		function flush() {
			if (inpara && enabled != "no" && (" " types " ") ~ /[ \t]deb[ \t]/) emit(f["uris"], f["suites"], f["components"], f["signed-by"])
			delete f; inpara = 0; enabled = ""; types = ""; last = ""
		}
		FNR == 1 { flush() }
		FILENAME ~ /\.sources$/ {
			if ($0 ~ /^[ \t]*#/) next
			if ($0 ~ /^[ \t]*$/) { flush(); next }
			if ($0 ~ /^[ \t]/) { if (last != "") f[last] = f[last] "\n" $0; next }
			inpara = 1
			name = tolower(substr($0, 1, index($0, ":") - 1)); value = trim(substr($0, index($0, ":") + 1))
			f[name] = value; last = name
			if (name == "types") types = value
			if (name == "enabled") enabled = tolower(value)
			next
		}
		{
			line = $0; sub(/#.*/, "", line)
			if (line !~ /^[ \t]*deb[ \t]/) next
			key = ""
			if (match(line, /\[[^]]*\]/)) {
				opts = substr(line, RSTART + 1, RLENGTH - 2)
				line = substr(line, 1, RSTART - 1) " " substr(line, RSTART + RLENGTH)
				if (match(opts, /signed-by=[^ \t]+/)) key = substr(opts, RSTART + 10, RLENGTH - 10)
			}
			n = split(trim(line), w, /[ \t]+/)
			comps = ""; for (i = 4; i <= n; i++) comps = comps " " w[i]
			if (n >= 4) emit(w[2], w[3], comps, key)
		}
		END { flush() }
	' "${files[@]}" | awk '!seen[$0]++'
}

MIRRORS=()
KEYRING_ARGS=()
load_mirrors() {
	local uri suite comps key keys=()
	while IFS='|' read -r uri suite comps key; do
		MIRRORS+=("deb $uri $suite $comps")
		[[ -n "$key" ]] && keys+=("$key")
	done < <(debian_apt_entries)
	[[ ${#MIRRORS[@]} -gt 0 ]] || die "no Debian '$SUITE' entries found in the host's apt sources"
	if [[ ${#keys[@]} -gt 0 ]]; then
		mapfile -t keys < <(printf '%s\n' "${keys[@]}" | sort -u)
		[[ ${#keys[@]} -eq 1 && -f "${keys[0]}" ]] || die "expected one Debian keyring file, got: ${keys[*]}"
		KEYRING_ARGS=("--keyring=${keys[0]}")
	fi
	log "Debian package sources taken from the host's apt configuration:"
	printf '    %s\n' "${MIRRORS[@]}" >&2
}

# Content hash of everything that defines an image: this script (package lists, mmdebstrap
# options), the shared and per-image recipe files, and the suite.
recipe_hash() {
	local name="$1"
	{
		sha256sum "$SCRIPT_PATH" | cut -d' ' -f1
		(cd "$RECIPES" && find base "$name" -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
		printf 'suite=%s packages=%s\n' "$SUITE" "${PACKAGES[$name]}"
	} | sha256sum | cut -d' ' -f1
}

build_image() {
	local name="$1" tag="${TAG[$1]}" hash old_id="" current rootfs_id new_id start end
	local dir="$RECIPES/$name" inside="/tmp/offline-recipe"
	hash="$(recipe_hash "$name")"
	if current="$(docker image inspect --format "{{ index .Config.Labels \"$LABEL_KEY\" }}" "$tag" 2>/dev/null)"; then
		old_id="$(docker image inspect --format '{{.Id}}' "$tag")"
		if [[ "$current" == "$hash" && $FORCE -eq 0 ]]; then
			log "$tag: up to date (recipe ${hash:0:12}), reusing it"
			return 0
		fi
		log "$tag: exists with recipe ${current:0:12}; rebuilding for recipe ${hash:0:12}"
	else
		log "$tag: not present; building recipe ${hash:0:12}"
	fi
	[[ -n "${MIRRORS[*]}" ]] || load_mirrors

	local hooks=()
	if [[ -f "$dir/essential.sh" ]]; then
		hooks+=(
			--essential-hook="mkdir -p \"\$1$inside\""
			--essential-hook="copy-in $dir $inside"
			--essential-hook="chroot \"\$1\" sh $inside/$name/essential.sh $inside/$name"
		)
	fi
	hooks+=(
		--customize-hook="rm -rf \"\$1$inside\" && mkdir -p \"\$1$inside\""
		--customize-hook="copy-in $RECIPES/base $dir $inside"
	)
	if [[ -f "$dir/customize.sh" ]]; then
		hooks+=(--customize-hook="chroot \"\$1\" sh $inside/$name/customize.sh $inside/$name")
	fi
	hooks+=(
		--customize-hook="chroot \"\$1\" sh $inside/base/customize.sh"
		--customize-hook="rm -rf \"\$1$inside\""
	)

	start=$(date +%s)
	log "$tag: mmdebstrap $SUITE --variant=apt --include='${PACKAGES[$name]}' | docker import"
	rootfs_id="$(
		mmdebstrap --quiet --variant=apt --format=tar \
			--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
			--aptopt='APT::Install-Recommends "false"' \
			--aptopt='APT::Install-Suggests "false"' \
			--dpkgopt='path-exclude=/usr/share/doc/*' \
			--dpkgopt='path-include=/usr/share/doc/*/copyright' \
			--dpkgopt='path-exclude=/usr/share/man/*' \
			--dpkgopt='path-exclude=/usr/share/info/*' \
			--dpkgopt='path-exclude=/usr/share/locale/*' \
			--dpkgopt='path-include=/usr/share/locale/locale.alias' \
			--dpkgopt='path-exclude=/usr/share/lintian/*' \
			"${KEYRING_ARGS[@]}" \
			--include="${PACKAGES[$name]}" \
			"${hooks[@]}" \
			"$SUITE" - "${MIRRORS[@]}" \
		| docker import --message "offline $tag rootfs (recipe $hash)" -
	)"
	log "$tag: rootfs imported as ${rootfs_id#sha256:}; applying $name/Dockerfile metadata"
	new_id="$(docker build --quiet --build-arg ROOTFS="$rootfs_id" --build-arg RECIPE_SHA256="$hash" \
		--tag "$tag" - < "$dir/Dockerfile")"
	end=$(date +%s)
	log "$tag: built ${new_id#sha256:} in $((end - start)) s, size $(docker image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}')"
	if [[ -n "$old_id" && "$old_id" != "$new_id" ]]; then
		# The superseded image is now untagged; drop it unless a container still uses it.
		docker rmi "$old_id" >/dev/null 2>&1 && log "$tag: removed superseded image ${old_id#sha256:}" || true
	fi
}

for name in "${WANTED[@]}"; do
	build_image "$name"
done
docker image ls --filter reference='bookmarks-offline/*' >&2
