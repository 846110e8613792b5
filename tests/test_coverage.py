"""Coverage is reported (issue 22): the view knows Namespaces and guardhook's webhook entries, and
`audit` (text, JSON, PolicyReports) names every gap in protection; unreadable kinds degrade to a
note, never to an unready view."""

from __future__ import annotations

import base64
import copy
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families
from test_manifests import MANIFESTS

from guardhook.cluster import coverage
from guardhook.cluster.coverage import (
    ANNOTATION_UNREADABLE,
    EVICTIONS_UNGUARDED,
    GUARD_EVICTIONS_LABEL,
    WEBHOOK_FAILS_OPEN,
    WEBHOOK_UNREACHABLE,
    coverage_gaps,
    unchecked,
)
from guardhook.cluster.kube_transport import KubeTransport
from guardhook.cluster.view.live import LiveView
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import NAMESPACES, VALIDATINGWEBHOOKCONFIGURATIONS, ClusterView
from guardhook.commands.main import main
from guardhook.policies.group_capacity import SPARE_GROUPS_ANNOTATION
from guardhook.policies.shared.group_budget import BUDGET_ANNOTATION
from guardhook.server.certs import generate

from conftest import Server
from fake_apiserver import running_fake
from kustomize_lite import render

Object = dict[str, Any]
FLEET_NAMESPACE = "serve"


def namespace(name: str, guarded: bool) -> Object:
    labels = {"kubernetes.io/metadata.name": name}
    if guarded:
        labels[GUARD_EVICTIONS_LABEL] = "true"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def webhook_configurations(objects: list[Object]) -> list[Object]:
    return [o for o in objects if o["kind"].endswith("WebhookConfiguration")]


