"""guardhook's configuration (`--config FILE`, design.md §4): per-policy actions and parameters,
exemptions, and cluster-view settings. Unknown keys are errors that name the key.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from guardhook.cluster.lws import LWS_CONTROLLER
from guardhook.config_schema import DEFAULT_STALE_AFTER_SECONDS, MAX_NUMBER, schema_problems
from guardhook.policies import REGISTRY
from guardhook.policies.base import ACTIONS, Action, Policy
from guardhook.wire import UserInfo

# Kueue's controller as its install names it (`kueue-controller-manager` in `kueue-system`): it
# stops a group by deleting every pod of it and gives up at the first error. Exact, as every
# default: another install is named in `exemptions.users`.
KUEUE_CONTROLLER = "system:serviceaccount:kueue-system:kueue-controller-manager"
KUEUE_CONTROLLER_PATTERN = KUEUE_CONTROLLER
"""The former name of KUEUE_CONTROLLER (it was a pattern); kept for imports."""

DEFAULT_EXEMPT_USERS: tuple[str, ...] = (
    LWS_CONTROLLER,
    KUEUE_CONTROLLER,
    "system:serviceaccount:kube-system:generic-garbage-collector",
    "system:serviceaccount:kube-system:statefulset-controller",
    "system:serviceaccount:kube-system:pod-garbage-collector",
    "system:serviceaccount:kube-system:namespace-controller",
    # The node lifecycle and taint eviction controllers both run as node-controller.
    "system:serviceaccount:kube-system:node-controller",
    # A kubelet deletes only pods bound to its own node (the NodeRestriction admission plugin);
    # exempt only in the `system:nodes` group (Exemptions.exempts).
    "system:node:*",
)
"""Every default exempt identity: exact install identities, plus `system:node:*`, which the
NodeRestriction admission plugin confines to each kubelet's own node (and which is exempt only in
the `system:nodes` group: a user named like a node outside it is judged). The webhooks'
`matchConditions` in manifests/ skip exactly these (tests/test_manifests.py keeps them identical)."""
PER_POLICY_EXEMPT_USERS: tuple[str, ...] = (LWS_CONTROLLER,)
"""Default users exempt per policy instead of globally: every policy exempts them unless it judges
their writes — `Policy.judges_lws_controller` (group-capacity judges LWS spec changes whoever
makes them, e.g. the DisaggregatedSet controller, which runs as the LWS controller's account), or
`Policy.honours_user_exemptions` False (group-readiness judges every identity; see
`judges_default_per_policy_users`)."""
GLOBAL_EXEMPT_USERS: tuple[str, ...] = tuple(
    u for u in DEFAULT_EXEMPT_USERS if u not in PER_POLICY_EXEMPT_USERS
)
"""The default global `exemptions.users`: DEFAULT_EXEMPT_USERS less the per-policy ones."""
ENFORCEMENT_MODES = ("deny", "audit")
SECTIONS = ("policies", "exemptions", "clusterView")
"""The configuration's top-level keys. A new section (e.g. one for the server) goes here, in
build_config and in guardhook.config_schema.config_schema, whence the chart's `config` value and
docs take it; tests/test_config_schema.py fails while the two lists differ."""


class ConfigError(ValueError):
    """The configuration is invalid; the message names the offending key."""


@dataclass(frozen=True)
class Exemptions:
    """Requests that no policy judges (global) or one policy does not (`policies.<id>.exemptions`,
    added to the global ones): by username (`*` wildcards), group, or namespace."""

    users: tuple[str, ...] = GLOBAL_EXEMPT_USERS
    groups: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()

    @functools.cached_property
    def _user_patterns(self) -> re.Pattern[str]:
        # One compiled alternation: checked on every request, so no per-pattern fnmatch calls.
        return re.compile("|".join(fnmatch.translate(p) for p in self.users) or "(?!)")

    def exempts(self, user: UserInfo, namespace: str) -> bool:
        """Whether a request by `user` in `namespace` is exempt."""
        if namespace and namespace in self.namespaces:
            return True
        username = str(user.get("username") or "")
        if username and self._user_patterns.match(username) and _node_in_its_group(username, user):
            return True
        if not self.groups:  # the usual case: no group is exempt, so the user's are not read
            return False
        groups = user.get("groups") or []
        return any(isinstance(g, str) and g in self.groups for g in groups)


NODE_USER_PREFIX = "system:node:"
NODES_GROUP = "system:nodes"


def _node_in_its_group(username: str, user: UserInfo) -> bool:
    """False for a `system:node:<name>` username outside the `system:nodes` group: a kubelet's
    credentials carry both (the Node authorizer and NodeRestriction act only on that pair), so a
    user merely named like a node — anyone an authenticator lets pick a name — is judged (issue 48)."""
    if not username.startswith(NODE_USER_PREFIX):
        return True
    groups = user.get("groups") or []
    return NODES_GROUP in groups


@dataclass(frozen=True)
class PolicySettings:
    """One policy's configured actions (empty = off), parameters (defaults merged) and its own
    exemptions (`policies.<id>.exemptions`; the global ones apply on top)."""

    actions: tuple[Action, ...]
    params: Mapping[str, Any]
    exemptions: Exemptions = field(default_factory=lambda: Exemptions(users=()))


@dataclass(frozen=True)
class Config:
    """The whole configuration. `policies` holds an entry for every registered policy."""

    policies: Mapping[str, PolicySettings]
    exemptions: Exemptions = field(default_factory=Exemptions)
    stale_after_seconds: float = DEFAULT_STALE_AFTER_SECONDS
    lws_controllers: tuple[str, ...] = PER_POLICY_EXEMPT_USERS
    """`exemptions.lwsControllers`: the LWS controller's identities, exempt per policy (every
    policy but those that judge its writes) instead of globally."""

    def settings(self, policy_id: str) -> PolicySettings:
        return self.policies[policy_id]

    def exempt_users(self, policy_id: str) -> tuple[str, ...]:
        """The user patterns policy `policy_id` does not judge: global plus its own."""
        return self.exemptions.users + self.policies[policy_id].exemptions.users


def default_config(policies: Iterable[Policy] | None = None) -> Config:
    """The configuration with every policy at its defaults."""
    return build_config({}, policies)


def load_config(path: str | Path | None, enforcement: str = "deny") -> Config:
    """Read and validate a YAML config file (None: defaults), then apply `--enforcement`.

    The document must pass the loader's checks and the configuration schema
    (guardhook.config_schema), the one the chart's values.schema.json holds.
    Raises ConfigError naming the bad key or value, or the unreadable file.
    """
    raw: Any = {} if path is None else read_config_document(path)
    config = build_config(raw)
    problems = schema_problems(raw)
    if problems:  # the loader and the schema agree (tests/test_config_schema.py): a guard
        raise ConfigError(problems[0])
    return apply_enforcement(config, enforcement)


def read_config_document(path: str | Path) -> Any:
    """The decoded YAML document of config file `path` ({} for an empty file).

    Raises ConfigError when it cannot be read, is not UTF-8 YAML, or names a key twice."""
    try:
        loaded = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506
    except UnicodeDecodeError as exc:  # a ValueError, not an OSError: bytes that are not UTF-8
        raise ConfigError(
            f"cannot read config {path}: not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror or exc}") from exc
    except _DuplicateKey as exc:
        raise ConfigError(f"config {path}: {exc}") from exc
    except yaml.YAMLError as exc:
        from guardhook.cluster.view.manifests import yaml_error_line

        raise ConfigError(f"cannot read config {path}: not valid YAML: {yaml_error_line(exc)}") from exc
    return {} if loaded is None else loaded  # an empty file is the defaults; `false` is not


def config_problems(raw: Any) -> list[str]:
    """Every problem of a decoded config document, one line each: the schema's (all of them), else
    the one the loader finds beyond what the schema can say; [] when it is valid."""
    problems = schema_problems(raw)
    if problems:
        return problems
    try:
        build_config(raw)
    except ConfigError as exc:
        return [str(exc)]
    return []


class _DuplicateKey(yaml.YAMLError):
    """A mapping of the config names one key twice."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.SafeLoader that refuses a key given twice in one mapping: PyYAML keeps the last in
    silence, so a reviewer reading the first would read a setting that is not in force (YAML 1.2
    says mapping keys are unique)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, Hashable) and key in seen:
                line = key_node.start_mark.line + 1
                raise _DuplicateKey(f"line {line}: duplicate key {key} (YAML keys are unique)")
            seen.add(key)
        return super().construct_mapping(node, deep)


