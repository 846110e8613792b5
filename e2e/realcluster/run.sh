#!/usr/bin/env bash
# e2e/realcluster/run.sh: the suites that need a real Kubernetes, on the real single-node cluster of
# ../shared/realcluster (Kubernetes v1.37.2 built from the Go module proxy), as .ci/run runs them:
#
#   1. the cluster binaries (build.sh: minutes cold, seconds warm) and images (images.sh); what an
#      interrupted earlier run left in podman's store taken out (tidy-podman.sh);
#   2. the cluster (down.sh --wipe first, so it is brand-new even after a killed run; up.sh);
#   3. install_and_drain.sh N: guardhook from its own Dockerfile and manifests, `kubectl drain` N times
#      with the LWS stand-in, none may break more than one group;
#   3b. hash: LWS main's Hash group identity through the e2e stand-in (the CRD given its groupIdentity
#      field), drained under a budget of 1 (e2e/test_group_makers.py), before the real controller;
#   4. the real LWS controller (e2e/realcluster/lws-build.sh) and guardhook from the image $GUARDHOOK_IMAGE_ARCHIVE
#      (the one .ci/run built), installed with its own self-managed overlay (e2e/realcluster/overlay);
#   5. the e2e suite (e2e/) in kubeconfig mode;
#   5b. the helm suite: guardhook replaced by the Helm chart's install, upgraded under a drain and
#      uninstalled (e2e/test_helm.py, the pinned Helm of .ci/helm.sh);
#   6. down.sh --wipe, also when a step failed.
# Prints one line per suite last ("realcluster: <suite>: ok|FAILED ... in N s") and exits non-zero when
# any failed: a suite that cannot run fails, never skips.
#
# Settings: REALCLUSTER (default ../shared/realcluster beside the checkout), REALCLUSTER_WORK (default
# /var/tmp/guardhook-realcluster, kept between runs so the binaries and images are reused), PYTHON (a
# python with guardhook and the test extras, default .venv/bin/python), GUARDHOOK_IMAGE_ARCHIVE (default
# dist/image/guardhook-<version>.oci.tar), DRAINS (default 3), SUITES (default "drain hash e2e helm"),
# REALCLUSTER_BUILT=1 (build.sh already ran), KEEP_CLUSTER=1 (leave it up), E2E_ARGS (extra pytest arguments for the e2e suite),
# HELM_TESTS (the helm suite's test files, default e2e/test_helm.py e2e/test_helm_self_managed.py),
# DRAIN_REUSE=0 (the drain suite makes its own venv and image instead of PYTHON's venv and the archive),
# KEEP_DRAIN_WORK=1 (keep the drain suite's scratch dir, $TMPDIR/install_and_drain.*: its logs, manifests
# and wrappers; otherwise removed on exit, as it holds the certificates and keys it generated).
set -uo pipefail
cd "$(dirname "$0")/../.."
PROJECT=$PWD
RC=$(cd "${REALCLUSTER:-$PROJECT/../shared/realcluster}" && pwd) || { echo "realcluster: no ../shared/realcluster" >&2; exit 2; }
export REALCLUSTER_WORK=${REALCLUSTER_WORK:-/var/tmp/guardhook-realcluster}
mkdir -p "$REALCLUSTER_WORK"
PYTHON=${PYTHON:-$PROJECT/.venv/bin/python}
VERSION=$("$PYTHON" -c 'import guardhook; print(guardhook.__version__)')
ARCHIVE=${GUARDHOOK_IMAGE_ARCHIVE:-$PROJECT/dist/image/guardhook-$VERSION.oci.tar}
DRAINS=${DRAINS:-3}
SUITES=${SUITES:-drain hash e2e helm}
LOGS=$REALCLUSTER_WORK/guardhook-logs
mkdir -p "$LOGS"
summary=()
failed=0
drain_dir=   # the drain suite's scratch dir, once made (removed by finish)

step() { # step NAME TIMEOUT_SECONDS COMMAND...: run with a bound, log to $LOGS/NAME.log, record the result
  local name=$1 limit=$2; shift 2
  local t0 rc
  t0=$(date +%s)
  echo "=== realcluster: $name ($(date -u +%T))"
  timeout --kill-after=20 "$limit" "$@" > "$LOGS/$name.log" 2>&1
  rc=$?
  local took=$(( $(date +%s) - t0 ))
  if [ "$rc" -eq 0 ]; then
    summary+=("realcluster: $name: ok in ${took} s$(detail "$name")")
  else
    [ "$rc" -eq 124 ] && rc="timeout after ${limit} s"
    summary+=("realcluster: $name: FAILED ($rc) in ${took} s$(detail "$name")")
    failed=1
    echo "--- last lines of $LOGS/$name.log:"; tail -40 "$LOGS/$name.log"
  fi
  return 0
}

