"""Webhook certificates: a CA and an ECDSA P-256 serving certificate, written as the Kubernetes
TLS secret keys (`ca.crt`, `tls.crt`, `tls.key`), and a TLS context that follows rotated files.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import errno
import ipaddress
import logging
import os
import secrets
import ssl
import textwrap
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from guardhook.pki import CA_FILE, CERT_FILE, KEY_FILE, new_ca, new_serving, pem, pem_key, same_key
from guardhook.server.tlssock import bound_io

log = logging.getLogger(__name__)

DEFAULT_NAMES = ("localhost", "127.0.0.1")
CA_DAYS = 3650
SERVING_DAYS = 365


class CertificateError(RuntimeError):
    """Certificates are missing where they must not be generated, or cannot be loaded."""


@dataclass(frozen=True)
class CertPaths:
    """The three files of a certificate folder, and the CA that client certificates must chain to
    when the server requires them (`serve --client-ca-file`; None: no client authentication)."""

    folder: Path
    client_ca: Path | None = None

    @property
    def ca(self) -> Path:
        return self.folder / CA_FILE

    @property
    def cert(self) -> Path:
        return self.folder / CERT_FILE

    @property
    def key(self) -> Path:
        return self.folder / KEY_FILE

    def complete(self) -> bool:
        return self.cert.is_file() and self.key.is_file()


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the API server uses to reach a webhook Service: svc, svc.ns, svc.ns.svc(.cluster.local)."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def generate(folder: str | Path, names: Iterable[str]) -> CertPaths:
    """Write a new CA and a serving certificate for `names` (DNS names or IP addresses) into
    `folder` (created if missing; the key is written mode 0600). Returns the paths. Raises
    CertificateError when the folder cannot be created or written."""
    paths = CertPaths(Path(folder))
    _refuse_non_folder(paths.folder)
    try:
        paths.folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CertificateError(
            f"cannot create the certificate folder {paths.folder}: {exc.strerror or exc}"
        ) from exc
    names = list(dict.fromkeys(names))
    now = _now()
    ca_cert, ca_key = new_ca(now, datetime.timedelta(days=CA_DAYS))
    cert, key = new_serving(ca_cert, ca_key, names, now, datetime.timedelta(days=SERVING_DAYS))
    try:
        write_atomically(paths.ca, pem(ca_cert))
        write_atomically(paths.key, pem_key(key), private=True)
        write_atomically(paths.cert, pem(cert))
    except OSError as exc:
        raise CertificateError(
            f"cannot write certificates into {paths.folder}: {exc.strerror or exc}"
        ) from exc
    return paths


def _refuse_non_folder(folder: Path) -> None:
    """Raise CertificateError when `folder` exists and is not a folder (mkdir would only say "File
    exists")."""
    if folder.exists() and not folder.is_dir():
        raise CertificateError(
            f"{folder} is a file, not a folder: the certificates are the files ca.crt, tls.crt and tls.key "
            "inside a folder; give that folder"
        )


def write_atomically(path: Path, data: bytes, private: bool = False) -> None:
    """Write `data` to `path` atomically: into a new file of a fresh random name beside it, made with
    O_CREAT|O_EXCL|O_NOFOLLOW (so nothing already there, a pre-made file or a symlink planted where
    a fixed temporary name would be, is reused or followed), mode 0600 for a key (0644 otherwise),
    flushed to disk, then renamed over `path` (a symlink at `path` is replaced, never followed).
    Raises OSError; the temporary file is removed on failure."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    mode = 0o600 if private else 0o644
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            fd = os.open(tmp, flags, mode)
            break
        except FileExistsError:
            continue  # a name taken by chance (or planted): draw another
    else:
        raise FileExistsError(errno.EEXIST, "no free temporary name", str(path.parent))
    try:
        with os.fdopen(fd, "wb") as out:
            os.fchmod(out.fileno(), mode)  # the exact mode, whatever the umask
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def ensure_certs(folder: str | Path, extra_names: Iterable[str] = (), in_cluster: bool = False) -> CertPaths:
    """Use the certificates in `folder`, generating a self-signed set (SANs localhost, 127.0.0.1
    and `extra_names`) when absent. Raises CertificateError when absent inside a cluster, where
    each replica would otherwise invent its own CA, when only some of the files are there (never
    overwritten), and when tls.crt/tls.key do not load as a certificate and its key."""
    paths = CertPaths(Path(folder))
    _refuse_non_folder(paths.folder)
    extra_names = list(extra_names)
    if paths.complete():
        _check_loadable(paths)
        _warn_unnamed(paths, extra_names)
        return paths
    present = [p.name for p in (paths.ca, paths.cert, paths.key) if p.exists()]
    if present:
        raise CertificateError(
            f"{paths.folder} holds {', '.join(present)} but not both {CERT_FILE} and {KEY_FILE}; refusing to "
            "overwrite what is there: add the missing files, or remove the rest to have a self-signed set "
            "generated"
        )
    if in_cluster:
        raise CertificateError(
            f"no {CERT_FILE}/{KEY_FILE} in {paths.folder}: inside a cluster the serving certificate must be "
            "mounted (cert-manager or `guardhook certs`); refusing to invent a CA per replica"
        )
    names = list(dict.fromkeys([*DEFAULT_NAMES, *extra_names]))
    generate(paths.folder, names)
    # Said, since a first run's curl needs it: `curl --cacert <folder>/ca.crt https://localhost:…`.
    log.info(
        "no certificates in %s: generated a CA (%s) and a serving certificate for %s",
        paths.folder,
        paths.ca,
        ", ".join(names),
    )
    return paths


def _warn_unnamed(paths: CertPaths, names: list[str]) -> None:
    """Log a WARNING for each of `names` (`serve --dns`) that the certificate already in the folder
    does not name: --dns shapes only a certificate serve generates, so a name added on a later run
    would otherwise be dropped in silence and clients calling it would fail verification."""
    if not names:
        return
    cert = x509.load_pem_x509_certificates(paths.cert.read_bytes())[0]
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        sans = x509.SubjectAlternativeName([])
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    dns = [d.lower() for d in sans.get_values_for_type(x509.DNSName)]
    missing = [name for name in names if not _named(name, ips, dns)]
    if missing:
        log.warning(
            "%s does not name %s: --dns applies only to a certificate serve generates into an empty "
            "folder; remove the folder's ca.crt, tls.crt and tls.key to have them generated again "
            "(clients must then trust the new ca.crt), or give a certificate that names them",
            paths.cert,
            ", ".join(missing),
        )


def _named(name: str, ips: set[str], dns: list[str]) -> bool:
    """Whether a certificate with these IP and DNS SANs names `name` (a `*.` SAN covers one label)."""
    try:
        return str(ipaddress.ip_address(name)) in ips
    except ValueError:
        pass
    name = name.lower()
    return name in dns or any(
        san.startswith("*.") and "." in name and name.split(".", 1)[1] == san[2:] for san in dns
    )


def _check_loadable(paths: CertPaths) -> None:
    # Fail at start, not on every TLS handshake after gunicorn is already listening.
    try:
        RotatingServerContext(paths)
    except (OSError, ssl.SSLError) as exc:
        raise CertificateError(
            f"cannot load {paths.cert} and {paths.key} as a certificate and its private key "
            f"({pair_problem(paths) or exc}); "
            "replace them, or remove the folder's files to have a self-signed set generated"
        ) from exc


def with_client_ca(paths: CertPaths, client_ca: str | Path) -> CertPaths:
    """`paths` with the client CA `client_ca` (`serve --client-ca-file`), checked now so a file that
    cannot be used fails at start. Raises CertificateError naming the file and what is wrong."""
    ca = Path(client_ca)
    if ca.is_dir():
        raise CertificateError(f"--client-ca-file {ca} is a folder: give the PEM file of the client CA")
    problem = client_ca_problem(ca)
    if problem:
        raise CertificateError(problem)
    return dataclasses.replace(paths, client_ca=ca)


def ca_bundle(paths: CertPaths) -> str:
    """The base64 caBundle for a webhook configuration's clientConfig."""
    import base64

    return base64.b64encode(paths.ca.read_bytes()).decode()


class RotatingServerContext:
    """Server-side TLS contexts (TLS 1.2+) that follow certificate rotation.

    `context()` returns a cached SSLContext, rebuilt when tls.crt or tls.key changed on disk
    (by mtime and size). A connection keeps the context it was handshaken with, so in-flight
    requests are unaffected; new connections get the new certificate. Files that fail to load (half
    written, garbage, a key of another certificate) or that cannot be read at all (deleted) keep the
    previous context: each such change is logged once at WARNING, naming the file and what is
    wrong, and counted in `failures`. `not_after` is the loaded certificate's notAfter (UTC), for
    the expiry gauge while the files cannot be read.
    """

    def __init__(self, paths: CertPaths) -> None:
        self.paths = paths
        self._lock = threading.Lock()
        self._stamp: tuple[float, ...] | None = None
        self._context: ssl.SSLContext | None = None
        self.reloads = 0
        self.failures = 0
        """Changed files that did not load (each change counted once; the previous context kept)."""
        self._failed: object = None
        self.not_after: datetime.datetime | None = None
        self.context()
        if self._context is None:
            raise CertificateError(f"cannot load {paths.cert} and {paths.key}")

    def _file_stamp(self) -> tuple[float, ...]:
        files = [self.paths.cert, self.paths.key]
        if self.paths.client_ca is not None:  # a rotated client CA is reloaded like the pair
            files.append(self.paths.client_ca)
        stamp: list[float] = []
        for path in files:
            info = path.stat()
            stamp += [info.st_mtime, info.st_size]
        return tuple(stamp)

    def context(self) -> ssl.SSLContext:
        """The current context, reloading changed files."""
        try:
            stamp = self._file_stamp()
        except OSError as exc:
            if self._context is None:
                raise
            self._refused(f"missing:{exc.filename}", f"cannot read {exc.filename}: {exc.strerror or exc}")
            return self._context
        if stamp == self._stamp and self._context is not None:
            return self._context
        with self._lock:
            if stamp != self._stamp or self._context is None:
                try:
                    self._context = self._build()
                    self._stamp = stamp
                    self._failed = None
                    self.reloads += 1
                    verb = "loaded" if self.reloads == 1 else "reloaded"
                    log.info("%s the serving certificate %s", verb, self.paths.cert)
                except (OSError, ssl.SSLError) as exc:
                    if self._context is None:
                        raise
                    self._refused(stamp, files_problem(self.paths) or str(exc))
        return self._context

    def _refused(self, change: object, why: str) -> None:
        """Log and count a change that did not load, once per change (not once per connection)."""
        if change == self._failed:
            return
        self._failed = change
        self.failures += 1
        log.warning("keeping the previous serving certificate (%s): %s", self._expiry_words(), why)

    def _expiry_words(self) -> str:
        return f"notAfter {self.not_after.isoformat()}" if self.not_after else "loaded before"

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(certfile=str(self.paths.cert), keyfile=str(self.paths.key))
        if self.paths.client_ca is not None:
            require_client_certificates(context, self.paths.client_ca)
        try:
            self.not_after = x509.load_pem_x509_certificate(self.paths.cert.read_bytes()).not_valid_after_utc
        except (OSError, ValueError):
            self.not_after = None  # OpenSSL loaded it (e.g. DER in a chain file): no gauge from here
        return bound_io(context)  # a stalled client must not hold a request thread for good


def require_client_certificates(context: ssl.SSLContext, client_ca: Path) -> None:
    """Make `context` ask every client for a certificate and refuse the handshake of one whose
    certificate does not chain to a CA in the PEM file `client_ca`. A client that presents none is
    let through (CERT_OPTIONAL): the kubelet's probes present none on this same port, so the
    review endpoints refuse such a request over HTTP instead (guardhook.server.clientauth). Raises
    OSError or ssl.SSLError when the file cannot be read or holds no certificate."""
    context.load_verify_locations(cafile=str(client_ca))
    if not context.get_ca_certs():  # load_verify_locations accepts a file with no certificate in it
        raise ssl.SSLError(f"{client_ca} holds no PEM certificate")
    context.verify_mode = ssl.CERT_OPTIONAL


def client_ca_problem(client_ca: Path) -> str:
    """What is wrong with the client CA file in words that name it ("" when it loads)."""
    try:
        require_client_certificates(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), client_ca)
    except OSError as exc:  # ssl.SSLError included
        return f"{client_ca} cannot be used as the client CA: {exc.strerror or exc}"
    return ""


