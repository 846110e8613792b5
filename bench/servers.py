"""Start `guardhook serve` and a bare allow-all webhook under the same gunicorn/TLS settings, on
127.0.0.1 at free ports, for the benchmarks. Both stop when the `with` block ends."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GUARDHOOK_FIXTURES", REPO.parent / "shared" / "fixtures"))


@dataclass(frozen=True)
class Running:
    """A server process: its master pid, address and the CA file that verifies it."""

    name: str
    pid: int
    host: str
    port: int
    ca: Path

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))

    def connection(self, timeout: float = 30) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(self.host, self.port, context=self.context(), timeout=timeout)


@dataclass
class Connections:
    """The tally of the connections a benchmark holds open to a server: opened, closed by the
    server, failed to open; `stop` tells the holder to close them."""

    opened: int = 0
    closed_by_server: int = 0
    connect_failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)


def percentile(values: list[float], q: float) -> float:
    """The `q` quantile of `values` (the nearest rank at or below), NaN when there are none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def served_code() -> str:
    """The folder of the guardhook package `serve` runs (PYTHONPATH first, then the installed
    one), as the benchmarks print it: a before/after comparison names the code it measured."""
    with tempfile.TemporaryDirectory(prefix="bench-which-") as tmp:
        found = subprocess.run(
            [sys.executable, "-c", "import guardhook, os; print(os.path.dirname(guardhook.__file__))"],
            capture_output=True,
            text=True,
            check=True,
            cwd=tmp,
            env=_clean_env(Path(tmp)),
        )
    return found.stdout.strip()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _clean_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(home)
    return env


def _wait_ready(process: subprocess.Popen[bytes], running: Running, log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{running.name} exited {process.returncode}:\n{log.read_text()}")
        if running.ca.exists():
            try:
                connection = running.connection(timeout=2)
                connection.request("GET", "/healthz")
                if connection.getresponse().status == 200:
                    connection.close()
                    return
            except OSError:
                pass
        time.sleep(0.1)
    raise RuntimeError(f"{running.name} did not start:\n{log.read_text()}")


@contextmanager
def serve(kind: str, threads: int = 8, extra: Sequence[str] = ()) -> Iterator[Running]:
    """Run `guardhook serve` (kind "guardhook"), bench/bare.py's flask app (kind "bare") or its
    plain WSGI callable (kind "wsgi") until the block ends; `extra` are more command-line flags."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp:
        folder = Path(tmp)
        port = free_port()
        certs = folder / "certs"
        if kind == "guardhook":
            args = [sys.executable, "-m", "guardhook", "serve"]
        else:
            args = [sys.executable, str(Path(__file__).with_name("bare.py"))]
            args += ["--wsgi"] if kind == "wsgi" else []
        args += [
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--cert-dir",
            str(certs),
            "--threads",
            str(threads),
            *extra,
        ]
        log = folder / "serve.log"
        with log.open("wb") as out:
            # cwd is the temporary folder: `python -m` puts the cwd first on sys.path, so run from
            # a checkout it would serve that checkout's guardhook whatever PYTHONPATH names.
            process = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, env=_clean_env(folder), cwd=folder
            )
        running = Running(kind, process.pid, "127.0.0.1", port, certs / "ca.crt")
        try:
            _wait_ready(process, running, log)
            yield running
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
