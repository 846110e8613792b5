"""`guardhook audit`: group counts per LWS, violations of existing objects, PolicyReports; offline
from `--cluster-state` and live against a small in-process fake API server on 127.0.0.1."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.cluster import listing
from guardhook.cluster.view.manifests import load_paths
from guardhook.commands.audit import audit, policy_reports
from guardhook.commands.main import main
from guardhook.commands.scan import Located
from guardhook.config import default_config

from conftest import FIXTURES, REPO
from fake_apiserver import FakeApiServer, kubeconfig_text, running_fake

LINT_LWS = Path(__file__).parent / "manifests" / "lint" / "lws.yaml"


def degraded_fleet() -> list[dict[str, Any]]:
    """The sample fleet with group 1 missing worker 2 and group 2's worker 3 not Ready (leaders of
    both still Ready), group 3's leader terminating; plus LWS default/lax that group-spec warns about."""
    objects = [copy.deepcopy(m.obj) for m in load_paths([FIXTURES / "fleet"])]
    objects = [o for o in objects if o["metadata"]["name"] != "llm-xl-1-2" or o["kind"] != "Pod"]
    for obj in objects:
        if obj["kind"] != "Pod":
            continue
        if obj["metadata"]["name"] == "llm-xl-2-3":
            for condition in obj["status"]["conditions"]:
                if condition["type"] == "Ready":
                    condition["status"] = "False"
        if obj["metadata"]["name"] == "llm-xl-3":
            obj["metadata"]["deletionTimestamp"] = "2026-11-29T17:00:00Z"
    lax = yaml.safe_load(LINT_LWS.read_text())
    lax["metadata"]["namespace"] = "default"
    return [*objects, lax]


# LWS serve/llm-xl of the degraded fleet as `audit --format json` lists it.
DEGRADED_XL_ROW = {
    "namespace": "serve",
    "name": "llm-xl",
    "desired": 4,
    "whole": 1,
    "broken": 3,
    "leaderReadyGroupIncomplete": 2,
    "spare": 1,  # gpu-node-16..19 and gpu-node-06 (group 1's missing worker) are free: one group fits
    "doomedByTaint": 0,
}


def test_groups_are_counted_per_lws() -> None:
    result = audit([Located("cluster", o) for o in degraded_fleet()], default_config())
    groups = {(g.namespace, g.name): g for g in result.groups}
    xl = groups[("serve", "llm-xl")]
    assert (xl.desired, xl.whole, xl.broken, xl.leader_ready_group_incomplete) == (4, 1, 3, 2)
    lax = groups[("default", "lax")]
    assert (lax.desired, lax.whole, lax.broken, lax.leader_ready_group_incomplete) == (2, 0, 2, 0)
    # lax breaks three group-spec rules: one finding each
    assert [(v.name, v.policy, v.action) for v in result.violations] == [("lax", "group-spec", "Warn")] * 3
    assert "restartPolicy None restarts a failed pod alone" in result.violations[0].message


def test_policy_reports_follow_the_wgpolicyk8s_format() -> None:
    result = audit([Located("cluster", o) for o in degraded_fleet()], default_config())
    reports = {r["metadata"]["namespace"]: r for r in policy_reports(result, now=1_800_000_000)}
    assert set(reports) == {"default", "serve"}
    lax = reports["default"]
    assert lax["apiVersion"] == "wgpolicyk8s.io/v1alpha2" and lax["kind"] == "PolicyReport"
    assert lax["summary"] == {"pass": 0, "fail": 0, "warn": 3, "error": 0, "skip": 0}
    entry = lax["results"][0]
    assert entry["policy"] == "group-spec" and entry["result"] == "warn" and entry["source"] == "guardhook"
    assert entry["resources"] == [
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "name": "lax",
            "namespace": "default",
        }
    ]
    assert entry["timestamp"] == {"seconds": 1_800_000_000, "nanos": 0}
    assert entry["properties"] == {"action": "Warn"} and "restartPolicy None" in entry["message"]
    assert reports["serve"]["summary"]["pass"] >= 1 and reports["serve"]["summary"]["warn"] == 0


def write_state(tmp_path: Path) -> Path:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": degraded_fleet()}))
    return state


