"""argparse types that refuse values a command cannot use, so argparse names the flag and exits 2
instead of a traceback or a hot loop later (e.g. `--port 99999`, `--threads 0`, `--interval 0`)."""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import math
import re

from guardhook.commands.names import is_label, is_subdomain


def port(text: str) -> int:
    """A TCP port, 1-65535. Raises argparse.ArgumentTypeError otherwise."""
    value = _int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (1-65535)")
    return value


def listen_port(text: str) -> int:
    """A TCP port to listen on, 0-65535: 0 lets the OS choose a free one. Raises
    argparse.ArgumentTypeError otherwise."""
    value = _int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (0-65535; 0: any free port)")
    return value


_BINARY_SUFFIXES = {"": 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}


def byte_size(text: str) -> int:
    """A number of bytes of at least 1, plain or with a Kubernetes binary suffix (Ki, Mi, Gi:
    `128Mi`). Raises argparse.ArgumentTypeError otherwise."""
    number = text.rstrip("KMGi")
    suffix = text[len(number) :]
    if not number.isdigit() or suffix not in _BINARY_SUFFIXES or int(number) < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a size in bytes (e.g. 134217728, 128Mi, 1Gi)")
    return int(number) * _BINARY_SUFFIXES[suffix]


def positive_int(text: str) -> int:
    """An integer of at least 1. Raises argparse.ArgumentTypeError otherwise."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def positive_seconds(text: str) -> float:
    """A finite number of seconds above 0. Raises argparse.ArgumentTypeError otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text} must be a number of seconds above 0")
    return value


def seconds_or_zero(text: str) -> float:
    """A finite number of seconds, 0 or more (0: do not wait). Raises argparse.ArgumentTypeError
    otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not a number of seconds") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"{text} must be a number of seconds, 0 or more")
    return value


_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")


def duration(text: str) -> datetime.timedelta:
    """A positive duration written as Go and cert-manager write them, hours, minutes and seconds in
    that order (`8760h`, `90m`, `1h30m`, `45s`). Raises argparse.ArgumentTypeError otherwise."""
    found = _DURATION.fullmatch(text) if text else None
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 8760h, 90m, 1h30m, 45s)")
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    value = datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds)
    if value <= datetime.timedelta(0):
        raise argparse.ArgumentTypeError(f"{text!r} must be a duration above 0")
    return value


def dns_label(text: str) -> str:
    """A Kubernetes object name that must be an RFC 1123 label (a namespace, a Service): lowercase
    letters, digits and '-', 1-63 characters, starting and ending alphanumeric. Raises
    argparse.ArgumentTypeError otherwise."""
    if not is_label(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid name: lowercase letters, digits and '-', at most 63, "
            "starting and ending with a letter or digit (RFC 1123 label)"
        )
    return text


def dns_subdomain(text: str) -> str:
    """A Kubernetes object name that must be an RFC 1123 subdomain (a Node): RFC 1123 labels joined
    by dots, at most 253 characters. Raises argparse.ArgumentTypeError otherwise (an empty name too)."""
    if not is_subdomain(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid name: lowercase letters, digits, '-' and '.', at most 253 "
            "(RFC 1123 subdomain)"
        )
    return text


def san(text: str) -> str:
    """A subject alternative name for a serving certificate: an IP address, or a DNS name (RFC 1123
    labels joined by dots, at most 253 characters; a leading `*.` wildcard allowed; any case).
    Raises argparse.ArgumentTypeError otherwise."""
    try:
        ipaddress.ip_address(text)
        return text
    except ValueError:
        pass
    labels = text.lower().removeprefix("*.").split(".")
    if len(text) > 253 or not all(is_label(label) for label in labels):
        raise argparse.ArgumentTypeError(f"{text!r} is neither a DNS name nor an IP address")
    return text


def certificate_name(text: str) -> str:
    """A name a certificate's subject CN or DNS SAN may hold: non-empty, printable, no surrounding
    space (a CN is free text, e.g. `system:kube-apiserver`). Raises argparse.ArgumentTypeError
    otherwise."""
    if not text or text != text.strip() or not text.isprintable():
        raise argparse.ArgumentTypeError(f"{text!r} is not a certificate name (non-empty printable text)")
    return text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not an integer") from None
