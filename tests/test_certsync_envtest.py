"""The certificate controller of `serve --manage-certs` against a real kube-apiserver (issue 49): the
empty Secret the chart ships gets a CA and a serving certificate, guardhook's own webhook
configurations (and no other) get its CA as every entry's caBundle, a round with nothing to do
writes nothing, the elected controller holds the Lease guardhook-certs, and the start-up wait
returns once the certificate is in the mounted folder."""

from __future__ import annotations

import base64
import datetime
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from kubernetes import client
from test_manifests import MANIFESTS

from guardhook.certsync.apply import Outcome, Target, sync_once, sync_secret
from guardhook.certsync.issue import CertSettings, service_names
from guardhook.certsync.runner import LEASE_NAME, start_background_sync, wait_until_mounted

from envtest import ApiServer, api_server, requires_api_server, wait_for
from kustomize_lite import render

pytestmark = [pytest.mark.envtest, requires_api_server]
NS = "guardhook-system"
SECRET = f"/api/v1/namespaces/{NS}/secrets/guardhook-tls"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
DAY = datetime.timedelta(days=1)
TARGET = Target(
    NS, "guardhook-tls", CertSettings(service_names("guardhook", NS), 90 * DAY, 3650 * DAY, 30 * DAY)
)


def _foreign() -> dict[str, Any]:
    """Another product's webhook configuration, which the controller must never touch."""
    return {
        "metadata": {"name": "other"},
        "webhooks": [
            {
                "name": "x.other.io",
                "clientConfig": {"url": "https://other.example/validate", "caBundle": "b3RoZXI="},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "rules": [],
            }
        ],
    }


@pytest.fixture
def api(tmp_path: Path) -> Iterator[ApiServer]:
    (tmp_path / "api").mkdir()
    with api_server(tmp_path / "api") as server:
        server.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        server.create(
            f"/api/v1/namespaces/{NS}/secrets", {"metadata": {"name": "guardhook-tls"}, "type": "Opaque"}
        )
        for obj in render(MANIFESTS):
            if obj["kind"].endswith("WebhookConfiguration"):
                obj["metadata"].pop("annotations", None)
                server.create(f"{ADMISSION}/{obj['kind'].lower()}s", obj)
        server.create(f"{ADMISSION}/validatingwebhookconfigurations", _foreign())
        yield server


def _bundles(api: ApiServer, kind: str, name: str) -> list[str]:
    found = api.get(f"{ADMISSION}/{kind}/{name}")
    return [h["clientConfig"].get("caBundle", "") for h in found.get("webhooks") or []]


