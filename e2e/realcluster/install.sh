#!/usr/bin/env bash
# e2e/realcluster/install.sh ARCHIVE: install the real LWS controller and guardhook on the running real
# cluster, as a user installs them: the LWS controller from e2e/realcluster/lws-build.sh's rendered
# manifests (its image imported into the cluster's containerd), guardhook from the image ARCHIVE (the OCI
# archive image/build.sh saved) with its own self-managed overlay plus the opt-in components named in
# COMPONENTS (default: group-readiness pdb-sync), certificates from `guardhook certs --patch-manifests`.
# Waits (bounded) until both controllers' pods are Ready and guardhook answers a dry-run request.
# guardhook's configuration: GUARDHOOK_E2E_CONFIG (default e2e/realcluster/config.yaml; empty: the manifests').
# Needs: REALCLUSTER_WORK, KUBECONFIG (eval "$(../shared/realcluster/env.sh)"), PYTHON (with guardhook).
set -euo pipefail
ARCHIVE=${1:?usage: install.sh GUARDHOOK_IMAGE_ARCHIVE}
cd "$(dirname "$0")/../.."
PROJECT=$PWD
RC=$(cd "${REALCLUSTER:-$PROJECT/../shared/realcluster}" && pwd)
: "${REALCLUSTER_WORK:?}" "${KUBECONFIG:?}"
PYTHON=${PYTHON:-$PROJECT/.venv/bin/python}
LWS_VERSION=${LWS_VERSION:-v0.9.0}
LWS_DIR=$REALCLUSTER_WORK/lws-$LWS_VERSION
COMPONENTS=${COMPONENTS:-group-readiness pdb-sync}
# GUARDHOOK_CLIENT_CA (client-auth.sh's client-ca.crt, when the API server presents its certificate):
# the Secret guardhook-client-ca and the client-auth component, as docs/operations.md says.
if [ -n "${GUARDHOOK_CLIENT_CA:-}" ]; then COMPONENTS="client-auth $COMPONENTS"; fi
FIXTURES=${GUARDHOOK_FIXTURES:-$PROJECT/../shared/fixtures}
W=$REALCLUSTER_WORK/guardhook-install
log() { echo "$(date -u +%T) $*"; }
[ -s "$ARCHIVE" ] || { echo "install.sh: no image archive $ARCHIVE (image/build.sh writes it)" >&2; exit 2; }
[ -s "$LWS_DIR/lws.yaml" ] || { echo "install.sh: no $LWS_DIR/lws.yaml (run e2e/realcluster/lws-build.sh)" >&2; exit 2; }

wait_ready() { # NAMESPACE SELECTOR SECONDS: every non-terminating pod matching Ready, at least one
  local ns=$1 sel=$2 limit=$3 i out
  for i in $(seq 1 "$limit"); do
    out=$(kubectl -n "$ns" get pods -l "$sel" -o go-template='{{range .items}}{{if not .metadata.deletionTimestamp}}{{range .status.conditions}}{{if eq .type "Ready"}}{{.status}}{{"\n"}}{{end}}{{end}}{{end}}{{end}}' 2>/dev/null || true)
    if [ -n "$out" ] && ! grep -qv True <<<"$out"; then return 0; fi
    sleep 1
  done
  kubectl -n "$ns" get pods -o wide >&2; kubectl -n "$ns" describe pods -l "$sel" | tail -30 >&2
  echo "install.sh: pods $sel in $ns not Ready after $limit s" >&2; return 1
}

