"""The image's committed files agree with the project (issue 25), with no container needed: the lock
pins every dependency of pyproject.toml with hashes, one version is named everywhere (package,
pyproject, manifests' image reference, the Dockerfile's label default, README's install section), and
the Dockerfile keeps its promises (base image a build argument, multi-stage, non-root, no HEALTHCHECK)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from guardhook import __version__

from conftest import REPO

IMAGE = REPO / "image"
DOCKERFILE = (REPO / "Dockerfile").read_text()
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def locked(path: Path) -> dict[str, tuple[set[str], list[str]]]:
    """name -> (pinned versions, hashes) of a `--generate-hashes` requirements file."""
    pins: dict[str, tuple[set[str], list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z0-9])", path.read_text()):
        match = re.match(r"([A-Za-z0-9._-]+)==([^\s;\\]+)", block)
        if match:
            versions, hashes = pins.setdefault(canonicalize_name(match[1]), (set(), []))
            versions.add(match[2])
            hashes += re.findall(r"--hash=sha256:([0-9a-f]{64})", block)
    return pins


def test_the_lock_pins_every_runtime_and_build_dependency_with_hashes() -> None:
    pins = locked(IMAGE / "requirements.lock")
    required = PYPROJECT["project"]["dependencies"] + PYPROJECT["build-system"]["requires"]
    for line in required:
        requirement = Requirement(line)
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{requirement.name} is not in image/requirements.lock: run image/lock.sh"
        versions, _ = pins[name]
        assert any(requirement.specifier.contains(v) for v in versions), (line, versions, "run image/lock.sh")
    for name, (_, hashes) in pins.items():
        assert hashes, f"{name} has no hash"
    assert "guardhook" not in pins  # the project itself is built from the context, not fetched


def test_the_sbom_tool_is_locked_with_hashes() -> None:
    pins = locked(IMAGE / "sbom-tool.lock")
    assert "cyclonedx-bom" in pins and all(hashes for _, hashes in pins.values())


def test_one_version_everywhere() -> None:
    assert PYPROJECT["project"]["version"] == __version__
    reference = f"ghcr.io/guardhook/guardhook:{__version__}"
    deployment = yaml.safe_load((REPO / "manifests" / "base" / "deployment.yaml").read_text())
    images = [c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]]
    assert images == [reference]
    assert re.search(r"^ARG VERSION=(\S+)$", DOCKERFILE, re.M)[1] == __version__  # type: ignore[index]
    assert re.search(
        r"^IMAGE=\$\{IMAGE:-ghcr\.io/guardhook/guardhook:\$VERSION\}$", (IMAGE / "build.sh").read_text(), re.M
    )
    docs = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    assert any(reference in doc.read_text() for doc in docs), f"no install section names {reference}"


def stages() -> list[str]:
    return re.split(r"^(?=FROM )", DOCKERFILE, flags=re.M)[1:]


def test_the_dockerfile_is_multi_stage_on_a_base_argument_and_non_root() -> None:
    # Fully qualified: podman cannot ask which registry a short name means without a terminal.
    assert re.search(r"^ARG BASE=docker\.io/library/python:3\.11-slim$", DOCKERFILE, re.M)
    build, runtime, final = stages()
    assert build.startswith("FROM ${BASE} AS build\n") and runtime.startswith("FROM ${BASE} AS runtime\n")
    assert "--require-hashes" in build and "requirements.lock" in build
    assert "pip install" not in runtime and "COPY --from=build /opt/guardhook /opt/guardhook" in runtime
    # The image is the runtime stage's root, whole, in one layer: what it deletes from the base is
    # not shipped in a base layer underneath.
    assert final.startswith("FROM scratch\n") and "COPY --from=runtime / /" in final
    assert "pip install" not in final and "RUN " not in final
    users = re.findall(r"^USER (\S+)$", final, re.M)
    assert users == ["10001:10001"]
    assert not re.search(r"^HEALTHCHECK", DOCKERFILE, re.M | re.I)
    for label in ("source", "version", "licenses"):
        assert f"org.opencontainers.image.{label}=" in final


def test_the_build_context_is_only_what_the_dockerfile_copies() -> None:
    allowed = {line[1:] for line in (REPO / ".dockerignore").read_text().splitlines() if line.startswith("!")}
    copied = set()
    for line in re.findall(r"^COPY (?!--from)(.+)$", DOCKERFILE, re.M):
        copied |= set(line.split()[:-1])
    assert copied == allowed
    # What building the project reads besides its code (setuptools fails without them).
    project = PYPROJECT["project"]
    assert {project["readme"], *project.get("license-files", [])} <= copied
    assert "*" in (REPO / ".dockerignore").read_text().splitlines()


def test_nothing_imports_the_kubernetes_asyncio_client_the_image_leaves_out() -> None:
    """The Dockerfile deletes kubernetes/aio (~70 MB): neither guardhook nor the rest of the client
    may import it."""
    import kubernetes

    client = Path(kubernetes.__file__).parent
    sources = [
        *(REPO / "guardhook").rglob("*.py"),
        *(p for p in client.rglob("*.py") if "aio" not in p.parts),
    ]
    importing = re.compile(
        r"^\s*(from\s+kubernetes\.aio\b|import\s+kubernetes\.aio\b|from\s+\.+\s+import\s+aio\b)", re.M
    )
    assert [p for p in sources if importing.search(p.read_text(encoding="utf-8"))] == []
    assert 'rm -rf "$site/kubernetes/aio"' in DOCKERFILE