def apply_enforcement(config: Config, enforcement: str) -> Config:
    """`audit` turns every Deny into Audit (a cluster-wide dry run); `deny` changes nothing."""
    if enforcement not in ENFORCEMENT_MODES:
        raise ConfigError(f"--enforcement must be one of {', '.join(ENFORCEMENT_MODES)}, not {enforcement!r}")
    if enforcement == "deny":
        return config
    softened = {}
    for policy_id, settings in config.policies.items():
        actions = [a if a != "Deny" else "Audit" for a in settings.actions]
        softened[policy_id] = PolicySettings(
            tuple(dict.fromkeys(actions)), settings.params, settings.exemptions
        )
    return Config(softened, config.exemptions, config.stale_after_seconds)


def build_config(raw: Any, policies: Iterable[Policy] | None = None) -> Config:
    """Validate a decoded config document against the registered policies."""
    if policies is None:
        policies = REGISTRY
    registry = {p.id: p for p in policies}
    doc = _mapping(raw, "config")
    _reject_unknown(doc, set(SECTIONS), "")
    controllers = _lws_controllers(doc.get("exemptions"))
    # Only an absent or empty (null) key means "defaults": `policies: []` or `false` is a mistake.
    raw_policies = doc.get("policies")
    policy_docs = _mapping(raw_policies if raw_policies is not None else {}, "policies")
    _reject_unknown(policy_docs, set(registry), "policies.")
    settings = {pid: _policy_settings(p, policy_docs.get(pid), controllers) for pid, p in registry.items()}
    _inherit_shared_params(registry, policy_docs, settings)
    return Config(
        policies=settings,
        exemptions=_exemptions(doc.get("exemptions")),
        stale_after_seconds=_stale_after(doc.get("clusterView")),
        lws_controllers=controllers,
    )