def files_problem(paths: CertPaths) -> str:
    """pair_problem, then the client CA's (client_ca_problem); "" when neither is found."""
    found = pair_problem(paths)
    if not found and paths.client_ca is not None:
        found = client_ca_problem(paths.client_ca)
    return found


def _key_reason(exc: Exception) -> str:
    """cryptography's reason a key did not load, whole words only: the part after "Details:" when
    there is one (the specific fault, after a generic preamble), else the message shortened at a
    word boundary."""
    text = str(exc) or type(exc).__name__
    _, found, details = text.partition("Details: ")
    return textwrap.shorten(details if found else text, 200, placeholder=" ...")


def pair_problem(paths: CertPaths) -> str:
    """What is wrong with tls.crt/tls.key in words that name the file ("" when nothing is found:
    OpenSSL's own reason then stands): unreadable, not a PEM certificate, not a PEM private key,
    or a key that is not the certificate's. OpenSSL alone says only `[SSL] PEM lib`."""
    try:
        cert_pem, key_pem = paths.cert.read_bytes(), paths.key.read_bytes()
    except OSError as exc:
        return f"cannot read {exc.filename}: {exc.strerror or exc}"
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return (
            f"{paths.cert} is not a PEM certificate ({len(cert_pem)} bytes; no valid BEGIN CERTIFICATE block)"
        )
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        return f"{paths.key} is not an unencrypted PEM private key ({_key_reason(exc)})"
    if not same_key(cert, key):
        return f"{paths.key} is not the private key of {paths.cert}"
    return ""
