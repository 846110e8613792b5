"""argparse types that refuse values a command cannot use, so argparse names the flag and exits 2
instead of a traceback or a hot loop later (e.g. `--port 99999`, `--threads 0`, `--interval 0`)."""

from __future__ import annotations

import argparse
import math


def port(text: str) -> int:
    """A TCP port, 1-65535. Raises argparse.ArgumentTypeError otherwise."""
    value = _int(text)
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (1-65535)")
    return value


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


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text} is not an integer") from None