detail() { # the line of a step's log worth repeating in the summary
  local f=$LOGS/$1.log
  case $1 in
    drain) tail -1 "$f" 2>/dev/null | sed 's/^/: /' ;;
    e2e*) grep -E '^(=+ )?[0-9]+ (passed|failed)|(passed|failed|error).* in [0-9.]+s' "$f" 2>/dev/null | tail -1 | sed 's/^=* */: /; s/ =*$//' ;;
  esac
}

finish() {
  if [ -n "$drain_dir" ]; then
    if [ "${KEEP_DRAIN_WORK:-0}" = 1 ]; then
      summary+=("realcluster: drain scratch dir kept: $drain_dir")
    else
      rm -rf -- "$drain_dir"   # its venv is a link to PYTHON's venv: rm removes the link, not the venv
    fi
  fi
  if [ "${KEEP_CLUSTER:-0}" != 1 ]; then
    "$RC/down.sh" --wipe > "$LOGS/down.log" 2>&1 || { summary+=("realcluster: down: FAILED (see $LOGS/down.log)"); failed=1; }
  fi
  echo
  printf '%s\n' "${summary[@]}"
  exit "$failed"
}
trap finish EXIT
# a run stopped by a signal fails (finish exits with $failed)
trap 'summary+=("realcluster: interrupted by a signal"); failed=1; exit 130' INT TERM

HOST_PATH=$PATH
eval "$("$RC/env.sh")"   # KUBECONFIG, KUBEBUILDER_ASSETS, PATH with the cluster's kubectl first
step deps 900 "$RC/install-deps.sh"
# what an interrupted earlier run left in podman's store (a killed build's working container) would
# fail the drain suite's image build at its `podman rmi` (tidy-podman.sh says why)
step tidy 120 "$PROJECT/e2e/realcluster/tidy-podman.sh"
# build.sh on the host's PATH, not env.sh's: it links bin/etcdctl to the first etcdctl on PATH, which
# with the cluster's bin first is that link itself (a loop, and up.sh then finds no etcdctl)
[ "${REALCLUSTER_BUILT:-0}" = 1 ] || step build 2700 env PATH="$HOST_PATH" "$RC/build.sh"
[ "$failed" = 0 ] || exit 1
if [ ! -s "$REALCLUSTER_WORK/images/pause.tar" ] || [ ! -s "$REALCLUSTER_WORK/images/py.tar" ]; then
  step images 900 "$RC/images.sh"
fi
step lws-build 1800 env KUBECTL="$REALCLUSTER_BIN/kubectl" "$PROJECT/e2e/realcluster/lws-build.sh"
# A brand-new cluster every run: a run killed before its `down.sh --wipe` (a CI timeout) leaves its
# cluster running, and up.sh would resume it, objects and all.
step fresh 300 "$RC/down.sh" --wipe
# The API server presents a client certificate to guardhook (issue 48): install.sh gives guardhook its
# CA and the client-auth component, so every suite's reviews come from an authenticated caller and
# e2e/test_client_auth.py shows a caller without one refused.
CLIENT_AUTH_DIR=$REALCLUSTER_WORK/client-auth
if flag=$("$PROJECT/e2e/realcluster/client-auth.sh" "$CLIENT_AUTH_DIR" 2> "$LOGS/client-auth.log"); then
  export RC_APISERVER_FLAGS="${RC_APISERVER_FLAGS:+$RC_APISERVER_FLAGS }$flag"
  export GUARDHOOK_CLIENT_CA=$CLIENT_AUTH_DIR/client-ca.crt
else
  summary+=("realcluster: client-auth: FAILED (see $LOGS/client-auth.log)"); failed=1
fi
step up 300 "$RC/up.sh"
[ "$failed" = 0 ] || exit 1

