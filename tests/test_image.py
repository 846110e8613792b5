"""The container image (issue 25) runs as the README says: `guardhook serve` in the image, on
127.0.0.1 with the sample fleet and a read-only root filesystem, answers /healthz, /readyz and a
captured review on /validate over TLS (the client verifying the CA) exactly as `guardhook review` does
offline; it runs as uid 10001, carries its OCI labels and has no pip or compiler.

The image is the one image/build.sh built, named by GUARDHOOK_IMAGE (image/test.sh builds and sets it;
so does .ci/run, with GUARDHOOK_REQUIRE_IMAGE=1 so a missing image fails CI instead of skipping)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from packaging.utils import canonicalize_name
from test_image_files import IMAGE as IMAGE_FILES
from test_image_files import locked

from guardhook import __version__

from conftest import REPO, REVIEWS, free_port, load_review

IMAGE = os.environ.get("GUARDHOOK_IMAGE", "")
# Where image/build.sh wrote the OCI archive and the SBOM (its OUT).
OUT = REPO / os.environ.get("GUARDHOOK_IMAGE_OUT", "dist/image")
REVIEW = "s01-worker-delete.validating"


def _missing() -> str | None:
    if shutil.which("podman") is None:
        return "podman is not installed (Debian: apt-get install podman runc)"
    if not IMAGE:
        return "GUARDHOOK_IMAGE is not set (image/test.sh builds the image and runs these tests)"
    if subprocess.run(["podman", "image", "exists", IMAGE], check=False).returncode != 0:
        return f"image {IMAGE} is not in podman's store (image/build.sh builds it)"
    return None


@pytest.fixture(scope="module", autouse=True)
def _image_present() -> None:
    missing = _missing()
    if missing and os.environ.get("GUARDHOOK_REQUIRE_IMAGE") == "1":
        pytest.fail(f"GUARDHOOK_REQUIRE_IMAGE=1 but {missing}")
    if missing:
        pytest.skip(missing)


def podman_args() -> list[str]:
    """The run arguments of image/podman-args.sh: runc when installed (crun refuses some kernels'
    cgroups), ulimits no higher than our hard limits (podman's defaults may exceed them)."""
    hard_files = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    hard_procs = resource.getrlimit(resource.RLIMIT_NPROC)[1]
    files = min(20000, hard_files if hard_files != resource.RLIM_INFINITY else 20000)
    procs = min(32768, hard_procs if hard_procs != resource.RLIM_INFINITY else 32768)
    args = ["--ulimit", f"nofile={files}:{files}", "--ulimit", f"nproc={procs}:{procs}"]
    runtime = os.environ.get("PODMAN_RUNTIME", "runc" if shutil.which("runc") else "")
    return args + (["--runtime", runtime] if runtime else [])


def podman(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], capture_output=True, text=True, check=check, timeout=timeout)


def run_in_image(*args: str, entrypoint: str | None = None) -> subprocess.CompletedProcess[str]:
    """A throwaway container of the image (no network, read-only root, the image's own user)."""
    chosen = ["--entrypoint", entrypoint] if entrypoint else []
    return podman("run", "--rm", *podman_args(), "--network", "none", "--read-only", *chosen, IMAGE, *args)


class Container:
    """`guardhook serve` running in the image on 127.0.0.1:port with the host's network."""

    def __init__(self, name: str, url: str, ca: Path) -> None:
        self.name, self.url = name, url
        self.session = requests.Session()
        self.session.trust_env = False  # REQUESTS_CA_BUNDLE would override verify
        self.session.verify = str(ca)

    def get(self, path: str) -> requests.Response:
        return self.session.get(self.url + path, timeout=5)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        """Run Python inside the serving container, as its user."""
        return podman("exec", self.name, "python", "-c", code, check=False)

    def logs(self) -> str:
        result = podman("logs", self.name, check=False)
        return result.stdout + result.stderr


