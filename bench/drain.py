"""Benchmark `guardhook drain` against `kubectl drain` on the same cluster state (printed figures,
not a test; issue 52).

Needs a cluster where guardhook and the LWS controller are installed (e.g. the real cluster after
e2e/realcluster/run.sh with KEEP_CLUSTER=1). For each tool and trial, on a fresh namespace
`bench-drain` (opted in to eviction guarding, guardhook's default budget of 1 group per LWS):
`--lws` LWSs of `--groups` groups of `--size` one-GPU pause pods, all on fake GPU node
`bench-fake-0`, `bench-fake-1` empty with room for all (e2e/drain_scene.py: kubelet-less nodes whose
kubelet this script plays; the scheduler, garbage collector, LWS controller and guardhook's webhook
are the cluster's). Then the tool drains `bench-fake-0`:

- `guardhook drain bench-fake-0 --poll-interval 0.5`;
- `kubectl drain bench-fake-0 --ignore-daemonsets --delete-emptydir-data` (kubectl's own 5 s
  between retries of a 429).

Figures per run, from a pod watch on the namespace: the command's time, the time until every group
is whole and Ready again off the node, the restarts of each group (leader pods created: a group
restart makes a new leader), the most groups of one LWS broken at once, and the 429s kubectl
reports ("will retry after 5s").

Run: python bench/drain.py --kubeconfig FILE [--lws 2] [--groups 3] [--size 4] [--trials 1]
     [--tools guardhook,kubectl] [--kubectl PATH] [--image example.local/pause:3.9]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from drain_scene import FakeNodes, GroupWatch, lws_manifest  # noqa: E402

NAMESPACE = "bench-drain"
NODES = ("bench-fake-0", "bench-fake-1")
OPT_IN = "guardhook.io/guard-evictions=true"


def kubectl(
    args: argparse.Namespace, *argv: str, stdin: str | None = None, check: bool = True, ok: bool = False
) -> Any:
    """Run kubectl on the cluster: its stdout (RuntimeError on failure unless not `check`), or
    with `ok` whether it succeeded."""
    done = subprocess.run(
        [args.kubectl, f"--kubeconfig={args.kubeconfig}", *argv],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if ok:
        return done.returncode == 0
    if check and done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(argv)}: {done.stderr.strip()}")
    return done.stdout


def wait(check: Any, seconds: float, what: str) -> float:
    """Poll `check` every 0.1 s; the monotonic time it first held. RuntimeError after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(0.1)
    raise RuntimeError(f"timed out after {seconds:.0f} s waiting for {what}")


def one_run(args: argparse.Namespace, tool: str) -> dict[str, Any]:
    """One drain by `tool` from a fresh scene; its figures."""
    sets = {f"bench-{chr(ord('a') + i)}": (args.groups, args.size) for i in range(args.lws)}
    pods = args.lws * args.groups * args.size
    kubectl(args, "create", "namespace", NAMESPACE)
    kubectl(args, "label", "namespace", NAMESPACE, OPT_IN)
    nodes = FakeNodes(args.kubeconfig, NODES, gpus=pods)
    nodes.register(cordoned=NODES[1:])
    watch = GroupWatch(args.kubeconfig, NAMESPACE, sets)
    watch.start()
    try:
        for name, (groups, size) in sets.items():
            manifest = json.dumps(lws_manifest(name, groups, size, args.image))
            # group-capacity judges the create on guardhook's view, which may not show the new
            # nodes' room yet: applied again until admitted
            wait(
                lambda manifest=manifest: kubectl(
                    args, "apply", "-n", NAMESPACE, "-f", "-", stdin=manifest, check=False, ok=True
                ),
                60,
                f"LWS {name} admitted",
            )

        def whole() -> bool:
            for thread in (nodes, watch):
                if thread.failure is not None:
                    raise thread.failure
            return not any(watch.broken_now().values())

        wait(whole, 300, "every group whole on bench-fake-0")
        nodes.cordon(NODES[1], False)
        time.sleep(2)  # the scheduler's cache sees the uncordon
        watch.reset()
        argv = (
            [sys.executable, "-m", "guardhook", "drain", NODES[0], "--kubeconfig", str(args.kubeconfig)]
            + ["--poll-interval", "0.5", "--timeout", "20m"]
            if tool == "guardhook"
            else [args.kubectl, f"--kubeconfig={args.kubeconfig}", "drain", NODES[0]]
            + ["--ignore-daemonsets", "--delete-emptydir-data", "--timeout=20m"]
        )
        began = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=1500)
        ended = time.monotonic()

        def off_and_whole() -> bool:
            on_node = [p for p in nodes.pods(NODES[0]) if p["metadata"]["namespace"] == NAMESPACE]
            return not on_node and whole()

        rebuilt = wait(off_and_whole, 600, "every group whole again off bench-fake-0")
        restarts = [watch.restarts.get((name, str(g)), 0) for name, (n, _) in sets.items() for g in range(n)]
        return {
            "tool": tool,
            "exit": done.returncode,
            "command_s": round(ended - began, 1),
            "whole_again_s": round(rebuilt - began, 1),
            "restarts_per_group": dict(sorted(Counter(restarts).items())),
            "restarts_mean": round(statistics.mean(restarts), 2),
            "most_broken_per_lws": max(watch.most_broken.values()),
            "retries_429": done.stderr.count("will retry after"),
            "groups": len(restarts),
            "pods": pods,
        }
    finally:
        watch.stop()
        kubectl(args, "delete", "namespace", NAMESPACE, "--wait=true", "--timeout=300s", check=False)
        nodes.remove()


def machine(args: argparse.Namespace) -> dict[str, Any]:
    version = json.loads(kubectl(args, "version", "-o", "json"))
    return {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "host": f"{platform.system()} {platform.release()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "server": version.get("serverVersion", {}).get("gitVersion", "?"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", type=Path, default=Path(os.environ.get("KUBECONFIG", "")))
    parser.add_argument("--lws", type=int, default=2)
    parser.add_argument("--groups", type=int, default=3)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--tools", default="guardhook,kubectl")
    parser.add_argument("--kubectl", default=shutil.which("kubectl") or "kubectl")
    parser.add_argument("--image", default=os.environ.get("GUARDHOOK_E2E_IMAGE", "example.local/pause:3.9"))
    args = parser.parse_args()
    print(json.dumps(machine(args)), flush=True)
    runs = []
    for _ in range(args.trials):
        for tool in args.tools.split(","):
            runs.append(one_run(args, tool))
            print(json.dumps(runs[-1]), flush=True)
    print()
    print(
        "| tool | exit | command | all groups whole again | restarts per group (restarts: groups) "
        "| most broken of an LWS | 429s |"
    )
    print("|---|---|---|---|---|---|---|")
    for run in runs:
        spread = ", ".join(f"{k}: {v}" for k, v in run["restarts_per_group"].items())
        print(
            f"| {run['tool']} drain | {run['exit']} | {run['command_s']} s | {run['whole_again_s']} s | "
            f"mean {run['restarts_mean']} ({spread}) | {run['most_broken_per_lws']} | {run['retries_429']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
