#!/usr/bin/env bash
# Installs the pinned Helm (built from its Go module with the machine's Go) into a cache directory and
# prints the path of the helm binary. Reuses an earlier install of the same version.
#   HELM_VERSION   the pinned version (default below); bump it here only.
#   HELM_CACHE     where versions are kept (default ${XDG_CACHE_HOME:-$HOME/.cache}/guardhook/helm).
set -euo pipefail
HELM_VERSION="${HELM_VERSION:-v4.3.2}"
HELM_CACHE="${HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/guardhook/helm}"
bin_dir="$HELM_CACHE/$HELM_VERSION"
helm="$bin_dir/helm"
if [ ! -x "$helm" ]; then
  go_bin="$(command -v go || true)"
  [ -n "$go_bin" ] || go_bin=/usr/local/go/bin/go
  [ -x "$go_bin" ] || { echo "helm.sh: no Go toolchain (go on PATH or /usr/local/go/bin/go)" >&2; exit 1; }
  mkdir -p "$bin_dir"
  # Helm's own version string comes from this linker flag (as its Makefile sets it).
  GOBIN="$bin_dir" GOFLAGS=-mod=mod CGO_ENABLED=0 "$go_bin" install \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v4/cmd/helm@$HELM_VERSION" >&2
fi
"$helm" version --short >/dev/null
echo "$helm"
