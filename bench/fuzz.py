"""Fuzz the webhook with >= 100,000 malformed and adversarial AdmissionReviews and print the count.

Runs the hypothesis strategies of tests/adversarial.py through the flask app in-process (the real
codec, engine and every registered policy on the embedded sample fleet), alternating /validate and
/mutate, and counts answers by HTTP status, 5xx, contract breaks (malformed 400 or review) and
policies that raised. Every bad body is kept (first few printed). Exit status 1 on any finding.

    .venv/bin/python bench/fuzz.py [--examples 100000]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from adversarial import BadAnswer, Harness, bodies  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=100_000)
    args = parser.parse_args()
    logging.disable(logging.CRITICAL)  # 400s are logged at INFO; a policy failure is counted below
    harness = Harness()
    findings: list[str] = []
    count = 0
    slowest = 0.0

    @settings(
        max_examples=args.examples, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(body=bodies, endpoint=st.sampled_from(["/validate", "/mutate"]))
    def run(body: bytes, endpoint: str) -> None:
        nonlocal count, slowest
        count += 1
        started = time.perf_counter()
        try:
            harness.send(body, endpoint)
        except BadAnswer as exc:
            findings.append(f"{endpoint}: {exc}")
        except Exception as exc:  # an exception escaping the app is a finding too
            findings.append(f"{endpoint}: {type(exc).__name__}: {exc} for {body[:200]!r}")
        slowest = max(slowest, time.perf_counter() - started)
        if count % 10_000 == 0:
            print(f"  {count} examples ...", file=sys.stderr, flush=True)

    started = time.perf_counter()
    run()
    elapsed = time.perf_counter() - started
    server_errors = sum(n for status, n in harness.statuses.items() if status >= 500)
    print(f"examples:          {count}")
    print(
        f"elapsed:           {elapsed:.0f} s ({count / elapsed:.0f} examples/s),"
        f" slowest {slowest * 1000:.0f} ms"
    )
    print(f"HTTP statuses:     {dict(sorted(harness.statuses.items()))}")
    print(f"5xx:               {server_errors}")
    print(f"contract breaks:   {len(findings)}")
    print(f"policy failures:   {len(harness.policy_errors)}")
    print(f"policies judged:   {dict(sorted(harness.policies_run.items()))}")
    for finding in findings[:5]:
        print(f"  finding: {finding[:400]}")
    return 1 if findings or server_errors or harness.policy_errors else 0


if __name__ == "__main__":
    sys.exit(main())
