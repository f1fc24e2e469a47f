# Sluice's broker, name server (with the replication controller) and admin
# tool in one image:
#   docker build -t sluice .
#   docker run --rm -p 9876:9876 -p 10911:10911 -p 8081:8081 sluice
# runs one broker with its embedded name server; deploy/k8s runs a cluster.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin broker --bin namesrv --bin sluice-admin \
    && mkdir /out \
    && cp target/release/broker target/release/namesrv target/release/sluice-admin /out/

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /var/lib/sluice --create-home sluice
COPY --from=build /out/ /usr/local/bin/
USER sluice
WORKDIR /var/lib/sluice
# Remoting, HA, gRPC, metrics; name server and controller.
EXPOSE 10911 10912 8081 5557 9876 9878
ENTRYPOINT ["broker"]
CMD ["--store-dir", "/var/lib/sluice/store"]
