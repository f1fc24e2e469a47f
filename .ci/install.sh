#!/usr/bin/env bash
# Installs what `cargo xtask ci` needs on a fresh machine with a Rust toolchain.
set -euo pipefail

need_apt=()
# libfuzzer-sys compiles libFuzzer (C++) in its build script, which the fuzz check runs.
command -v c++ >/dev/null 2>&1 || need_apt+=(g++)
# The peers benchmark (`cargo xtask bench peers`) runs NATS and Redis beside
# Sluice; redis-server brings redis-benchmark (redis-tools). Debian puts
# nats-server in /usr/sbin.
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || need_apt+=(nats-server)
command -v redis-server >/dev/null 2>&1 || need_apt+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || need_apt+=(redis-tools)
# The chaos suite's partition cases cut links between network namespaces
# with nftables rules (`ip` comes with iproute2).
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need_apt+=(nftables)
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || need_apt+=(iproute2)
if [ ${#need_apt[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}"
fi

for component in rustfmt clippy; do
  if ! rustup component list --installed 2>/dev/null | grep -q "^${component}"; then
    rustup component add "$component"
  fi
done

# Apache's RocketMQ C++ client for the e2e suite, in target/cpp-client/venv.
bash "$(dirname "$0")/../scripts/install-cpp-client.sh"

# The Kubernetes manifests' schema checker, in target/k8s-validate/venv.
bash "$(dirname "$0")/../scripts/install-k8s-validate.sh"

cargo --version
rustc --version