def test_cli_text_json_and_reports_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = write_state(tmp_path)
    assert main(["audit", "--cluster-state", str(state)]) == 0
    text = capsys.readouterr().out
    assert "Violations (3):" in text
    lax = [line for line in text.splitlines() if "[group-spec]" in line]
    assert len(lax) == 3  # one line per finding, the kind and name once on each
    assert all(line.count("lax") == 1 for line in lax)
    assert f"{state}: LeaderWorkerSet default/lax: Warn [group-spec] restartPolicy None" in text
    rows = [line.split() for line in text.splitlines()]
    assert ["serve", "llm-xl", "4", "1", "3", "2", "1", "0"] in rows
    assert [
        "NAMESPACE",
        "NAME",
        "DESIRED",
        "WHOLE",
        "BROKEN",
        "LEADER-READY-INCOMPLETE",
        "SPARE",
        "DOOMED",
    ] in rows

    reports_file = tmp_path / "reports.yaml"
    assert (
        main(
            ["audit", "--cluster-state", str(state), "--format", "json", "--reports-file", str(reports_file)]
        )
        == 0
    )
    document = json.loads(capsys.readouterr().out)
    assert DEGRADED_XL_ROW in document["groups"]
    assert [v["name"] for v in document["violations"]] == ["lax"] * 3
    assert document["violations"][0]["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert all("_" not in key for v in document["violations"] for key in v)  # camelCase keys
    written = list(yaml.safe_load_all(reports_file.read_text()))
    assert {r["metadata"]["namespace"] for r in written} == {"default", "serve"}


def test_write_reports_needs_a_live_cluster(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # refused before the audit is printed: CI read a whole report and exit code 2 together
    assert main(["audit", "--cluster-state", str(write_state(tmp_path)), "--write-reports"]) == 2
    captured = capsys.readouterr()
    assert "--write-reports needs a live cluster" in captured.err and captured.out == ""
    missing = tmp_path / "no-such-folder" / "reports.yaml"
    assert main(["audit", "--cluster-state", str(write_state(tmp_path)), "--reports-file", str(missing)]) == 2
    captured = capsys.readouterr()
    assert f"cannot write {missing}: its folder does not exist" in captured.err and captured.out == ""


def test_quiet_prints_the_violations_alone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(write_state(tmp_path))
    assert main(["audit", "--cluster-state", state]) == 0
    full = capsys.readouterr().out.splitlines()
    assert main(["audit", "-q", "--cluster-state", state]) == 0
    captured = capsys.readouterr()
    quiet = captured.out.splitlines()
    assert quiet and quiet == [line.strip() for line in full if line.strip() in quiet]
    assert len(quiet) < len(full) and not any(line.startswith("Violations") for line in quiet)
    assert "note:" not in captured.err


def test_notes_go_to_stderr_as_checks_do(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # they were "Note: …" lines in the report on stdout
    assert main(["audit", "--cluster-state", str(write_state(tmp_path))]) == 0
    captured = capsys.readouterr()
    assert "Note" not in captured.out and "note:" not in captured.out
    notes = [line for line in captured.err.splitlines() if line.startswith("guardhook audit: note: ")]
    assert (
        "guardhook audit: note: group-capacity skipped: existing groups are counted in the groups "
        "table instead" in notes
    )


# ---- live: the fake API server -----------------------------------------------------------------

REPORTS = "/apis/wgpolicyk8s.io/v1alpha2/namespaces/{}/policyreports"
CLUSTER_REPORTS = "/apis/wgpolicyk8s.io/v1alpha2/clusterpolicyreports"


@pytest.fixture
def fake_api() -> Iterator[FakeApiServer]:
    """The degraded fleet in a fake API server that does not serve keda.sh ScaledObjects."""
    with running_fake(unserved={"scaledobjects"}) as fake:
        fake.load(degraded_fleet())
        yield fake


def test_live_audit_lists_pages_and_writes_reports(
    fake_api: FakeApiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    kubeconfig = fake_api.write_kubeconfig(tmp_path / "kubeconfig")
    monkeypatch.setattr(listing, "PAGE_SIZE", 5)  # 15 pods: three pages
    assert main(["audit", "--kubeconfig", str(kubeconfig), "--format", "json", "--write-reports"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert DEGRADED_XL_ROW in document["groups"]
    assert [v["name"] for v in document["violations"]] == ["lax"] * 3
    assert document["violations"][0]["apiVersion"] == "leaderworkerset.x-k8s.io/v1"
    assert all("_" not in key for v in document["violations"] for key in v)  # camelCase keys
    assert any("ScaledObject" in note and "not served" in note for note in document["notes"])
    pod_pages = [c for c in fake_api.requests if c.startswith("GET /api/v1/pods")]
    assert len(pod_pages) == 3 and "continue=10" in pod_pages[-1]
    assert {namespace for namespace, _ in fake_api.objects["policyreports"]} == {"default", "serve"}
    assert report(fake_api, "default")["summary"]["warn"] == 3
    first_version = int(report(fake_api, "serve")["metadata"]["resourceVersion"])
    assert [c for c in fake_api.requests if c.startswith("POST")] == [
        "POST " + REPORTS.format("default"),
        "POST " + REPORTS.format("serve"),
        "POST " + CLUSTER_REPORTS,  # the fake holds no webhook configuration: guardhook not installed
    ]
    (cluster_report,) = fake_api.objects["clusterpolicyreports"].values()
    assert [(r["rule"], r["result"]) for r in cluster_report["results"]] == [("not-installed", "fail")]
    # A second run replaces the reports it wrote.
    assert main(["audit", "--kubeconfig", str(kubeconfig), "--write-reports"]) == 0
    assert [c for c in fake_api.requests if c.startswith("PUT")] == [
        "PUT " + REPORTS.format("default") + "/guardhook",
        "PUT " + REPORTS.format("serve") + "/guardhook",
        "PUT " + CLUSTER_REPORTS + "/guardhook",
    ]
    assert int(report(fake_api, "serve")["metadata"]["resourceVersion"]) > first_version


def report(fake: FakeApiServer, namespace: str) -> dict[str, Any]:
    stored = fake.get("policyreports", namespace, "guardhook")
    assert stored is not None, f"no PolicyReport in {namespace}"
    return stored


def test_unreachable_cluster_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text("http://127.0.0.1:1"))
    assert main(["audit", "--kubeconfig", str(kubeconfig)]) == 2
    assert "cannot list objects" in capsys.readouterr().err


def test_spare_counts_whole_groups_that_fit_now() -> None:
    # The sample fleet: gpu-node-16..19 are free, so one more 4-node group of llm-xl fits.
    objects = [copy.deepcopy(m.obj) for m in load_paths([FIXTURES / "fleet"])]
    assert audit([Located("cluster", o) for o in objects], default_config()).spare == {("serve", "llm-xl"): 1}
    # Group 3's pods gone frees 4 more nodes: two spare groups. Then a node cordoned: one again.
    objects = [
        o for o in objects if not (o["kind"] == "Pod" and o["metadata"]["name"].startswith("llm-xl-3"))
    ]
    assert audit([Located("cluster", o) for o in objects], default_config()).spare == {("serve", "llm-xl"): 2}
    node = next(o for o in objects if o["kind"] == "Node" and o["metadata"]["name"] == "gpu-node-19")
    node["spec"]["unschedulable"] = True
    assert audit([Located("cluster", o) for o in objects], default_config()).spare == {("serve", "llm-xl"): 1}


def test_spare_is_a_dash_without_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--cluster-state", str(LINT_LWS)]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    [row] = [r for r in rows if "lax" in r]
    assert row[-2] == "-"  # SPARE (DOOMED follows)


MALFORMED_LWS = """\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: two, namespace: serve}
spec:
  replicas: "two"
  leaderWorkerTemplate: {size: 2, workerTemplate: {spec: {containers: [{name: c, image: x}]}}}
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: x, namespace: serve}
spec: "x"
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: four, namespace: serve}
spec: {replicas: "four", leaderWorkerTemplate: {size: 4}}
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: fine, namespace: serve}
spec: {replicas: 2, leaderWorkerTemplate: {size: 4}}
"""


def test_a_malformed_lws_in_cluster_state_is_read_with_a_warning_naming_it_and_its_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    # replicas "two" was shown as 1 group, spec "x" read as empty, without a word
    state = tmp_path / "state.yaml"
    state.write_text(MALFORMED_LWS)
    assert main(["audit", "--format", "json", "--cluster-state", str(state)]) == 0
    desired = {g["name"]: g["desired"] for g in json.loads(capsys.readouterr().out)["groups"]}
    assert (desired["two"], desired["four"], desired["fine"]) == (1, 1, 2)
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelname == "WARNING" and "LeaderWorkerSet" in r.getMessage()
    ]
    assert warnings == [
        f'{state}: LeaderWorkerSet serve/two: spec.replicas "two" is not an integer: read as 1',
        f'{state}: LeaderWorkerSet serve/x: spec "x" is not an object: read as empty',
        f'{state}: LeaderWorkerSet serve/four: spec.replicas "four" is not an integer: read as 1',
    ]


def default_install_state(tmp_path: Path, floor_without: str | None = None) -> list[str]:
    """--cluster-state flags for the sample fleet with the default install (manifests/base) and,
    with `floor_without` (a policy id, or "" for none left out), the admission-policy floor less
    that policy's floor objects."""
    flags = [
        "--cluster-state",
        str(REPO / "guardhook" / "data" / "fleet"),
        "--cluster-state",
        str(REPO / "manifests" / "base"),
    ]
    if floor_without is not None:
        floor = REPO / "manifests" / "components" / "admission-policy-floor" / "floor.yaml"
        documents = [d for d in yaml.safe_load_all(floor.read_text()) if d]
        kept = [d for d in documents if d["metadata"]["name"] != f"guardhook-floor-{floor_without}"]
        (tmp_path / "floor.yaml").write_text(yaml.safe_dump_all(kept))
        flags += ["--cluster-state", str(tmp_path / "floor.yaml")]
    return flags


def test_fails_open_gaps_name_the_floor_as_next_step_and_count_what_it_covers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a default install listed its [webhook-fails-open] gaps with no next step
    assert main(["audit", *default_install_state(tmp_path)]) == 0
    out = capsys.readouterr().out
    count = out.count("  [webhook-fails-open] ")
    assert count >= 10
    assert (
        f"Next step for the {count} [webhook-fails-open] gaps: install the admission-policy floor unless it "
        "is (it could not be checked) (guardhook export admission-policies | kubectl apply -f -, or the "
        "component manifests/components/admission-policy-floor), which the API server enforces while "
        "guardhook cannot be called; it covers 3 of them: worker-delete.guardhook.io (worker-delete), "
        "group-pdb.guardhook.io (group-pdb), leaderworkersets.guardhook.io (group-spec)\n"
        f"  the other {count - 3} hold only while guardhook answers: run it highly available "
        "(manifests/components/ha)\n"
    ) in out
    assert main(["audit", "--format", "json", *default_install_state(tmp_path)]) == 0
    fails_open = json.loads(capsys.readouterr().out)["failsOpen"]
    assert (fails_open["gaps"], fails_open["floorInstalled"]) == (count, False)
    assert fails_open["covered"] == {
        "guardhook/worker-delete.guardhook.io": ["worker-delete"],
        "guardhook/group-pdb.guardhook.io": ["group-pdb"],
        "guardhook/leaderworkersets.guardhook.io": ["group-spec"],
    }


def test_an_installed_floor_is_counted_by_the_policies_it_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["audit", *default_install_state(tmp_path, floor_without="")]) == 0
    out = capsys.readouterr().out
    count = out.count("  [webhook-fails-open] ")
    assert (
        f"The admission-policy floor, installed, covers 3 of the {count} [webhook-fails-open] gaps: " in out
    )
    assert main(["audit", *default_install_state(tmp_path, floor_without="group-pdb")]) == 0
    out = capsys.readouterr().out
    assert (
        f"The admission-policy floor, installed, covers 2 of the {count} [webhook-fails-open] gaps: "
        "worker-delete.guardhook.io (worker-delete), leaderworkersets.guardhook.io (group-spec)\n"
    ) in out
    assert f"  the other {count - 2} hold only while guardhook answers" in out
