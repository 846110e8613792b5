"""Certificate rotation without a restart, the way the kubelet rotates a mounted secret: the
files are symlinks through `..data`, swapped atomically to a new timestamped folder. New
connections get the new certificate; a connection kept alive from before keeps working."""

from __future__ import annotations

import http.client
import json
import os
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509

from guardhook.server.certs import CA_FILE, CERT_FILE, KEY_FILE, generate

from conftest import Server, load_review, start_server

NAMES = ["localhost", "127.0.0.1"]


def kubelet_secret_volume(folder: Path) -> None:
    """Lay out `folder` like a secret volume: tls.crt -> ..data/tls.crt, ..data -> ..v1/."""
    folder.mkdir(parents=True)
    generate(folder / "..v1", NAMES)
    os.symlink("..v1", folder / "..data")
    for name in (CA_FILE, CERT_FILE, KEY_FILE):
        os.symlink(f"..data/{name}", folder / name)


def kubelet_rotate(folder: Path, version: str) -> Path:
    """Write a new certificate set (a new CA too) and swap ..data to it atomically."""
    generate(folder / version, NAMES)
    os.symlink(version, folder / "..data_tmp")
    os.replace(folder / "..data_tmp", folder / "..data")
    return folder / version


def connect(server: Server, cafile: Path) -> http.client.HTTPSConnection:
    host, port = server.url.removeprefix("https://").split(":")
    context = ssl.create_default_context(cafile=str(cafile))
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
    connection.connect()
    return connection


def served_certificate(connection: http.client.HTTPSConnection) -> x509.Certificate:
    assert isinstance(connection.sock, ssl.SSLSocket)
    der = connection.sock.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def validate(connection: http.client.HTTPSConnection) -> bool:
    """POST a captured worker delete over `connection`; return `allowed` (False: denied as expected)."""
    body = json.dumps(load_review("s01-worker-delete.validating"))
    connection.request("POST", "/validate", body, {"Content-Type": "application/json"})
    answer = connection.getresponse()
    assert answer.status == 200
    return bool(json.loads(answer.read())["response"]["allowed"])


def pem_certificate(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


@pytest.fixture
def rotating(tmp_path: Path) -> Iterator[tuple[Server, Path]]:
    certs = tmp_path / "certs"
    kubelet_secret_volume(certs)
    server = start_server(tmp_path)  # serves from tmp_path/certs, the symlinked layout
    yield server, certs
    server.stop()


def test_new_connections_get_the_rotated_certificate_and_old_ones_keep_working(
    rotating: tuple[Server, Path],
) -> None:
    server, certs = rotating
    old_ca = certs / "..v1" / CA_FILE
    kept = connect(server, old_ca)
    assert validate(kept) is False
    assert served_certificate(kept) == pem_certificate(certs / "..v1" / CERT_FILE)

    new = kubelet_rotate(certs, "..v2")

    fresh = connect(server, new / CA_FILE)
    assert served_certificate(fresh) == pem_certificate(new / CERT_FILE)
    assert validate(fresh) is False
    with pytest.raises(ssl.SSLCertVerificationError):
        connect(server, old_ca)  # the old certificate is no longer handed out
    kept_socket = kept.sock
    for _ in range(3):
        assert validate(kept) is False  # the connection opened before rotation still serves
    assert kept.sock is kept_socket
    kept.close()
    fresh.close()


def test_an_unreadable_rotation_keeps_serving_the_last_good_certificate(
    rotating: tuple[Server, Path],
) -> None:
    server, certs = rotating
    broken = certs / "..broken"
    broken.mkdir()
    (broken / CERT_FILE).write_text("not a certificate\n")
    (broken / KEY_FILE).write_text("not a key\n")
    (broken / CA_FILE).write_bytes((certs / "..v1" / CA_FILE).read_bytes())
    os.symlink("..broken", certs / "..data_tmp")
    os.replace(certs / "..data_tmp", certs / "..data")

    connection = connect(server, certs / "..v1" / CA_FILE)
    assert served_certificate(connection) == pem_certificate(certs / "..v1" / CERT_FILE)
    assert validate(connection) is False
    connection.close()
    assert server.process.poll() is None