for suite in $SUITES; do
  case $suite in
    drain)
      # install_and_drain.sh pip-installs guardhook into a venv of its own and builds guardhook's image
      # a second time (about a minute warm, several cold) where this run's are at hand: its scratch dir
      # gets PYTHON's venv (it skips its pip install when venv/bin/guardhook is there), and its
      # REALCLUSTER a folder of wrappers whose build-image.sh (drain-image.sh) imports $ARCHIVE when
      # that holds the tag it would build. DRAIN_REUSE=0: the script's own venv and build, as before.
      # Its scratch dir (GI_WORK) is made here either way, so finish removes it (KEEP_DRAIN_WORK=1 keeps it).
      drain_dir=$(mktemp -d "${TMPDIR:-/tmp}/install_and_drain.XXXXXX")
      drain_env=(PROJECT="$PROJECT" DOWN=0 GI_WORK="$drain_dir")
      if [ "${DRAIN_REUSE:-1}" = 1 ]; then
        venv=$(cd "$(dirname "$PYTHON")/.." && pwd)
        [ -x "$venv/bin/guardhook" ] && ln -s "$venv" "$drain_dir/venv"
        mkdir "$drain_dir/rc"
        for s in env.sh up.sh down.sh; do
          printf '#!/bin/sh\nexec "%s/%s" "$@"\n' "$RC" "$s" > "$drain_dir/rc/$s"; chmod +x "$drain_dir/rc/$s"
        done
        ln -s "$PROJECT/e2e/realcluster/drain-image.sh" "$drain_dir/rc/build-image.sh"
        drain_env+=(REALCLUSTER="$drain_dir/rc" REAL_REALCLUSTER="$RC" REUSE_IMAGE_ARCHIVE="$ARCHIVE")
      fi
      step drain 1200 env "${drain_env[@]}" "$RC/install_and_drain.sh" "$DRAINS"
      # the stand-in's LWS must not meet the real controller
      kubectl delete namespace serve --wait=true --timeout=120s > /dev/null 2>&1 || true ;;
    hash)
      # LWS's Hash group identity is on LWS main only (no release the Go module proxy serves): before the
      # real controller is installed, the LWS CRD gets LWS main's spec.groupIdentity field and the e2e
      # stand-in (e2e/hash_standin.py) makes the pods as LWS main does, for this case alone.
      step hash-crd 60 kubectl patch crd leaderworkersets.leaderworkerset.x-k8s.io --type=json -p \
        '[{"op":"add","path":"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/groupIdentity","value":{"type":"string","enum":["Ordinal","Hash"],"default":"Ordinal"}}]'
      step e2e-hash 900 env GUARDHOOK_E2E_KUBECONFIG="$KUBECONFIG" GUARDHOOK_E2E_FLEET=0 GUARDHOOK_E2E_REQUIRE=1 \
        GUARDHOOK_E2E_IMAGE="${GUARDHOOK_E2E_IMAGE:-example.local/pause:3.9}" \
        "$PYTHON" -m pytest -q -rs -p no:cacheprovider e2e/test_group_makers.py -k hash
      kubectl delete namespace guardhook-e2e --wait=true --timeout=120s > /dev/null 2>&1 || true ;;
    e2e)
      step install 900 "$PROJECT/e2e/realcluster/install.sh" "$ARCHIVE"
      [ "$failed" = 0 ] || exit 1
      # shellcheck disable=SC2086
      step e2e 2400 env GUARDHOOK_E2E_KUBECONFIG="$KUBECONFIG" GUARDHOOK_E2E_REALCLUSTER="$RC" GUARDHOOK_E2E_REQUIRE=1 \
        GUARDHOOK_E2E_CLIENT_AUTH="${GUARDHOOK_CLIENT_CA:+1}" \
        GUARDHOOK_E2E_IMAGE="${GUARDHOOK_E2E_IMAGE:-example.local/pause:3.9}" \
        "$PYTHON" -m pytest -q -rs -p no:cacheprovider e2e ${E2E_ARGS:-} \
        --deselect e2e/test_group_makers.py::test_a_hash_lws_is_drained_one_group_at_a_time \
        --ignore e2e/test_helm.py --ignore e2e/test_helm_self_managed.py ;;  # the hash and helm suites run those
    helm)
      # guardhook from charts/guardhook with the pinned Helm (e2e/test_helm.py): a kustomize install
      # left by the e2e suite is taken out first (GUARDHOOK_E2E_REPLACE=1); the image archive is
      # imported here too, for a run of this suite alone.
      "$RC/import-image.sh" "$ARCHIVE" > "$LOGS/helm-image.log" 2>&1 || { summary+=("realcluster: helm: image import FAILED"); failed=1; continue; }
      helm=${GUARDHOOK_HELM:-$("$PROJECT/.ci/helm.sh" 2> "$LOGS/helm-build.log")} || { summary+=("realcluster: helm: no helm (see $LOGS/helm-build.log)"); failed=1; continue; }
      step e2e-helm 1800 env GUARDHOOK_E2E_KUBECONFIG="$KUBECONFIG" GUARDHOOK_E2E_HELM=1 GUARDHOOK_E2E_REPLACE=1 GUARDHOOK_E2E_REQUIRE=1 \
        GUARDHOOK_HELM="$helm" GUARDHOOK_E2E_IMAGE="${GUARDHOOK_E2E_IMAGE:-example.local/pause:3.9}" \
        "$PYTHON" -m pytest -q -rs -p no:cacheprovider ${HELM_TESTS:-e2e/test_helm.py e2e/test_helm_self_managed.py} ;;
    *) echo "realcluster: unknown suite $suite" >&2; failed=1 ;;
  esac
done
