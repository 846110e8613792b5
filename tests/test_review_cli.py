"""`guardhook review`: `--format review|text|json` (the decoded JSONPatch printed for people and
scripts) and `--exit-code` (1 on a denial), over captured kube-apiserver reviews."""

from __future__ import annotations

import base64
import json

import pytest

from guardhook.commands.main import main

from conftest import FIXTURES

REVIEWS = FIXTURES / "reviews"
SERVICE = str(REVIEWS / "s12-service-app-selector.mutating.json")  # leader-service patches it
WORKER_DELETE = str(REVIEWS / "s01-worker-delete.validating.json")  # worker-delete denies it
LEADER_DELETE = str(REVIEWS / "s02-leader-delete.validating.json")  # allowed
PIN = {"op": "add", "path": "/spec/selector/leaderworkerset.sigs.k8s.io~1worker-index", "value": "0"}


def review(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["review", *args])
    return code, capsys.readouterr().out


def test_default_format_is_the_response_admission_review_with_its_base64_patch(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = review(capsys, SERVICE)
    document = json.loads(out)
    assert code == 0 and document["kind"] == "AdmissionReview"
    assert json.loads(base64.b64decode(document["response"]["patch"])) == [PIN]


def test_text_format_prints_the_decision_and_the_decoded_patch(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = review(capsys, "--format", "text", SERVICE)
    assert code == 0
    # each operation says the policy that made it, as a warning does
    assert out.splitlines() == ["allowed", "patch (JSONPatch):", "  [leader-service] " + json.dumps(PIN)]
    code, out = review(capsys, "--format", "text", WORKER_DELETE)
    [first] = out.splitlines()
    assert first.startswith("denied 403 Forbidden: [worker-delete] pod serve/llm-xl-0-2 is worker 2")


def test_json_format_decodes_the_patch(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = review(capsys, "--format", "json", SERVICE)
    document = json.loads(out)
    assert code == 0
    assert document == {
        "allowed": True,
        "code": None,
        "reason": None,
        "message": None,
        "warnings": [],
        "auditAnnotations": {},
        "patch": [PIN],
        "patches": [{"policy": "leader-service", "patch": [PIN]}],  # which policy made it
        "notJudged": [],
    }
    code, out = review(capsys, "--format", "json", WORKER_DELETE)
    denied = json.loads(out)
    assert (denied["allowed"], denied["code"], denied["reason"], denied["patch"]) == (
        False,
        403,
        "Forbidden",
        None,
    )


@pytest.mark.parametrize(
    ("path", "flags", "expected"),
    [
        (WORKER_DELETE, ["--exit-code"], 1),
        (WORKER_DELETE, [], 0),  # without the flag a judged review exits 0, as before
        (LEADER_DELETE, ["--exit-code"], 0),
        (SERVICE, ["--exit-code", "--format", "text"], 0),
    ],
)
def test_exit_code_flag_exits_1_on_a_denial(
    capsys: pytest.CaptureFixture[str], path: str, flags: list[str], expected: int
) -> None:
    assert review(capsys, *flags, path)[0] == expected
