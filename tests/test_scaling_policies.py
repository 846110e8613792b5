"""The `pod-counted-scaler` and `group-capacity` policies through the engine, on the sample fleet
and on small hand-made views."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import ClusterView
from guardhook.config import build_config, default_config
from guardhook.policies.pod_counted_scaler import lws_controller_exemption_warning, startup_checks

from conftest import load_review

_FLEET = embedded_fleet_objects()  # parsed once: YAML parsing dominates a test's time


def fleet_objects() -> list[dict[str, Any]]:
    return copy.deepcopy(_FLEET)


def embedded_fleet_view() -> ClusterView:
    return view_from_objects(fleet_objects())


def judge(request: dict[str, Any], view: ClusterView | None = None, config: Any = None) -> dict[str, Any]:
    engine = Engine(view or embedded_fleet_view(), config, record=False)
    return dict(engine.judge(request, "validate").response)


def request_of(name: str) -> dict[str, Any]:
    return copy.deepcopy(load_review(name)["request"])


# ---- pod-counted-scaler ------------------------------------------------------------------------


def test_hpa_on_the_leader_statefulset_is_denied() -> None:
    request = request_of("s21-hpa-worker-sts.validating")
    request["object"]["spec"]["scaleTargetRef"]["name"] = "llm-xl"
    response = judge(request)
    assert response["allowed"] is False
    assert "leader StatefulSet of LeaderWorkerSet llm-xl" in response["status"]["message"]


def test_hpa_on_an_unrelated_statefulset_or_deployment_is_allowed() -> None:
    request = request_of("s21-hpa-worker-sts.validating")
    request["object"]["spec"]["scaleTargetRef"]["name"] = "postgres"
    assert judge(request)["allowed"] is True
    # a plain allow: no warning (a policy error fails open with one, which would also be "allowed")
    assert not judge(request).get("warnings")
    request["object"]["spec"]["scaleTargetRef"] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "llm-xl-0",
    }
    assert judge(request)["allowed"] is True


def test_naming_convention_covers_statefulsets_not_yet_in_the_view() -> None:
    objects = [o for o in fleet_objects() if o["kind"] != "StatefulSet"]
    request = request_of("s21-hpa-worker-sts.validating")
    request["object"]["spec"]["scaleTargetRef"]["name"] = "llm-xl-7"
    response = judge(request, view_from_objects(objects))
    assert response["allowed"] is False
    assert "group 7 of LeaderWorkerSet llm-xl" in response["status"]["message"]


def test_a_statefulset_in_the_view_without_lws_markers_is_not_lws_owned() -> None:
    plain = {
        "kind": "StatefulSet",
        "metadata": {"name": "llm-xl-9", "namespace": "serve"},
        "spec": {"replicas": 1},
    }
    request = request_of("s21-hpa-worker-sts.validating")
    request["object"]["spec"]["scaleTargetRef"]["name"] = "llm-xl-9"
    assert judge(request, view_from_objects([*fleet_objects(), plain]))["allowed"] is True


def test_keda_defaults_an_omitted_target_to_a_deployment() -> None:
    request = request_of("s24-keda-worker-sts.validating")
    request["object"]["spec"]["scaleTargetRef"] = {"name": "llm-xl-1"}
    assert judge(request)["allowed"] is True  # apps/v1 Deployment llm-xl-1, not the StatefulSet
    request["object"]["spec"]["scaleTargetRef"] = {"name": "llm-xl-1", "kind": "StatefulSet"}
    assert judge(request)["allowed"] is False  # apiVersion defaults to apps/v1


def test_statefulset_update_keeping_replicas_is_allowed() -> None:
    request = request_of("s27-sts-update-worker.validating")
    request["object"]["spec"]["replicas"] = request["oldObject"]["spec"]["replicas"]
    assert judge(request)["allowed"] is True


def test_statefulset_update_is_judged_by_its_own_owner_labels() -> None:
    objects = [o for o in fleet_objects() if o["kind"] not in ("StatefulSet", "LeaderWorkerSet")]
    response = judge(request_of("s27-sts-update-worker.validating"), view_from_objects(objects))
    assert response["allowed"] is False  # the object's LWS name label says so, with an empty view


def test_lws_controller_and_statefulset_controller_are_exempt() -> None:
    for user in (
        "system:serviceaccount:lws-system:lws-controller-manager",
        "system:serviceaccount:kube-system:statefulset-controller",
    ):
        request = request_of("s26-sts-scale-worker.validating")
        request["userInfo"] = {"username": user}
        assert judge(request)["allowed"] is True, user


def test_a_look_alike_lws_controller_is_judged_unless_configured() -> None:
    # Exact by default (issue 20): another namespace's account of the same name is anyone.
    request = request_of("s26-sts-scale-worker.validating")
    request["userInfo"] = {"username": "system:serviceaccount:ml:lws-controller-manager"}
    assert judge(request)["allowed"] is False
    configured = build_config(
        {"exemptions": {"lwsControllers": ["system:serviceaccount:ml:lws-controller-manager"]}}
    )
    assert judge(request, config=configured)["allowed"] is True


def test_startup_warns_when_no_exemption_covers_the_lws_controller(caplog: pytest.LogCaptureFixture) -> None:
    view = embedded_fleet_view()
    assert lws_controller_exemption_warning(view, default_config()) is None
    # the LWS controller is exempt per policy by default: replacing the global list keeps it exempt
    replaced = build_config(
        {"exemptions": {"users": ["system:serviceaccount:kube-system:generic-garbage-collector"]}}
    )
    assert lws_controller_exemption_warning(view, replaced) is None
    bare = build_config(
        {
            "exemptions": {"users": ["system:serviceaccount:kube-system:generic-garbage-collector"]},
            "policies": {"pod-counted-scaler": {"exemptions": {"users": []}}},
        }
    )
    assert lws_controller_exemption_warning(view, bare) is not None
    warning = lws_controller_exemption_warning(view, bare) or ""
    assert "no exempt user covers the LWS controller" in warning
    assert "system:serviceaccount:lws-system:lws-controller-manager" in warning
    assert lws_controller_exemption_warning(view_from_objects([]), bare) is None  # no LWS, no warning
    custom = build_config({"exemptions": {"users": ["system:serviceaccount:ml:myrel-controller-manager"]}})
    assert lws_controller_exemption_warning(view, custom) is None
    with caplog.at_level(logging.WARNING):
        startup_checks(view, bare)
    assert "LWS controller" in caplog.text


# ---- group-capacity ----------------------------------------------------------------------------


def fleet_with(**changes: Any) -> ClusterView:
    """The sample fleet with the LWS's annotations / rollout changed."""
    objects = fleet_objects()
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet":
            obj["metadata"].setdefault("annotations", {}).update(changes.get("annotations", {}))
    return view_from_objects(objects)


