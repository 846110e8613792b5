"""Who may ask for a review: with `serve --client-ca-file`, only a caller whose client certificate
chains to that CA and names one of the allowed names (`--client-cn`, default `kube-apiserver`, as
Gatekeeper's `--client-cn-name`) in its subject CN or a DNS SAN.

The TLS handshake asks every client for a certificate and refuses one that does not chain to the
CA (guardhook.server.certs.require_client_certificates). A client that presents none still
completes the handshake, because the kubelet's probes (`/healthz`, `/readyz`) come to this same
port with no certificate, and Prometheus may scrape `/metrics` here. The review endpoints then
refuse it over HTTP: 401 without a certificate, 403 with one whose names are not allowed, before
the body is decoded, so such a request is never judged and records nothing in the ledger. A
review request with no certificate is answered 401 even earlier, by the worker as soon as its
request line is in (guardhook.server.readahead), so its body is never read or held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

DEFAULT_NAME = "kube-apiserver"
"""The name expected when none is given, as Gatekeeper's `--client-cn-name` defaults to it."""


NO_CERTIFICATE = "a client certificate is required: the webhook only judges the API server's requests"
"""The 401's reason, here and where the worker refuses such a request before reading its body."""


@dataclass(frozen=True)
class ClientAuth:
    """The names a caller's verified certificate must carry, one of them, in its CN or DNS SANs."""

    names: frozenset[str]

    def refusal(self, environ: Mapping[str, Any]) -> tuple[int, str] | None:
        """(HTTP code, reason) to refuse the request of `environ` with, or None to judge it. The
        certificate is read off the TLS socket gunicorn puts in the WSGI environ; `getpeercert`
        returns one only when it was verified against the client CA in the handshake."""
        sock = environ.get("gunicorn.socket")
        getpeercert = getattr(sock, "getpeercert", None)
        cert = getpeercert() if getpeercert is not None else None
        if not cert:
            return 401, NO_CERTIFICATE
        presented = certificate_names(cert)
        if presented & self.names:
            return None
        shown = ", ".join(sorted(presented)[:5]) or "none"
        return 403, f"client certificate names ({shown}) are not allowed: the webhook accepts {self.wanted()}"

    def wanted(self) -> str:
        """The allowed names, for messages and the start-up log."""
        return ", ".join(sorted(self.names))


def certificate_names(cert: Mapping[str, Any]) -> set[str]:
    """The subject commonName(s) and DNS subjectAltNames of a certificate as `SSLSocket.getpeercert`
    returns it (a dict of tuples)."""
    names = {str(value) for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName"}
    names.update(str(value) for kind, value in cert.get("subjectAltName", ()) if kind == "DNS")
    return names


def client_auth(names: Iterable[str]) -> ClientAuth:
    """A ClientAuth for `names` (`--client-cn`), DEFAULT_NAME when none is given."""
    return ClientAuth(frozenset(names) or frozenset({DEFAULT_NAME}))
