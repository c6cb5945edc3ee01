# Offline mode's application image: the runtime half of ../../Dockerfile on the local Debian
# stand-in, with the binary built on the host (`cargo build --release --bin bookmarks`)
# instead of in the official Rust image, which cannot be pulled here.
FROM bookmarks-offline/debian:bookworm-slim
COPY target/release/bookmarks /usr/local/bin/bookmarks
COPY autumn.toml /app/autumn.toml
WORKDIR /app
ENV AUTUMN_CONFIG=/app/autumn.toml BIND=0.0.0.0:3000
USER 10001:10001
EXPOSE 3000
ENTRYPOINT ["bookmarks"]
CMD ["serve"]
