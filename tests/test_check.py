"""`guardhook check PATH…` over folders of good and bad manifests (tests/manifests): the lines it
prints, its exit codes (0 clean or advisory, 1 Deny violated, 2 unreadable), stdin, JSON, and the
group-capacity skip when no Nodes are given."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from guardhook.commands.check import check
from guardhook.commands.main import main
from guardhook.config import default_config
from guardhook.policies import REGISTRY
from guardhook.policies.base import Judgement, Policy, PolicyContext, Violation, target
from guardhook.policies.group_spec import POLICY as GROUP_SPEC

from conftest import FIXTURES, REPO, clean_env

MANIFESTS = "tests/manifests"
HAS_GROUP_PDB = any(p.id == "group-pdb" for p in REGISTRY)
needs_group_pdb = pytest.mark.skipif(
    not HAS_GROUP_PDB, reason="policy group-pdb is not registered in this build"
)


@pytest.fixture(autouse=True)
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # printed paths are the paths as given


def summary(err: str) -> list[str]:
    """The cells of the summary table's row (the last line of stderr), split at 2+ spaces."""
    header, row = err.splitlines()[-2:]
    assert header.split() == ["OBJECTS", "FINDINGS", "BY", "ACTION", "DENIED", "NOT", "JUDGED", "UNREADABLE"]
    return re.split(r"\s{2,}", row.strip())


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[str], str]:
    code = main(["check", *args])
    captured = capsys.readouterr()
    return code, captured.out.splitlines(), captured.err


@needs_group_pdb
def test_lws_with_an_lws_wide_pdb_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, f"{MANIFESTS}/lws-wide-pdb")
    assert code == 1
    prefix = f"{MANIFESTS}/lws-wide-pdb/pdb.yaml: PodDisruptionBudget serve/llm: Deny [group-pdb] "
    assert [line for line in lines if "[group-pdb]" in line] == [
        line for line in lines if line.startswith(prefix)
    ]
    assert any(line.startswith(prefix) for line in lines)


