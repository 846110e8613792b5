"""What the e2e tests run against: a kubeconfig, the LWS fleet in it, and kubectl.

Two ways to get one (see conftest.py): an existing cluster with guardhook installed
(`GUARDHOOK_E2E_KUBECONFIG`, e.g. kind via e2e/run.sh), or a bare kube-apiserver + etcd from
`KUBEBUILDER_ASSETS` with `guardhook serve` on the host (bare.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

E2E = Path(__file__).resolve().parent
REPO = E2E.parent
EVICTION_OPT_IN_LABEL = "guardhook.io/guard-evictions=true"
# The image every e2e pod runs: a setting, so a cluster with no registry (../shared/realcluster imports
# example.local/pause:3.9) needs no re-tag.
POD_IMAGE_ENV = "GUARDHOOK_E2E_IMAGE"
DEFAULT_POD_IMAGE = "registry.k8s.io/pause:3.10"


def pod_image() -> str:
    """The container image of the e2e pods: $GUARDHOOK_E2E_IMAGE, else registry.k8s.io/pause:3.10."""
    return os.environ.get(POD_IMAGE_ENV) or DEFAULT_POD_IMAGE


LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"


class KubectlError(RuntimeError):
    """kubectl failed where the harness needed it to succeed."""


@dataclass
class Cluster:
    """A cluster with guardhook's webhooks registered and one whole LWS fleet.

    `lws` has `groups` groups of `size` pods, all Ready, in `namespace` (opted in to eviction
    guarding); its worker pods carry `worker_labels` from the worker template. `restore` puts the
    fleet back after a test that broke a group."""

    kubeconfig: Path
    mode: str
    namespace: str
    lws: str
    groups: int
    size: int
    worker_labels: dict[str, str]
    restore: Callable[[], None] = field(default=lambda: None)

    def kubectl(
        self, *args: str, stdin: str | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster; returns the finished process (never raises on exit code)."""
        return subprocess.run(
            ["kubectl", f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def must(self, *args: str, stdin: str | None = None, timeout: float = 60) -> str:
        """kubectl that must succeed; returns stdout."""
        done = self.kubectl(*args, stdin=stdin, timeout=timeout)
        if done.returncode != 0:
            raise KubectlError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def dry_run_create(self, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        """`kubectl create --dry-run=server -o json` of one object in the fleet's namespace."""
        return self.kubectl(
            "create", "-n", self.namespace, "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(obj)
        )

    def evict(
        self, pod: str, dry_run: bool = False, body_dry_run: bool = False, grace_period: int | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Evict `pod` of the fleet's namespace through the Eviction API: `dry_run` as `?dryRun=All`
        (admission sees `request.dryRun: true`), `body_dry_run` as `kubectl drain --dry-run=server`
        sends it, in the Eviction's `deleteOptions.dryRun` (admission sees `request.dryRun: false`);
        `grace_period` as `deleteOptions.gracePeriodSeconds`."""
        options: dict[str, Any] = {}
        if grace_period is not None:
            options["gracePeriodSeconds"] = grace_period
        if body_dry_run:
            options["dryRun"] = ["All"]
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": self.namespace},
        }
        if options:
            body["deleteOptions"] = options
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}/eviction" + ("?dryRun=All" if dry_run else "")
        return self.kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(body))

    def wait_budget_free(self) -> None:
        """Until every group's worker may be evicted (dry runs, recording nothing): an earlier
        test's real eviction counts until the LWS controller's replacement is visible, or for the
        ledger's TTL (120 s by default; 30 s as e2e/realcluster/install.sh configures guardhook)."""

        def free() -> bool:
            return all(self.evict(self.worker(g), dry_run=True).returncode == 0 for g in range(self.groups))

        eventually(free, timeout=180, what="every group's budget free", interval=3)

    def leader(self, group: int) -> str:
        return f"{self.lws}-{group}"

    def worker(self, group: int, index: int = 1) -> str:
        return f"{self.lws}-{group}-{index}"


def eventually(check: Callable[[], bool], timeout: float, what: str, interval: float = 1.0) -> None:
    """Poll `check` until it returns True; raise TimeoutError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")


def webhooks_answering(cluster: Cluster) -> bool:
    """Whether guardhook answers through the API server: a dry-run worker delete is denied."""
    done = cluster.kubectl("delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--dry-run=server")
    return done.returncode != 0 and "[worker-delete]" in done.stderr


REQUIRE_ENV = "GUARDHOOK_E2E_REQUIRE"
"""`1` (e2e/realcluster/run.sh): a cluster that cannot run the suite fails it rather than skipping it."""


def skip_or_fail(reason: str) -> None:
    """Skip the test with `reason`, or fail it when the cluster was required (REQUIRE_ENV=1): a suite
    run.sh runs that cannot run must not pass as "1 skipped". Raises pytest's Skipped or Failed."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1)")
    pytest.skip(reason)
