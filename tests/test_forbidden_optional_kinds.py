"""A 403 (RBAC) on an optional kind guardhook reads for group-capacity — the DRA kinds, Karpenter's
NodePools — leaves that kind empty and unreadable instead of failing it: a failed kind kept the
live view from syncing, so `serve` stayed unready and, under failurePolicy Fail, every pod delete
and eviction it guards was refused. group-capacity then takes the kind as unknown, not as none."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_capacity_models import message, pool_node
from test_live_serve import metric, serve_args

from guardhook.admission.engine import Engine
from guardhook.cluster.kube_transport import KubeTransport
from guardhook.cluster.view.live import LiveView
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import FORBIDDABLE_KINDS, NODEPOOLS, RESOURCESLICES, ClusterView

from conftest import Server
from fake_apiserver import running_fake
from gpu_cluster import claim_template, device_class, dra_cluster, lws_create, node


def judge(objects: list[dict[str, Any]], request: dict[str, Any], unreadable: list[str]) -> dict[str, Any]:
    view = view_from_objects(objects, unreadable=unreadable)
    return dict(Engine(view, None, record=False).judge(request).response)


def test_unreadable_resource_slices_leave_the_claimed_devices_uncounted_not_short() -> None:
    # CPU nodes, a DeviceClass and a claim template: with the ResourceSlices readable and none
    # there, the claimed GPUs are short; unreadable, whether there are any is unknown.
    objects = [node(f"cpu-{i}") for i in range(8)] + [device_class(), claim_template()]
    request = lws_create(replicas=1, claim="gpus-8")
    read = judge(objects, request, unreadable=[])
    assert read["allowed"] is False and "short of nvidia.com/gpu" in message(read)
    unread = judge(objects, request, unreadable=[RESOURCESLICES])
    assert unread["allowed"] is True
    assert "guardhook may not read resourceslices (RBAC): DRA devices were not counted" in str(
        unread["auditAnnotations"]
    )


def test_unreadable_resource_slices_turn_a_shortfall_of_extended_resources_into_a_warning() -> None:
    # DRA GPU nodes (none in allocatable) whose DeviceClass maps nvidia.com/gpu, which the pods
    # request as an extended resource: without the slices no node seems to have a GPU.
    readable = dra_cluster(nodes=8)
    request = lws_create(replicas=1)  # 4 pods x 8 nvidia.com/gpu
    assert judge(readable, request, unreadable=[])["allowed"] is True  # the slices' devices counted
    objects = [o for o in readable if o["kind"] != "ResourceSlice"]  # what a view may not list
    assert judge(objects, request, unreadable=[])["allowed"] is False  # read as none: short
    unread = judge(objects, request, unreadable=[RESOURCESLICES])
    assert unread["allowed"] is True
    (warning,) = unread["warnings"]
    assert "short of nvidia.com/gpu" in warning
    assert "guardhook may not read resourceslices (RBAC), so the DRA devices that may supply them" in warning
    # asking for no device, a shortfall is one whatever DRA holds
    cpu_only = lws_create(replicas=3, gpus=0)
    assert judge(objects, cpu_only, unreadable=[RESOURCESLICES])["allowed"] is False


def test_unreadable_nodepools_turn_a_shortfall_into_a_warning() -> None:
    objects = [pool_node("h100-a")]  # one node; the group needs four
    request = lws_create(replicas=1)
    read = judge(objects, request, unreadable=[])
    assert read["allowed"] is False  # no NodePool in a readable view: none would add the nodes
    unread = judge(objects, request, unreadable=[NODEPOOLS])
    assert unread["allowed"] is True
    (warning,) = unread["warnings"]
    assert "guardhook may not read Karpenter NodePools (RBAC)" in warning and "allowed" in warning


@pytest.mark.parametrize("kind", FORBIDDABLE_KINDS)
def test_a_live_view_syncs_with_a_forbidden_optional_kind_and_marks_it_unreadable(kind: str) -> None:
    with running_fake(forbidden={kind}) as fake:
        fake.load(embedded_fleet_objects())
        view = ClusterView(source="live")
        live = LiveView(view, lambda: KubeTransport(fake.api_client())).start()
        try:
            deadline = time.monotonic() + 10
            while not view.synced and time.monotonic() < deadline:
                time.sleep(0.05)
            assert view.synced and not view.is_stale()  # the webhook is ready
            assert not view.readable(kind)
            assert all(view.readable(other) for other in FORBIDDABLE_KINDS if other != kind)
        finally:
            live.stop()


def test_serve_is_ready_and_says_which_optional_kinds_it_may_not_read(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    with running_fake(forbidden={RESOURCESLICES, NODEPOOLS}) as fake:
        fake.load(embedded_fleet_objects())
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        server = fresh_server(*serve_args(tmp_path, kubeconfig))  # waits for /readyz 200
        assert metric(server, "guardhook_coverage_unchecked", 'kind="resourceslices"') == 1
        assert metric(server, "guardhook_coverage_unchecked", 'kind="nodepools"') == 1
        assert metric(server, "guardhook_coverage_unchecked", 'kind="deviceclasses"') == 0
        server.logged("guardhook may not list resourceslices (RBAC")
        assert server.review("/validate", "s01-worker-delete.validating")["allowed"] is False  # guarding
