"""Judge many existing objects as CREATEs through the one Engine, for `check` and `audit`.

Each object becomes a synthetic CREATE (guardhook.commands.synthetic) judged the way the API server runs
webhooks: mutating first, the patch applied, then validating (guardhook.admission.review.verdict_both).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from guardhook.admission.engine import Engine
from guardhook.admission.review import verdict_both
from guardhook.cluster.model import metadata
from guardhook.cluster.view.store import ClusterView, object_key
from guardhook.commands.synthetic import SYNTHETIC_USER, as_create
from guardhook.config import Config
from guardhook.policies.base import Policy
from guardhook.wire import KubeObject


@dataclass(frozen=True)
class Finding:
    """One policy result on one object.

    `action` is the enforcement action taken (Deny, Warn, Audit, Mutate; "Advisory" for a warning
    a policy emits whatever its actions); `outcome` as in engine.Decision ("allowed" for a pass).
    """

    source: str
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str
    policy: str
    action: str
    outcome: str
    message: str
    document: int | None = None
    """The object's YAML document in `source` (0 for the first), for objects read from a file."""
    document_line: int | None = None
    """The line that document starts on (1-based)."""

    @property
    def violated(self) -> bool:
        return self.outcome != "allowed" and self.outcome != "error"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form: camelCase keys, as Kubernetes objects (`apiVersion`); `document` and
        `documentLine` only for an object read from a file."""
        return {_camel(key): value for key, value in asdict(self).items() if value is not None}

    def line(self) -> str:
        """`source: Kind namespace/name: Action [policy] message`."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.source}: {self.kind} {where}: {self.action} [{self.policy}] {self.message}"


@dataclass(frozen=True)
class Located:
    """An object and where it came from (a file path, "-" for stdin, or "cluster"; for a file, its
    document index and the line that document starts on, as in Manifest)."""

    source: str
    obj: KubeObject
    document: int | None = None
    line: int | None = None


def usable_policies(
    policies: Sequence[Policy], view: ClusterView, skip_node_readers: bool = False
) -> list[Policy]:
    """`policies` minus those that read Nodes (Policy.reads_nodes) when `skip_node_readers` is set
    or the view holds no Nodes."""
    if skip_node_readers or not view.nodes():
        return [p for p in policies if not p.reads_nodes]
    return list(policies)


def scan(
    view: ClusterView,
    config: Config,
    policies: Sequence[Policy],
    objects: Iterable[Located],
    username: str = SYNTHETIC_USER,
    previous: Mapping[tuple[str, str, str], KubeObject] | None = None,
) -> list[Finding]:
    """Judge every object of a kind guardhook knows as a CREATE by `username`; return one Finding
    per finding of each decision (a lint's several findings apart; passes and errors included) and
    per advisory warning, in object order. An object in `previous` (by kind, namespace, name) is
    judged as an UPDATE from that copy."""
    engine = Engine(view, config, policies=policies, record=False)
    findings: list[Finding] = []
    for located in objects:
        request = as_create(located.obj, username)
        if request is None:
            continue
        before = (previous or {}).get((str(located.obj.get("kind") or ""), *object_key(located.obj)))
        if before is not None:
            # The context holds this object already: judge what applying the manifest changes.
            request = {**request, "operation": "UPDATE", "oldObject": before}
        elif any(policy.already_running(view, located.obj) for policy in policies):
            # A dump of a live cluster holds running objects: judge them as unchanged.
            request = {**request, "operation": "UPDATE", "oldObject": located.obj}
        verdict = verdict_both(engine, request)
        explained = set()
        for decision in verdict.decisions:
            for message in decision.findings or (decision.message,):
                findings.append(
                    _finding(located, decision.policy, decision.action, decision.outcome, message)
                )
            if decision.action == "Warn":
                explained.add(f"[{decision.policy}] {decision.message}")
        for warning in verdict.response.get("warnings", []):
            if warning not in explained:
                policy, _, message = warning.removeprefix("[").partition("] ")
                findings.append(_finding(located, policy, "Advisory", "warned", message))
    return findings


def _finding(located: Located, policy: str, action: str, outcome: str, message: str) -> Finding:
    meta = metadata(located.obj)
    kind = str(located.obj.get("kind") or "")
    namespace = str(meta.get("namespace") or "")
    name = str(meta.get("name") or "")
    return Finding(
        source=located.source,
        kind=kind,
        namespace=namespace,
        name=name,
        uid=str(meta.get("uid") or ""),
        api_version=str(located.obj.get("apiVersion") or ""),
        policy=policy,
        action=action,
        outcome=outcome,
        message=without_subject(message, kind, namespace, name),
        document=located.document,
        document_line=located.line,
    )


def without_subject(message: str, kind: str, namespace: str, name: str) -> str:
    """`message` without a leading "Kind namespace/name" or "Kind name" (and a ":" after it): a
    webhook message names its object, a report line names it already, once."""
    if not (kind and name):
        return message
    for subject in (f"{kind} {namespace}/{name}", f"{kind} {name}"):
        if message.startswith((subject + " ", subject + ":")):
            return message[len(subject) :].removeprefix(":").lstrip()
    return message


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.capitalize() for part in rest)
