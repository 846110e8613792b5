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


def metric_lines(server: Server, prefix: str) -> list[str]:
    """/metrics lines starting with `prefix`, on a new connection (one kept alive from before a
    SIGHUP may still reach the old worker while it stops)."""
    connection = connect(server, server.ca)
    connection.request("GET", "/metrics")
    answer = connection.getresponse()
    assert answer.status == 200
    text = answer.read().decode()
    connection.close()
    return [line for line in text.splitlines() if line.startswith(prefix)]


def new_connections_serve(server: Server, within: float = 20.0) -> None:
    """A fresh verifying connection gets /healthz 200 (retried while a new worker boots)."""
    import time

    deadline = time.monotonic() + within
    while True:
        try:
            connection = connect(server, server.ca)
            connection.request("GET", "/healthz")
            assert connection.getresponse().status == 200
            connection.close()
            return
        except (ConnectionError, ssl.SSLError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_sighup_with_garbage_certificate_files_keeps_serving_the_last_good_pair(tmp_path: Path) -> None:
    import signal

    server = start_server(tmp_path)
    try:
        served = pem_certificate(server.cert_dir / CERT_FILE)
        kept = connect(server, server.ca)
        assert validate(kept) is False
        (server.cert_dir / CERT_FILE).write_text("garbage\n")
        (server.cert_dir / KEY_FILE).write_text("garbage\n")
        server.process.send_signal(signal.SIGHUP)
        server.logged("Booting worker", within=5)
        log = server.logged(f"{server.cert_dir / CERT_FILE} is not a PEM certificate", within=20)
        assert "keeping the previous serving certificate" in log
        new_connections_serve(server)
        fresh = connect(server, server.ca)
        assert served_certificate(fresh) == served
        assert validate(fresh) is False
        fresh.close()
        kept.close()
        failures = metric_lines(server, 'guardhook_certificate_reloads_total{result="failure"}')
        assert failures and float(failures[0].split()[-1]) >= 1
        assert server.process.poll() is None
    finally:
        server.stop()


def test_deleted_certificate_files_are_logged_counted_and_keep_the_expiry_gauge(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    try:
        served = pem_certificate(server.cert_dir / CERT_FILE)
        (server.cert_dir / CERT_FILE).unlink()
        (server.cert_dir / KEY_FILE).unlink()
        connection = connect(server, server.ca)  # a new connection: the files are looked at
        assert served_certificate(connection) == served
        assert validate(connection) is False
        connection.close()
        log = server.logged(f"cannot read {server.cert_dir / CERT_FILE}")
        assert "keeping the previous serving certificate" in log
        failures = metric_lines(server, 'guardhook_certificate_reloads_total{result="failure"}')
        assert failures and float(failures[0].split()[-1]) == 1
        gauge = metric_lines(server, 'guardhook_certificate_expiry_timestamp_seconds{certificate="serving"}')
        assert gauge and float(gauge[0].split()[-1]) == served.not_valid_after_utc.timestamp()
    finally:
        server.stop()


def test_a_garbage_certificate_is_named_with_what_is_wrong(tmp_path: Path) -> None:
    from guardhook.server.certs import CertificateError, ensure_certs

    paths = generate(tmp_path, NAMES)
    other = generate(tmp_path / "other", NAMES)
    os.replace(other.key, paths.key)
    with pytest.raises(CertificateError, match=f"{paths.key} is not the private key of {paths.cert}"):
        ensure_certs(tmp_path)
    paths.cert.write_text("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n")
    with pytest.raises(CertificateError, match=f"{paths.cert} is not a PEM certificate"):
        ensure_certs(tmp_path)


def test_serve_says_it_generated_certificates_and_which_dns_names_an_existing_one_lacks(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A first run's curl needs to know where the CA went; a later `serve --dns NAME` on the same
    # folder kept the old certificate and dropped NAME in silence (clients calling it then failed
    # verification with no word in the log).
    import logging

    from guardhook.server.certs import ensure_certs

    folder = tmp_path / "certs"
    with caplog.at_level(logging.INFO, "guardhook.server.certs"):
        ensure_certs(folder, ["web.example", "10.0.0.1"])
    assert (
        f"no certificates in {folder}: generated a CA ({folder / CA_FILE}) and a serving certificate "
        "for localhost, 127.0.0.1, web.example, 10.0.0.1"
    ) in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, "guardhook.server.certs"):
        ensure_certs(folder, ["WEB.example", "10.0.0.1", "localhost"])  # all named: no warning
    assert "WARNING" not in caplog.text and "does not name" not in caplog.text
    with caplog.at_level(logging.INFO, "guardhook.server.certs"):
        ensure_certs(folder, ["web.example", "api.example", "10.0.0.2"])
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.getMessage().startswith(
        f"{folder / CERT_FILE} does not name api.example, 10.0.0.2: --dns applies only to a "
        "certificate serve generates into an empty folder"
    )


def test_a_wildcard_san_names_one_label_below_it(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from guardhook.server.certs import ensure_certs

    generate(tmp_path, ["*.svc.example"])
    with caplog.at_level(logging.WARNING, "guardhook.server.certs"):
        ensure_certs(tmp_path, ["a.svc.example"])
        assert caplog.records == []
        ensure_certs(tmp_path, ["a.b.svc.example"])
    assert "does not name a.b.svc.example" in caplog.text
