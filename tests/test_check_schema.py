"""`guardhook check` validates each object against its kind's schema before judging it (issue
39): the Kubernetes 1.37 schemas of kubernetes-validate for built-in kinds, the vendored CRD
schemas for LeaderWorkerSet and the other custom resources. An invalid object is a finding with
its field path (`Invalid [schema]`, exit 1), and is not judged."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.commands.main import main
from guardhook.commands.schema import validate

from conftest import REPO

LWS = yaml.safe_load((REPO / "tests" / "manifests" / "lws-wide-pdb" / "lws.yaml").read_text())
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "router", "namespace": "serve"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "router"}},
        "template": {
            "metadata": {"labels": {"app": "router"}},
            "spec": {"containers": [{"name": "router", "image": "example.com/router:1"}]},
        },
    },
}


def lws_worker(obj: dict[str, Any]) -> dict[str, Any]:
    return obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]


CASES: list[tuple[str, dict[str, Any], Callable[[dict[str, Any]], None], str]] = [
    ("name-list", LWS, lambda o: o["metadata"].update(name=["a"]), 'metadata.name: ["a"] is not a string'),
    ("spec-string", LWS, lambda o: o.update(spec="oops"), 'spec: "oops" is not a mapping'),
    (
        "replicas-word",
        LWS,
        lambda o: o["spec"].update(replicas="four"),
        'spec.replicas: "four" is not an integer',
    ),
    (
        "replicas-negative",
        LWS,
        lambda o: o["spec"].update(replicas=-4),
        "spec.replicas: -4 is less than the minimum of 0",
    ),
    # a typo'd field of a custom resource: kubectl apply --validate=strict refuses it (issue 50)
    (
        "lws-replica",
        LWS,
        lambda o: o["spec"].update(replica=3),
        "spec: unknown field ('replica' was unexpected)",
    ),
    (
        "lws-specs",
        LWS,
        lambda o: o.update(specs=o.pop("spec")),
        "(object): unknown field ('specs' was unexpected)",
    ),
    (
        "lws-sise",
        LWS,
        lambda o: o["spec"]["leaderWorkerTemplate"].update(sise=4),
        "spec.leaderWorkerTemplate: unknown field ('sise' was unexpected)",
    ),
    (
        "lws-resourcse",
        LWS,
        lambda o: lws_worker(o).update(resourcse=lws_worker(o).pop("resources")),
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0]: "
        "unknown field ('resourcse' was unexpected)",
    ),
    (
        "lws-template-metadata",
        LWS,
        lambda o: o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"].update(labelz={"a": "b"}),
        "spec.leaderWorkerTemplate.workerTemplate.metadata: unknown field ('labelz' was unexpected)",
    ),
    (  # the API server: strict decoding error: unknown field "spec....metadata.creationTimestamp"
        "lws-template-creation-timestamp",
        LWS,
        lambda o: o["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["metadata"].update(
            creationTimestamp=None
        ),
        "spec.leaderWorkerTemplate.leaderTemplate.metadata: "
        "unknown field ('creationTimestamp' was unexpected)",
    ),
    (
        "size-0",
        LWS,
        lambda o: o["spec"]["leaderWorkerTemplate"].update(size=0),
        "spec.leaderWorkerTemplate.size: 0 is less than 1",
    ),
    (
        "containers-null",
        DEPLOYMENT,
        lambda o: o["spec"]["template"]["spec"].update(containers=None),
        "spec.template.spec.containers: null is not a list",
    ),
    (
        "cpu-lots",
        LWS,
        lambda o: lws_worker(o)["resources"]["requests"].update(cpu="lots"),
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].resources.requests.cpu: "
        '"lots" is not a resource quantity',
    ),
    (
        "deployment-replicas-word",
        DEPLOYMENT,
        lambda o: o["spec"].update(replicas="four"),
        'spec.replicas: "four" is not an integer',
    ),
]


@pytest.mark.parametrize(("base", "edit", "problem"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_invalid_field_is_a_finding_with_its_path_and_exit_1(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    base: dict[str, Any],
    edit: Callable[[dict[str, Any]], None],
    problem: str,
) -> None:
    obj = json.loads(json.dumps(base))
    assert validate(obj) == []  # the base is valid: the edit alone makes it invalid
    edit(obj)
    path = tmp_path / "object.yaml"
    path.write_text(yaml.safe_dump(obj))
    code = main(["check", str(path)])
    out = capsys.readouterr().out.splitlines()
    assert code == 1
    name = obj["metadata"]["name"] if isinstance(obj["metadata"]["name"], str) else "(no name)"
    prefix = f"{path}: {obj['kind']} serve/{name}: Invalid [schema] "
    assert any(line.startswith(prefix + problem) for line in out), out
    assert all("[schema]" in line for line in out)  # not judged: no policy finding beside it
    code = main(["check", "--format", "json", str(path)])
    (finding,) = [v for v in json.loads(capsys.readouterr().out)["violations"] if problem in v["message"]]
    assert (finding["policy"], finding["action"], finding["documentLine"]) == ("schema", "Invalid", 1)


def test_the_built_in_schemas_are_kubernetes_1_37_strict() -> None:
    from importlib.metadata import version

    assert version("kubernetes-validate") == "1.37.0"
    unknown = {**DEPLOYMENT, "spec": {**DEPLOYMENT["spec"], "replica": 2}}
    assert validate(unknown) == ["spec: unknown field ('replica' was unexpected)"]


def test_custom_resources_have_their_crd_schemas() -> None:
    pool = {
        "apiVersion": "inference.networking.k8s.io/v1",
        "kind": "InferencePool",
        "metadata": {"name": "p", "namespace": "serve"},
        "spec": {"selector": {"matchLabels": {"app": "llm"}}, "targetPorts": "8000"},
    }
    assert validate(pool) and validate(pool)[0].startswith("spec.")
    scaled = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "s", "namespace": "serve"},
        "spec": {"scaleTargetRef": {"name": "llm"}, "triggers": "cpu"},
    }
    assert validate(scaled) == ['spec.triggers: "cpu" is not a list']
    alpha = {**pool, "apiVersion": "inference.networking.x-k8s.io/v1alpha2", "spec": {"selector": "x"}}
    assert 'spec.selector: "x" is not a mapping' in validate(alpha)  # type: ignore[operator]
    assert validate({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}) is None


@pytest.mark.parametrize(
    "api_version",
    ["scheduling.volcano.sh/v1beta1", "scheduling.x-k8s.io/v1beta1", "apps.kruise.io/v1"],
)
def test_a_custom_resource_is_not_validated_against_a_built_in_kind_of_the_same_name(
    api_version: str,
) -> None:
    # Volcano's and coscheduling's PodGroup, and a StatefulSet CRD of an apps.* group, share a kind
    # and the first label of their group with a built-in kind, whose schema does not describe them
    kind = "StatefulSet" if api_version.startswith("apps.") else "PodGroup"
    custom = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": "pg", "namespace": "serve"},
        "spec": {"minMember": 4, "queue": "default"},
    }
    assert validate(custom) is None
    built_in = {**custom, "apiVersion": "apps/v1" if kind == "StatefulSet" else "scheduling.k8s.io/v1beta1"}
    assert validate(built_in)  # the built-in kind itself is still validated


def test_an_object_without_api_version_or_of_a_kind_its_group_lacks_is_invalid(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # the API server refuses both (kubectl: "apiVersion not set", "no matches for kind")
    typo = {**DEPLOYMENT, "kind": "Deploymnet"}
    [problem] = validate(typo) or []
    assert problem.startswith("kind: apps/v1 has no kind Deploymnet (it has ControllerRevision, DaemonSet,")
    no_version = {key: value for key, value in DEPLOYMENT.items() if key != "apiVersion"}
    assert validate(no_version) == ["apiVersion: is required (the API server refuses an object without one)"]
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump_all([typo, no_version]))
    assert main(["check", str(path)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": Invalid [schema] ")[1].split(":")[0] for line in out] == ["kind", "apiVersion"]
    # a kind guardhook knows no group/version of is still judged as it is
    assert validate({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}) is None


PDB: dict[str, Any] = {
    "apiVersion": "policy/v1",
    "kind": "PodDisruptionBudget",
    "metadata": {"name": "llm", "namespace": "serve", "labels": {"app.kubernetes.io/part-of": "llm"}},
    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "llm"}}},
}
SERVICE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "llm-api", "namespace": "serve"},
    "spec": {"selector": {"app": "llm"}, "ports": [{"port": 80}]},
}


@pytest.mark.parametrize(
    ("base", "edit", "problem"),
    [
        (
            SERVICE,
            lambda o: o["metadata"].update(name="LLM_Bad!"),
            "metadata.name: 'LLM_Bad!' is not an RFC 1123 label",
        ),
        (PDB, lambda o: o["metadata"].update(name="pdb/with/slash"), "is not an RFC 1123 subdomain"),
        (
            PDB,
            lambda o: o["metadata"].update(name="ünïcode"),
            "metadata.name: 'ünïcode' is not an RFC 1123 subdomain",
        ),
        (
            PDB,
            lambda o: o["metadata"].update(namespace="Serve Ns"),
            "metadata.namespace: 'Serve Ns' is not an RFC 1123 label",
        ),
        (PDB, lambda o: o["metadata"].pop("name"), "metadata.name: is required (or metadata.generateName)"),
        (PDB, lambda o: o.pop("metadata"), "metadata.name: is required"),
        (
            PDB,
            lambda o: o["metadata"]["labels"].update({"bad key!!": "x"}),
            "metadata.labels.bad key!!: 'bad key!!' is not a label key",
        ),
        (
            PDB,
            lambda o: o["metadata"]["labels"].update(ok="not ok"),
            "metadata.labels.ok: 'not ok' is not a label value",
        ),
        (
            PDB,
            lambda o: o["spec"]["selector"]["matchLabels"].update({"bad key!!": "x"}),
            "spec.selector.matchLabels.bad key!!: 'bad key!!' is not a label key",
        ),
        (
            PDB,
            lambda o: o["spec"]["selector"].update(matchExpressions=[{"key": "-x", "operator": "Exists"}]),
            "spec.selector.matchExpressions[0].key: '-x' is not a label key",
        ),
        (
            SERVICE,
            lambda o: o["spec"]["selector"].update({"app": "a b"}),
            "spec.selector.app: 'a b' is not a label value",
        ),
        (
            LWS,
            lambda o: o["metadata"].update(name="a/b"),
            "metadata.name: 'a/b' is not an RFC 1123 subdomain",
        ),
    ],
)
def test_names_labels_and_selectors_follow_the_api_servers_rules(
    base: dict[str, Any], edit: Callable[[dict[str, Any]], None], problem: str
) -> None:
    # A schema says "a string"; the API server refuses these (kubectl apply fails where check passed);
    # a custom resource's name is an RFC 1123 subdomain (apiextensions' customResourceValidator).
    obj = json.loads(json.dumps(base))
    assert validate(obj) == []
    edit(obj)
    assert any(line.startswith(problem) or problem in line for line in validate(obj) or []), validate(obj)


def test_what_the_api_server_takes_passes() -> None:
    for obj, edit in (
        (
            PDB,
            lambda o: o["metadata"].update(name="a.b-c.d", labels={"example.com/tier": "", "x_y.z": "A-1"}),
        ),
        (PDB, lambda o: o["metadata"].update(name=None, generateName="llm-")),
        (SERVICE, lambda o: o["metadata"].update(name="a" * 63)),
        (SERVICE, lambda o: o["metadata"].update(name="1st-svc")),  # RFC 1123 since KEP-5311
        # kinds whose names are not subdomains, or need none, are left alone
        (
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "IPAddress",
                "metadata": {"name": "2001:db8::1"},
                "spec": {"parentRef": {"resource": "services", "name": "s", "namespace": "d"}},
            },
            lambda o: None,
        ),
        (
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SubjectAccessReview",
                "metadata": {},
                "spec": {"user": "u", "resourceAttributes": {"verb": "get"}},
            },
            lambda o: None,
        ),
        (
            {
                "apiVersion": "certificates.k8s.io/v1",
                "kind": "CertificateSigningRequest",
                "metadata": {"name": "node-csr-My_Node"},
                "spec": {"request": "cmVx", "signerName": "a.b/c", "usages": ["client auth"]},
            },
            lambda o: None,
        ),
    ):
        changed = json.loads(json.dumps(obj))
        edit(changed)
        changed["metadata"] = {k: v for k, v in changed["metadata"].items() if v is not None}
        assert validate(changed) == [], changed


def test_a_custom_resource_is_validated_after_its_crds_defaults() -> None:
    # The API server fills in a CRD's defaults before validating: LWS's rolloutStrategy.type is
    # required and defaults to RollingUpdate, so leaving it out is valid (it was "'type' is required").
    lws = json.loads(json.dumps(LWS))
    lws["spec"]["rolloutStrategy"] = {"rollingUpdateConfiguration": {"maxSurge": 1, "maxUnavailable": 0}}
    assert validate(lws) == []
    assert "type" not in lws["spec"]["rolloutStrategy"]  # checked on a copy: the object is as written
    lws["spec"]["rolloutStrategy"]["type"] = "Recreate"
    assert validate(lws) == ["spec.rolloutStrategy.type: 'Recreate' is not one of ['RollingUpdate']"]


SCHEMAS = REPO / "guardhook" / "data" / "schemas"


def object_paths(
    schema: dict[str, Any], path: tuple[Any, ...] = ()
) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """Every object with fixed fields a CRD schema describes (through properties, list items and
    map values), with its path; a map (`additionalProperties`) takes any key."""
    fixed = schema.get("type") == "object" and "additionalProperties" not in schema
    found = [(path, schema)] if fixed else []
    for key, sub in (schema.get("properties") or {}).items():
        found += object_paths(sub, (*path, key))
    if isinstance(schema.get("items"), dict):
        found += object_paths(schema["items"], (*path, 0))
    if isinstance(schema.get("additionalProperties"), dict):
        found += object_paths(schema["additionalProperties"], (*path, "some-key"))
    return found


def placed(path: tuple[Any, ...], value: Any) -> Any:
    for step in reversed(path):
        value = [value] if isinstance(step, int) else {step: value}
    return value


@pytest.mark.parametrize("crd", sorted(p.name for p in SCHEMAS.glob("*.json")))
def test_every_vendored_crd_refuses_an_unknown_field_at_every_depth(crd: str) -> None:
    # The API server prunes a field its CRD's structural schema does not name, and
    # --validate=strict (kubectl apply's default) refuses the object for it: at the root, in spec,
    # in an embedded pod template's containers, in a template's metadata.
    group, version, kind = crd.removesuffix(".json").split("_")
    schema = json.loads((SCHEMAS / crd).read_text())
    paths = [(path, sub) for path, sub in object_paths(schema) if path != ("metadata",)]
    assert len(paths) > 3
    for path, sub in paths:
        obj = {
            "apiVersion": f"{group}/{version}",
            "kind": kind,
            "metadata": {"name": "x", "namespace": "serve"},
        }
        obj.update(placed(path, {"zzUnknown": 1}) if path else {"zzUnknown": 1})
        where = ".".join(str(step) for step in path).replace(".0", "[0]") or "(object)"
        expected = f"{where}: unknown field ('zzUnknown' was unexpected)"
        assert expected in (validate(obj) or []), (path, validate(obj))
        if sub.get("properties"):  # a field the schema names is known there
            known = next(iter(sub["properties"]))
            obj.update(placed(path, {known: None}) if path else {known: None})
            assert not any("unknown field" in p for p in validate(obj) or []), (path, validate(obj))


def test_preserve_unknown_fields_and_embedded_resources_are_respected(
    monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    # as apiextensions-apiserver's pruning: unknown fields are kept below
    # x-kubernetes-preserve-unknown-fields (the named ones still checked); an
    # x-kubernetes-embedded-resource takes apiVersion, kind (both required) and an ObjectMeta
    import guardhook.commands.schema as schema

    crd = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "config": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"mode": {"type": "string"}},
                    },
                    "object": {
                        "type": "object",
                        "x-kubernetes-embedded-resource": True,
                        "properties": {
                            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                        },
                    },
                },
            }
        },
    }
    monkeypatch.setattr(schema, "_crd_file", lambda api_version, kind: "gadget" if kind == "Gadget" else None)
    monkeypatch.setattr(schema, "_crd_schema", lambda name: crd)
    schema._validator.cache_clear()  # validators are kept per kind: this one must come from `crd`
    request.addfinalizer(schema._validator.cache_clear)
    widget = {
        "apiVersion": "gadgets.example.com/v1",
        "kind": "Gadget",
        "metadata": {"name": "w", "namespace": "serve"},
        "spec": {
            "config": {"mode": "fast", "anything": {"deep": [1]}},
            "object": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c"},
                "spec": {"size": 1},
            },
        },
    }
    assert validate(widget) == []
    widget["spec"]["config"]["mode"] = 3
    widget["spec"]["object"]["metadata"]["nmae"] = "c"
    widget["spec"]["object"]["spec"]["sise"] = 1
    del widget["spec"]["object"]["kind"]
    assert validate(widget) == [
        "spec.config.mode: 3 is not a string",
        "spec.object: 'kind' is required",
        "spec.object.metadata: unknown field ('nmae' was unexpected)",
        "spec.object.spec: unknown field ('sise' was unexpected)",
    ]


@pytest.mark.parametrize("api_version", ["leaderworkerset.sigs.k8s.io/v1", "leaderworkerset.x-k8s.io/v2"])
def test_a_known_custom_resource_kind_in_a_version_not_served_is_invalid_and_not_used(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, api_version: str
) -> None:
    # kubectl: no matches for kind "LeaderWorkerSet" in version "leaderworkerset.sigs.k8s.io/v1" (the
    # label domain). A PDB beside it is not judged against it as if it were a LeaderWorkerSet.
    lws = {**LWS, "apiVersion": api_version}
    path = tmp_path / "app.yaml"
    pdb = REPO / "tests" / "manifests" / "lws-wide-pdb" / "pdb.yaml"
    path.write_text(yaml.safe_dump(lws))
    assert main(["check", str(path), str(pdb)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"{path}: LeaderWorkerSet serve/llm: Invalid [schema] apiVersion: no matches for kind "
        f'"LeaderWorkerSet" in version "{api_version}" (its CRD serves leaderworkerset.x-k8s.io/v1)'
    ]
    assert "[group-pdb]" not in captured.out
    assert "not judged by [group-pdb]" in captured.err
    # nor as context: --cluster-state's objects are not checked, but such an LWS is no LWS
    assert main(["check", "--cluster-state", str(path), str(pdb)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "not judged by [group-pdb]" in captured.err
    assert (
        f"guardhook check: note: {path}: document at line 1 skipped: not used as context: "
        f'no matches for kind "LeaderWorkerSet" in version "{api_version}"'
    ) in captured.err
    policy_report = {"apiVersion": "wgpolicyk8s.io/v9", "kind": "PolicyReport", "metadata": {"name": "r"}}
    assert validate(policy_report) == [
        'apiVersion: no matches for kind "PolicyReport" in version "wgpolicyk8s.io/v9" (its CRD serves '
        "wgpolicyk8s.io/v1alpha1, wgpolicyk8s.io/v1alpha2 or wgpolicyk8s.io/v1beta1)"
    ]


POOL: dict[str, Any] = {
    "apiVersion": "inference.networking.k8s.io/v1",
    "kind": "InferencePool",
    "metadata": {"name": "pool", "namespace": "serve"},
    "spec": {
        "selector": {"matchLabels": {"app": "llm"}},
        "targetPorts": [{"number": 8000}],
        "endpointPickerRef": {"name": "epp", "port": {"number": 9002}},
    },
}
SCALED: dict[str, Any] = {
    "apiVersion": "keda.sh/v1alpha1",
    "kind": "ScaledObject",
    "metadata": {"name": "llm", "namespace": "serve"},
    "spec": {
        "scaleTargetRef": {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": "llm",
        },
        "triggers": [{"type": "cpu", "metadata": {"value": "50"}}],
        "minReplicaCount": 1,
        "maxReplicaCount": 4,
    },
}


def disaggregated(*replicas: int | None) -> dict[str, Any]:
    template = LWS["spec"]["leaderWorkerTemplate"]
    roles = [
        {
            "name": f"role-{i}",
            "spec": {"leaderWorkerTemplate": template, **({} if r is None else {"replicas": r})},
        }
        for i, r in enumerate(replicas)
    ]
    return {
        "apiVersion": "disaggregatedset.x-k8s.io/v1",
        "kind": "DisaggregatedSet",
        "metadata": {"name": "pd", "namespace": "serve"},
        "spec": {"roles": roles},
    }


@pytest.mark.parametrize(
    ("base", "edit", "problem"),
    [
        (
            SCALED,
            lambda o: o["spec"].update(minReplicaCount=5),
            "spec: minReplicaCount must be less than or equal to maxReplicaCount",
        ),
        (
            POOL,
            lambda o: o["spec"]["endpointPickerRef"].pop("port"),
            "spec.endpointPickerRef: port is required when kind is 'Service' or unspecified",
        ),
        (
            POOL,
            lambda o: o["spec"]["targetPorts"].append({"number": 8000}),
            "spec.targetPorts: port number must be unique",
        ),
        (
            disaggregated(2, 3),
            lambda o: o["spec"]["roles"][1]["spec"].update(replicas=0),
            "spec: replicas must be zero for all non-External roles or non-zero for all",
        ),
    ],
)
def test_a_crds_cel_rules_are_kept(
    base: dict[str, Any], edit: Callable[[dict[str, Any]], None], problem: str
) -> None:
    # x-kubernetes-validations: the API server evaluates them on a create (kubectl apply refuses a
    # ScaledObject whose minReplicaCount exceeds its maxReplicaCount); the CRD's defaults come first
    # (an endpointPickerRef's kind defaults to Service, which needs a port)
    obj = json.loads(json.dumps(base))
    assert validate(obj) == []
    edit(obj)
    assert [p for p in validate(obj) or [] if p.startswith(problem)], validate(obj)
    # a rule guardhook cannot evaluate (here: on a value of the wrong type) is not reported
    obj = json.loads(json.dumps(SCALED))
    obj["spec"]["minReplicaCount"] = "five"
    assert validate(obj) == ['spec.minReplicaCount: "five" is not an integer']


STRICTNESS = REPO / "tests" / "manifests" / "strictness"


@pytest.mark.parametrize("path", sorted(STRICTNESS.glob("*.yaml")), ids=lambda p: p.stem)
def test_check_refuses_what_kubectl_apply_strict_refuses(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fixtures e2e/test_check_strictness.py sends to a real 1.37 API server with `kubectl apply
    --dry-run=server --validate=strict`: `invalid-*` Invalid [schema] here (exit 1), `valid-*` not."""
    code = main(["check", str(path)])
    out = capsys.readouterr().out
    if path.name.startswith("invalid-"):
        assert code == 1 and "Invalid [schema]" in out, out
    else:
        assert code == 0 and "Invalid" not in out, out
