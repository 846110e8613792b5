"""e2e/realcluster/tidy-podman.sh: a build container left by a killed `podman build` makes the next
`podman rmi` of the image it holds fail (as the drain suite's image build did on a CI machine that kept
its store); the script takes such containers out and leaves podman's own containers and the images.

Real podman and buildah on an empty image made here (no registry, no base image). They are Debian's
packages that .ci/run installs (GUARDHOOK_REQUIRE_IMAGE=1 there: a missing tool fails, never skips)."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "e2e" / "realcluster" / "tidy-podman.sh"
LOCK = Path(tempfile.gettempdir()) / "guardhook-tidy-podman-test.lock"
"""Held by each test for its whole run: the script removes every build container in podman's store,
so one test's run beside another's (another xdist worker, another pytest session) would take that
test's container away."""


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=120)


@pytest.fixture
def empty_image() -> Iterator[str]:
    """A tagged empty image in podman's store (buildah from scratch, committed); removed afterwards.
    The test runs holding LOCK."""
    missing = [tool for tool in ("podman", "buildah") if shutil.which(tool) is None]
    if missing:
        reason = f"{' and '.join(missing)} not installed (Debian: apt-get install podman buildah)"
        if os.environ.get("GUARDHOOK_REQUIRE_IMAGE") == "1":
            pytest.fail(f"GUARDHOOK_REQUIRE_IMAGE=1 but {reason}")
        pytest.skip(reason)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tag = f"localhost/guardhook-tidy-test:{uuid.uuid4().hex[:8]}"
        scratch = _run("buildah", "from", "scratch").stdout.strip()
        try:
            _run("buildah", "commit", "--quiet", scratch, tag)
        finally:
            _run("buildah", "rm", scratch, check=False)
        try:
            yield tag
        finally:
            _run("podman", "rmi", "--force", tag, check=False)


def _build_container_ids() -> set[str]:
    out = _run("buildah", "containers", "--noheading", "--format", "{{.ContainerID}}").stdout
    return set(out.split())


def test_a_left_build_container_blocks_rmi_until_tidied(empty_image: str) -> None:
    left = _run("buildah", "from", empty_image).stdout.strip()  # what a killed build step leaves
    left_id = _run("buildah", "inspect", "--format", "{{.ContainerID}}", left).stdout.strip()
    blocked = _run("podman", "rmi", empty_image, check=False)
    assert blocked.returncode != 0 and "in use by a container" in blocked.stderr

    tidied = _run(str(SCRIPT))

    assert f"removed build container {left}" in tidied.stdout
    assert left_id not in _build_container_ids()
    assert _run("podman", "rmi", empty_image, check=False).returncode == 0


def test_podman_containers_and_images_are_left_alone(empty_image: str) -> None:
    name = f"guardhook-tidy-keep-{uuid.uuid4().hex[:8]}"
    _run("podman", "create", "--name", name, empty_image, "/none")
    try:
        tidied = _run(str(SCRIPT))
        assert name not in tidied.stdout
        assert _run("podman", "container", "exists", name, check=False).returncode == 0
        assert _run("podman", "image", "exists", empty_image, check=False).returncode == 0
    finally:
        _run("podman", "rm", "--force", name, check=False)
