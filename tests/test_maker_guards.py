"""A second eviction guard (guardhook.policies.shared.maker_guards): `audit` lists other webhook
entries on pods/eviction, and group-eviction's `deferToMakerGuards` leaves a maker's evictions to
its own guard while that guard is installed (Kthena's ModelServing eviction webhook, kthena PR
#1485). Pods: the sample fleet served by Kthena (tests/group_shapes.to_kthena); evictions: the
captured s07."""

from __future__ import annotations

import io
from typing import Any

import group_shapes as shapes
import pytest

from guardhook.admission.engine import Engine
from guardhook.commands.audit import audit, render_text
from guardhook.commands.scan import Located
from guardhook.config import ConfigError, build_config
from guardhook.ledger import MemoryLedger
from guardhook.policies.shared.maker_guards import eviction_guards

ENTRY = "modelserving-eviction.kthena.io"
DEFER = {"policies": {"group-eviction": {"deferToMakerGuards": [f"Kthena ModelServing={ENTRY}"]}}}


def webhook(
    name: str, entry: str, resources: list[str], kind: str = "ValidatingWebhookConfiguration"
) -> dict:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": entry,
                "clientConfig": {
                    "service": {"namespace": "kthena-system", "name": "kthena-webhook", "path": "/evict"}
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": resources,
                        "operations": ["CREATE"],
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
            }
        ],
    }


def kthena_fleet(guard: bool = True) -> list:
    objects = shapes.fleet()
    shapes.to_kthena(objects)
    objects.append(webhook("unrelated", "pods.example.com", ["pods"]))
    objects.append(webhook("own", "group-eviction.guardhook.io", ["pods/eviction"]))
    if guard:
        objects.append(webhook("kthena-webhook", ENTRY, ["pods/eviction"]))
    return objects


def evict(eng: Engine, name: str) -> dict[str, Any]:
    return dict(eng.judge(shapes.eviction_request(name), "validate").response)


def workers(objects: list) -> list[str]:
    pods = [o for o in objects if o["kind"] == "Pod" and o["metadata"]["namespace"] == "serve"]
    return sorted(p["metadata"]["name"] for p in pods if not p["metadata"]["name"].endswith("-0"))


def test_other_eviction_guards_are_listed_and_ours_and_other_resources_are_not() -> None:
    (guard,) = eviction_guards(shapes.view(kthena_fleet()))
    assert (guard.configuration, guard.entry.name) == ("kthena-webhook", ENTRY)
    assert "calls service kthena-system/kthena-webhook:443 /evict" in guard.describe()
    result = audit([Located("cluster", o) for o in kthena_fleet()], build_config({}))
    out = io.StringIO()
    render_text(result, out, err=io.StringIO())
    assert (
        f"Other eviction guards (1):\n  {ENTRY} (ValidatingWebhookConfiguration kthena-webhook"
        in out.getvalue()
    )


def test_a_deferred_makers_evictions_go_to_its_own_guard() -> None:
    objects = kthena_fleet()
    eng = Engine(shapes.view(objects), build_config(DEFER), ledger=MemoryLedger())
    first, second = (evict(eng, name) for name in ("llm-xl-0-default-0-1", "llm-xl-2-default-0-1"))
    assert first["allowed"] and second["allowed"]
    note = second["auditAnnotations"]["group-eviction-deferred-to"]
    assert note.startswith(
        "allowed: group 2 of LeaderWorkerSet serve/llm-xl is guarded by Kthena ModelServing's own"
    )
    assert ENTRY in note


def test_without_the_guard_installed_or_the_setting_guardhook_keeps_judging() -> None:
    for objects, config in ((kthena_fleet(guard=False), DEFER), (kthena_fleet(), {})):
        eng = Engine(shapes.view(objects), build_config(config), ledger=MemoryLedger())
        assert evict(eng, "llm-xl-0-default-0-1")["allowed"] is True
        denied = evict(eng, "llm-xl-2-default-0-1")
        assert denied["allowed"] is False and denied["status"]["code"] == 429


def test_malformed_items_are_refused() -> None:
    with pytest.raises(ConfigError, match="deferToMakerGuards"):
        build_config({"policies": {"group-eviction": {"deferToMakerGuards": ["Kthena ModelServing"]}}})