def test_spare_groups_reserve_blocks_a_scale_up_that_would_use_it() -> None:
    request = request_of("s29-lws-scale-up-1.validating")
    assert judge(request)["allowed"] is True
    config = build_config({"policies": {"group-capacity": {"spareGroups": 1}}})
    response = judge(request, config=config)
    assert response["allowed"] is False
    assert "spare" in response["status"]["message"]
    # the new group itself fits (fits == new groups, the boundary); only the reserve does not
    assert (
        "all 1 new group of LeaderWorkerSet llm-xl fit, but the reserve of 1 spare"
        in (response["status"]["message"])
    )
    assert "room for 0 of them beside the new ones" in response["status"]["message"]


def test_spare_groups_annotation_overrides_the_config() -> None:
    request = request_of("s29-lws-scale-up-1.validating")
    view = fleet_with(annotations={"guardhook.io/spare-groups": "0"})
    config = build_config({"policies": {"group-capacity": {"spareGroups": 1}}})
    assert judge(request, view, config)["allowed"] is True
    view = fleet_with(annotations={"guardhook.io/spare-groups": "1"})
    assert judge(request, view)["allowed"] is False


def test_a_spare_groups_annotation_int_cannot_read_keeps_the_config_reserve() -> None:
    # "²" passes str.isdigit(), and int() raised on it: the policy failed open (allowed with a
    # warning), so a tenant's annotation switched the capacity check off for its own scale-ups.
    request = request_of("s29-lws-scale-up-1.validating")
    config = build_config({"policies": {"group-capacity": {"spareGroups": 1}}})
    for value in ("²", "٣"):
        response = judge(request, fleet_with(annotations={"guardhook.io/spare-groups": value}), config)
        assert response["allowed"] is False and "spare" in response["status"]["message"], value


