"""Carry out a per-group PDB plan (`guardhook.pdbsync.desired.Plan`) through the Kubernetes API.

Uses `kubernetes.client.PolicyV1Api` (or anything with the same four methods). Updates are
full replaces carrying the resourceVersion the plan saw, so a PDB changed meanwhile answers 409
and is retried on the next round; a PDB already gone answers 404 to a delete, which is success.
Every failure is reported and the rest of the plan still runs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from guardhook.cluster.model import metadata
from guardhook.pdbsync.desired import Plan
from guardhook.wire import KubeObject

log = logging.getLogger(__name__)

NOT_FOUND = 404


class PdbApi(Protocol):
    """The PolicyV1Api methods the applier calls."""

    def create_namespaced_pod_disruption_budget(self, namespace: str, body: Any) -> Any: ...

    def replace_namespaced_pod_disruption_budget(self, name: str, namespace: str, body: Any) -> Any: ...

    def delete_namespaced_pod_disruption_budget(self, name: str, namespace: str) -> Any: ...


@dataclass
class Outcome:
    """What one round changed ("namespace/name" each) and what failed (messages)."""

    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, list[str]]:
        return {
            "created": self.created,
            "updated": self.updated,
            "deleted": self.deleted,
            "skipped": self.skipped,
            "errors": self.errors,
        }


def apply_plan(api: PdbApi, plan: Plan) -> Outcome:
    """Create, replace and delete as `plan` says; never raises for an API error."""
    outcome = Outcome(skipped=list(plan.warnings))
    for pdb in plan.create:
        _try(outcome.created, outcome.errors, "create", _name(pdb), lambda p=pdb: _create(api, p))
    for pdb in plan.update:
        _try(outcome.updated, outcome.errors, "update", _name(pdb), lambda p=pdb: _replace(api, p))
    for namespace, name in plan.delete:
        _try(
            outcome.deleted,
            outcome.errors,
            "delete",
            f"{namespace}/{name}",
            lambda n=name, ns=namespace: _delete(api, n, ns),
        )
    for warning in plan.warnings:
        log.warning("pdb-sync: %s", warning)
    return outcome


def _name(pdb: KubeObject) -> str:
    meta = metadata(pdb)
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _create(api: PdbApi, pdb: KubeObject) -> None:
    api.create_namespaced_pod_disruption_budget(metadata(pdb)["namespace"], pdb)


def _replace(api: PdbApi, pdb: KubeObject) -> None:
    meta = metadata(pdb)
    api.replace_namespaced_pod_disruption_budget(meta["name"], meta["namespace"], pdb)


def _delete(api: PdbApi, name: str, namespace: str) -> None:
    try:
        api.delete_namespaced_pod_disruption_budget(name, namespace)
    except ApiException as exc:
        if exc.status != NOT_FOUND:
            raise


def _try(done: list[str], errors: list[str], verb: str, name: str, call: Any) -> None:
    try:
        call()
    except ApiException as exc:
        message = f"{verb} PodDisruptionBudget {name}: HTTP {exc.status} {exc.reason}"
        log.warning("pdb-sync: %s", message)
        errors.append(message)
        return
    except (HTTPError, OSError) as exc:  # API server unreachable
        errors.append(f"{verb} PodDisruptionBudget {name}: {exc}")
        log.warning("pdb-sync: %s", errors[-1])
        return
    log.info("pdb-sync: %sd PodDisruptionBudget %s", verb.rstrip("e"), name)
    done.append(name)
