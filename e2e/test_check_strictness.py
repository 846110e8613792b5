"""`guardhook check` as strict as `kubectl apply` (issue 50), asked of a real API server: every
fixture in tests/manifests/strictness that `check` calls Invalid for a schema reason
(`invalid-*`) is refused by `kubectl apply --dry-run=server --validate=strict`, and every one it
passes (`valid-*`) is accepted. tests/test_check_schema.py pins `check`'s verdicts; this pins the
API server's, so the two cannot drift apart unseen. Server-side dry runs: nothing is created."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster import REPO, Cluster

STRICTNESS = REPO / "tests" / "manifests" / "strictness"


@pytest.mark.parametrize("path", sorted(STRICTNESS.glob("*.yaml")), ids=lambda p: p.stem)
def test_the_api_server_agrees_with_check(cluster: Cluster, path: Path) -> None:
    done = cluster.kubectl(
        "apply", "-n", cluster.namespace, "--dry-run=server", "--validate=strict", "-f", str(path)
    )
    if path.name.startswith("invalid-"):
        assert done.returncode != 0, done.stdout
        assert "denied the request" not in done.stderr, done.stderr  # the schema refused it, not a policy
    else:
        assert done.returncode == 0, done.stderr
