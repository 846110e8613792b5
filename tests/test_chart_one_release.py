"""One guardhook release per cluster (issue 49): its names are fixed, so a second release (another
name or namespace) or a Helm install over a kustomize one fails at render with one line naming
what is installed; an upgrade of the same release renders."""

from __future__ import annotations

from pathlib import Path

import pytest
from helm_chart import CHART, NAMESPACE, RELEASE, run_helm
from test_chart_certs import StandIn, api  # noqa: F401 (the stand-in API server fixture)

OWNER = {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": NAMESPACE}
WEBHOOK = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/guardhook"


def _installed(annotations: dict[str, str]) -> dict[str, object]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {
            "name": "guardhook",
            "annotations": annotations,
            "labels": {"app.kubernetes.io/managed-by": "Helm"} if annotations else {},
            "resourceVersion": "3",
        },
        "webhooks": [],
    }


def _render(tmp_path: Path, kubeconfig: Path, release: str, namespace: str):  # type: ignore[no-untyped-def]
    return run_helm(
        "template", release, str(CHART), "--namespace", namespace, "--dry-run=server",
        "--disable-openapi-validation", "--kubeconfig", str(kubeconfig), values={}, tmp=tmp_path,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("release", "namespace", "owner", "says"),
    [
        ("second", NAMESPACE, OWNER, f"by the Helm release {RELEASE} in namespace {NAMESPACE}"),
        (RELEASE, "other", OWNER, f"by the Helm release {RELEASE} in namespace {NAMESPACE}"),
        (RELEASE, NAMESPACE, {}, "without Helm"),
    ],
)  # fmt: skip
def test_a_second_release_fails_with_one_line(
    tmp_path: Path,
    api: tuple[type[StandIn], Path],  # noqa: F811
    release: str,
    namespace: str,
    owner: dict[str, str],
    says: str,
) -> None:
    handler, kubeconfig = api
    handler.objects[WEBHOOK] = _installed(owner)
    done = _render(tmp_path, kubeconfig, release, namespace)
    assert done.returncode != 0
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert "guardhook is already installed in this cluster" in error and says in error, done.stderr


def test_the_same_release_upgrades_and_a_first_install_renders(
    tmp_path: Path,
    api: tuple[type[StandIn], Path],  # noqa: F811
) -> None:
    handler, kubeconfig = api
    assert _render(tmp_path, kubeconfig, RELEASE, NAMESPACE).returncode == 0  # nothing installed yet
    handler.objects[WEBHOOK] = _installed(OWNER)
    done = _render(tmp_path, kubeconfig, RELEASE, NAMESPACE)
    assert done.returncode == 0, done.stderr
