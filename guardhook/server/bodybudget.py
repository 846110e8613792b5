"""The server-wide bound on request-body bytes held at once (issue 48 item 4).

The worker (guardhook.server.readahead) reads each request whole into memory before a request
thread sees it, and keeps it until the answer is sent. Each connection may hold up to the body cap
(6 MiB), so about 150 connections sending large bodies reach a 1 GiB memory limit, and the
out-of-memory kill that follows switches the fail-open webhook entries off. Past this bound a new
body is refused with 503 and `Retry-After` instead (a request being judged is never cut short).

The default is a share of the container's memory limit (cgroup v2 `memory.max`, or v1
`memory.limit_in_bytes`): each byte held costs about that again as the parser's copy and the
app's, and the request threads each hold a decoded review several times its size, so an eighth of
the limit leaves the rest for the cluster view and the judging.
"""

from __future__ import annotations

from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
MEMORY_SHARE = 8
"""The default bound is the memory limit divided by this."""
NO_LIMIT_DEFAULT = 256 * 1024 * 1024
"""The bound when no memory limit is set (a process outside a container, or `memory.max` "max")."""
UNLIMITED_ABOVE = 1 << 50
"""cgroup v1 reports "no limit" as a huge number (PAGE_COUNTER_MAX pages): anything above this."""


def memory_limit(root: Path = CGROUP_ROOT) -> int | None:
    """This process's cgroup memory limit in bytes (v2, else v1), or None when there is none or it
    cannot be read."""
    for path in (root / "memory.max", root / "memory" / "memory.limit_in_bytes"):
        try:
            text = path.read_text().strip()
        except OSError:
            continue
        if not text.isdigit():  # "max": no limit
            return None
        value = int(text)
        return value if 0 < value < UNLIMITED_ABOVE else None
    return None


def default_budget(root: Path = CGROUP_ROOT) -> tuple[int, str]:
    """(bytes, why) of the default bound: MEMORY_SHARE-th of the memory limit, else NO_LIMIT_DEFAULT."""
    limit = memory_limit(root)
    if limit is None:
        return NO_LIMIT_DEFAULT, "no memory limit found"
    return limit // MEMORY_SHARE, f"1/{MEMORY_SHARE} of the memory limit {mib(limit)}"


def mib(count: int) -> str:
    """`count` bytes in MiB, for messages."""
    return f"{count / (1024 * 1024):g} MiB"
