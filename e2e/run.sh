#!/usr/bin/env bash
# End-to-end on kind: create the cluster, install the LeaderWorkerSet CRD and controller, build and
# load the guardhook image, install manifests/ (self-managed certificates), run the e2e suite.
#
#   e2e/run.sh            # needs docker, kind, kubectl, python3 (and network for images)
#   KEEP_CLUSTER=1 e2e/run.sh   # leave the cluster up afterwards
#
# Environment: LWS_VERSION (upstream release for the controller, default v0.10.0),
# CLUSTER (kind cluster name, default guardhook-e2e), PYTHON (default python3),
# E2E_KUBECONFIG_FILE (where to write the cluster's kubeconfig, default a temporary folder).
# GUARDHOOK_E2E_IMAGE: the image of every pod the suite creates (default registry.k8s.io/pause:3.10;
# an offline cluster names one its nodes already hold).
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER="${CLUSTER:-guardhook-e2e}"
LWS_VERSION="${LWS_VERSION:-v0.10.0}"
PYTHON="${PYTHON:-python3}"
FIXTURES="${GUARDHOOK_FIXTURES:-../shared/fixtures}"
WORK="$(mktemp -d)"
KUBECONFIG_FILE="${E2E_KUBECONFIG_FILE:-$WORK/kubeconfig}"

cleanup() {
  if [[ -z "${KEEP_CLUSTER:-}" ]]; then kind delete cluster --name "$CLUSTER" || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

kind create cluster --name "$CLUSTER" --config e2e/kind.yaml --kubeconfig "$KUBECONFIG_FILE" --wait 120s
export KUBECONFIG="$KUBECONFIG_FILE"

# The LWS controller (its release manifest carries the CRD); the captured CRD when offline.
if ! kubectl apply --server-side -f \
    "https://github.com/kubernetes-sigs/lws/releases/download/${LWS_VERSION}/manifests.yaml"; then
  echo "could not fetch LWS ${LWS_VERSION}: installing the CRD only (the suite will skip without a controller)" >&2
  kubectl create -f "$FIXTURES/crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml"
else
  kubectl -n lws-system rollout status deployment/lws-controller-manager --timeout=300s
fi
# A stand-in ScaledObject CRD, so the KEDA rule of pod-counted-scaler is exercised.
if [[ -f "$FIXTURES/crds/keda.sh_scaledobjects.yaml" ]]; then
  kubectl create -f "$FIXTURES/crds/keda.sh_scaledobjects.yaml"
fi

docker build -t guardhook:e2e .
kind load docker-image guardhook:e2e --name "$CLUSTER"

# Self-managed certificates: written into the overlay (git-ignored), then installed.
"$PYTHON" -m venv "$WORK/venv"
"$WORK/venv/bin/pip" install --quiet -e '.[test]'
# --force: a rerun of this script replaces the certificates of the cluster it tore down.
"$WORK/venv/bin/guardhook" certs --force --patch-manifests manifests >/dev/null
kubectl apply --server-side -k e2e/overlay
kubectl -n guardhook-system rollout status deployment/guardhook --timeout=300s

GUARDHOOK_E2E_KUBECONFIG="$KUBECONFIG_FILE" GUARDHOOK_FIXTURES="$FIXTURES" \
  "$WORK/venv/bin/pytest" -q -rs e2e
