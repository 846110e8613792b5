"""Issue 39: what the CLI refuses to pass in silence. `review` of a request whose LWS is not in the
cluster view says "not judged" (exit 2 with --exit-code, a note in JSON); `--config` refuses a
duplicate key and an out-of-range number with one line naming it; `certs --force` prints the
caBundle with the previous CA, as the patches hold it."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import pytest

from guardhook.commands.main import main

from conftest import FIXTURES

WORKER_DELETE = FIXTURES / "reviews" / "s01-worker-delete.validating.json"
FLEET = str(FIXTURES / "fleet")


def worker_delete_of_prod_vllm(tmp_path: Path) -> str:
    """The captured worker DELETE, moved to an LWS prod/vllm that the fleet does not hold."""
    review = json.loads(WORKER_DELETE.read_text())
    request = review["request"]
    pod = copy.deepcopy(request["oldObject"])
    meta = pod["metadata"]
    meta.update(namespace="prod", name="vllm-0-2", generateName="vllm-0-")
    meta["labels"]["leaderworkerset.sigs.k8s.io/name"] = "vllm"
    meta["labels"]["statefulset.kubernetes.io/pod-name"] = "vllm-0-2"
    meta["annotations"]["leaderworkerset.sigs.k8s.io/leader-name"] = "vllm-0"
    for owner in meta.get("ownerReferences", []):
        owner["name"] = "vllm-0"
    request.update(namespace="prod", name="vllm-0-2", oldObject=pod)
    path = tmp_path / "review.json"
    path.write_text(json.dumps(review))
    return str(path)


def test_review_of_a_worker_delete_whose_lws_is_not_in_the_view_is_not_judged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    review = worker_delete_of_prod_vllm(tmp_path)
    note = "not judged: LeaderWorkerSet prod/vllm is not in the cluster view"
    assert main(["review", "--cluster-state", FLEET, "--exit-code", "--format", "text", review]) == 2
    assert f"guardhook review: {note}\n" in capsys.readouterr().err
    assert main(["review", "--cluster-state", FLEET, "--format", "json", review]) == 0
    assert json.loads(capsys.readouterr().out)["notJudged"] == [
        "LeaderWorkerSet prod/vllm is not in the cluster view"
    ]


def test_review_of_a_known_group_has_no_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(["review", "--cluster-state", FLEET, "--exit-code", "--format", "json", str(WORKER_DELETE)]) == 1
    )
    captured = capsys.readouterr()
    assert json.loads(captured.out)["notJudged"] == [] and "not judged" not in captured.err


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            "policies:\n  group-eviction:\n    maxDisruptedGroups: 1\n    maxDisruptedGroups: 3\n",
            "line 4: duplicate key maxDisruptedGroups",
        ),
        (
            "policies:\n  group-eviction:\n    maxDisruptedGroups: 99999999999999999999999\n",
            "policies.group-eviction.maxDisruptedGroups must be at most 2147483647",
        ),
        (
            "policies:\n  group-eviction:\n    ledgerTTLSeconds: .inf\n",
            "ledgerTTLSeconds must be a non-negative",
        ),
        ("clusterView: {staleAfterSeconds: 1e40}\n", "clusterView.staleAfterSeconds must be a positive"),
    ],
    ids=["duplicate", "huge-int", "infinite", "huge-float"],
)
def test_config_refuses_duplicate_keys_and_out_of_range_numbers(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, line: str
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    assert main(["check", "--config", str(config), str(FIXTURES / "fleet")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("guardhook check: ") and line in err[0], err


def test_certs_force_prints_the_bundle_with_the_previous_ca(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "certs"
    assert main(["certs", "--out", str(out)]) == 0
    previous = (out / "ca.crt").read_bytes()
    capsys.readouterr()
    assert main(["certs", "--out", str(out), "--force"]) == 0
    bundle = base64.b64decode(capsys.readouterr().out.strip())
    current = (out / "ca.crt").read_bytes()
    assert bundle.startswith(current.rstrip(b"\n")) and previous.strip() in bundle
    assert bundle.count(b"BEGIN CERTIFICATE") == 2


def test_audit_says_what_it_could_not_check_instead_of_a_count_of_0(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the fleet's manifests hold neither Namespaces nor webhook configurations
    assert main(["audit", "--cluster-state", FLEET]) == 0
    out = capsys.readouterr().out
    assert "Protection gaps (0)" not in out
    assert (
        "Protection gaps: not checked (Namespaces and webhook configurations could not be read; "
        "see the notes):\n"
    ) in out
    assert main(["audit", "--cluster-state", FLEET, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["gaps"] == [] and document["gapsNotChecked"] == ["Namespaces", "webhook configurations"]
