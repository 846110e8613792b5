"""Where the e2e suite runs, chosen once per session:

1. `GUARDHOOK_E2E_KUBECONFIG=FILE`: a cluster where guardhook is installed from manifests/ and the
   LWS controller runs (e2e/run.sh sets one up on kind). The suite creates e2e/fleet.yaml there.
2. `KUBEBUILDER_ASSETS=DIR` holding `kube-apiserver` and `etcd`: bare API server mode (bare.py).
3. Neither: every test is skipped, with the reason, before anything slow happens.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bare import bare_cluster, missing_assets  # noqa: E402
from cluster import (  # noqa: E402
    DEFAULT_POD_IMAGE,
    E2E,
    LWS_NAME_LABEL,
    Cluster,
    eventually,
    pod_image,
    skip_or_fail,
    webhooks_answering,
)

KUBECONFIG_ENV = "GUARDHOOK_E2E_KUBECONFIG"
FLEET_ENV = "GUARDHOOK_E2E_FLEET"
"""`0`: create no fleet (for tests that bring their own LWS controller or stand-in)."""
FLEET = E2E / "fleet.yaml"


def no_cluster_reason() -> str | None:
    """Why the suite must skip, or None when a cluster (or bare mode) is configured."""
    if os.environ.get(KUBECONFIG_ENV):
        if shutil.which("kubectl") is None:
            return "kubectl is not on PATH"
        return None
    bare = missing_assets()
    if bare is None:
        return None
    return (
        f"no cluster: set {KUBECONFIG_ENV} (see e2e/run.sh) or KUBEBUILDER_ASSETS for bare API server "
        f"mode ({bare})"
    )


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    reason = no_cluster_reason()
    if reason:
        skip_or_fail(reason)
    if os.environ.get(KUBECONFIG_ENV):
        yield from _existing_cluster(Path(os.environ[KUBECONFIG_ENV]))
    else:
        with bare_cluster() as running:
            yield running


def e2e_cluster(kubeconfig: Path) -> Cluster:
    """The e2e fleet's Cluster (namespace guardhook-e2e, LWS `e2e` of 2 groups of 2) on the cluster
    of `kubeconfig`; skipped (failed when required) when it has no LeaderWorkerSet CRD."""
    cluster = Cluster(
        kubeconfig=kubeconfig,
        mode="cluster",
        namespace="guardhook-e2e",
        lws="e2e",
        groups=2,
        size=2,
        worker_labels={"app": "e2e"},
    )
    if cluster.kubectl("get", "crd", "leaderworkersets.leaderworkerset.x-k8s.io").returncode != 0:
        skip_or_fail("the cluster has no LeaderWorkerSet CRD (e2e/run.sh installs it)")
    return cluster


def _existing_cluster(kubeconfig: Path) -> Iterator[Cluster]:
    cluster = e2e_cluster(kubeconfig)
    if os.environ.get(FLEET_ENV) == "0":
        # A phase with no LWS controller (e2e/realcluster/run.sh's hash phase, beside the stand-in):
        # no fleet; guardhook must answer a request every install judges, a cluster-wide PDB.
        cluster.kubectl("create", "namespace", cluster.namespace)
        cluster.kubectl("label", "namespace", cluster.namespace, "guardhook.io/guard-evictions=true")
        eventually(lambda: guardhook_answering(cluster), 120, "guardhook to answer through the API server")
        yield cluster
        return
    cluster.restore = lambda: _wait_whole(cluster)
    cluster.must("apply", "-f", "-", stdin=fleet_manifest())
    _wait_whole(cluster)
    eventually(lambda: webhooks_answering(cluster), 120, "guardhook to answer through the API server")
    yield cluster
    cluster.kubectl("delete", "-f", "-", "--wait=false", stdin=fleet_manifest())


def guardhook_answering(cluster: Cluster) -> bool:
    """Whether guardhook answers through the API server with no fleet: a dry-run LWS create gets
    group-spec's warning (judged from the object alone, no cluster view needed)."""
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "e2e-probe"},
        "spec": {
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {"spec": {"containers": [{"name": "c", "image": pod_image()}]}},
            }
        },
    }
    done = cluster.dry_run_create(lws)
    return done.returncode == 0 and "[group-spec]" in done.stderr


def fleet_manifest() -> str:
    """e2e/fleet.yaml with its pods' image set to the e2e pod image (`GUARDHOOK_E2E_IMAGE`)."""
    return FLEET.read_text().replace(f"image: {DEFAULT_POD_IMAGE}", f"image: {pod_image()}")


def _wait_whole(cluster: Cluster) -> None:
    """Wait until the LWS controller has every pod of every group Ready."""
    selector = f"{LWS_NAME_LABEL}={cluster.lws}"

    def whole() -> bool:
        done = cluster.kubectl(
            "get",
            "pods",
            "-n",
            cluster.namespace,
            "-l",
            selector,
            "-o",
            "jsonpath={range .items[*]}{.metadata.deletionTimestamp}|"
            "{.status.conditions[?(@.type=='Ready')].status}{'\\n'}{end}",
        )
        rows = [row for row in done.stdout.splitlines() if row]
        return len(rows) == cluster.groups * cluster.size and all(row == "|True" for row in rows)

    eventually(whole, 300, f"{cluster.groups} whole groups of LWS {cluster.lws}", interval=2)


def pytest_report_header() -> list[str]:
    reason = no_cluster_reason()
    return [f"guardhook e2e: {reason or 'cluster configured'}"]


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """One process, whatever pyproject's addopts say: the unit suite's `-n 4` (pytest-xdist) is not
    for this suite, whose tests share one cluster and build on each other's state. Runs before
    pytest-xdist's own hook reads `-n` (pytest calls it for the initial conftests, this one
    whenever the arguments name e2e/)."""
    if hasattr(config.option, "numprocesses"):
        config.option.numprocesses = 0