@pytest.fixture(scope="module")
def container(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    """The image serving the sample fleet: certificates from `guardhook certs` mounted read-only at
    /certs (the key readable by uid 10001, as fsGroup makes it in manifests/base), /tmp a tmpfs like the
    manifests' emptyDir, everything else read-only."""
    certs = tmp_path_factory.mktemp("image") / "certs"
    subprocess.run(
        [sys.executable, "-m", "guardhook", "certs", "--out", str(certs), "--dns", "127.0.0.1"],
        check=True,
        capture_output=True,
        env={**os.environ, "HOME": str(certs.parent)},
    )
    for name in ("tls.crt", "tls.key", "ca.crt"):
        (certs / name).chmod(0o644)
    port = free_port()
    name = f"guardhook-test-{uuid.uuid4().hex[:8]}"
    podman(
        "run", "--detach", "--name", name, *podman_args(), "--network", "host",
        "--read-only", "--read-only-tmpfs=false", "--tmpfs", "/tmp:rw,size=16m,mode=1777",
        "-v", f"{certs}:/certs:ro", IMAGE,
        "serve", "--host", "127.0.0.1", "--port", str(port), "--cert-dir", "/certs", "--threads", "4",
    )  # fmt: skip
    running = Container(name, f"https://127.0.0.1:{port}", certs / "ca.crt")
    try:
        _wait_ready(running)
        yield running
    finally:
        podman("rm", "--force", "--time", "5", name, check=False)


def _wait_ready(running: Container) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        state = podman("inspect", "--format", "{{.State.Running}}", running.name, check=False).stdout.strip()
        if state == "false":
            raise AssertionError(f"the container exited:\n{running.logs()}")
        try:
            if running.get("/readyz").status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.2)
    raise AssertionError(f"the container did not become ready:\n{running.logs()}")


def test_healthz_and_readyz_answer_over_tls_verifying_the_ca(container: Container) -> None:
    assert container.get("/healthz").status_code == 200
    assert container.get("/readyz").status_code == 200
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(container.url + "/healthz", timeout=5, verify=True)  # not a publicly trusted cert