# --- the LWS controller -------------------------------------------------------------------------
log "LWS $LWS_VERSION: image"
podman build --runtime runc -q -t "example.local/lws:$LWS_VERSION" -f "$LWS_DIR/Containerfile" "$LWS_DIR" > /dev/null
podman save --quiet --format oci-archive -o "$LWS_DIR/image.tar" "example.local/lws:$LWS_VERSION"
"$RC/import-image.sh" "$LWS_DIR/image.tar" > /dev/null
log "LWS $LWS_VERSION: manifests"
kubectl apply --server-side --force-conflicts -f "$LWS_DIR/lws.yaml" > /dev/null
kubectl -n lws-system rollout restart deployment/lws-controller-manager > /dev/null  # a rebuilt image under the same tag
kubectl -n lws-system rollout status deployment/lws-controller-manager --timeout=300s
# The LWS webhooks get their caBundle from the controller's own certificate rotation: wait until they answer.
for i in $(seq 1 120); do
  kubectl create --dry-run=server -f - > /dev/null 2>&1 <<'YAML' && break
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: probe, namespace: default}
spec:
  leaderWorkerTemplate:
    size: 1
    workerTemplate: {spec: {containers: [{name: c, image: example.local/pause:3.9}]}}
YAML
  [ "$i" = 120 ] && { echo "install.sh: the LWS webhooks do not answer after 120 s" >&2; exit 1; }
  sleep 1
done
log "LWS $LWS_VERSION: controller and webhooks answering"
# A stand-in ScaledObject CRD, so pod-counted-scaler's KEDA rule is exercised.
kubectl get crd scaledobjects.keda.sh > /dev/null 2>&1 || kubectl create -f "$FIXTURES/crds/keda.sh_scaledobjects.yaml" > /dev/null

# --- guardhook ----------------------------------------------------------------------------------
log "guardhook: image $ARCHIVE"
"$RC/import-image.sh" "$ARCHIVE" > /dev/null
rm -rf "$W"; mkdir -p "$W"; cp -a "$PROJECT/manifests" "$W/m"
"$PYTHON" - "$W/m/overlays/self-managed/kustomization.yaml" $COMPONENTS <<'PY'
import sys, yaml
path, wanted = sys.argv[1], sys.argv[2:]
doc = yaml.safe_load(open(path))
doc["components"] = list(doc.get("components") or []) + [f"../../components/{c}" for c in wanted]
open(path, "w").write(yaml.safe_dump(doc, sort_keys=False))
PY
# guardhook's configuration for the e2e suite (GUARDHOOK_E2E_CONFIG, default e2e/realcluster/config.yaml:
# the eviction ledger's TTL short, see there; empty: the manifests' own, every default), validated first.
E2E_CONFIG=${GUARDHOOK_E2E_CONFIG-$PROJECT/e2e/realcluster/config.yaml}
if [ -n "$E2E_CONFIG" ]; then
  "$PYTHON" -m guardhook config validate "$E2E_CONFIG" > /dev/null
  "$PYTHON" - "$W/m/base/configmap.yaml" "$E2E_CONFIG" <<'PY'
import sys, yaml
path, config = sys.argv[1], sys.argv[2]
doc = yaml.safe_load(open(path))
doc["data"]["config.yaml"] = open(config).read()
open(path, "w").write(yaml.safe_dump(doc, sort_keys=False))
PY
fi
"$PYTHON" -m guardhook certs --force --patch-manifests "$W/m" > "$W/certs.log"
kubectl kustomize "$W/m/overlays/self-managed" > "$W/rendered.yaml"
if [ -n "${GUARDHOOK_CLIENT_CA:-}" ]; then
  kubectl create namespace guardhook-system --dry-run=client -o yaml | kubectl apply -f - > /dev/null
  kubectl -n guardhook-system create secret generic guardhook-client-ca --from-file=ca.crt="$GUARDHOOK_CLIENT_CA" \
    --dry-run=client -o yaml | kubectl apply -f - > /dev/null
fi
kubectl apply --server-side --force-conflicts -f "$W/rendered.yaml" > /dev/null
# New pods for the imported image under the same tag and the new certificates.
kubectl -n guardhook-system rollout restart deployment/guardhook > /dev/null
kubectl -n guardhook-system rollout status deployment/guardhook --timeout=300s
wait_ready guardhook-system app.kubernetes.io/name=guardhook 180
log "guardhook: installed with components: $COMPONENTS"