def test_size_change_with_max_surge_needs_a_surge_group_of_the_new_shape() -> None:
    request = request_of("s31-lws-patch-replicas-6.validating")
    request["object"]["spec"]["replicas"] = 4
    request["object"]["spec"]["leaderWorkerTemplate"]["size"] = 5  # 5 free GPU nodes needed, 4 exist
    response = judge(request)
    assert response["allowed"] is False
    assert "0 of 1 new group" in response["status"]["message"]
    request["object"]["spec"]["leaderWorkerTemplate"]["size"] = 3  # surge group of 3 fits on nvl-4
    assert judge(request)["allowed"] is True


def test_size_change_without_surge_is_allowed_with_an_advisory() -> None:
    request = request_of("s31-lws-patch-replicas-6.validating")
    request["object"]["spec"]["replicas"] = 4
    request["object"]["spec"]["leaderWorkerTemplate"]["size"] = 8
    request["object"]["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"] = 0
    response = judge(request)
    assert response["allowed"] is True
    assert any("replaced in place" in w for w in response["warnings"])


def test_percentage_max_surge_is_rounded_up() -> None:
    from guardhook.policies.group_capacity import surge_groups

    assert surge_groups({"maxSurge": "10%"}, 4) == 1
    assert surge_groups({"maxSurge": "50%"}, 5) == 3
    assert surge_groups({"maxSurge": 9}, 4) == 4
    assert surge_groups({}, 4) == 0


def test_scale_down_and_unchanged_updates_are_allowed() -> None:
    request = request_of("s31-lws-patch-replicas-6.validating")
    request["object"]["spec"]["replicas"] = 2
    assert judge(request)["allowed"] is True
    request["object"]["spec"]["replicas"] = 4
    assert judge(request)["allowed"] is True


def test_no_nodes_in_the_view_skips_with_an_advisory() -> None:
    objects = [o for o in fleet_objects() if o["kind"] != "Node"]
    response = judge(request_of("s34-lws-create-too-big.validating"), view_from_objects(objects))
    assert response["allowed"] is True
    assert any("holds no nodes" in w for w in response["warnings"])


def test_exclusive_topology_on_the_fleet_counts_free_domains() -> None:
    request = request_of("s34-lws-create-too-big.validating")
    request["object"]["metadata"]["annotations"] = {
        "leaderworkerset.sigs.k8s.io/exclusive-topology": "example.com/nvlink-domain"
    }
    request["object"]["spec"]["replicas"] = 1
    assert judge(request)["allowed"] is True  # nvl-4 is free
    request["object"]["spec"]["replicas"] = 2
    response = judge(request)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "1 of 2 new groups" in message
    assert "5 domains, 4 already hold a group" in message


def test_tolerations_and_selectors_of_the_templates_are_applied() -> None:
    request = request_of("s33-lws-create-fits.validating")
    template = request["object"]["spec"]["leaderWorkerTemplate"]
    template["workerTemplate"]["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": "cpu-32"}
    response = judge(request)
    assert response["allowed"] is False  # workers may only use the CPU nodes, which have no GPU
    assert "Eligible: 22 of 22 nodes for leaders and 2 for workers" in response["status"]["message"]