def test_validate_answers_a_captured_review_as_the_offline_engine_does(container: Container) -> None:
    body = load_review(REVIEW)
    answer = container.session.post(
        container.url + "/validate",
        data=json.dumps(body),
        headers={"Content-Type": "application/json"},
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    served: dict[str, Any] = answer.json()["response"]
    offline = subprocess.run(
        [sys.executable, "-m", "guardhook", "review", str(REVIEWS / f"{REVIEW}.json")],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")},
    )
    expected = json.loads(offline.stdout)["response"]
    assert served["uid"] == body["request"]["uid"]
    assert served == expected
    # What the README says this request gets.
    assert served["allowed"] is False and served["status"]["code"] == 403
    assert (
        served["status"]["message"].startswith("[worker-delete]")
        and "llm-xl-0" in served["status"]["message"]
    )


def test_serves_as_uid_10001_on_a_read_only_root(container: Container) -> None:
    ids = container.python("import os; print(os.getuid(), os.getgid())")
    assert ids.stdout.split() == ["10001", "10001"], ids.stderr
    server_uid = container.python(
        "print([l.split()[1] for l in open('/proc/1/status') if l.startswith('Uid:')][0])"
    )
    assert server_uid.stdout.strip() == "10001"
    for path in ("/opt/guardhook/x", "/etc/x", "/x"):
        write = container.python(f"open({path!r}, 'w')")
        assert write.returncode != 0 and "Read-only file system" in write.stderr, (path, write.stderr)
    assert container.python("open('/tmp/x', 'w').write('ok')").returncode == 0  # the emptyDir stand-in


def test_image_user_labels_and_no_healthcheck() -> None:
    config = json.loads(podman("image", "inspect", "--format", "{{json .Config}}", IMAGE).stdout)
    assert config["User"] == "10001:10001"
    labels = config["Labels"]
    assert labels["org.opencontainers.image.version"] == __version__
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert not config.get("Healthcheck"), "Kubernetes probes do health checks, not the image"
    assert podman("image", "inspect", "--format", "{{json .HealthCheck}}", IMAGE).stdout.strip() == "null"


def test_guardhook_version_inside_the_image() -> None:
    assert run_in_image("--version").stdout.strip() == f"guardhook {__version__}"


def test_no_pip_build_backend_or_compiler_in_the_image() -> None:
    probe = (
        "import glob, importlib.util, shutil; "
        "print([m for m in ('pip', 'setuptools') if importlib.util.find_spec(m)]); "
        "print([t for t in ('pip', 'pip3', 'cc', 'gcc', 'c++', 'g++', 'clang') if shutil.which(t)]); "
        "print(glob.glob('/usr/**/pip-*.whl', recursive=True))"
    )
    found = run_in_image("-c", probe, entrypoint="python").stdout.splitlines()
    assert found == ["[]", "[]", "[]"]


def test_check_inside_the_image_reads_the_one_schema_version_kept() -> None:
    """The image keeps only the kubernetes-validate schemas `check` reads (the Dockerfile drops the
    other Kubernetes versions, ~100 MB): `check` still refuses a mistyped Deployment field there."""
    from guardhook.commands.schema import schema_dir_name

    manifest = (
        "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  replicaz: 1\n"
        "  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
        "    spec: {containers: [{name: c, image: i}]}\n"
    )
    done = subprocess.run(
        [
            "podman",
            "run",
            "--rm",
            "-i",
            *podman_args(),
            "--network",
            "none",
            "--read-only",
            IMAGE,
            "check",
            "-",
        ],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1 and "Invalid [schema]" in done.stdout + done.stderr, done
    probe = (
        "import importlib.resources as r; "
        "d = r.files('kubernetes_validate').joinpath('kubernetes-json-schema'); "
        "print(sorted(p.name for p in d.iterdir()))"
    )
    kept = run_in_image("-c", probe, entrypoint="python").stdout.strip()
    assert kept == str([schema_dir_name()])


def test_no_perl_modules_and_no_numpy_test_suites_in_the_image() -> None:
    """What never runs stays out: Perl's modules and library (Debian's usrmerge needed them, at
    install; the essential perl-base dpkg uses stays), numpy's tests."""
    probe = (
        "import glob, numpy; "
        "perl = glob.glob('/usr/share/perl/*') + glob.glob('/usr/lib/*/libperl.so*'); "
        "tests = glob.glob('/opt/guardhook/lib/python3*/site-packages/numpy/**/tests', recursive=True); "
        "print(perl, tests)"
    )
    assert run_in_image("-c", probe, entrypoint="python").stdout.split() == ["[]", "[]"]


def test_no_development_parts_of_python_or_the_dependencies_in_the_image() -> None:
    """What never runs stays out (the Dockerfile's runtime stage): the standard library's tools
    for development and the desktop and its sources (it runs from bytecode), the dependencies'
    own test suites, numpy's build tools and the RECORD lines of files no longer there."""
    probe = (
        "import glob, importlib.util, sys, sysconfig; "
        "stdlib = sysconfig.get_paths()['stdlib']; "
        "gone = ('lib2to3', 'distutils', 'idlelib', 'tkinter', 'pydoc_data', 'ensurepip', 'test', "
        "'numpy.f2py', 'numpy.distutils'); "
        "print([m for m in gone if importlib.util.find_spec(m)]); "
        "print(glob.glob(stdlib + '/**/*.py', recursive=True)[:3]); "
        "site = glob.glob('/opt/guardhook/lib/python3*/site-packages')[0]; "
        "print([p for p in glob.glob(site + '/*/**/tests/', recursive=True) if '/guardhook/' not in p][:3]); "
        "import ssl, json, email, asyncio, concurrent.futures; "
        "print(sum(1 for l in open(glob.glob(site + '/kubernetes_validate-*.dist-info/RECORD')[0])) < 2000)"
    )
    assert run_in_image("-c", probe, entrypoint="python").stdout.split() == ["[]", "[]", "[]", "True"]


def installed() -> dict[str, str]:
    """The image's Python environment: canonical distribution name -> version."""
    probe = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    found = json.loads(run_in_image("-c", probe, entrypoint="python").stdout)
    return {canonicalize_name(name): version for name, version in found.items()}


def test_the_environment_is_exactly_the_lock() -> None:
    pins = locked(IMAGE_FILES / "requirements.lock")
    expected = {name: versions for name, (versions, _) in pins.items() if name != "setuptools"}
    environment = installed()
    assert environment.pop("guardhook") == __version__
    assert set(environment) == set(expected)
    assert all(version in expected[name] for name, version in environment.items())


def test_the_release_archive_and_the_sbom_describe_this_image() -> None:
    archive = OUT / f"guardhook-{__version__}.oci.tar"
    with tarfile.open(archive) as tar:

        def blob(name: str) -> Any:
            return json.load(tar.extractfile(name))  # type: ignore[arg-type]

        assert blob("oci-layout")["imageLayoutVersion"] == "1.0.0"
        [manifest] = blob("index.json")["manifests"]
        config = blob("blobs/sha256/" + manifest["digest"].removeprefix("sha256:"))["config"]["digest"]
    image_id = podman("image", "inspect", "--format", "{{.Id}}", IMAGE).stdout.strip()
    assert config == f"sha256:{image_id}", "the archive holds another image"
    assert manifest["annotations"]["org.opencontainers.image.ref.name"]  # a tag: `podman load` names it
    sbom = json.loads((OUT / f"guardhook-{__version__}.cdx.json").read_text())
    assert sbom["bomFormat"] == "CycloneDX"
    root = sbom["metadata"]["component"]
    assert (root["name"], root["version"]) == ("guardhook", __version__)
    listed = {canonicalize_name(c["name"]): c["version"] for c in sbom["components"]}
    environment = installed()
    environment.pop("guardhook")
    assert listed == environment
