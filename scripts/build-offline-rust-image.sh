#!/usr/bin/env bash
# Builds bookmarks-offline/rust:bookworm, a stand-in for the official Rust build image (which
# cannot be pulled on machines without a registry), so that the repository's Dockerfile itself
# can be built and checked here (scripts/check-dockerfile.sh). It is the host's own toolchain
# (the active rustup toolchain's bin/, lib/ and libexec/, no docs) on the local Debian
# stand-in, with gcc and libc6-dev from Debian for linking, and the host's extra CA
# certificates (/usr/local/share/ca-certificates), so that cargo inside reaches the crate
# registry the way the host does. Reused while the host's rustc version is unchanged.
#
# The toolchain is the host's version, not the Dockerfile's pinned one: the image label and
# the script's output say which.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=bookmarks-offline/rust:bookworm
LABEL=org.bookmarks-offline.rustc
sysroot="$(rustc --print sysroot)"
version="$(rustc --version)"

if [ "$(docker image inspect -f "{{ index .Config.Labels \"$LABEL\" }}" "$TAG" 2>/dev/null || true)" = "$version" ]; then
	echo "build-offline-rust-image: $TAG ($version) up to date, reusing it"
	exit 0
fi
if ! docker image inspect bookmarks-offline/debian:bookworm-slim >/dev/null 2>&1; then
	scripts/build-offline-images.sh debian
fi

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
mkdir -p "$context/toolchain" "$context/ca"
cp -a "$sysroot/bin" "$sysroot/lib" "$context/toolchain/"
[ -d "$sysroot/libexec" ] && cp -a "$sysroot/libexec" "$context/toolchain/"
find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$context/ca/" \; 2>/dev/null || true
cat >"$context/Dockerfile" <<EOF
FROM bookmarks-offline/debian:bookworm-slim
RUN apt-get update \\
 && apt-get install -y --no-install-recommends gcc libc6-dev \\
 && rm -rf /var/lib/apt/lists/*
COPY ca/ /usr/local/share/ca-certificates/
RUN update-ca-certificates >/dev/null
COPY toolchain/ /usr/local/rust/
ENV PATH=/usr/local/rust/bin:/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \\
    CARGO_HOME=/usr/local/cargo
LABEL $LABEL="$version" org.bookmarks-offline.stands-in-for="rust (official image)"
RUN cargo --version && rustc --version
EOF
start=$(date +%s)
docker build --quiet -t "$TAG" "$context" >/dev/null
echo "build-offline-rust-image: $TAG ($version) built in $(($(date +%s) - start)) s"
