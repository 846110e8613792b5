"""docs/operations.md states the supported Kubernetes versions (issue 15 item 16), and they agree with
what the manifests use: matchConditions need 1.28 (beta) and are GA in 1.30."""

from __future__ import annotations

import re

from docs_helpers import DOCS, section
from test_manifests import MANIFESTS

from kustomize_lite import render


def supported_section() -> str:
    return section(DOCS / "operations.md", "### Supported Kubernetes versions")


def test_the_docs_state_the_minimum_and_recommended_kubernetes_versions() -> None:
    section = supported_section()
    minimum = re.search(r"\*\*1\.(\d+) or newer; 1\.(\d+)\+ recommended\.\*\*", section)
    assert minimum, section[:200]
    uses_match_conditions = any(
        hook.get("matchConditions")
        for obj in render(MANIFESTS)
        if obj["kind"].endswith("WebhookConfiguration")
        for hook in obj["webhooks"]
    )
    assert uses_match_conditions
    assert int(minimum.group(1)) >= 28  # matchConditions: beta (on by default) in 1.28
    assert int(minimum.group(2)) >= 30  # GA in 1.30
    assert "matchConditions" in section and "1.30" in section
