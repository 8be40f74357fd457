# Multi-stage build of the single `tayga` binary; the runtime image runs as a non-root user.
FROM rust:1.89-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
COPY src ./src
# The local ClickHouse config `tayga up` embeds (one copy with scripts/services.sh).
COPY scripts/clickhouse ./scripts/clickhouse
COPY benches ./benches
RUN cargo build --release --locked --bin tayga

FROM debian:bookworm-slim
# curl serves the compose healthchecks; ca-certificates the https webhook targets.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --home-dir /var/lib/tayga --create-home tayga
COPY --from=build /src/target/release/tayga /usr/local/bin/tayga
COPY completions/tayga.bash /usr/share/bash-completion/completions/tayga
USER tayga
WORKDIR /var/lib/tayga
ENTRYPOINT ["tayga"]
CMD ["serve", "all"]