def _policy_settings(
    policy: Policy, raw: Any, lws_controllers: tuple[str, ...] = PER_POLICY_EXEMPT_USERS
) -> PolicySettings:
    where = f"policies.{policy.id}"
    doc = _mapping(raw if raw is not None else {}, where)
    _reject_unknown(doc, {"actions", "exemptions", *policy.params}, where + ".")
    actions = _actions(policy, doc.get("actions", list(policy.default_actions)), where)
    params = dict(policy.params)
    for name, default in policy.params.items():
        if name in doc:
            params[name] = _same_type(doc[name], default, f"{where}.{name}")
            _at_least(params[name], policy.param_minimums.get(name), f"{where}.{name}")
            problem = policy.param_problem(name, params[name])
            if problem:
                raise ConfigError(f"{where}.{name}: {problem}")
    exemptions = _policy_exemptions(policy, doc.get("exemptions"), where, lws_controllers)
    return PolicySettings(actions, params, exemptions)


def _inherit_shared_params(
    registry: Mapping[str, Policy], docs: Mapping[str, Any], settings: dict[str, PolicySettings]
) -> None:
    """A parameter a policy shares with another (Policy.shared_params, e.g. the group budget that
    `worker-delete` drains and `group-taint` take from `group-eviction`) follows the owner's
    configured value unless set for the policy itself: one budget, set in one place."""
    for pid, policy in registry.items():
        raw = docs.get(pid)
        own: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
        inherited = {
            name: settings[owner].params[name]
            for name, owner in policy.shared_params.items()
            if name not in own and owner in settings and name in settings[owner].params
        }
        if inherited:
            current = settings[pid]
            settings[pid] = PolicySettings(
                current.actions, {**current.params, **inherited}, current.exemptions
            )


def _policy_exemptions(
    policy: Policy, raw: Any, where: str, lws_controllers: tuple[str, ...] = PER_POLICY_EXEMPT_USERS
) -> Exemptions:
    """`policies.<id>.exemptions`: each key given replaces its default (users default to the LWS
    controller's identities, `exemptions.lwsControllers`, none for a policy that judges them)."""
    doc = _mapping(raw if raw is not None else {}, f"{where}.exemptions")
    _reject_unknown(doc, {"users", "groups", "namespaces"}, f"{where}.exemptions.")
    users = () if judges_default_per_policy_users(policy) else lws_controllers
    return Exemptions(
        users=_strings(doc.get("users", list(users)), f"{where}.exemptions.users"),
        groups=_strings(doc.get("groups", []), f"{where}.exemptions.groups"),
        namespaces=_strings(doc.get("namespaces", []), f"{where}.exemptions.namespaces"),
    )


