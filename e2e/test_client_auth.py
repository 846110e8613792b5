"""Only the API server may ask (issue 48): on the real cluster, run.sh gives kube-apiserver a client
certificate for guardhook (e2e/realcluster/client-auth.sh, an AdmissionConfiguration with
`kubeConfigFile`) and install.sh the client-auth component. Every other test's reviews then come
through that certificate; this one sends a hand-made review straight to guardhook's pod, as any pod
in the cluster could, and shows it refused with 401 and spending nothing: a dry-run eviction of
another group afterwards is still allowed. Skips where guardhook was installed without client
authentication, unless run.sh asked for it (GUARDHOOK_E2E_CLIENT_AUTH=1)."""

from __future__ import annotations

import copy
import json
import os
import warnings

import pytest
import requests
from urllib3.exceptions import InsecureRequestWarning

from bare import FIXTURES
from cluster import Cluster

NAMESPACE = "guardhook-system"


def guardhook_args(cluster: Cluster) -> list[str]:
    done = cluster.kubectl(
        "get",
        "deployment",
        "guardhook",
        "-n",
        NAMESPACE,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].args}",
    )
    return json.loads(done.stdout) if done.returncode == 0 and done.stdout.strip() else []


def forged_eviction(cluster: Cluster, pod: str) -> dict:
    """The captured eviction review s07, aimed at the fleet's `pod`: what a caller without the API
    server's certificate could send to spend the budget of `pod`'s group."""
    review = json.loads((FIXTURES / "reviews" / "s07-eviction-worker.validating.json").read_text())
    forged = copy.deepcopy(review)
    forged["request"].update(name=pod, namespace=cluster.namespace)
    forged["request"]["object"]["metadata"].update(name=pod, namespace=cluster.namespace)
    return forged


def test_a_review_without_a_client_certificate_is_refused_and_spends_nothing(cluster: Cluster) -> None:
    args = guardhook_args(cluster)
    if not any(a.startswith("--client-ca-file") for a in args):
        if os.environ.get("GUARDHOOK_E2E_CLIENT_AUTH") == "1":
            pytest.fail(f"guardhook runs without --client-ca-file: {args}")
        pytest.skip("guardhook was installed without client authentication")
    pod_ip = cluster.must(
        "get", "pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/name=guardhook",
        "-o", "jsonpath={.items[0].status.podIP}",
    ).strip()  # fmt: skip
    port = next((a.split("=", 1)[1] for a in args if a.startswith("--port=")), "8443")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InsecureRequestWarning)  # no CA needed to be refused
        answer = requests.post(
            f"https://{pod_ip}:{port}/validate",
            json=forged_eviction(cluster, cluster.worker(0)),
            verify=False,
            timeout=10,
        )
    assert answer.status_code == 401, answer.text
    # Had the forged allow been recorded, group 0 would count as broken and this would be 429.
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": cluster.worker(1)}}
    path = f"/api/v1/namespaces/{cluster.namespace}/pods/{cluster.worker(1)}/eviction?dryRun=All"
    done = cluster.kubectl("create", "--raw", path, "-f", "-", stdin=json.dumps(body))
    assert done.returncode == 0, done.stderr
