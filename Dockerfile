# The application image: built from source with the official Rust image, run on slim Debian
# as an unprivileged user. Holds every binary the runbooks use.
#
# The Rust image is pinned to the crate's `rust-version` (Cargo.toml); change both together.
# Both base images are build arguments only so that a machine without a registry can build
# this same file with local stand-ins (scripts/check-dockerfile.sh); users keep the defaults.
ARG RUST_IMAGE=rust:1.88-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${RUST_IMAGE} AS builder
WORKDIR /src
# Dependencies first, in a layer of their own: the manifests and lock file with an empty
# source file at every target path they declare. This layer is rebuilt only when a
# Cargo.toml or Cargo.lock change, so an edit to the application recompiles only this
# crate. The placeholders of other targets stay: cargo wants every declared target of every
# workspace member to exist, and the build context (.dockerignore) carries only what the
# binaries are built from. The load generator and the harnesses (xtask) are workspace members
# the image never builds.
COPY Cargo.toml Cargo.lock ./
COPY loadgen/Cargo.toml loadgen/
COPY xtask/Cargo.toml xtask/
RUN sed -n 's/^path = "\(.*\)"$/\1/p' Cargo.toml | while read -r target; do \
        mkdir -p "$(dirname "$target")" && echo 'fn main() {}' > "$target"; \
    done \
 && for member in loadgen xtask; do \
        mkdir -p $member/src && echo 'fn main() {}' > $member/src/main.rs && : > $member/src/lib.rs; \
    done \
 && cargo build --release --locked -p bookmarks-sharded --bins \
 && rm -rf app bin
COPY . .
# COPY keeps the files' own (older) times; make sure cargo sees the real sources as newer
# than the placeholders it just compiled.
RUN find app bin -name '*.rs' -exec touch {} + \
 && cargo build --release --locked -p bookmarks-sharded --bins \
 && strip target/release/bookmarks target/release/move_slot

FROM ${RUNTIME_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*
COPY --from=builder /src/target/release/bookmarks /src/target/release/move_slot /usr/local/bin/
COPY autumn.toml /app/autumn.toml
WORKDIR /app
ENV AUTUMN_CONFIG=/app/autumn.toml BIND=0.0.0.0:3000
# A numeric user: no login account is needed to run a server.
USER 10001:10001
EXPOSE 3000
ENTRYPOINT ["bookmarks"]
CMD ["serve"]
