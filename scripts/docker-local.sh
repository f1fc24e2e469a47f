#!/usr/bin/env bash
# A Docker engine and the image's two base images on a Debian host that
# cannot reach Docker Hub (air-gapped, or behind a registry mirror that
# lacks them), so that `docker build` and `cargo xtask image` work there:
#
# 1. installs Debian's docker.io and debootstrap when missing, and starts
#    dockerd when none answers (without systemd: directly, in the
#    background, logging to /var/log/sluice-dockerd.log; no bridge network:
#    builds and containers use the host's network);
# 2. when `debian:bookworm-slim` cannot be pulled, makes a stand-in from a
#    minimal debootstrap of bookworm;
# 3. when `rust:1.95-slim-bookworm` cannot be pulled, makes a stand-in
#    from that base, gcc and libc6-dev, and this host's Rust 1.95
#    toolchain (rustup's `1.95.0` or `stable`), trusting the host's extra
#    CA certificates (a TLS-inspecting proxy's) for cargo's downloads.
#
# Both stand-ins are tagged with the public names, so the Dockerfile builds
# unchanged. Run as root; safe to run again (it makes only what is missing).
set -euo pipefail

RUST_IMAGE=rust:1.95-slim-bookworm
BASE_IMAGE=debian:bookworm-slim
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
WORK=$(mktemp -d /tmp/sluice-docker-XXXXXX)
trap 'rm -rf "$WORK"' EXIT

if [ "$(id -u)" -ne 0 ]; then
  echo "docker-local: run as root (it installs packages and starts dockerd)" >&2
  exit 1
fi

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    docker.io debootstrap iptables >/dev/null
fi

if ! docker info >/dev/null 2>&1; then
  setsid nohup dockerd --storage-driver=overlay2 --iptables=false --ip6tables=false \
    --bridge=none >/var/log/sluice-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  docker info >/dev/null 2>&1 || {
    echo "docker-local: dockerd did not start; see /var/log/sluice-dockerd.log" >&2
    exit 1
  }
fi

have() { docker image inspect "$1" >/dev/null 2>&1; }
pulled() { timeout 60 docker pull -q "$1" >/dev/null 2>&1; }

if ! have "$BASE_IMAGE" && ! pulled "$BASE_IMAGE"; then
  echo "docker-local: $BASE_IMAGE cannot be pulled; making it with debootstrap"
  root="$WORK/rootfs"
  debootstrap --variant=minbase bookworm "$root" "$MIRROR" >"$WORK/debootstrap.log" || {
    tail -20 "$WORK/debootstrap.log" >&2
    exit 1
  }
  cat >"$root/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb http://deb.debian.org/debian-security bookworm-security main
EOF
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import --change 'CMD ["bash"]' - "$BASE_IMAGE" >/dev/null
fi

if ! have "$RUST_IMAGE" && ! pulled "$RUST_IMAGE"; then
  echo "docker-local: $RUST_IMAGE cannot be pulled; making it from this host's toolchain"
  toolchain=""
  for t in 1.95.0 stable; do
    dir="${RUSTUP_HOME:-$HOME/.rustup}/toolchains/$t-x86_64-unknown-linux-gnu"
    if [ -x "$dir/bin/rustc" ] && "$dir/bin/rustc" -V | grep -q '^rustc 1\.95\.'; then
      toolchain=$(readlink -f "$dir")
      break
    fi
  done
  if [ -z "$toolchain" ]; then
    echo "docker-local: no Rust 1.95 toolchain under ~/.rustup/toolchains" >&2
    exit 1
  fi
  ctx="$WORK/rust"
  mkdir -p "$ctx/certs"
  tar -C "$toolchain" --exclude=./share/doc -cf "$ctx/toolchain.tar" .
  cp /usr/local/share/ca-certificates/*.crt "$ctx/certs/" 2>/dev/null || true
  cat >"$ctx/Dockerfile" <<EOF
FROM $BASE_IMAGE
ENV CARGO_HOME=/usr/local/cargo \\
    PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates gcc libc6-dev \\
    && rm -rf /var/lib/apt/lists/*
COPY certs/ /usr/local/share/ca-certificates/
RUN update-ca-certificates
ADD toolchain.tar /usr/local/rust/
RUN mkdir -p /usr/local/cargo/bin && rustc -V && cargo -V
EOF
  docker build -q --network host -t "$RUST_IMAGE" "$ctx" >/dev/null
fi

docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$BASE_IMAGE"
docker image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' "$RUST_IMAGE"
