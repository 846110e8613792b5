"""Per-policy exemptions (`policies.<id>.exemptions`, added to the global ones): by default the LWS
controller's account is exempt from every policy but group-capacity, which judges LWS spec changes
whoever makes them (the DisaggregatedSet controller runs as that account)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import LWS_CONTROLLER_PATTERN
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.config import GLOBAL_EXEMPT_USERS, ConfigError, build_config, default_config

from conftest import load_review

LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"
_FLEET = embedded_fleet_objects()


def as_user(
    review: str, username: str, groups: tuple[str, ...] = ("system:serviceaccounts",)
) -> dict[str, Any]:
    request = copy.deepcopy(load_review(review)["request"])
    request["userInfo"] = {"username": username, "groups": list(groups)}
    return request


def allowed(request: dict[str, Any], config: Any = None) -> bool:
    engine = Engine(view_from_objects(copy.deepcopy(_FLEET)), config, record=False)
    return bool(engine.judge(request).response["allowed"])


def test_the_default_judges_the_lws_controllers_lws_scale_up() -> None:
    # s30 does not fit: as kubernetes-admin it is denied, and now as the LWS controller too
    assert not allowed(as_user("s30-lws-scale-up-2.validating", "kubernetes-admin"))
    assert not allowed(as_user("s30-lws-scale-up-2.validating", LWS_CONTROLLER))
    assert LWS_CONTROLLER_PATTERN not in GLOBAL_EXEMPT_USERS
    assert default_config().settings("group-capacity").exemptions.users == ()


@pytest.mark.parametrize(
    "review",
    [
        "s04-worker-delete-lws-controller.validating",  # worker-delete
        "s26-sts-scale-worker.validating",  # pod-counted-scaler: the StatefulSet level stays exempt
    ],
)
def test_the_lws_controller_stays_exempt_from_every_other_policy(review: str) -> None:
    assert not allowed(as_user(review, "kubernetes-admin"))
    assert allowed(as_user(review, LWS_CONTROLLER))


@pytest.mark.parametrize(
    ("exemptions", "user", "groups", "exempt"),
    [
        ({"users": [LWS_CONTROLLER_PATTERN]}, LWS_CONTROLLER, (), True),
        (
            {"users": ["system:serviceaccount:ml:disagg-*"]},
            "system:serviceaccount:ml:disagg-controller",
            (),
            True,
        ),
        ({"users": ["system:serviceaccount:ml:disagg-*"]}, LWS_CONTROLLER, (), False),
        ({"groups": ["platform-admins"]}, "alice", ("platform-admins",), True),
        ({"namespaces": ["serve"]}, "alice", (), True),  # s30 is in namespace serve
        ({"namespaces": ["elsewhere"]}, "alice", (), False),
    ],
)
def test_per_policy_exemptions_skip_only_that_policy(
    exemptions: dict[str, Any], user: str, groups: tuple[str, ...], exempt: bool
) -> None:
    config = build_config({"policies": {"group-capacity": {"exemptions": exemptions}}})
    assert allowed(as_user("s30-lws-scale-up-2.validating", user, groups), config) is exempt
    # the other policies keep their defaults: the worker delete is still denied for this user
    if user != LWS_CONTROLLER:
        assert not allowed(as_user("s01-worker-delete.validating", user, groups), config)


def test_global_exemptions_apply_on_top_of_per_policy_ones() -> None:
    config = build_config({"exemptions": {"users": [*GLOBAL_EXEMPT_USERS, LWS_CONTROLLER_PATTERN]}})
    assert allowed(as_user("s30-lws-scale-up-2.validating", LWS_CONTROLLER), config)


def test_a_per_policy_list_replaces_that_policys_default() -> None:
    config = build_config({"policies": {"worker-delete": {"exemptions": {"users": []}}}})
    assert not allowed(as_user("s04-worker-delete-lws-controller.validating", LWS_CONTROLLER), config)
    assert config.exempt_users("worker-delete") == GLOBAL_EXEMPT_USERS


@pytest.mark.parametrize(
    ("doc", "error"),
    [
        (
            {"policies": {"group-capacity": {"exemptions": {"user": []}}}},
            "policies.group-capacity.exemptions.user",
        ),
        (
            {"policies": {"group-capacity": {"exemptions": {"users": "x"}}}},
            "policies.group-capacity.exemptions.users",
        ),
        (
            {"policies": {"group-capacity": {"exemptions": []}}},
            "policies.group-capacity.exemptions must be a mapping",
        ),
    ],
)
def test_bad_per_policy_exemptions_name_the_key(doc: dict[str, Any], error: str) -> None:
    with pytest.raises(ConfigError, match=error.replace(".", r"\.")):
        build_config(doc)


# ---- exact by default (issue 20) -----------------------------------------------------------------

LOOK_ALIKES = [
    "system:serviceaccount:tenant-a:my-lws-controller-manager",
    "system:serviceaccount:tenant-a:lws-controller-manager",
    "system:serviceaccount:tenant-a:kueue-controller-manager",
    "system:serviceaccount:tenant-a:statefulset-controller",
    "system:serviceaccount:lws-system:lws-controller-manager-x",
]


@pytest.mark.parametrize("username", LOOK_ALIKES)
def test_look_alike_identities_in_other_namespaces_are_judged_like_anyone(username: str) -> None:
    assert not allowed(as_user("s01-worker-delete.validating", username))


@pytest.mark.parametrize(
    "username",
    [
        LWS_CONTROLLER,
        "system:serviceaccount:kueue-system:kueue-controller-manager",
        "system:node:gpu-node-01",
    ],
)
def test_the_install_identities_are_exempt(username: str) -> None:
    groups = ("system:nodes",) if username.startswith("system:node:") else ("system:serviceaccounts",)
    assert allowed(as_user("s01-worker-delete.validating", username, groups))


def test_a_user_named_like_a_node_outside_system_nodes_is_judged() -> None:
    # Issue 48: `system:node:*` matched the username alone.
    for groups in (("system:authenticated",), ()):
        assert not allowed(as_user("s01-worker-delete.validating", "system:node:evil", groups))
    assert allowed(as_user("s01-worker-delete.validating", "system:node:evil", ("system:nodes",)))


def test_another_install_is_named_in_the_configuration() -> None:
    helm_lws = "system:serviceaccount:ml:myrel-lws-controller-manager"
    helm_kueue = "system:serviceaccount:batch:kueue-controller-manager"
    config = build_config(
        {"exemptions": {"lwsControllers": [helm_lws], "users": [*GLOBAL_EXEMPT_USERS, helm_kueue]}}
    )
    for user in (helm_lws, helm_kueue):
        assert not allowed(as_user("s01-worker-delete.validating", user)), user
        assert allowed(as_user("s01-worker-delete.validating", user), config), user
    # Named as the LWS controller it is exempt per policy, like the default: group-capacity still
    # judges its spec changes; the default install's account is no longer exempt.
    assert not allowed(as_user("s30-lws-scale-up-2.validating", helm_lws), config)
    assert not allowed(as_user("s01-worker-delete.validating", LWS_CONTROLLER), config)
    with pytest.raises(ConfigError, match="exemptions.lwsControllers"):
        build_config({"exemptions": {"lwsControllers": "system:serviceaccount:ml:x"}})
