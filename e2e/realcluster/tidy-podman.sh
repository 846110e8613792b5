#!/usr/bin/env bash
# e2e/realcluster/tidy-podman.sh: take out the build containers an interrupted earlier run left in
# podman's store, before e2e/realcluster/run.sh builds any image.
#
# `podman build` makes a buildah working container for each step (an "external" container: `podman ps
# --all --external`) and removes it when the step ends; a build that is killed leaves it, holding its
# intermediate image. ../shared/realcluster/build-image.sh ends with `podman rmi TAG`, which also removes
# the tag's dangling parents, so a later build that reuses that cached intermediate image fails there
# ("image used by <id>: image is in use by a container"), as a CI machine that kept its store from an
# interrupted run showed. No build runs beside run.sh, so none of these is in use. Images, the layer
# cache and podman's own containers are left alone.
# Prints what it removed; exits non-zero only when a removal failed. BUILDAH: default buildah.
set -euo pipefail
BUILDAH=${BUILDAH:-buildah}
removed=0
while read -r id name; do
  [ -n "$id" ] || continue
  "$BUILDAH" rm "$id" > /dev/null
  echo "tidy-podman: removed build container $name ($id)"
  removed=$((removed + 1))
done < <("$BUILDAH" containers --noheading --format '{{.ContainerID}} {{.ContainerName}}')
echo "tidy-podman: $removed build containers removed"
