#!/usr/bin/env bash
# Installs Apache's RocketMQ C++ client 2.x for the end-to-end suite.
#
# The client's librocketmq.so ships inside the PyPI package
# rocketmq-python-cvs together with a ctypes wrapper; this script puts it in a
# project-local virtual environment, target/cpp-client/venv (git-ignored),
# whose python runs tests/cpp-client/driver.py. `cargo xtask e2e` passes that
# python to the suite as SLUICE_E2E_CPP_PYTHON.
#
# Idempotent: when the venv already holds the pinned version and the library
# loads, it does nothing. Debian packages the library needs (zlib and
# libstdc++) and python3-venv are installed with apt only when missing.
set -euo pipefail

PACKAGE=rocketmq-python-cvs
VERSION=2.1.0.3

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/target/cpp-client/venv"
stamp="$venv/.installed-$PACKAGE-$VERSION"
python="${PYTHON:-python3}"

# Loads the packaged library through the wrapper, which is what the driver does.
check() {
  "$venv/bin/python" -c 'import rocketmq.client, rocketmq.ffi as f; f.dll.GetLatestErrorMessage' \
    >/dev/null 2>&1
}

if [ -f "$stamp" ] && check; then
  echo "cpp client: $PACKAGE $VERSION already installed in $venv"
  exit 0
fi

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "$@"
}

if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  apt_install python3-venv
fi

mkdir -p "$(dirname "$venv")"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  "$PACKAGE==$VERSION"

lib="$("$venv/bin/python" -c 'import importlib.util, os; s = importlib.util.find_spec("rocketmq"); print(os.path.join(os.path.dirname(s.origin), "librocketmq.so"))')"
if ldd "$lib" | grep -q 'not found'; then
  ldd "$lib" | grep 'not found' >&2
  apt_install zlib1g libstdc++6
fi
if ! check; then
  echo "cpp client: $lib does not load" >&2
  "$venv/bin/python" -c 'import rocketmq.client' >&2 || true
  exit 1
fi
touch "$stamp"
echo "cpp client: installed $PACKAGE $VERSION in $venv"