@pytest.fixture(scope="module")
def self_managed(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Object], x509.Certificate]:
    """The self-managed install's webhook configurations and its serving certificate."""
    manifests = tmp_path_factory.mktemp("m") / "manifests"
    shutil.copytree(MANIFESTS, manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    assert main(["certs", "--patch-manifests", str(manifests)]) == 0
    overlay = manifests / "overlays" / "self-managed"
    serving = x509.load_pem_x509_certificate((overlay / "certs" / "tls.crt").read_bytes())
    return webhook_configurations(render(overlay)), serving


def test_the_constants_are_the_policies_and_manifests_own() -> None:
    assert coverage.BUDGET_ANNOTATION == BUDGET_ANNOTATION
    assert coverage.SPARE_GROUPS_ANNOTATION == SPARE_GROUPS_ANNOTATION
    from guardhook.groups.ready import OPT_IN_ANNOTATION
    from guardhook.policies.group_pdb import GROUP_PDBS_ANNOTATION

    assert coverage.GROUP_READINESS_ANNOTATION == OPT_IN_ANNOTATION
    assert coverage.GROUP_PDBS_ANNOTATION == GROUP_PDBS_ANNOTATION
    (eviction,) = [
        h
        for c in webhook_configurations(render(MANIFESTS))
        for h in c["webhooks"]
        if h["name"] == "group-eviction.guardhook.io"
    ]
    opt_in = {"key": GUARD_EVICTIONS_LABEL, "operator": "In", "values": ["true"]}
    assert opt_in in eviction["namespaceSelector"]["matchExpressions"]


@pytest.mark.parametrize("guarded", [True, False])
def test_an_lws_namespace_without_the_eviction_label_is_a_gap(guarded: bool) -> None:
    view = view_from_objects([*embedded_fleet_objects(), namespace(FLEET_NAMESPACE, guarded)])
    gaps = [g for g in coverage_gaps(view) if g.kind == EVICTIONS_UNGUARDED]
    if guarded:
        assert gaps == []
        return
    (gap,) = gaps
    assert (gap.object_kind, gap.name, gap.severe) == ("Namespace", FLEET_NAMESPACE, True)
    assert f"{GUARD_EVICTIONS_LABEL}=true" in gap.message and "llm-xl" in gap.message


def test_without_namespaces_nothing_is_called_unguarded_but_a_note_says_so() -> None:
    view = view_from_objects(embedded_fleet_objects())  # manifests without Namespace objects
    assert not view.readable(NAMESPACES)
    assert [g for g in coverage_gaps(view) if g.kind == EVICTIONS_UNGUARDED] == []
    assert any("Namespaces could not be read" in note for note in unchecked(view))
    # offline (manifests, the sample fleet) a note that says only "could not be read" reads as an
    # RBAC failure: it says what to do in both cases, as the webhook configurations' note does
    [note] = [n for n in unchecked(view) if n.startswith("Namespaces")]
    assert note.endswith("(in a cluster, grant get/list on namespaces; offline, the objects hold none)")


def test_self_managed_entries_reach_guardhook_and_only_ignore_entries_fail_open(
    self_managed: tuple[list[Object], x509.Certificate],
) -> None:
    configs, serving = self_managed
    gaps = coverage_gaps(view_from_objects(configs), serving_cert=serving)
    assert [g for g in gaps if g.kind == WEBHOOK_UNREACHABLE] == []
    ignore = {
        f"{c['metadata']['name']}/{h['name']}"
        for c in configs
        for h in c["webhooks"]
        if h["failurePolicy"] == "Ignore"
    }
    assert {g.name for g in gaps if g.kind == WEBHOOK_FAILS_OPEN} == ignore
    assert "guardhook/group-eviction.guardhook.io" not in ignore  # Fail: refused while down
    assert all(not g.severe for g in gaps)


def test_entries_without_a_verifying_ca_bundle_are_unreachable(
    self_managed: tuple[list[Object], x509.Certificate], tmp_path: Path
) -> None:
    configs, serving = copy.deepcopy(self_managed[0]), self_managed[1]
    validating = next(c for c in configs if c["kind"] == "ValidatingWebhookConfiguration")
    del validating["webhooks"][0]["clientConfig"]["caBundle"]
    other_ca = generate(tmp_path / "other", ["x"]).ca.read_bytes()
    validating["webhooks"][1]["clientConfig"]["caBundle"] = base64.b64encode(other_ca).decode()
    validating["webhooks"][2]["clientConfig"]["caBundle"] = base64.b64encode(b"not a certificate").decode()
    all_gaps = coverage_gaps(view_from_objects(configs), serving_cert=serving)
    gaps = {g.name: g for g in all_gaps if g.kind == WEBHOOK_UNREACHABLE}
    names = [f"guardhook/{h['name']}" for h in validating["webhooks"][:3]]
    assert set(gaps) == set(names)
    assert "no caBundle" in gaps[names[0]].message and "never runs" in gaps[names[0]].message
    assert "does not verify the serving certificate" in gaps[names[1]].message
    assert "holds no PEM certificate" in gaps[names[2]].message
    # Without the serving certificate (audit from outside) a foreign CA cannot be told apart.
    offline = {g.name for g in coverage_gaps(view_from_objects(configs)) if g.kind == WEBHOOK_UNREACHABLE}
    assert offline == {names[0], names[2]}


def test_cert_manager_entries_before_injection_are_unreachable() -> None:
    gaps = coverage_gaps(view_from_objects(webhook_configurations(render(MANIFESTS))))
    unreachable = [g for g in gaps if g.kind == WEBHOOK_UNREACHABLE]
    assert unreachable and all("cainjector has not filled it in" in g.message for g in unreachable)


def test_unreadable_lws_annotations_are_gaps_naming_the_value_used() -> None:
    objects = embedded_fleet_objects()
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    lws["metadata"].setdefault("annotations", {}).update(
        {BUDGET_ANNOTATION: "two", SPARE_GROUPS_ANNOTATION: "-3", "guardhook.io/serving-pods": "All"}
    )
    gaps = [g for g in coverage_gaps(view_from_objects(objects), budget_default=1, spare_default=0)]
    messages = [g.message for g in gaps if g.kind == ANNOTATION_UNREADABLE]
    name = lws["metadata"]["name"]
    assert messages == [
        f'LeaderWorkerSet {name}: annotation {BUDGET_ANNOTATION}: "two" cannot be read; '
        "the configured maxDisruptedGroups (1) is used instead",
        f'LeaderWorkerSet {name}: annotation {SPARE_GROUPS_ANNOTATION}: "-3" cannot be read; '
        "the configured spareGroups (0) is used instead",
        f'LeaderWorkerSet {name}: annotation guardhook.io/serving-pods: "All" cannot be read; '
        '"leaders" is used instead',
    ]
    lws["metadata"]["annotations"] = {BUDGET_ANNOTATION: "-1"}
    (gap,) = [g for g in coverage_gaps(view_from_objects(objects)) if g.kind == ANNOTATION_UNREADABLE]
    assert '"-1" cannot be read' in gap.message


def test_audit_reports_gaps_in_text_json_and_policy_reports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all([*embedded_fleet_objects(), namespace(FLEET_NAMESPACE, False)]))
    reports = tmp_path / "reports.yaml"
    assert main(["audit", "--cluster-state", str(state), "--reports-file", str(reports)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert (
        "Protection gaps (1; not checked: webhook configurations, which could not be read):\n"
        "  [evictions-unguarded] namespace serve lacks the label"
    ) in text
    # the notes on stderr, as check's: stdout holds the report alone
    assert "guardhook audit: note: webhook configurations could not be read" in captured.err
    assert "note:" not in text.lower()
    assert main(["audit", "--cluster-state", str(state), "--format", "json"]) == 0
    (gap,) = json.loads(capsys.readouterr().out)["gaps"]
    assert (gap["gap"], gap["kind"], gap["name"], gap["severe"]) == (
        EVICTIONS_UNGUARDED,
        "Namespace",
        "serve",
        True,
    )
    written = list(yaml.safe_load_all(reports.read_text()))
    (serve,) = [r for r in written if r["metadata"].get("namespace") == FLEET_NAMESPACE]
    (result,) = [r for r in serve["results"] if r["policy"] == "coverage"]
    assert (result["rule"], result["result"]) == (EVICTIONS_UNGUARDED, "fail")
    assert result["resources"] == [{"apiVersion": "v1", "kind": "Namespace", "name": FLEET_NAMESPACE}]


def test_live_audit_degrades_on_forbidden_webhook_configurations(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with running_fake(forbidden={"validatingwebhookconfigurations"}, unserved={"scaledobjects"}) as fake:
        fake.load([*embedded_fleet_objects(), namespace(FLEET_NAMESPACE, False)])
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        assert main(["audit", "--kubeconfig", str(kubeconfig), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [g["gap"] for g in document["gaps"]] == [EVICTIONS_UNGUARDED]  # no "not-installed"
    assert any("ValidatingWebhookConfiguration cannot be listed (HTTP 403)" in n for n in document["notes"])


def test_live_view_syncs_with_forbidden_coverage_kinds_and_marks_them_unreadable() -> None:
    forbidden = {"namespaces", "validatingwebhookconfigurations", "mutatingwebhookconfigurations"}
    with running_fake(forbidden=forbidden) as fake:
        fake.load(embedded_fleet_objects())
        view = ClusterView(source="live")
        live = LiveView(view, lambda: KubeTransport(fake.api_client())).start()
        try:
            for _ in range(200):
                if view.synced:
                    break
                time.sleep(0.05)
            assert view.synced and not view.is_stale()  # the webhook is ready
            assert not view.readable(NAMESPACES) and not view.readable(VALIDATINGWEBHOOKCONFIGURATIONS)
            assert len(unchecked(view)) == 2
        finally:
            live.stop()


def _samples(server: Server, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = server.session.get(server.url + "/metrics", timeout=10).text
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_metrics_name_every_gap_and_check_entries_against_the_serving_certificate(
    fresh_server: Callable[..., Server],
    tmp_path: Path,
    self_managed: tuple[list[Object], x509.Certificate],
) -> None:
    # The rendered configurations trust another CA than the one this server's certificate is from.
    state = tmp_path / "state.yaml"
    objects = [*embedded_fleet_objects(), namespace(FLEET_NAMESPACE, False), *self_managed[0]]
    state.write_text(yaml.safe_dump_all(objects))
    server = fresh_server("--cluster-state", str(state))
    counts = {
        dict(labels)["gap"]: value for labels, value in _samples(server, "guardhook_protection_gaps").items()
    }
    entries = sum(len(c["webhooks"]) for c in self_managed[0])
    assert counts[EVICTIONS_UNGUARDED] == 1 and counts[WEBHOOK_UNREACHABLE] == entries
    assert counts[ANNOTATION_UNREADABLE] == 0 and set(counts) == set(coverage.GAP_KINDS)
    named = _samples(server, "guardhook_protection_gap")
    assert named[(("gap", EVICTIONS_UNGUARDED), ("name", FLEET_NAMESPACE), ("namespace", ""))] == 1
    unchecked_kinds = _samples(server, "guardhook_coverage_unchecked")
    assert set(unchecked_kinds.values()) == {0}  # everything readable: the manifests held each kind


def test_an_lws_with_several_unreadable_annotations_is_one_series_counting_them() -> None:
    # Two gaps of one kind on one object must not be two samples with the same labels (a
    # Prometheus scrape drops duplicates): one series whose value counts them, so the per-object
    # series still add up to guardhook_protection_gaps.
    from prometheus_client import CollectorRegistry, generate_latest

    from guardhook.config import default_config
    from guardhook.server.coverage_metrics import CoverageCollector

    objects = embedded_fleet_objects()
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    lws["metadata"]["annotations"] = {BUDGET_ANNOTATION: "two", SPARE_GROUPS_ANNOTATION: "-3"}
    view = view_from_objects([*objects, namespace(FLEET_NAMESPACE, True)])
    config = default_config()
    registry = CollectorRegistry()
    registry.register(CoverageCollector(lambda: view, lambda: config, None))
    text = generate_latest(registry).decode()
    samples = [
        (tuple(sorted(s.labels.items())), s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "guardhook_protection_gap"
    ]
    key = (("gap", ANNOTATION_UNREADABLE), ("name", lws["metadata"]["name"]), ("namespace", FLEET_NAMESPACE))
    assert samples == [(key, 2)]
    totals = {
        s.labels["gap"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "guardhook_protection_gaps"
    }
    assert totals[ANNOTATION_UNREADABLE] == 2


def test_the_entries_of_one_readable_webhook_kind_are_checked_without_the_other(
    self_managed: tuple[list[Object], x509.Certificate],
) -> None:
    # e.g. `kubectl get validatingwebhookconfiguration guardhook -o yaml` as the only dump, or RBAC
    # for one kind: its entries are still judged, and only "not installed" needs both kinds.
    validating = copy.deepcopy(
        next(c for c in self_managed[0] if c["kind"] == "ValidatingWebhookConfiguration")
    )
    validating["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(b"not a certificate").decode()
    view = view_from_objects([validating])
    gaps = [g for g in coverage_gaps(view) if g.kind == WEBHOOK_UNREACHABLE]
    assert [g.name for g in gaps] == [f"guardhook/{validating['webhooks'][0]['name']}"]
    (note,) = [n for n in unchecked(view) if n.startswith("webhook configurations")]
    assert "mutatingwebhookconfigurations" in note and "validatingwebhookconfigurations" not in note
    # neither kind holds a guardhook entry, one unread: nothing is called not installed
    validating["webhooks"] = []
    assert coverage_gaps(view_from_objects([validating])) == []


@pytest.mark.parametrize("key", ["guardhook.io/group-readiness", "guardhook.io/group-pdbs"])
def test_an_opt_in_switch_that_is_neither_true_nor_false_is_a_gap_and_a_group_spec_warning(
    key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # "yes" opts nothing in: the LWS silently gets no gate (no per-group PDBs), so it is said
    objects = embedded_fleet_objects()
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    lws["metadata"]["annotations"] = {key: "yes"}
    (gap,) = [g for g in coverage_gaps(view_from_objects(objects)) if g.kind == ANNOTATION_UNREADABLE]
    assert f'annotation {key}: "yes" cannot be read; "false"' in gap.message
    for readable in ("true", "false"):
        lws["metadata"]["annotations"] = {key: readable}
        assert [g for g in coverage_gaps(view_from_objects(objects)) if g.kind == ANNOTATION_UNREADABLE] == []
    for unreadable in (" true", "TRUE", "True", "true "):  # docs/policies.md: only true/false
        lws["metadata"]["annotations"] = {key: unreadable}
        assert [g for g in coverage_gaps(view_from_objects(objects)) if g.kind == ANNOTATION_UNREADABLE]
    lws["metadata"]["annotations"] = {key: "enabled"}
    manifest = tmp_path / "lws.yaml"
    manifest.write_text(yaml.safe_dump(lws))
    assert main(["check", str(manifest)]) == 0
    out = capsys.readouterr().out
    assert f'Warn [group-spec] annotation {key}: "enabled" cannot be read' in out


def test_an_lws_in_a_namespace_every_entry_leaves_out_is_unguarded() -> None:
    # the manifests' namespaceSelectors and the constant agree ...
    for configuration in webhook_configurations(render(MANIFESTS)):
        for hook in configuration["webhooks"]:
            if "namespaceSelector" not in hook:
                continue  # cluster-scoped kinds (Nodes, DeviceTaintRules)
            (left_out,) = [
                e
                for e in hook["namespaceSelector"]["matchExpressions"]
                if e["key"] == "kubernetes.io/metadata.name"
            ]
            assert (left_out["operator"], tuple(left_out["values"])) == (
                "NotIn",
                coverage.EXCLUDED_NAMESPACES,
            )
    # ... and an LWS there is a gap whatever the namespace's labels (or with no Namespace read)
    objects = embedded_fleet_objects()
    for obj in objects:
        if obj["metadata"].get("namespace") == FLEET_NAMESPACE:
            obj["metadata"]["namespace"] = "kube-system"
    for extra in ([namespace("kube-system", True)], []):
        (gap,) = [
            g for g in coverage_gaps(view_from_objects([*objects, *extra])) if g.kind == EVICTIONS_UNGUARDED
        ]
        assert gap.name == "kube-system" and "left out by every guardhook webhook entry" in gap.message


@pytest.mark.parametrize("value", ["true", "false", " true", "True", "TRUE", "yes", ""])
def test_both_opt_in_switches_read_a_value_alike(value: str) -> None:
    # group-readiness once trimmed and case-folded, group-pdbs only case-folded: " true" opted in
    # to one and was unreadable to the other. One parser (guardhook.cluster.annotations) now.
    from guardhook.cluster.coverage import unreadable_annotations
    from guardhook.cluster.lws import LeaderWorkerSet
    from guardhook.groups.ready import opted_in
    from guardhook.pdbsync.desired import opted_in as wants_group_pdbs

    objects = embedded_fleet_objects()
    raw = next(o for o in objects if o["kind"] == "LeaderWorkerSet")
    raw["metadata"]["annotations"] = {"guardhook.io/group-readiness": value, "guardhook.io/group-pdbs": value}
    lws = LeaderWorkerSet(raw)
    assert opted_in(lws) is wants_group_pdbs(lws) is (value == "true")
    unreadable = {g.annotation for g in unreadable_annotations(lws)}
    expected = (
        set() if value in ("true", "false") else {"guardhook.io/group-readiness", "guardhook.io/group-pdbs"}
    )
    assert unreadable == expected
