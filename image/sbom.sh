#!/usr/bin/env bash
# image/sbom.sh IMAGE [BASE]: print the CycloneDX SBOM (JSON) of IMAGE's Python environment
# (/opt/guardhook), made inside IMAGE itself by cyclonedx-py (PyPI `cyclonedx-bom`, pinned with hashes in
# image/sbom-tool.lock). The tool's venv is built once in a container of BASE (the image's base, default
# python:3.11-slim), so its interpreter is the image's, and kept in $CACHE keyed by the lock and the base.
# image/build.sh calls this; knobs as there (PODMAN, PODMAN_RUNTIME, CA_BUNDLE, BUILD_NETWORK, CACHE).
set -euo pipefail
cd "$(dirname "$0")/.."
. image/podman-args.sh
[ $# -ge 1 ] || { echo "usage: image/sbom.sh IMAGE [BASE]" >&2; exit 2; }
IMAGE=$1 BASE=${2:-docker.io/library/python:3.11-slim}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/guardhook-image}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
key=$( { cat image/sbom-tool.lock; $PODMAN image inspect --format '{{.Id}}' "$BASE"; } | sha256sum | cut -c1-12)
tool=$CACHE/sbom-tool-$key
if [ ! -x "$tool/venv/bin/cyclonedx-py" ]; then
  rm -rf "$tool"; mkdir -p "$tool"; cp image/sbom-tool.lock "$tool/"
  ca=(); [ -r "$CA_BUNDLE" ] && ca=(-v "$CA_BUNDLE:/run/secrets/ca-bundle:ro" -e PIP_CERT=/run/secrets/ca-bundle)
  $PODMAN run --rm "${PODMAN_ARGS[@]}" --network "${BUILD_NETWORK:-host}" "${ca[@]}" -v "$tool:/sbom" \
    --entrypoint /bin/sh "$BASE" -c 'python3 -m venv /sbom/venv && PIP_DISABLE_PIP_VERSION_CHECK=1 \
      /sbom/venv/bin/pip install --quiet --no-cache-dir --require-hashes --only-binary=:all: -r /sbom/sbom-tool.lock' >&2
fi
# --output-reproducible: no timestamp or random serial, so one environment gives one SBOM.
$PODMAN run --rm "${PODMAN_ARGS[@]}" --network none --read-only -v "$tool:/sbom:ro" \
  -v "$PWD/pyproject.toml:/sbom-project/pyproject.toml:ro" --entrypoint /sbom/venv/bin/python "$IMAGE" \
  -m cyclonedx_py environment --output-reproducible --of JSON --pyproject /sbom-project/pyproject.toml \
  /opt/guardhook/bin/python
