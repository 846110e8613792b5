#!/usr/bin/env bash
# image/build.sh: build the guardhook image with podman from the repository's Dockerfile, save it as the
# release artifact (an OCI archive) and write the SBOM of its Python environment beside it:
#   image/build.sh                                       # on python:3.11-slim (needs its registry)
#   BASE=$(image/base.sh) image/build.sh                 # on a base made from Debian packages, offline
#   BASE=example.local/py:1 image/build.sh               # on any Python 3.11 image with python3 + venv
#   image/build.sh --no-cache                            # extra arguments go to `podman build`
# Writes $OUT/guardhook-$VERSION.oci.tar and $OUT/guardhook-$VERSION.cdx.json (OUT default dist/image);
# prints the image name last. Knobs: IMAGE (default ghcr.io/guardhook/guardhook:$VERSION, the manifests'
# reference), BASE, OUT, CA_BUNDLE (build secret `ca-bundle` for TLS inside the build; default the host's
# bundle when readable), BUILD_NETWORK (default host), SAVE=0 (no archive, no SBOM), PODMAN, PODMAN_RUNTIME.
set -euo pipefail
cd "$(dirname "$0")/.."
. image/podman-args.sh
VERSION=$(python3 -c 'import re,sys; print(re.search(r"__version__ = \"([^\"]+)\"", open("guardhook/__init__.py").read())[1])')
IMAGE=${IMAGE:-ghcr.io/guardhook/guardhook:$VERSION}
OUT=${OUT:-dist/image}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
args=("${PODMAN_ARGS[@]}" --network "${BUILD_NETWORK:-host}" --build-arg "VERSION=$VERSION")
[ -n "${BASE:-}" ] && args+=(--build-arg "BASE=$BASE")
[ -r "$CA_BUNDLE" ] && args+=(--secret "id=ca-bundle,src=$CA_BUNDLE")
start=$(date +%s)
$PODMAN build "${args[@]}" "$@" -f Dockerfile -t "$IMAGE" . >&2
echo "built $IMAGE in $(( $(date +%s) - start ))s ($($PODMAN image inspect --format '{{.Size}}' "$IMAGE" | awk '{printf "%d MB", $1/1e6}'))" >&2
if [ "${SAVE:-1}" != 0 ]; then
  mkdir -p "$OUT"
  archive=$OUT/guardhook-$VERSION.oci.tar
  rm -f "$archive"
  start=$(date +%s)
  $PODMAN save --quiet --format oci-archive -o "$archive" "$IMAGE"
  saved=$(date +%s)
  image/sbom.sh "$IMAGE" "${BASE:-docker.io/library/python:3.11-slim}" > "$OUT/guardhook-$VERSION.cdx.json.part"
  mv "$OUT/guardhook-$VERSION.cdx.json.part" "$OUT/guardhook-$VERSION.cdx.json"
  echo "wrote $archive ($(du -h "$archive" | cut -f1)) in $(( saved - start ))s and" \
    "$OUT/guardhook-$VERSION.cdx.json in $(( $(date +%s) - saved ))s" >&2
fi
echo "$IMAGE"
