"""How long a `guardhook` command takes from process start to exit (issue 15): `--version`,
`--help`, `review` of captured reviews on the bundled sample fleet, and `check` of a folder of
manifests, each run N times in a fresh interpreter with no cluster configured. Prints min, median
and p90 wall-clock seconds and the median CPU seconds (user + system: the command's own cost), the
interpreter's own start-up (`python -c pass`) for reference, and the machine's load average, since
a shared machine's other jobs land in the wall-clock times.

Targets (quiet machine): `--version` and `--help` under 0.3 s, `review` under 1 s.

    .venv/bin/python bench/startup.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GUARDHOOK_FIXTURES", REPO.parent / "shared" / "fixtures"))
REVIEWS = FIXTURES / "reviews"

CASES: list[tuple[str, list[str], float | None]] = [
    ("python -c pass (interpreter only)", ["-c", "pass"], None),
    ("guardhook --version", ["-m", "guardhook", "--version"], 0.3),
    ("guardhook --help", ["-m", "guardhook", "--help"], 0.3),
    ("guardhook check --help", ["-m", "guardhook", "check", "--help"], 0.3),
    (
        "guardhook review (worker delete, sample fleet)",
        ["-m", "guardhook", "review", str(REVIEWS / "s01-worker-delete.validating.json")],
        1.0,
    ),
    (
        "guardhook review (LWS scale-up: group-capacity, numpy)",
        ["-m", "guardhook", "review", str(REVIEWS / "s30-lws-scale-up-2.validating.json")],
        1.0,
    ),
    (
        "guardhook check tests/manifests/lws-examples",
        ["-m", "guardhook", "check", str(REPO / "tests" / "manifests" / "lws-examples")],
        None,
    ),
]


def time_once(args: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) seconds of one `python ARGS` run. The CPU time is the
    command's own cost; wall-clock adds the time it waited for a CPU on a busy machine. Raises
    RuntimeError when it exits above 1 (`check` exits 1 on a denial: a result, not a failure)."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=REPO
    )
    assert child.stderr is not None
    stderr = child.stderr.read()
    _, status, usage = os.wait4(child.pid, 0)
    elapsed = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    child.stderr.close()
    if child.returncode > 1:
        raise RuntimeError(f"{args} exited {child.returncode}: {stderr.decode()[-500:]}")
    return elapsed, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20, help="runs per command (default 20)")
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory() as home:
        # No cluster: review judges against the sample fleet, as on a first try.
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
        env["HOME"] = home
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
        print(f"{runs} runs each; load average before: {loadavg()}")
        print("| command | wall min s | wall median s | wall p90 s | CPU median s | target (median wall) |")
        print("|---|---|---|---|---|---|")
        for label, args, target in CASES:
            time_once(args, env)  # warm the page cache and .pyc files
            samples = [time_once(args, env) for _ in range(runs)]
            walls = sorted(wall for wall, _ in samples)
            p90 = walls[min(len(walls) - 1, int(0.9 * len(walls)))]
            median = statistics.median(walls)
            cpu = statistics.median(cpu for _, cpu in samples)
            verdict = "" if target is None else f"< {target} s: {'met' if median < target else 'MISSED'}"
            print(f"| {label} | {walls[0]:.3f} | {median:.3f} | {p90:.3f} | {cpu:.3f} | {verdict} |")
        print(f"load average after: {loadavg()}")


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
