"""`guardhook test DIR` (issue 39): suites of resources and captured AdmissionReviews with the
expected result per policy, a pass/fail table, exit 1 on a failure, like `kyverno test`. The
repository's example suite (examples/test-suites) runs here, so CI runs it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from guardhook.commands.main import main

from conftest import REPO

EXAMPLES = REPO / "examples" / "test-suites"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["test", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def copy_examples(tmp_path: Path) -> Path:
    """The example suites in `tmp_path`, their cluster state path still pointing at the fleet."""
    target = tmp_path / "suites"
    shutil.copytree(EXAMPLES, target)
    for suite in target.rglob("guardhook-test.yaml"):
        document = yaml.safe_load(suite.read_text())
        document["clusterState"] = [
            str((EXAMPLES / suite.parent.relative_to(target) / p).resolve()) for p in document["clusterState"]
        ]
        suite.write_text(yaml.safe_dump(document, sort_keys=False))
    return target


def test_the_example_suite_passes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    code, out, err = run(capsys, "examples/test-suites")
    assert code == 0, out + err
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "SUITE", "POLICY", "RESOURCE", "RESULT", "REASON"]
    assert lines[-1] == "Test summary: 6 passed, 0 failed"
    rows = [line.split() for line in lines[1:-1]]
    assert [(r[2], r[-1]) for r in rows] == [
        ("worker-delete", "PASS"),
        ("leader-service", "PASS"),
        ("group-capacity", "PASS"),
        ("group-pdb", "PASS"),
        ("group-eviction", "PASS"),
        ("group-eviction", "PASS"),
    ]
    assert "CREATE Eviction serve/llm-xl-2-1" in out  # the eviction over budget is the one judged


def wrong_suites(tmp_path: Path, within_denied: bool = False) -> Path:
    """The example suites with group-disrupted's expectations made wrong: the eviction over budget
    expected to answer 403 (it answers 429) and, with `within_denied`, the one within it expected
    denied (it is allowed)."""
    suites = copy_examples(tmp_path)
    suite = suites / "group-disrupted" / "guardhook-test.yaml"
    document = yaml.safe_load(suite.read_text())
    document["results"][1]["code"] = 403
    if within_denied:
        document["results"][0]["result"] = "denied"
    suite.write_text(yaml.safe_dump(document))
    return suites


def test_a_wrong_expectation_fails_with_its_reason_and_exit_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    suites = wrong_suites(tmp_path, within_denied=True)
    code, out, _ = run(capsys, str(suites))
    assert code == 1
    assert out.splitlines()[-1] == "Test summary: 4 passed, 2 failed"
    failed = [line for line in out.splitlines() if " FAIL " in line]
    assert len(failed) == 2
    assert failed[0].endswith("FAIL    expected denied, got allowed")
    assert "FAIL    expected code 403, got 429: evicting" in failed[1]
    code, out, _ = run(capsys, "--format", "json", str(suites))
    document = json.loads(out)
    assert code == 1 and (document["passed"], document["failed"]) == (4, 2)


def test_a_wrong_patch_fails(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    suites = copy_examples(tmp_path)
    suite = suites / "fleet" / "guardhook-test.yaml"
    document = yaml.safe_load(suite.read_text())
    document["results"][1]["patch"][0]["value"] = "1"
    suite.write_text(yaml.safe_dump(document))
    code, out, _ = run(capsys, "--fail-only", str(suite))
    assert code == 1
    [row] = out.splitlines()[1:-1]
    assert "leader-service" in row and "FAIL" in row and "expected patch" in row


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(results=[]), "results must be a non-empty list"),
        (lambda d: d.update(resultz=[]), "unknown key resultz"),
        (lambda d: d["results"][0].update(result="refused"), "results[0].result must be one of"),
        (lambda d: d.pop("clusterState"), "clusterState is required"),
        (
            lambda d: d.update(clusterState=["/nonexistent-state"]),
            "clusterState: /nonexistent-state: no such",
        ),
        (
            lambda d: d["results"][0].update(policy="worker-delet"),
            "results[0].policy: unknown policy worker-delet",
        ),
        (
            lambda d: d["results"][3].update(result="patched", patch=[]),
            "results[3].patch goes with a review and result: patched",
        ),
    ],
    ids=[
        "empty",
        "unknown-key",
        "bad-result",
        "no-state",
        "missing-state",
        "unknown-policy",
        "resource-patch",
    ],
)
def test_a_bad_suite_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, edit: object, message: str
) -> None:
    suites = copy_examples(tmp_path)
    suite = suites / "fleet" / "guardhook-test.yaml"
    document = yaml.safe_load(suite.read_text())
    edit(document)  # type: ignore[operator]
    suite.write_text(yaml.safe_dump(document))
    code, out, err = run(capsys, str(suite))
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert line.startswith(f"guardhook test: {suite}: ") and message in line, line


def test_a_folder_without_suites_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(capsys, str(tmp_path))
    assert code == 2 and err == f"guardhook test: {tmp_path}: no guardhook-test.yaml below it\n"


def test_fail_only_lists_only_failures_in_json_and_keeps_their_ids(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    suites = wrong_suites(tmp_path)
    code, out, _ = run(capsys, "--fail-only", "--format", "json", str(suites))
    document = json.loads(out)
    assert code == 1 and (document["passed"], document["failed"]) == (5, 1)
    assert [(r["policy"], r["passed"]) for r in document["results"]] == [("group-eviction", False)]
    code, out, _ = run(capsys, "--fail-only", str(suites))
    [row] = out.splitlines()[1:-1]
    assert row.split()[0] == "6" and "FAIL" in row  # its ID in the full table, not 1


def test_a_resource_named_nowhere_in_resources_is_a_suite_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # a typo'd name must not pass as "skipped" (kyverno test: a resource not found fails the run)
    suites = copy_examples(tmp_path)
    suite = suites / "fleet" / "guardhook-test.yaml"
    document = yaml.safe_load(suite.read_text())
    document["results"][3].update(
        resource={"kind": "PodDisruptionBudget", "namespace": "serve", "name": "llm-x"}
    )
    document["results"][3]["result"] = "skipped"
    suite.write_text(yaml.safe_dump(document, sort_keys=False))
    code, out, err = run(capsys, str(suite))
    assert code == 2 and out == ""
    assert err == (
        f"guardhook test: {suite}: results[3].resource PodDisruptionBudget serve/llm-x is not in resources\n"
    )


def unjudged_suite(tmp_path: Path, result: str) -> Path:
    """A suite whose clusterState lacks the LWS of its one review (a worker DELETE of serve/llm-xl)."""
    (tmp_path / "state.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: serve}\n")
    suite = tmp_path / "guardhook-test.yaml"
    review = str(EXAMPLES / "reviews" / "s01-worker-delete.validating.json")
    document = {
        "apiVersion": "guardhook.io/v1alpha1",
        "kind": "Test",
        "clusterState": ["state.yaml"],
        "reviews": [review],
        "results": [{"review": review, "policy": "worker-delete", "result": result}],
    }
    suite.write_text(yaml.safe_dump(document, sort_keys=False))
    return suite


def test_a_review_that_cannot_be_judged_fails_unless_expected_not_judged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, out, _ = run(capsys, str(unjudged_suite(tmp_path, "allowed")))
    assert code == 1, out
    [row] = out.splitlines()[1:-1]
    assert row.endswith(
        "FAIL    expected allowed, got not-judged: LeaderWorkerSet serve/llm-xl is not in the cluster view"
    )
    code, out, _ = run(capsys, str(unjudged_suite(tmp_path, "not-judged")))
    assert code == 0 and out.splitlines()[-1] == "Test summary: 1 passed, 0 failed"
    # and as review --exit-code says it: not judged, exit 2
    review = str(EXAMPLES / "reviews" / "s01-worker-delete.validating.json")
    assert main(["review", "--exit-code", "--cluster-state", str(tmp_path / "state.yaml"), review]) == 2


def test_not_judged_is_expected_of_a_review_only(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    suites = copy_examples(tmp_path)
    suite = suites / "fleet" / "guardhook-test.yaml"
    document = yaml.safe_load(suite.read_text())
    document["results"][3]["result"] = "not-judged"
    suite.write_text(yaml.safe_dump(document, sort_keys=False))
    code, _, err = run(capsys, str(suite))
    assert code == 2 and "results[3].result not-judged goes with a review" in err


def test_the_suites_and_output_in_commands_md_are_the_examples_and_what_they_print(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # the excerpt had drifted from the example suites (one review of two) and their comments
    text = (REPO / "docs" / "commands.md").read_text()
    suites = [
        "examples/test-suites/fleet/guardhook-test.yaml",
        "examples/test-suites/group-disrupted/guardhook-test.yaml",
    ]
    excerpt = "---\n".join(f"# {name}\n" + (REPO / name).read_text() for name in suites)
    assert f"```yaml\n{excerpt}```\n" in text
    monkeypatch.chdir(REPO)
    code, out, _ = run(capsys, "examples/test-suites")
    assert code == 0 and f"```\n$ guardhook test examples/test-suites\n{out}```\n" in text