def judges_default_per_policy_users(policy: Policy) -> bool:
    """Whether `policy` judges PER_POLICY_EXEMPT_USERS by default. Those users were global
    exemptions moved per policy, so the two Policy switches over default exemptions both reach
    them: `judges_lws_controller` (only these users are judged) and `honours_user_exemptions`
    False (no user exemption applies, these included)."""
    return policy.judges_lws_controller or not policy.honours_user_exemptions


def _actions(policy: Policy, raw: Any, where: str) -> tuple[Action, ...]:
    # the actions this policy takes, as the schema lists them (`config validate` says the same)
    allowed = ", ".join(a for a in ACTIONS if a != "Mutate" or policy.can_mutate)
    if not isinstance(raw, list):
        raise ConfigError(f"{where}.actions must be a list of {allowed}")
    actions: list[Action] = []
    for item in raw:
        if item not in ACTIONS:
            raise ConfigError(f"{where}.actions: unknown action {item!r} (one of {allowed})")
        if item == "Mutate" and not policy.can_mutate:
            raise ConfigError(f"{where}.actions: {policy.id} cannot Mutate")
        actions.append(item)
    if "Deny" in actions and "Warn" in actions:
        # As in ValidatingAdmissionPolicy: a denied request's warning is redundant.
        raise ConfigError(f"{where}.actions: Deny and Warn together are not allowed")
    return tuple(dict.fromkeys(actions))


def _lws_controllers(raw: Any) -> tuple[str, ...]:
    """`exemptions.lwsControllers`: the LWS controller's service accounts (default: the install
    default, exactly); name another install (Helm release, namespace) here."""
    doc = _mapping(raw if raw is not None else {}, "exemptions")
    return _strings(doc.get("lwsControllers", list(PER_POLICY_EXEMPT_USERS)), "exemptions.lwsControllers")


def _exemptions(raw: Any) -> Exemptions:
    doc = _mapping(raw if raw is not None else {}, "exemptions")
    _reject_unknown(doc, {"users", "groups", "namespaces", "lwsControllers"}, "exemptions.")
    defaults = Exemptions()
    return Exemptions(
        users=_strings(doc.get("users", list(defaults.users)), "exemptions.users"),
        groups=_strings(doc.get("groups", []), "exemptions.groups"),
        namespaces=_strings(doc.get("namespaces", []), "exemptions.namespaces"),
    )


def _stale_after(raw: Any) -> float:
    doc = _mapping(raw if raw is not None else {}, "clusterView")
    _reject_unknown(doc, {"staleAfterSeconds"}, "clusterView.")
    value = doc.get("staleAfterSeconds", DEFAULT_STALE_AFTER_SECONDS)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_NUMBER:
        raise ConfigError(f"clusterView.staleAfterSeconds must be a positive number up to {MAX_NUMBER}")
    return float(value)


def _mapping(raw: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a mapping (got {_yaml_kind(raw)})")
    return raw


def _yaml_kind(value: Any) -> str:
    """What a YAML value is, in the words of the file: `false`, a list, a string, a number."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "an empty list" if not value else "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


def _reject_unknown(doc: Mapping[str, Any], known: set[str], prefix: str) -> None:
    for key in doc:
        if key not in known:
            choices = ", ".join(sorted(known)) or "none"
            raise ConfigError(f"unknown key {prefix}{key} (known: {choices})")


def _strings(raw: Any, where: str) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(s, str) for s in raw):
        raise ConfigError(f"{where} must be a list of strings")
    return tuple(raw)


def _at_least(value: Any, minimum: float | None, where: str) -> None:
    if minimum is not None and value < minimum:
        raise ConfigError(f"{where} must be at least {minimum}, got {value!r}")


def _same_type(value: Any, default: Any, where: str) -> Any:
    if isinstance(default, bool):
        ok = isinstance(value, bool)
    elif isinstance(default, int):
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    elif isinstance(default, float):
        ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
    else:
        ok = isinstance(value, type(default))
    if not ok:
        raise ConfigError(f"{where} must be {_kind_of(default)}, got {value!r}")
    if isinstance(value, int | float) and not isinstance(value, bool) and not value <= MAX_NUMBER:
        # also NaN and .inf, for which every comparison but != is false
        raise ConfigError(f"{where} must be at most {MAX_NUMBER}, got {value!r}")
    return value


def _kind_of(default: Any) -> str:
    if isinstance(default, bool):
        return "true or false"
    if isinstance(default, int):
        return "a non-negative integer"
    if isinstance(default, float):
        return "a non-negative number"
    return "a string" if isinstance(default, str) else f"a {type(default).__name__}"
