"""Pod-level in-place resize (KEP-5419) in group-resize (issue 37 item 3): a `pods/resize` of
`spec.resources` restarts a container that inherits the changed pod-level limit under
`resizePolicy: RestartContainer`, so under a recreating LWS restartPolicy it is a group disruption
budgeted like a container-level one (429 over it). Reviews are the captured s01 re-aimed as a
resize (test_group_resize.resize), each with its control."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from eviction_helpers import find
from test_group_resize import RESTARTS_MEMORY, engine, fleet, resize, respond, with_resize_policy

from guardhook.ledger import MemoryLedger
from guardhook.policies.group_resize import Restart, restarts

Objects = list[dict[str, Any]]
POD_LEVEL = {"requests": {"cpu": "90", "memory": "1500Gi"}, "limits": {"memory": "1800Gi"}}


def pod_level(own_memory_limit: bool = False) -> Callable[[Objects], None]:  # noqa: ANN201 - a fleet edit
    """Every fleet pod with pod-level `spec.resources`; its container `shard` without a memory
    limit of its own (it inherits the pod's), or with one when `own_memory_limit`."""

    def edit(objects: Objects) -> None:
        for pod in (o for o in objects if o["kind"] == "Pod"):
            pod["spec"]["resources"] = copy.deepcopy(POD_LEVEL)
            resources = pod["spec"]["containers"][0].setdefault("resources", {})
            limits = {k: v for k, v in resources.get("limits", {}).items() if k != "memory"}
            if own_memory_limit:
                limits["memory"] = "1800Gi"
            resources["limits"] = limits

    return edit


def pod_resize(pod: str, objects: Objects, **limits: str) -> dict[str, Any]:
    """A resize of `pod` that changes only pod-level `spec.resources.limits` (no container change)."""
    request = resize(pod, objects)
    request["object"]["spec"]["resources"]["limits"].update(limits)
    return request


def test_a_pod_level_limit_change_restarts_a_container_that_inherits_it() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY), pod_level())
    request = pod_resize("llm-xl-0-2", objects, memory="1900Gi")
    assert restarts(request["object"], request["oldObject"]) == [Restart("shard", ("memory",), ("memory",))]


def test_control_a_container_with_its_own_limit_is_not_restarted() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY), pod_level(own_memory_limit=True))
    request = pod_resize("llm-xl-0-2", objects, memory="1900Gi")
    assert restarts(request["object"], request["oldObject"]) == []


def test_control_a_cpu_change_at_pod_level_restarts_nothing_under_not_required() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY), pod_level())
    request = pod_resize("llm-xl-0-2", objects, cpu="95")
    assert restarts(request["object"], request["oldObject"]) == []


def test_a_pod_level_request_is_inherited_only_without_a_request_or_limit_of_its_own() -> None:
    old = {
        "spec": {"resources": {"requests": {"memory": "1Gi"}}, "containers": [{"name": "c", "resources": {}}]}
    }
    old["spec"]["containers"][0]["resizePolicy"] = copy.deepcopy(RESTARTS_MEMORY)
    new = copy.deepcopy(old)
    new["spec"]["resources"]["requests"]["memory"] = "2Gi"
    assert restarts(new, old) == [Restart("c", ("memory",), ("memory",))]
    for own in ({"requests": {"memory": "1Gi"}}, {"limits": {"memory": "4Gi"}}):  # controls
        old["spec"]["containers"][0]["resources"] = new["spec"]["containers"][0]["resources"] = own
        assert restarts(new, old) == []


def test_a_restarting_pod_level_resize_is_budgeted_like_a_container_level_one() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY), pod_level())
    ledger = MemoryLedger()
    eng = engine(objects, ledger)
    first = respond(eng, pod_resize("llm-xl-0-2", objects, memory="1900Gi"))
    assert first["allowed"] is True
    assert "memory inherited from the pod-level spec.resources" in first["warnings"][0]
    assert [(e.group, e.pod) for e in ledger.entries(("serve", "llm-xl"))] == [("0", "llm-xl-0-2")]
    second = respond(eng, pod_resize("llm-xl-1-1", objects, memory="1900Gi"))
    assert second["allowed"] is False and second["status"]["code"] == 429
    assert "group 0 (resize of llm-xl-0-2 recorded" in second["status"]["message"]
    # control: the same change at container level is 429 alike
    container_level = fleet(with_resize_policy(RESTARTS_MEMORY))
    eng = engine(container_level)
    assert respond(eng, resize("llm-xl-0-2", container_level, memory="1600Gi"))["allowed"] is True
    assert respond(eng, resize("llm-xl-1-1", container_level, memory="1600Gi"))["status"]["code"] == 429


def test_control_the_same_pod_level_resize_with_own_limits_is_a_plain_allow() -> None:
    objects = fleet(with_resize_policy(RESTARTS_MEMORY), pod_level(own_memory_limit=True))
    ledger = MemoryLedger()
    eng = engine(objects, ledger)
    for pod in ("llm-xl-0-2", "llm-xl-1-1"):
        answer = respond(eng, pod_resize(pod, objects, memory="1900Gi"))
        assert answer == {"uid": answer["uid"], "allowed": True}
    assert ledger.entries(("serve", "llm-xl")) == ()
    assert find(objects, "Pod", "llm-xl-0-2")["spec"]["resources"]["limits"]["memory"] == "1800Gi"
