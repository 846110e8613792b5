"""`guardhook certs`: write a CA and a serving certificate, print the caBundle, and optionally the
self-managed overlay's caBundle patches. Refuses to replace certificates already in the folder
(a running webhook or an applied overlay may be using them) unless `--force` is given."""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardhook.commands import argtypes
from guardhook.commands.common import CommandError

if TYPE_CHECKING:
    from guardhook.server.certs import CertPaths


def add_parser(commands: Any) -> None:
    """Register `guardhook certs` on the CLI's subparsers."""
    certs = commands.add_parser("certs", help="write a CA and serving certificate; print the caBundle")
    certs.add_argument(
        "--out",
        help="folder to write ca.crt, tls.crt, tls.key into (default certs/, or the self-managed overlay's "
        "certs/ with --patch-manifests)",
    )
    certs.add_argument(
        "--service",
        type=argtypes.dns_label,
        default="guardhook",
        help="webhook Service name (default guardhook)",
    )
    certs.add_argument(
        "--namespace",
        type=argtypes.dns_label,
        default="guardhook-system",
        help="webhook Service namespace (default guardhook-system)",
    )
    certs.add_argument(
        "--dns", action="append", type=argtypes.san, default=[], metavar="NAME", help="extra SAN"
    )
    certs.add_argument(
        "--patch-manifests",
        metavar="DIR",
        help="also write the caBundle patches of the self-managed overlay of the manifests folder DIR",
    )
    certs.add_argument(
        "--force",
        action="store_true",
        help="replace certificates already in the folder (a rotation: the caBundle keeps the previous CA)",
    )
    certs.add_argument(
        "--keep-certs",
        action="store_true",
        help="with --patch-manifests: keep the overlay's certificates and rewrite only the caBundle patches "
        "(after changing the overlay's components)",
    )
    certs.set_defaults(run=run_certs)


def run_certs(args: argparse.Namespace) -> int:
    """Write the certificates (and patches); raise ManifestsError/CertificateError on bad input and
    CommandError when the folder already holds certificates and `--force` is not given, or when
    `--keep-certs` finds none to keep."""
    from guardhook.server.cabundle import (
        base_webhook_configurations,
        bundle_with_previous,
        self_managed_certs,
    )
    from guardhook.server.certs import CertPaths, generate, service_dns_names

    names = [*service_dns_names(args.service, args.namespace), *args.dns]
    manifests = Path(args.patch_manifests) if args.patch_manifests else None
    if manifests is not None:
        base_webhook_configurations(manifests)  # fail before writing anything
    out = args.out or (self_managed_certs(manifests) if manifests is not None else "certs")
    existing = CertPaths(Path(out))
    if args.keep_certs:
        return _rewrite_patches(manifests, existing)
    present = [p.name for p in (existing.ca, existing.cert, existing.key) if p.exists()]
    if present and not args.force:
        raise CommandError(
            f"{out} already holds {', '.join(present)}, which a running webhook or an applied "
            "overlay may be using; pass --force to replace them (or --keep-certs to rewrite the patches only)"
        )
    previous_ca = existing.ca.read_bytes() if existing.ca.is_file() else None
    paths = generate(out, names)
    print(f"wrote {paths.ca}, {paths.cert}, {paths.key} for {', '.join(names)}", file=sys.stderr)
    bundle = bundle_with_previous(paths.ca.read_bytes(), previous_ca)
    if manifests is not None:
        _write(manifests, bundle)
    # the printed caBundle is the one the patches set: with --force, the new CA and the previous one
    print(base64.b64encode(bundle).decode())
    return 0


def _write(manifests: Path, bundle: bytes) -> None:
    from guardhook.server.cabundle import write_patches

    for patch in write_patches(manifests, bundle):
        print(f"wrote {patch}", file=sys.stderr)


def _rewrite_patches(manifests: Path | None, existing: CertPaths) -> int:
    """--keep-certs: the patches again, for the overlay's current components, from the CA in the
    folder (and the bundle the patches set now, when it starts with that CA: a rotation's window)."""
    from guardhook.server.cabundle import patched_bundle
    from guardhook.server.certs import ca_bundle

    if manifests is None:
        raise CommandError("--keep-certs needs --patch-manifests DIR")
    if not existing.ca.is_file():
        raise CommandError(f"--keep-certs: {existing.ca} does not exist; run without --keep-certs first")
    ca = existing.ca.read_bytes()
    current = patched_bundle(manifests)
    _write(manifests, current if current and current.startswith(ca.rstrip(b"\n")) else ca)
    print(ca_bundle(existing))
    return 0
