#!/usr/bin/env bash
# Installs kubernetes-validate (PyPI), which checks the manifests under
# deploy/k8s against Kubernetes' own API schemas (shipped in the package,
# no cluster needed), in a project-local virtual environment:
# target/k8s-validate/venv (git-ignored). `cargo xtask manifests` runs it.
#
# Idempotent: when the venv already holds the pinned version, it does
# nothing.
set -euo pipefail

PACKAGE=kubernetes-validate
VERSION=1.37.0

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/target/k8s-validate/venv"
stamp="$venv/.installed-$PACKAGE-$VERSION"
python="${PYTHON:-python3}"

if [ -f "$stamp" ] && "$venv/bin/kubernetes-validate" --version >/dev/null 2>&1; then
  echo "manifests: $PACKAGE $VERSION already installed in $venv"
  exit 0
fi
if ! "$python" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq python3-venv
fi
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check "$PACKAGE==$VERSION"
touch "$stamp"
echo "manifests: installed $PACKAGE $VERSION in $venv"
