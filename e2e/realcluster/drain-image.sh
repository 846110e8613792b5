#!/usr/bin/env bash
# e2e/realcluster/drain-image.sh CONTEXT TAG [ARCHIVE] [-- PODMAN BUILD ARGS...]: the build-image.sh that
# run.sh's drain suite gives ../shared/realcluster/install_and_drain.sh (through a folder of wrappers
# passed as its REALCLUSTER, see run.sh). When REUSE_IMAGE_ARCHIVE is an OCI archive of TAG (the
# image .ci/run or image/build.sh made from this checkout, the one the e2e and helm suites install),
# it is imported into the cluster's containerd instead of building the image a second time; otherwise
# (a run by hand without the archive, another tag) the real build-image.sh builds it as before.
set -euo pipefail
: "${REAL_REALCLUSTER:?the real realcluster folder}"
tag=${2:-}
archive=${REUSE_IMAGE_ARCHIVE:-}
if [ -n "$tag" ] && [ -s "$archive" ]; then
  # the archive's tags (index.json's ref.name annotations), one a line
  ref=$(tar -xOf "$archive" index.json 2>/dev/null | python3 -c 'import json, sys
for m in json.load(sys.stdin)["manifests"]:
    print(m.get("annotations", {}).get("org.opencontainers.image.ref.name", ""))' 2>/dev/null || true)
  if grep -qxF -- "$tag" <<<"$ref"; then
    t=$(date +%s)
    "$REAL_REALCLUSTER/import-image.sh" "$archive"
    echo "reused $archive ($tag) instead of a build, imported in $(( $(date +%s) - t ))s"
    exit 0
  fi
  echo "drain-image.sh: $archive holds '$ref', not $tag: building" >&2
fi
exec "$REAL_REALCLUSTER/build-image.sh" "$@"