@needs_group_pdb
def test_enforcement_audit_turns_the_pdb_denial_into_an_audit_finding(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines, _ = run(capsys, "--enforcement", "audit", f"{MANIFESTS}/lws-wide-pdb")
    assert code == 0
    assert any(
        line.startswith(
            f"{MANIFESTS}/lws-wide-pdb/pdb.yaml: PodDisruptionBudget serve/llm: Audit [group-pdb] "
        )
        for line in lines
    )


def test_lws_with_per_group_integer_pdbs_exits_0_with_nothing_printed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines, err = run(capsys, f"{MANIFESTS}/per-group-pdb")
    assert (code, lines) == (0, [])
    assert summary(err)[:4] == ["4", "0", "-", "0"]
    with_nodes = run(
        capsys, "--cluster-state", str(FIXTURES / "fleet" / "nodes.yaml"), f"{MANIFESTS}/per-group-pdb"
    )
    assert with_nodes[:2] == (0, [])  # three 4x8-GPU groups fit on 20 empty GPU nodes


def test_lint_findings_are_printed_but_do_not_fail(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, f"{MANIFESTS}/lint")
    assert code == 0
    prefix = f"{MANIFESTS}/lint/lws.yaml: LeaderWorkerSet default/lax: Warn [group-spec] "
    # One line per finding; the kind and name once on each (not again inside the message).
    assert [line.removeprefix(prefix).split(" ")[0] for line in lines] == [
        "restartPolicy",
        "rollout",
        "leader",
    ]
    assert all(line.startswith(prefix) and line.count("lax") == 1 for line in lines)
    for line, finding in zip(
        lines,
        ("restartPolicy None", "rollout takes up to 1 of 2", "only checks that a TCP port accepts"),
        strict=True,
    ):
        assert finding in line


def test_a_policy_configured_to_deny_fails_the_check(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "deny.yaml"
    config.write_text("policies: {group-spec: {actions: [Deny]}}\n")
    code, lines, _ = run(capsys, "--config", str(config), f"{MANIFESTS}/lint", f"{MANIFESTS}/per-group-pdb")
    assert code == 1
    assert {line.split(" [")[0] for line in lines} == {
        f"{MANIFESTS}/lint/lws.yaml: LeaderWorkerSet default/lax: Deny"
    }


def test_json_format(capsys: pytest.CaptureFixture[str]) -> None:
    code, lines, _ = run(capsys, "--format", "json", f"{MANIFESTS}/lint")
    document = json.loads("\n".join(lines))
    assert code == 0 and document["exitCode"] == 0 and document["objects"] == 1
    violation = document["violations"][0]
    assert len(document["violations"]) == 3  # one entry per finding, as in the text
    assert set(violation) == {
        "source",
        "kind",
        "namespace",
        "name",
        "uid",
        "apiVersion",
        "policy",
        "action",
        "outcome",
        "message",
        "document",
        "documentLine",
    }  # camelCase, as Kubernetes writes JSON
    assert violation["message"].startswith("restartPolicy None")
    assert violation["source"] == f"{MANIFESTS}/lint/lws.yaml"
    assert (violation["kind"], violation["namespace"], violation["name"]) == (
        "LeaderWorkerSet",
        "default",
        "lax",
    )
    assert (violation["policy"], violation["action"], violation["outcome"]) == (
        "group-spec",
        "Warn",
        "warned",
    )


@pytest.mark.parametrize("path", [f"{MANIFESTS}/unreadable", f"{MANIFESTS}/missing"])
def test_unreadable_input_exits_2_naming_it(capsys: pytest.CaptureFixture[str], path: str) -> None:
    code, lines, err = run(capsys, path)
    assert code == 2 and lines == []
    assert path in err


def test_bad_config_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("policies: {group-spec: {actionz: [Deny]}}\n")
    code, _, err = run(capsys, "--config", str(config), f"{MANIFESTS}/lint")
    assert code == 2 and "policies.group-spec.actionz" in err


def test_stdin_like_kustomize_output(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = "---\n".join(p.read_text() for p in sorted((REPO / MANIFESTS / "lint").glob("*.yaml")))
    stream += "---\n" + (REPO / MANIFESTS / "per-group-pdb" / "pdbs.yaml").read_text()
    monkeypatch.setattr(sys, "stdin", io.StringIO(stream))
    code, lines, err = run(capsys, "-")
    assert code == 0
    assert lines and all(
        line.startswith("-: LeaderWorkerSet default/lax: Warn [group-spec] ") for line in lines
    )
    assert summary(err)[0] == "4"


def test_the_installed_command_reads_stdin_and_sets_the_exit_code(tmp_path: Path) -> None:
    config = tmp_path / "deny.yaml"
    config.write_text("policies: {group-spec: {actions: [Deny]}}\n")
    done = subprocess.run(
        [sys.executable, "-m", "guardhook", "check", "--config", str(config), "-"],
        input=(REPO / MANIFESTS / "lint" / "lws.yaml").read_text(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("-: LeaderWorkerSet default/lax: Deny [group-spec] ")


class NoRoom(Policy):
    """A test double standing in for group-capacity: violates every LWS CREATE."""

    id = "group-capacity"
    targets = (target("leaderworkerset.x-k8s.io", "leaderworkersets", "", "CREATE"),)
    default_actions = ("Deny",)
    reads_nodes = True

    def judge(self, ctx: PolicyContext) -> Judgement:
        return Judgement(violation=Violation("no room"))


def test_group_capacity_is_skipped_once_without_nodes_and_runs_with_them() -> None:
    policies = [GROUP_SPEC, NoRoom()]
    config = default_config(policies)
    paths = [f"{MANIFESTS}/lint", f"{MANIFESTS}/per-group-pdb"]
    without = check(paths, config, policies=policies)
    assert without.skipped == {"group-capacity": "no Nodes in the manifests or context"}
    assert not any(f.policy == "group-capacity" for f in without.findings)
    with_nodes = check(
        paths, config, cluster_state=[str(FIXTURES / "fleet" / "nodes.yaml")], policies=policies
    )
    assert with_nodes.skipped == {}
    assert {(f.name, f.outcome) for f in with_nodes.findings if f.policy == "group-capacity"} == {
        ("lax", "denied"),
        ("llm", "denied"),
    }
    assert with_nodes.exit_code == 1


def test_skip_note_is_printed_once(capsys: pytest.CaptureFixture[str]) -> None:
    # group-capacity ships in the registry; a skip here would hide the note never being printed
    assert any(p.id == "group-capacity" for p in REGISTRY)
    code, _, err = run(capsys, f"{MANIFESTS}/lint", f"{MANIFESTS}/per-group-pdb")
    assert err.count("group-capacity skipped") == 1


def test_enforcement_audit_passes_what_deny_would_fail(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    config = tmp_path / "deny.yaml"
    config.write_text("policies: {group-spec: {actions: [Deny]}}\n")
    code, lines, _ = run(capsys, "--config", str(config), "--enforcement", "audit", f"{MANIFESTS}/lint")
    assert code == 0
    assert {line.split(" [")[0] for line in lines} == {
        f"{MANIFESTS}/lint/lws.yaml: LeaderWorkerSet default/lax: Audit"
    }


@pytest.mark.skipif(
    not any(p.id == "leader-service" for p in REGISTRY),
    reason="policy leader-service is not registered in this build",
)
def test_a_mutation_is_reported_and_the_patched_object_is_validated(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines, _ = run(capsys, f"{MANIFESTS}/service")
    assert code == 0
    assert [line.split(" [")[0] for line in lines] == [
        f"{MANIFESTS}/service/service.yaml: Service serve/llm: Mutate"
    ]


def test_a_cluster_dump_does_not_count_a_running_lws_as_new_demand() -> None:
    # The sample fleet's LWS runs 4 groups on its pods; judged as a CREATE its own groups would need
    # room a second time ("1 of 4 new groups fits"). Running objects are judged as unchanged.
    fleet = str(FIXTURES / "fleet")
    for paths, cluster_state in (([fleet], []), ([f"{fleet}/leaderworkersets.yaml"], [fleet])):
        result = check(paths, default_config(), cluster_state=cluster_state)
        assert [f for f in result.findings if f.policy == "group-capacity" and f.violated] == []
        assert result.exit_code == 0


def test_a_new_lws_beside_a_cluster_dump_is_still_judged_for_room(tmp_path: Path) -> None:
    lws = (
        (FIXTURES / "fleet" / "leaderworkersets.yaml").read_text().replace("name: llm-xl\n", "name: llm-2\n")
    )
    (tmp_path / "new.yaml").write_text(lws)
    result = check([str(tmp_path / "new.yaml")], default_config(), cluster_state=[str(FIXTURES / "fleet")])
    assert [f.outcome for f in result.findings if f.policy == "group-capacity"] == ["denied"]


# ---- what check cannot judge, context, and input it cannot read ---------------------------------

PDB = f"{MANIFESTS}/lws-wide-pdb/pdb.yaml"
DEPLOYMENT_APP_LLM_XL = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: serve}
spec:
  selector: {matchLabels: {app: llm-xl}}
  template:
    metadata: {labels: {app: llm-xl}}
    spec: {containers: [{name: c, image: web}]}
"""
SERVICE_APP_LLM_XL = """apiVersion: v1
kind: Service
metadata: {name: api, namespace: serve}
spec:
  selector: {app: llm-xl}
  ports: [{port: 80}]
"""
LWS = f"{MANIFESTS}/lws-wide-pdb/lws.yaml"


def write(folder: Path, name: str, text: str) -> str:
    path = folder / name
    path.write_text(text)
    return str(path)


@needs_group_pdb
def test_a_pdb_checked_without_its_lws_gets_a_note_instead_of_silence(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, lines, err = run(capsys, PDB)
    assert (code, lines) == (0, [])
    [note] = [line for line in err.splitlines() if "note:" in line]
    assert note == (
        f"guardhook check: note: {PDB}: PodDisruptionBudget serve/llm: not judged by [group-pdb]: no "
        "LeaderWorkerSet (nor any other workload) in the input or context creates pods its selector "
        "matches, so whether it selects the pods of LWS groups is unknown; add the LeaderWorkerSet to the "
        "input, or pass --cluster-state PATH or --kubeconfig FILE"
    )
    assert summary(err) == ["1", "0", "-", "0", "1", "0"]
    code, lines, _ = run(capsys, "--format", "json", PDB)
    [entry] = json.loads("\n".join(lines))["notJudged"]
    assert (entry["kind"], entry["name"], entry["policy"]) == ("PodDisruptionBudget", "llm", "group-pdb")


@needs_group_pdb
def test_lws_pods_without_their_lws_stand_for_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # A cluster dump's pods carry their LWS's name, group and position. Given without the LWS (as
    # input or as --cluster-state), an LWS-wide PDB beside them was a note, not the denial it gets
    # beside the LWS: the pods stand for it now (issue 50).
    from guardhook.cluster.view.static import embedded_fleet_objects

    fleet = embedded_fleet_objects()
    pods = [
        obj
        for obj in fleet
        if obj["kind"] == "Pod"
        and obj["metadata"]["labels"].get("leaderworkerset.sigs.k8s.io/name") == "llm-xl"
    ]
    assert len(pods) > 1
    [lws] = [obj for obj in fleet if obj["kind"] == "LeaderWorkerSet" and obj["metadata"]["name"] == "llm-xl"]
    folder = tmp_path / "dump"
    folder.mkdir()
    dump = write(tmp_path, "pods.yaml", yaml.safe_dump_all(pods))
    pdb = write(folder, "pdb.yaml", Path(PDB).read_text().replace(": llm\n", ": llm-xl\n"))
    with_lws = write(tmp_path, "lws.yaml", yaml.safe_dump(lws))
    code, expected, _ = run(capsys, "--cluster-state", with_lws, pdb)
    assert code == 1 and any(
        "PodDisruptionBudget serve/llm-xl: Deny [group-pdb]" in line for line in expected
    )
    for argv in (["--cluster-state", dump, pdb], [dump, pdb]):
        code, lines, err = run(capsys, *argv)
        assert (code, lines) == (1, expected), err  # as beside the LWS itself
        assert "note:" not in err
    # whatever else its selector matches too (a Deployment of the same app label)
    write(folder, "deploy.yaml", DEPLOYMENT_APP_LLM_XL)
    code, lines, _ = run(capsys, "--cluster-state", dump, str(folder))
    assert code == 1 and any("Deny [group-pdb]" in line for line in lines)
    (folder / "deploy.yaml").unlink()
    # a per-group PDB (an advisory on its maxUnavailable), a Service reaching workers (a patch) and
    # one of leaders only (nothing): each judged as beside the LWS itself
    per_group = (
        Path(PDB)
        .read_text()
        .replace(
            "leaderworkerset.sigs.k8s.io/name: llm\n",
            'leaderworkerset.sigs.k8s.io/name: llm-xl\n      leaderworkerset.sigs.k8s.io/group-index: "0"\n',
        )
    )
    leaders_only = SERVICE_APP_LLM_XL.replace(
        "app: llm-xl", "app: llm-xl, leaderworkerset.sigs.k8s.io/worker-index: '0'"
    )
    for text, expected_action in (
        (per_group, "Advisory"),
        (SERVICE_APP_LLM_XL, "Mutate"),
        (leaders_only, None),
    ):
        write(folder, "pdb.yaml", text)
        beside_lws = run(capsys, "--cluster-state", with_lws, pdb)[:2]
        code, lines, err = run(capsys, "--cluster-state", dump, pdb)
        assert (code, lines) == beside_lws and "note:" not in err
        assert [line.split(" [")[0].rsplit(" ", 1)[1] for line in lines] == (
            [expected_action] if expected_action else []
        )


def test_a_stand_in_lws_is_read_off_its_pods() -> None:
    from guardhook.cluster.lws import LeaderWorkerSet
    from guardhook.cluster.view.static import embedded_fleet_objects
    from guardhook.commands.context import stand_in_lws

    fleet = embedded_fleet_objects()
    [real] = [
        LeaderWorkerSet(o)
        for o in fleet
        if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == "llm-xl"
    ]
    pods = [o for o in fleet if o["kind"] == "Pod"]
    [stand_in] = [LeaderWorkerSet(obj) for obj in stand_in_lws(pods)]
    assert (stand_in.namespace, stand_in.name, stand_in.replicas, stand_in.size, stand_in.hashed) == (
        real.namespace,
        real.name,
        real.replicas,
        real.size,
        False,
    )
    assert stand_in.leader_template["metadata"]["labels"] == {"app": "llm-xl", "role": "leader"}
    assert stand_in.worker_template["metadata"]["labels"] == {"app": "llm-xl"}
    assert stand_in_lws([*pods, real.obj]) == []  # the LWS itself is there: no stand-in


@needs_group_pdb
def test_cluster_state_is_context_that_judges_the_input_and_is_not_checked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # The context LWS breaks group-spec rules: checked, it would be warned about; as context it is not.
    lax = (REPO / LWS).read_text().replace("RecreateGroupOnPodRestart", "None")
    context = write(tmp_path, "lws.yaml", lax)
    code, lines, err = run(capsys, "--cluster-state", context, PDB)
    assert code == 1
    assert [line.split(" [")[0] for line in lines] == [f"{PDB}: PodDisruptionBudget serve/llm: Deny"]
    assert summary(err)[:5] == ["1", "1", "Deny 1", "1", "0"] and "note:" not in err


@pytest.mark.parametrize(
    ("text", "policy"),
    [
        (
            "apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: serve}\n"
            "spec: {selector: {app: llm}, ports: [{port: 80}]}\n",
            "leader-service",
        ),
        (
            "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\n"
            "metadata: {name: hpa, namespace: serve}\n"
            "spec: {scaleTargetRef: {apiVersion: apps/v1, kind: StatefulSet, name: llm-0}, maxReplicas: 3}\n",
            "pod-counted-scaler",
        ),
    ],
)
def test_a_service_or_scaler_without_its_lws_gets_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, policy: str
) -> None:
    path = write(tmp_path, "alone.yaml", text)
    code, _, err = run(capsys, path)
    assert code == 0 and f"not judged by [{policy}]" in err
    # Beside the LWS it is judged, and no note is printed.
    code, _, err = run(capsys, path, LWS)
    assert "note:" not in err


def test_objects_whose_target_is_in_the_input_or_not_an_lws_get_no_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "web.yaml",
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"
        "spec: {selector: {matchLabels: {app: web}}, template: {metadata: {labels: {app: web}}, "
        "spec: {containers: [{name: c, image: i}]}}}\n---\n"
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web}\n"
        "spec: {minAvailable: 1, selector: {matchLabels: {app: web}}}\n---\n"
        "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\n"
        "spec: {scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}, maxReplicas: 3}\n",
    )
    code, lines, err = run(capsys, path)
    assert (code, lines) == (0, []) and "note:" not in err


@pytest.mark.parametrize("text", ["", "# nothing\n", "foo: bar\nitems: [1, 2]\n", "- a\n- b\n"])
def test_input_without_any_kubernetes_object_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str
) -> None:
    code, lines, err = run(capsys, write(tmp_path, "empty.yaml", text))
    assert (code, lines) == (2, [])
    *notes, error = err.splitlines()  # the documents skipped, then one error line: no table
    assert error == "guardhook check: no Kubernetes object (a document with a kind) in the input"
    assert all(note.startswith("guardhook check: note: ") for note in notes)
    code, lines, _ = run(capsys, "--format", "json", str(tmp_path / "empty.yaml"))
    assert code == 2 and json.loads("\n".join(lines))["exitCode"] == 2


def test_one_unreadable_file_does_not_hide_the_findings_of_the_others(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    latin1 = tmp_path / "latin1.yaml"
    latin1.write_bytes(b"apiVersion: v1\nkind: Service\nmetadata: {name: caf\xe9}\n")
    code, lines, err = run(capsys, f"{MANIFESTS}/unreadable", str(latin1), f"{MANIFESTS}/lint", "missing/")
    assert code == 2
    assert len(lines) == 3 and all(line.startswith(f"{MANIFESTS}/lint/lws.yaml: ") for line in lines)
    assert f"{MANIFESTS}/unreadable/broken.yaml: not valid YAML or JSON" in err
    assert f"{latin1}: cannot read: not UTF-8 text (byte 0xe9 at offset 49)" in err
    assert "missing: no such file or folder" in err
    assert summary(err) == ["1", "3", "Warn 3", "0", "0", "3"]
    code, lines, _ = run(capsys, "--format", "json", str(latin1), f"{MANIFESTS}/lint")
    document = json.loads("\n".join(lines))
    assert code == 2 and document["exitCode"] == 2 and len(document["violations"]) == 3
    assert [e.split(":")[0] for e in document["errors"]] == [str(latin1)]


def test_an_object_in_the_context_is_judged_as_the_update_applying_it_would_be(tmp_path: Path) -> None:
    fleet = FIXTURES / "fleet"
    raised = (fleet / "leaderworkersets.yaml").read_text().replace("replicas: 4", "replicas: 6")
    path = write(tmp_path, "lws.yaml", raised)
    result = check([path], default_config(), cluster_state=[str(fleet)])
    [finding] = [f for f in result.findings if f.policy == "group-capacity"]
    # 4 groups run already (context): only the 2 new ones need room, not 6.
    assert finding.outcome == "denied" and finding.message.startswith("1 of 2 new groups")


@needs_group_pdb
def test_kubeconfig_is_context_listed_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from fake_apiserver import running_fake

    with running_fake() as fake:
        fake.load(yaml.safe_load_all((REPO / LWS).read_text()))
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        code, lines, err = run(capsys, "--kubeconfig", str(kubeconfig), PDB)
        assert any(
            r.startswith("GET /apis/leaderworkerset.x-k8s.io/v1/leaderworkersets") for r in fake.requests
        )
    assert code == 1, err
    assert [line.split(" [")[0] for line in lines] == [f"{PDB}: PodDisruptionBudget serve/llm: Deny"]
    assert summary(err)[0] == "1"


REVIEW = str(FIXTURES / "reviews" / "s07-eviction-worker.validating.json")


@pytest.mark.parametrize(
    "command",
    [["check", PDB], ["audit"], ["drain-plan", "--draining"], ["review", REVIEW]],
    ids=lambda c: c[0],
)
def test_an_insecure_kubeconfig_is_one_warning_line_not_urllib3s(tmp_path: Path, command: list[str]) -> None:
    # urllib3 printed its raw InsecureRequestWarning (file, line, source) for every request, in
    # every command that reads a cluster
    import ssl
    import subprocess
    import sys

    from guardhook.server.certs import generate

    from fake_apiserver import kubeconfig_text, running_fake

    certs = generate(tmp_path / "certs", ["127.0.0.1"])
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(certs.cert, certs.key)
    with running_fake() as fake:
        fake.load(yaml.safe_load_all((REPO / LWS).read_text()))
        assert fake._httpd is not None
        fake._httpd.socket = tls.wrap_socket(fake._httpd.socket, server_side=True)  # HTTPS from now on
        text = kubeconfig_text(f"https://127.0.0.1:{fake.port}")
        kubeconfig = write(
            tmp_path,
            "kubeconfig",
            text.replace("  cluster:\n", "  cluster:\n    insecure-skip-tls-verify: true\n"),
        )
        done = subprocess.run(
            [sys.executable, "-m", "guardhook", *command, "--kubeconfig", kubeconfig],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        assert any(r.startswith("GET /apis/leaderworkerset.x-k8s.io/v1/") for r in fake.requests)
    assert done.returncode in (0, 1), done.stderr
    assert "InsecureRequestWarning" not in done.stderr and "urllib3" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if "insecure-skip-tls-verify" in line]
    assert line.startswith(f"guardhook {command[0]}: warning: {kubeconfig} sets insecure-skip-tls-verify: ")


def test_an_unreachable_kubeconfig_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from fake_apiserver import kubeconfig_text

    kubeconfig = write(tmp_path, "kubeconfig", kubeconfig_text("http://127.0.0.1:1"))
    code, lines, err = run(capsys, "--kubeconfig", kubeconfig, PDB)
    assert (code, lines) == (2, []) and "cannot list objects from kubeconfig" in err


MULTI = """# a comment before the first document
apiVersion: v1
kind: ConfigMap
metadata: {name: first}
---
---
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {name: lax, namespace: default}
"""


def lax_lws_stream() -> str:
    """MULTI with the lax LWS of the lint fixture as its third document (index 2, line 7)."""
    lws = yaml.safe_load((REPO / MANIFESTS / "lint" / "lws.yaml").read_text())
    return MULTI.split("apiVersion: leaderworkerset")[0] + yaml.safe_dump(lws, sort_keys=False)


def test_json_findings_name_their_document_and_its_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    stream = tmp_path / "stream.yaml"
    stream.write_text(lax_lws_stream())
    code, lines, _ = run(capsys, "--format", "json", str(stream))
    violations = json.loads("\n".join(lines))["violations"]
    assert code == 0 and violations
    assert {(v["source"], v["document"], v["documentLine"]) for v in violations} == {(str(stream), 2, 7)}


def test_sarif_output_locates_each_finding(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    stream = tmp_path / "stream.yaml"
    stream.write_text(lax_lws_stream())
    code, lines, _ = run(capsys, "--format", "sarif", str(stream))
    log = json.loads("\n".join(lines))
    assert code == 0 and log["version"] == "2.1.0" and log["$schema"].endswith("sarif-2.1.0.json")
    (sarif_run,) = log["runs"]
    assert sarif_run["tool"]["driver"]["name"] == "guardhook"
    assert [r["id"] for r in sarif_run["tool"]["driver"]["rules"]] == ["group-spec"]
    results = sarif_run["results"]
    assert len(results) == 3  # as many as the text and JSON findings
    for result in results:
        assert (result["ruleId"], result["ruleIndex"], result["level"]) == ("group-spec", 0, "warning")
        (location,) = result["locations"]
        physical = location["physicalLocation"]
        assert physical == {"artifactLocation": {"uri": str(stream)}, "region": {"startLine": 7}}
        assert location["logicalLocations"][0]["fullyQualifiedName"] == "LeaderWorkerSet default/lax"
        assert result["message"]["text"].startswith("Warn: ")
    (invocation,) = sarif_run["invocations"]
    assert invocation["executionSuccessful"] and invocation["exitCode"] == 0
    notes = [n["message"]["text"] for n in invocation["toolExecutionNotifications"]]
    assert notes == ["group-capacity skipped: no Nodes in the manifests or context"]


def test_sarif_of_a_denial_is_an_error_and_of_unreadable_input_a_failed_run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, lines, _ = run(capsys, "--format", "sarif", f"{MANIFESTS}/lws-wide-pdb", str(tmp_path / "missing"))
    sarif_run = json.loads("\n".join(lines))["runs"][0]
    assert code == 2 and not sarif_run["invocations"][0]["executionSuccessful"]
    assert any(r["level"] == "error" and r["ruleId"] == "group-pdb" for r in sarif_run["results"])
    errors = [n for n in sarif_run["invocations"][0]["toolExecutionNotifications"] if n["level"] == "error"]
    assert errors and "no such file or folder" in errors[0]["message"]["text"]


def test_a_document_that_is_no_object_gets_a_note_and_fails_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # A kustomize JSON patch, a values file and a scalar beside the manifests were skipped without
    # a word.
    folder = tmp_path / "overlay"
    folder.mkdir()
    write(folder, "patch.yaml", "- op: replace\n  path: /spec/replicas\n  value: 3\n")
    write(folder, "values.yaml", "---\nimage: vllm\n---\n---\nkind: 5\n---\ntrue\n")
    write(folder, "lws.yaml", Path(LWS).read_text())
    code, _, err = run(capsys, str(folder))
    assert code == 0
    notes = [
        line.removeprefix("guardhook check: note: ")
        for line in err.splitlines()
        if "document at line" in line
    ]
    assert notes == [
        f"{folder}/patch.yaml: document at line 1 skipped: a list, not a Kubernetes object (a kustomize JSON "
        "patch is one)",
        f"{folder}/values.yaml: document at line 2 skipped: a mapping with no kind, not a Kubernetes object",
        f"{folder}/values.yaml: document at line 5 skipped: a mapping whose kind is not a string (5), not a "
        "Kubernetes object",
        f"{folder}/values.yaml: document at line 7 skipped: a boolean, not a Kubernetes object",
    ]  # the empty documents say nothing
    assert summary(err)[0] == "1"

    code, lines, _ = run(capsys, "--format", "json", str(folder))
    skipped = json.loads("\n".join(lines))["skippedDocuments"]
    assert [(s["source"], s["document"], s["documentLine"]) for s in skipped] == [
        (f"{folder}/patch.yaml", 0, 1),
        (f"{folder}/values.yaml", 0, 2),  # numbered as a finding's `document`: 0 for the first
        (f"{folder}/values.yaml", 2, 5),
        (f"{folder}/values.yaml", 3, 7),
    ]


def test_a_helm_chart_template_is_noted_not_read_as_yaml(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `guardhook check charts/mychart` gave one "not valid YAML or JSON" error per template (exit 2
    # for a chart with nothing wrong): a template is the chart's, as a patch is a Kustomization's.
    chart = tmp_path / "charts" / "app"
    (chart / "templates").mkdir(parents=True)
    write(chart, "Chart.yaml", "apiVersion: v2\nname: app\nversion: 0.1.0\n")
    write(
        chart / "templates", "service.yaml", "{{- if .Values.service.enabled }}\nkind: Service\n{{- end }}\n"
    )
    write(
        chart / "templates",
        "plain.yaml",  # no template action: an object like any other, still judged
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: serve}\n",
    )
    monkeypatch.chdir(tmp_path)
    code, lines, err = run(capsys, "charts/app")
    assert (code, lines) == (0, []), err
    assert (
        "guardhook check: note: charts/app/templates/service.yaml: document at line 1 skipped: a Helm "
        "chart template (charts/app/Chart.yaml), not an object: give `helm template`'s output instead"
    ) in err.splitlines()
    assert "not valid YAML" not in err and summary(err)[0] == "1"  # plain.yaml
    code, lines, err = run(capsys, "charts/app/templates/service.yaml")  # given alone: the same note
    assert (code, lines) == (2, []) and "a Helm chart template (charts/app/Chart.yaml)" in err


def test_a_patch_given_by_a_relative_path_names_its_kustomization_relative_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `guardhook check manifests/` named every file as given but each patch's Kustomization by its
    # absolute path (`… a kustomize patch (/home/me/repo/manifests/…/kustomization.yaml names it)`).
    overlay = tmp_path / "repo" / "overlay"
    overlay.mkdir(parents=True)
    write(overlay, "kustomization.yaml", "resources: [../base]\npatches:\n- path: replicas.yaml\n")
    write(
        overlay,
        "replicas.yaml",
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\n"
        "metadata: {name: llm}\nspec: {replicas: 6}\n",
    )
    monkeypatch.chdir(tmp_path / "repo")
    _code, _lines, err = run(capsys, "overlay/replicas.yaml")
    assert (
        "guardhook check: note: overlay/replicas.yaml: document at line 1 skipped: a kustomize patch "
        "(overlay/kustomization.yaml names it), not an object: give `kustomize build DIR`'s output instead"
    ) in err.splitlines()
    monkeypatch.chdir(overlay)  # the Kustomization named from where the command runs
    _code, _lines, err = run(capsys, "replicas.yaml")
    assert "a kustomize patch (kustomization.yaml names it)" in err


def test_a_kustomize_overlay_is_noted_not_judged_as_objects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # An overlay folder: its Kustomization and the patches it names are no objects; judged alone, a
    # strategic-merge patch was "Invalid" (exit 1) and a folder of a Kustomization and a JSON patch
    # passed as "1 object" with nothing checked.
    overlay = tmp_path / "overlay"
    overlay.mkdir()
    write(
        overlay,
        "kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [../base]\n"
        "patches:\n- path: replicas.yaml\n- path: ops.yaml\n  target: {kind: LeaderWorkerSet}\n",
    )
    write(
        overlay,
        "replicas.yaml",
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\n"
        "metadata: {name: llm}\nspec: {replicas: 6}\n",
    )
    write(overlay, "ops.yaml", "- op: replace\n  path: /spec/replicas\n  value: 6\n")
    code, lines, err = run(capsys, str(overlay))
    assert (code, lines) == (2, [])
    kustomization = overlay / "kustomization.yaml"
    assert err.splitlines() == [
        f"guardhook check: note: {kustomization}: document at line 1 skipped: a kustomize Kustomization, "
        "not an object: give `kustomize build DIR`'s output instead",
        f"guardhook check: note: {overlay}/ops.yaml: document at line 1 skipped: a kustomize patch "
        f"({kustomization} names it), not an object: give `kustomize build DIR`'s output instead",
        f"guardhook check: note: {overlay}/replicas.yaml: document at line 1 skipped: a kustomize patch "
        f"({kustomization} names it), not an object: give `kustomize build DIR`'s output instead",
        "guardhook check: no Kubernetes object (a document with a kind) in the input",
    ]
    # a patch given alone (pre-commit passes changed files), its Kustomization in a folder above
    code, lines, err = run(capsys, str(overlay / "replicas.yaml"))
    assert (code, lines) == (2, [])
    assert f"{overlay}/replicas.yaml: document at line 1 skipped: a kustomize patch ({kustomization}" in err
    # kustomize's default Kustomization has no apiVersion or kind: known by its file name
    kustomization.write_text("resources: [../base]\npatches:\n- path: replicas.yaml\n")
    code, lines, err = run(capsys, str(overlay))
    assert (code, lines) == (2, []) and "skipped: a kustomize Kustomization, not an object" in err
    assert "skipped: a kustomize patch" in err


KUBEBUILDER_CRD_PATCH = """# The following patch enables a conversion webhook for the CRD
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: guestbooks.webapp.my.domain
spec:
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {namespace: system, name: webhook-service, path: /convert}
      conversionReviewVersions: [v1]
"""
KUBEBUILDER_MANAGER_PATCH = """apiVersion: apps/v1
kind: Deployment
metadata: {name: controller-manager, namespace: system}
spec:
  template:
    spec:
      containers:
      - name: manager
        ports: [{containerPort: 9443, name: webhook-server, protocol: TCP}]
"""


def test_a_patch_a_kustomization_leaves_commented_out_is_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # kubebuilder's scaffold leaves its webhook and cert-manager patches named in comments only; judged
    # alone, each was Invalid [schema] (a CRD with no names or versions, a Deployment with no selector)
    (tmp_path / ".git").mkdir()
    crd, default = tmp_path / "config" / "crd", tmp_path / "config" / "default"
    (crd / "patches").mkdir(parents=True)
    default.mkdir()
    write(
        crd,
        "kustomization.yaml",
        "resources:\n- bases/configmap.yaml\npatchesStrategicMerge:\n"
        "# [WEBHOOK] To enable webhook, uncomment all the sections with [WEBHOOK] prefix.\n"
        "#- patches/webhook_in_guestbooks.yaml\n",
    )
    write(crd / "patches", "webhook_in_guestbooks.yaml", KUBEBUILDER_CRD_PATCH)
    (crd / "bases").mkdir()
    write(
        crd / "bases",
        "configmap.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: serve}\n",
    )
    write(
        default,
        "kustomization.yaml",
        "resources:\n- ../crd\npatches:\n# [WEBHOOK] uncomment to enable the webhook\n"
        "#- path: manager_webhook_patch.yaml\n#  target:\n#    kind: Deployment\n",
    )
    write(default, "manager_webhook_patch.yaml", KUBEBUILDER_MANAGER_PATCH)
    code, lines, err = run(capsys, str(tmp_path / "config"))
    assert (code, lines) == (0, []), err
    for patch, kustomization in (
        (crd / "patches" / "webhook_in_guestbooks.yaml", crd / "kustomization.yaml"),
        (default / "manager_webhook_patch.yaml", default / "kustomization.yaml"),
    ):
        assert (
            f"guardhook check: note: {patch}: document at line 1 skipped: a kustomize patch ({kustomization} "
            "names it in a comment), not an object: give `kustomize build DIR`'s output instead"
        ) in err.splitlines()
    # given alone (pre-commit passes changed files): the same note
    code, lines, err = run(capsys, str(default / "manager_webhook_patch.yaml"))
    assert (code, lines) == (2, []) and "names it in a comment" in err
    # a patch the comment does not name is still judged
    write(default, "other.yaml", KUBEBUILDER_MANAGER_PATCH)
    code, lines, _ = run(capsys, str(default / "other.yaml"))
    assert code == 1 and "Invalid [schema]" in lines[0]


@needs_group_pdb
def test_a_pdb_without_a_namespace_beside_its_lws_is_told_so(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # Applied with `-n serve`, a file often has no namespace: checked, it lands in "default" and the
    # note said nothing of the LWS right beside it.
    pdb = yaml.safe_load(Path(PDB).read_text())
    del pdb["metadata"]["namespace"]
    path = write(tmp_path, "pdb.yaml", yaml.safe_dump(pdb))
    code, _, err = run(capsys, LWS, path)
    assert code == 0
    [note] = [line for line in err.splitlines() if "note:" in line]
    assert (
        "(LeaderWorkerSet serve/llm in another namespace has pods it would match: does it lack its "
        "namespace?)" in note
    )
    # a dump's pods in serve, no LWS object: the hint names their LWS too
    from guardhook.cluster.view.static import embedded_fleet_objects

    pods = [
        o
        for o in embedded_fleet_objects()
        if o["kind"] == "Pod" and o["metadata"]["name"].startswith("llm-xl-")
    ]
    dump = write(tmp_path, "pods.yaml", yaml.safe_dump_all(pods))
    pdb["spec"]["selector"]["matchLabels"]["leaderworkerset.sigs.k8s.io/name"] = "llm-xl"
    path = write(tmp_path, "pdb.yaml", yaml.safe_dump(pdb))
    code, _, err = run(capsys, "--cluster-state", dump, path)
    assert "(LeaderWorkerSet serve/llm-xl in another namespace has pods it would match" in err


def test_what_a_list_holds_that_is_no_object_gets_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(
        tmp_path,
        "lists.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- just-a-string\n- {replicas: 3}\n"
        "- {apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: serve}}\n---\n"
        "apiVersion: v1\nkind: PodList\nitems: oops\n",
    )
    code, _, err = run(capsys, path)
    assert code == 0
    assert [
        line.removeprefix(f"guardhook check: note: {path}: ")
        for line in err.splitlines()
        if "skipped" in line and path in line
    ] == [
        "document at line 1 skipped: item 0 of a List is a string, not a Kubernetes object",
        "document at line 1 skipped: item 1 of a List is a mapping with no kind, not a Kubernetes object",
        "document at line 8 skipped: the items of a PodList are not a list, so it holds no object",
    ]
    assert summary(err)[0] == "1"


def test_a_cluster_state_document_that_is_no_object_is_a_warning(tmp_path: Path) -> None:
    # audit, drain-plan and check's context read --cluster-state with load_paths: what it skipped
    # went unsaid there.
    state = tmp_path / "state"
    state.mkdir()
    write(state, "lws.yaml", Path(LWS).read_text())
    write(state, "ops.yaml", "- op: replace\n  path: /spec/replicas\n  value: 3\n")
    write(state, "kustomization.yaml", "resources: [lws.yaml]\npatches:\n- path: scale.yaml\n")
    scale = "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\n"
    scale += "metadata: {name: other, namespace: serve}\n"
    write(state, "scale.yaml", scale)
    done = subprocess.run(
        [sys.executable, "-m", "guardhook", "audit", "--cluster-state", str(state)],
        capture_output=True,
        text=True,
        timeout=120,
        env=clean_env(tmp_path),
    )
    assert done.returncode in (0, 1), done.stderr
    assert (
        f"Warning: {state}/ops.yaml: document at line 1 skipped: a list, not a Kubernetes object"
        in done.stderr
    )
    assert (
        f"Warning: {state}/kustomization.yaml: document at line 1 skipped: a kustomize Kustomization"
        in done.stderr
    )
    assert f"Warning: {state}/scale.yaml: document at line 1 skipped: a kustomize patch" in done.stderr
    assert "other" not in done.stdout  # the patch is no LeaderWorkerSet of the cluster


def test_an_empty_kind_is_a_note_not_an_invalid_object(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write(
        tmp_path, "mixed.yaml", 'apiVersion: v1\nkind: ""\nmetadata: {name: x}\n---\n' + Path(LWS).read_text()
    )
    code, lines, err = run(capsys, path)
    assert (code, lines) == (0, [])
    assert f"{path}: document at line 1 skipped: a mapping with no kind, not a Kubernetes object" in err


@needs_group_pdb
def test_a_file_given_twice_is_judged_once(capsys: pytest.CaptureFixture[str]) -> None:
    # as a path twice, or inside a folder also given: its findings were doubled
    once_code, once, once_err = run(capsys, LWS, PDB)
    for args in ((LWS, PDB, PDB), (f"{MANIFESTS}/lws-wide-pdb", PDB)):
        code, lines, err = run(capsys, *args)
        assert (code, lines, summary(err)) == (once_code, once, summary(once_err))
