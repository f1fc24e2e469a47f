# Sluice's broker, name server (with the replication controller) and admin
# tool in one image:
#   docker build -t sluice .
#   docker run --rm -p 9876:9876 -p 10911:10911 -p 8081:8081 sluice
# runs one broker with its embedded name server; deploy/k8s runs a cluster.
# `cargo xtask image` builds it and runs a replicated group from it. Where
# Docker Hub is out of reach, scripts/docker-local.sh makes the two base
# images locally; other bases can be named with --build-arg.
ARG BUILD_IMAGE=rust:1.95-slim-bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p broker-server -p name-server -p admin \
        --bin broker --bin namesrv --bin sluice-admin \
    && mkdir /out \
    && cp target/release/broker target/release/namesrv target/release/sluice-admin /out/

FROM ${RUNTIME_IMAGE}
RUN useradd --system --uid 10001 --home-dir /var/lib/sluice --create-home sluice
COPY --from=build /out/ /usr/local/bin/
USER sluice
WORKDIR /var/lib/sluice
# Remoting, HA, gRPC, metrics; name server and controller.
EXPOSE 10911 10912 8081 5557 9876 9878
ENTRYPOINT ["broker"]
CMD ["--store-dir", "/var/lib/sluice/store"]
