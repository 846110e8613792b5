"""README.md's Helm install lines say truly whether they need cert-manager: the comment on each
`helm install` matches the `certs.source` it installs with (the chart's default, self-managed,
needs none). The README once called the plain install "with cert-manager" and sent users without
cert-manager to `self-signed`, which GitOps renders cannot keep."""

from __future__ import annotations

import re

import yaml
from docs_helpers import README, section

from conftest import REPO


def helm_installs() -> list[tuple[str, str]]:
    """Each `helm install` of the README's Install section: (the command, its `#` comment), with
    backslash continuations joined."""
    text = section(README, "## Install")
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        if line.startswith("helm install"):
            command, _, comment = line.partition("#")
            found.append((command, comment))
    return found


def test_each_helm_install_comment_says_whether_it_needs_cert_manager() -> None:
    default = yaml.safe_load((REPO / "charts/guardhook/values.yaml").read_text())["certs"]["source"]
    installs = helm_installs()
    assert installs, "the README's Install section shows no helm install"
    for command, comment in installs:
        given = re.search(r"--set certs\.source=(\S+)", command)
        source = given.group(1) if given else default
        needs = re.search(r"\bwith cert-manager\b", comment) is not None
        assert needs == (source == "cert-manager"), (command, comment, source)
        if source != "cert-manager":
            assert "no cert-manager" in comment or "without cert-manager" in comment, (command, comment)
