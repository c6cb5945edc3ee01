# The application image: built from source with the official Rust image, run on slim
# Debian as an unprivileged user. Holds every binary the runbooks use.
FROM rust:1-bookworm AS builder
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bins \
 && strip target/release/bookmarks target/release/move_slot

FROM debian:bookworm-slim
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
