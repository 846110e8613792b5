"""The Lease ledger against a real kube-apiserver (and etcd) from KUBEBUILDER_ASSETS: two replicas
racing on one LWS. Skipped, with the reason, when the binaries are not there."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from eviction_helpers import engine, evict_all, group_of, lws_view
from kubernetes import client

from guardhook.ledger.lease import LeaseLedger, lease_name

from envtest import ApiServer, api_server, requires_api_server

NAMESPACE = "guardhook-system"

# One worker runs the whole module (pytest-xdist's loadgroup), so its module-scoped API server
# starts once, not once per worker.
pytestmark = [pytest.mark.envtest, requires_api_server, pytest.mark.xdist_group("test_eviction_envtest")]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with api_server(tmp_path_factory.mktemp("envtest")) as running:
        yield running


def test_two_replicas_racing_on_a_real_api_server_stay_within_the_budget(api: ApiServer) -> None:
    client.CoreV1Api(api.api_client()).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE))
    )
    replicas = [
        engine(lws_view(6, 2, budget=2), ledger=LeaseLedger(api.api_client(), NAMESPACE)) for _ in range(2)
    ]
    pods = [f"llm-{g}-1" for g in range(6)] * 2
    allowed = evict_all(replicas, pods)
    assert len({group_of(p) for p, ok in zip(pods, allowed, strict=True) if ok}) == 2
    lease = client.CoordinationV1Api(api.api_client()).read_namespaced_lease(
        lease_name(("serve", "llm")), NAMESPACE
    )
    assert lease.metadata.annotations["guardhook.io/disruptions"].count('"group"') == 2