def test_an_update_is_judged_on_its_own_templates_not_on_the_views_copy() -> None:
    """Shapes are reused from the view's LWS only while the templates are the same: an update
    that also moves the workers to the CPU nodes must be judged on the new template."""
    view = embedded_fleet_view()
    request = request_of("s31-lws-patch-replicas-6.validating")
    request["object"]["spec"]["replicas"] = 5  # one new group: it fits (as s29's /scale to 5)
    assert judge(request, view)["allowed"] is True
    template = request["object"]["spec"]["leaderWorkerTemplate"]
    template["workerTemplate"]["spec"]["nodeSelector"] = {"node.kubernetes.io/instance-type": "cpu-32"}
    response = judge(request, view)
    assert response["allowed"] is False
    assert "Eligible: 22 of 22 nodes for leaders and 2 for workers" in response["status"]["message"]


def test_the_pod_shapes_of_a_view_lws_are_read_once_for_scale_and_same_template_updates() -> None:
    from guardhook.capacity import index_for, shape_of_template
    from guardhook.cluster.lws import LeaderWorkerSet
    from guardhook.policies.group_capacity import template_shapes

    view = embedded_fleet_view()
    held = view.lws("serve", "llm-xl")
    assert held is not None
    assert judge(request_of("s29-lws-scale-up-1.validating"), view)["allowed"] is True
    shapes = held.derived["pod shapes"]
    assert shapes == (shape_of_template(held.leader_template), shape_of_template(held.worker_template))
    update = request_of("s31-lws-patch-replicas-6.validating")
    update["object"]["spec"]["replicas"] = 5
    assert judge(update, view)["allowed"] is True
    assert held.derived["pod shapes"] is shapes
    # the update's own object (same leaderWorkerTemplate) is judged with the view's shapes
    updated = LeaderWorkerSet(update["object"])
    leader, worker, _ = template_shapes(updated, "serve", view, index_for(view))
    assert (leader, worker) == shapes and leader is shapes[0] and worker is shapes[1]
    assert "pod shapes" not in updated.derived  # not read again from the request's object
    view.upsert("leaderworkersets", update["object"])  # the update lands: a new object, read anew
    replaced = view.lws("serve", "llm-xl")
    assert replaced is not None and "pod shapes" not in replaced.derived


def test_stale_view_allows_with_a_warning() -> None:
    view = embedded_fleet_view()
    view.mark_broken("pods", now=0.0)
    response = judge(request_of("s34-lws-create-too-big.validating"), view)
    assert response["allowed"] is True
    assert any(w.startswith("[group-capacity]") for w in response["warnings"])


def test_stale_view_pod_counted_scaler_fails_open_unless_the_object_shows_ownership() -> None:
    view = embedded_fleet_view()
    view.mark_broken("pods", now=0.0)
    response = judge(request_of("s21-hpa-worker-sts.validating"), view)
    assert response["allowed"] is True
    assert any("not checked" in w for w in response["warnings"])
    assert judge(request_of("s27-sts-update-worker.validating"), view)["allowed"] is False
    assert judge(request_of("s23-hpa-lws.validating"), view)["allowed"] is True


def test_naming_fallback_prefers_an_lws_of_that_exact_name() -> None:
    objects = [o for o in fleet_objects() if o["kind"] != "StatefulSet"]
    other = copy.deepcopy(next(o for o in objects if o["kind"] == "LeaderWorkerSet"))
    other["metadata"]["name"] = "llm-xl-3"
    request = request_of("s21-hpa-worker-sts.validating")
    request["object"]["spec"]["scaleTargetRef"]["name"] = "llm-xl-3"
    message = judge(request, view_from_objects([*objects, other]))["status"]["message"]
    assert "leader StatefulSet of LeaderWorkerSet llm-xl-3" in message