def test_a_round_fills_the_empty_secret_and_only_guardhooks_ca_bundles(api: ApiServer) -> None:
    with api.api_client() as client_:
        outcome = sync_once(client_, TARGET)
    assert not outcome.errors and outcome.rotated.startswith("new CA")
    data = {k: base64.b64decode(v) for k, v in api.get(SECRET)["data"].items()}
    assert set(data) == {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    x509.load_pem_x509_certificate(data["tls.crt"]).verify_directly_issued_by(
        x509.load_pem_x509_certificate(data["ca.crt"])
    )
    wanted = api.get(SECRET)["data"]["ca.crt"]
    validating = _bundles(api, "validatingwebhookconfigurations", "guardhook")
    mutating = _bundles(api, "mutatingwebhookconfigurations", "guardhook")
    assert len(validating) >= 9 and set(validating) == {wanted}
    assert set(mutating) <= {wanted} and mutating
    assert _bundles(api, "validatingwebhookconfigurations", "other") == ["b3RoZXI="]
    assert sorted(outcome.patched) == [
        "MutatingWebhookConfiguration/guardhook",
        "ValidatingWebhookConfiguration/guardhook",
    ]


def test_a_round_with_nothing_to_do_writes_nothing(api: ApiServer) -> None:
    with api.api_client() as client_:
        sync_once(client_, TARGET)
        versions = (
            api.get(SECRET)["metadata"]["resourceVersion"],
            api.get(f"{ADMISSION}/validatingwebhookconfigurations/guardhook")["metadata"]["resourceVersion"],
        )
        again = sync_once(client_, TARGET)
    assert (again.rotated, again.patched, again.errors) == ("", [], [])
    assert versions == (
        api.get(SECRET)["metadata"]["resourceVersion"],
        api.get(f"{ADMISSION}/validatingwebhookconfigurations/guardhook")["metadata"]["resourceVersion"],
    )


def test_an_entry_added_by_an_upgrade_gets_the_ca_bundle_on_the_next_round(api: ApiServer) -> None:
    with api.api_client() as client_:
        sync_once(client_, TARGET)
        path = f"{ADMISSION}/validatingwebhookconfigurations/guardhook"
        current = api.get(path)
        added = {**current["webhooks"][0], "name": "added.guardhook.io"}
        added["clientConfig"] = {k: v for k, v in added["clientConfig"].items() if k != "caBundle"}
        answer = api.request("PUT", path, {**current, "webhooks": [*current["webhooks"], added]})
        assert answer.status_code == 200, answer.text
        outcome = sync_once(client_, TARGET)
    assert outcome.patched == ["ValidatingWebhookConfiguration/guardhook"]
    assert set(_bundles(api, "validatingwebhookconfigurations", "guardhook")) == {
        api.get(SECRET)["data"]["ca.crt"]
    }


def test_of_two_replicas_that_both_found_the_secret_empty_only_the_first_writes(api: ApiServer) -> None:
    """The Secret is replaced with the resourceVersion read (before any replica holds the Lease, each
    runs rounds at start): the replica answered 409 writes nothing and reports no error."""
    with api.api_client() as client_:
        core = client.CoreV1Api(client_)

        class Racing:  # reads the empty Secret, then the other replica writes it first
            def read_namespaced_secret(self, *args: Any, **kwargs: Any) -> Any:
                found = core.read_namespaced_secret(*args, **kwargs)
                assert sync_once(client_, TARGET).rotated
                return found

            def replace_namespaced_secret(self, *args: Any, **kwargs: Any) -> Any:
                return core.replace_namespaced_secret(*args, **kwargs)

        assert not api.get(SECRET).get("data")  # both replicas start from the empty Secret
        late = Outcome()
        sync_secret(Racing(), TARGET, datetime.datetime.now(datetime.UTC), late)  # type: ignore[arg-type]
        written = api.get(SECRET)["data"]
        assert (late.rotated, late.errors, late.bundle) == ("", [], b"")
        # the first writer's CA stands: the next round of the late replica keeps it
        assert sync_once(client_, TARGET).rotated == "" and api.get(SECRET)["data"] == written


def test_the_elected_controller_holds_its_lease_and_fills_the_secret(api: ApiServer) -> None:
    stop = threading.Event()
    with api.api_client() as client_:
        thread = start_background_sync(client_, TARGET, interval=0.5, stop=stop)
        try:
            lease = wait_for(
                lambda: (
                    api.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases/{LEASE_NAME}").ok
                ),
                30,
                "the Lease guardhook-certs",
            )
            assert lease
            wait_for(lambda: api.get(SECRET).get("data"), 30, "the Secret's certificates")
        finally:
            # a campaign left running outlives the API server and the test: it retried for the
            # rest of the session and was still inside its loop when the interpreter finalized
            stop.set()
            thread.join(timeout=30)
    assert not thread.is_alive()


def test_start_up_waits_until_the_certificate_is_mounted(api: ApiServer, tmp_path: Path) -> None:
    folder = tmp_path / "certs"
    folder.mkdir()

    def kubelet() -> None:  # mounts the Secret's files once it holds them, as the kubelet would
        data = wait_for(lambda: api.get(SECRET).get("data"), 30, "the Secret's certificates")
        for key, value in data.items():
            (folder / key).write_bytes(base64.b64decode(value))

    mounting = threading.Thread(target=kubelet)
    mounting.start()
    with api.api_client() as client_:
        assert wait_until_mounted(client_, TARGET, folder, poll=0.2)
    mounting.join()
    assert (folder / "tls.crt").read_bytes() == base64.b64decode(api.get(SECRET)["data"]["tls.crt"])
    stopped = threading.Event()
    stopped.set()
    with api.api_client() as client_:
        assert not wait_until_mounted(client_, TARGET, tmp_path / "empty", stop=stopped)
