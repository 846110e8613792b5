"""`guardhook certs`: write a CA and a serving certificate, print the caBundle, and optionally the
self-managed overlay's caBundle patches, or guardhook's entries as manifest-based admission
configuration (`--static-manifests`, KEP-5793: an AdmissionConfiguration and the *.static.k8s.io
webhook manifests the API server loads from its own disk; guardhook.server.static_admission).
Refuses to replace certificates already in the folder (a running webhook or an applied overlay may
be using them) unless `--force` is given."""

from __future__ import annotations

import argparse
import base64
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from guardhook.commands import argtypes
from guardhook.commands.common import CommandError

if TYPE_CHECKING:
    from guardhook.server.certs import CertPaths

DEFAULT_STATIC_ROOT = "/etc/kubernetes/admission"  # guardhook.server.static_admission.DEFAULT_STATIC_ROOT


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
    certs.add_argument(
        "--static-manifests",
        metavar="DIR",
        help="also write guardhook's entries as manifest-based admission configuration (KEP-5793) into DIR: "
        "admission-configuration.yaml and validating-webhooks/, mutating-webhooks/ manifests named "
        "guardhook.static.k8s.io; needs --url",
    )
    certs.add_argument(
        "--url",
        metavar="URL",
        help="with --static-manifests: https://HOST[:PORT] where the API server reaches guardhook (a "
        "manifest-based entry calls a URL, not a Service); HOST is added to the certificate's names",
    )
    certs.add_argument(
        "--manifests",
        metavar="DIR",
        help="with --static-manifests: the manifests folder whose webhook entries to write (default "
        "--patch-manifests, else manifests)",
    )
    certs.add_argument(
        "--static-root",
        default=DEFAULT_STATIC_ROOT,
        metavar="PATH",
        help="with --static-manifests: the absolute folder on the API server hosts the files are copied to "
        f"(default {DEFAULT_STATIC_ROOT}), as the AdmissionConfiguration's staticManifestsDir names it",
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
    from guardhook.server.certs import CertPaths, ca_bundle, generate, service_dns_names

    names = [*service_dns_names(args.service, args.namespace), *args.dns]
    manifests = Path(args.patch_manifests) if args.patch_manifests else None
    if manifests is not None:
        base_webhook_configurations(manifests)  # fail before writing anything
    static = _static_source(args)
    if static is not None and static[1] not in names:
        names.append(static[1])
    out = args.out or (self_managed_certs(manifests) if manifests is not None else "certs")
    existing = CertPaths(Path(out))
    if args.keep_certs:
        if manifests is None and static is not None:
            if not existing.ca.is_file():
                raise CommandError(
                    f"--keep-certs: {existing.ca} does not exist; run without --keep-certs first"
                )
            _write_static(args, static[0], existing.ca.read_bytes())
            print(ca_bundle(existing))
            return 0
        code = _rewrite_patches(manifests, existing)
        if static is not None:
            _write_static(args, static[0], existing.ca.read_bytes())
        return code
    present = [p.name for p in (existing.ca, existing.cert, existing.key) if p.exists()]
    if present and not args.force:
        # --keep-certs goes only with patches to write: offering it to a bare `certs` led to its refusal
        keep = " (or --keep-certs to rewrite the patches only)" if manifests or static else ""
        raise CommandError(
            f"{out} already holds {', '.join(present)}, which a running webhook or an applied "
            f"overlay may be using; pass --force to replace them{keep}"
        )
    previous_ca = existing.ca.read_bytes() if existing.ca.is_file() else None
    paths = generate(out, names)
    print(f"wrote {paths.ca}, {paths.cert}, {paths.key} for {', '.join(names)}", file=sys.stderr)
    bundle = bundle_with_previous(paths.ca.read_bytes(), previous_ca)
    if manifests is not None:
        _write(manifests, bundle)
    if static is not None:
        _write_static(args, static[0], bundle)
    # the printed caBundle is the one the patches set: with --force, the new CA and the previous one
    print(base64.b64encode(bundle).decode())
    return 0


def _static_source(args: argparse.Namespace) -> tuple[Path, str] | None:
    """(manifests folder, URL host) for --static-manifests, checked before anything is written; None
    without it. Raises CommandError for a missing or bad --url or --static-root, ManifestsError for
    a folder without webhook configurations."""
    from guardhook.server.cabundle import base_webhook_configurations
    from guardhook.server.static_admission import base_url

    if not args.static_manifests:
        if args.url:
            raise CommandError("--url is for --static-manifests")
        return None
    if not args.url:
        raise CommandError(
            "--static-manifests needs --url https://HOST[:PORT] (where the API server calls guardhook)"
        )
    try:
        base_url(args.url)
        host = argtypes.san(urlsplit(args.url).hostname or "")
    except (ValueError, argparse.ArgumentTypeError) as exc:
        raise CommandError(str(exc)) from exc
    if not str(args.static_root).startswith("/"):
        raise CommandError(f"--static-root {args.static_root!r}: staticManifestsDir must be an absolute path")
    source = Path(args.manifests or args.patch_manifests or "manifests")
    base_webhook_configurations(source)
    return source, host


def _write_static(args: argparse.Namespace, source: Path, bundle: bytes) -> None:
    from guardhook.server.static_admission import write_static

    for path in write_static(Path(args.static_manifests), source, args.url, bundle, args.static_root):
        print(f"wrote {path}", file=sys.stderr)


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
