# Offline mode's application image: the runtime half of ../../Dockerfile on the local Debian
# stand-in, with both binaries (the server/CLI and move_slot) built on the host
# (`cargo build --release --bins`) instead of in the official Rust image, which cannot be
# pulled here.
FROM bookmarks-offline/debian:bookworm-slim
COPY target/release/bookmarks target/release/move_slot /usr/local/bin/
COPY autumn.toml /app/autumn.toml
WORKDIR /app
ENV AUTUMN_CONFIG=/app/autumn.toml BIND=0.0.0.0:3000
USER 10001:10001
EXPOSE 3000
ENTRYPOINT ["bookmarks"]
CMD ["serve"]
