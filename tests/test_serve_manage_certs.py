"""`guardhook serve --manage-certs` refuses what it cannot use before anything starts (issue 49): no
live cluster, a renewal point not below the validities, a duration it cannot read; each exits 2
with one line naming the flag."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import serve_refused

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        (
            ["--manage-certs", "guardhook-tls", "--cluster-state", "{fleet}"],
            "--manage-certs needs a live cluster",
        ),
        (
            [
                "--manage-certs",
                "guardhook-tls",
                "--kubeconfig",
                "{kubeconfig}",
                "--cert-renew-before",
                "9000h",
            ],
            "--cert-renew-before (375 days, 0:00:00) must be less than --cert-validity",
        ),
        (
            ["--manage-certs", "guardhook-tls", "--kubeconfig", "{kubeconfig}", "--cert-validity", "1y"],
            "'1y' is not a duration",
        ),
    ],
)
def test_manage_certs_refuses_what_it_cannot_use(tmp_path: Path, flags: list[str], reason: str) -> None:
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("apiVersion: v1\nkind: List\nitems: []\n")
    given = [f.format(kubeconfig=tmp_path / "kubeconfig", fleet=fleet) for f in flags]
    done = serve_refused(tmp_path, *given)
    assert done.returncode == 2, done.stderr
    assert reason in done.stderr.splitlines()[-1], done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "certs").exists()  # nothing made before the refusal
