#!/usr/bin/env bash
# image/base.sh: make a Python base image from Debian packages (mmdebstrap), for building the image where
# no image registry is reachable; prints its name. Nothing but Debian's package archive is needed:
#   BASE=$(image/base.sh) image/build.sh
# The rootfs tar is kept in $CACHE (default ~/.cache/guardhook-image) keyed by suite and packages, and
# re-imported when the podman image is missing. Knobs: SUITE (bookworm: its python3 is 3.11, the lock's),
# BASE_IMAGE (name, default localhost/guardhook-base:$SUITE), MIRRORS (mmdebstrap mirror arguments; default
# the host's apt sources), PODMAN (default podman). Needs root (mmdebstrap, podman) and Debian's
# mmdebstrap + podman.
set -euo pipefail
SUITE=${SUITE:-bookworm}
BASE_IMAGE=${BASE_IMAGE:-localhost/guardhook-base:$SUITE}
PODMAN=${PODMAN:-podman}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/guardhook-image}
# python3-venv: the build stage's `python3 -m venv`; libstdc++6: the C++ runtime numpy's and
# google-re2's wheels link (the official python images have it through apt); the essential variant:
# no apt, no init system. /usr is merged by mmdebstrap's merged-usr hook (the `usr-is-merged` marker
# package) rather than by the `usrmerge` package, which pulls in the whole of Perl (~47 MB) to run once.
PACKAGES="python3 python3-venv libstdc++6"
HOOKS=/usr/share/mmdebstrap/hooks/merged-usr
if $PODMAN image exists "$BASE_IMAGE"; then echo "$BASE_IMAGE"; exit 0; fi
key=$(echo "$SUITE essential $PACKAGES merged-usr no-gconv" | sha256sum | cut -c1-12)
rootfs=$CACHE/rootfs-$SUITE-$key.tar
if [ ! -s "$rootfs" ]; then
  mkdir -p "$CACHE"
  if [ -n "${MIRRORS:-}" ]; then read -r -a mirrors <<< "$MIRRORS"
  elif [ -s /etc/apt/sources.list.d/debian.sources ]; then mirrors=(/etc/apt/sources.list.d/debian.sources)
  elif [ -s /etc/apt/sources.list ]; then mirrors=(/etc/apt/sources.list)
  else mirrors=(); fi
  # Manuals, docs (copyright files kept: the licences), translations and glibc's iconv modules (gconv:
  # Python's codecs are its own) are not needed in an image.
  mmdebstrap --quiet --variant=essential --include="${PACKAGES// /,}" --hook-dir="$HOOKS" \
    --dpkgopt='path-exclude=/usr/lib/*/gconv/*' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --format=tar "$SUITE" "$rootfs.part" "${mirrors[@]}" >&2
  mv "$rootfs.part" "$rootfs"
fi
$PODMAN import --quiet --change 'CMD ["/usr/bin/python3"]' "$rootfs" "$BASE_IMAGE" >/dev/null
echo "$BASE_IMAGE"
