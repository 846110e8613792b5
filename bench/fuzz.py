"""Fuzz the webhook with >= 100,000 malformed and adversarial AdmissionReviews and print the count.

Runs the hypothesis strategies of tests/adversarial.py through the flask app in-process (the real
codec, engine and every registered policy on the embedded sample fleet), alternating /validate and
/mutate, and counts answers by HTTP status, 5xx, contract breaks (malformed 400 or review) and
policies that raised. Every bad body is kept (first few printed). Exit status 1 on any finding.

    .venv/bin/python bench/fuzz.py [--examples 100000]

With `--protocol`, the HTTP framing is damaged instead (bench/protocol_fuzz.py): a real
`guardhook serve` is started on a free 127.0.0.1 port and each example goes over its own TLS
connection; counted are answers by status, 5xx, resets and answers that are not JSON. Exit 1 on
any finding.

    nice -n 19 .venv/bin/python bench/fuzz.py --protocol --examples 200000 --jobs 4
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from adversarial import BadAnswer, Harness, bodies  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@dataclass
class Tally:
    """What one fuzzing process saw."""

    count: int = 0
    slowest: float = 0.0
    statuses: dict[int, int] = field(default_factory=dict)
    findings: list[str] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    policy_errors: int = 0
    policies_run: dict[str, int] = field(default_factory=dict)


def fuzz(examples: int) -> Tally:
    """Run `examples` hypothesis examples through an in-process webhook."""
    logging.disable(logging.CRITICAL)  # 400s are logged at INFO; a policy failure is counted below
    harness = Harness()
    tally = Tally()

    @settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(body=bodies, endpoint=st.sampled_from(["/validate", "/mutate"]))
    def run(body: bytes, endpoint: str) -> None:
        tally.count += 1
        started = time.perf_counter()
        try:
            harness.send(body, endpoint)
        except BadAnswer as exc:
            tally.findings.append(f"{endpoint}: {exc}")
            tally.bodies.append(body)
        except Exception as exc:  # an exception escaping the app is a finding too
            tally.findings.append(f"{endpoint}: {type(exc).__name__}: {exc} for {body[:200]!r}")
            tally.bodies.append(body)
        tally.slowest = max(tally.slowest, time.perf_counter() - started)
        if tally.count % 10_000 == 0:
            print(f"  {tally.count} examples in process {os.getpid()} ...", file=sys.stderr, flush=True)

    run()
    tally.statuses = harness.statuses
    tally.policy_errors = len(harness.policy_errors)
    tally.policies_run = harness.policies_run
    return tally


def add(into: dict[Any, int], counts: dict[Any, int]) -> None:
    for key, value in counts.items():
        into[key] = into.get(key, 0) + value


def protocol(examples: int, jobs: int, seed: int, save: Path | None) -> int:
    """Send `examples` protocol-damaged requests from `jobs` client threads to a real server;
    print the tally; 1 on any 5xx, reset or non-JSON answer."""
    import random
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from protocol_fuzz import client_context, exchange, mutated, review_bodies

    from conftest import REVIEWS, start_server

    bodies = review_bodies(REVIEWS)
    with tempfile.TemporaryDirectory() as tmp:
        # A 1 s read timeout: the few requests the mutations leave open-ended get their 408 sooner.
        server = start_server(Path(tmp), "--threads", "8", "--request-timeout", "1")
        host, port = server.url.removeprefix("https://").split(":")
        context = client_context(server.ca)
        statuses: dict[int, int] = {}
        findings: list[tuple[str, bytes]] = []
        resets = 0
        started = time.perf_counter()

        def run(job: int) -> None:
            nonlocal resets
            rng = random.Random(seed * 1000 + job)
            session = None
            for n in range(examples // jobs):
                request = mutated(rng, bodies)
                outcome = exchange((host, int(port)), context, request, session=session)
                session = outcome.session or session
                for status in outcome.statuses:
                    statuses[status] = statuses.get(status, 0) + 1
                resets += outcome.reset
                if outcome.finding:
                    findings.append((outcome.finding, request))
                    print(
                        f"  finding: {outcome.finding[:300]} for {request[:300]!r}",
                        file=sys.stderr,
                        flush=True,
                    )
                if job == 0 and n and n % 2_500 == 0:
                    so_far = f"{n * jobs} examples, statuses {dict(sorted(statuses.items()))}"
                    print(
                        f"  {so_far}, resets {resets}, findings {len(findings)}", file=sys.stderr, flush=True
                    )

        try:
            with ThreadPoolExecutor(jobs) as pool:
                list(pool.map(run, range(jobs)))
        finally:
            server.stop()
        elapsed = time.perf_counter() - started
    count = examples // jobs * jobs
    server_errors = sum(n for status, n in statuses.items() if status >= 500)
    non_json = sum(1 for finding, _ in findings if "not JSON" in finding)
    print(f"protocol examples: {count} in {jobs} client threads, seed {seed}")
    print(f"elapsed:           {elapsed:.0f} s ({count / elapsed:.0f} examples/s)")
    print(f"HTTP statuses:     {dict(sorted(statuses.items()))}")
    print(f"5xx:               {server_errors}")
    print(f"resets:            {resets}")
    print(f"non-JSON answers:  {non_json}")
    print(f"findings:          {len(findings)}")
    for finding, request in findings[:5]:
        print(f"  finding: {finding[:300]} for {request[:200]!r}")
    if save:
        save.mkdir(parents=True, exist_ok=True)
        for n, (_, request) in enumerate(findings):
            (save / f"protocol-finding-{n}.http").write_bytes(request)
    return 1 if findings or server_errors or resets else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100_000)
    parser.add_argument("--save", type=Path, help="write each finding's body into this folder")
    parser.add_argument("--jobs", type=int, default=2, help="processes (threads with --protocol)")
    parser.add_argument("--protocol", action="store_true", help="damage the HTTP framing, over real TLS")
    parser.add_argument("--seed", type=int, default=42, help="with --protocol: the mutations' seed")
    args = parser.parse_args()
    if args.protocol:
        return protocol(args.examples, args.jobs, args.seed, args.save)
    started = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        tallies = pool.map(fuzz, [args.examples // args.jobs] * args.jobs)
    elapsed = time.perf_counter() - started
    total = Tally()
    for tally in tallies:
        total.count += tally.count
        total.slowest = max(total.slowest, tally.slowest)
        total.findings += tally.findings
        total.bodies += tally.bodies
        total.policy_errors += tally.policy_errors
        add(total.statuses, tally.statuses)
        add(total.policies_run, tally.policies_run)
    server_errors = sum(n for status, n in total.statuses.items() if status >= 500)
    print(f"examples:          {total.count} in {args.jobs} processes")
    print(f"elapsed:           {elapsed:.0f} s ({total.count / elapsed:.0f} examples/s)")
    print(f"slowest example:   {total.slowest * 1000:.0f} ms")
    print(f"HTTP statuses:     {dict(sorted(total.statuses.items()))}")
    print(f"5xx:               {server_errors}")
    print(f"contract breaks:   {len(total.findings)}")
    print(f"policy failures:   {total.policy_errors}")
    print(f"policies judged:   {dict(sorted(total.policies_run.items()))}")
    if args.save:
        args.save.mkdir(parents=True, exist_ok=True)
        for n, body in enumerate(total.bodies):
            (args.save / f"finding-{n}.json").write_bytes(body)
    for finding in total.findings[:5]:
        print(f"  finding: {finding[:400]}")
    return 1 if total.findings or server_errors or total.policy_errors else 0


if __name__ == "__main__":
    sys.exit(main())
