"""bench/load.py's account of the paced phase's slowest 1% (issue 53: which requests make the
p99): the reviews most often in it and the share due at a slice's start. No timing: the
latencies are made up."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import load  # noqa: E402  (bench/ is not a package: its scripts import each other by name)


def _result(latencies: list[float], reviews: list[str], positions: list[int]) -> load.PhaseResult:
    return load.PhaseResult("guardhook", "paced", 1.0, latencies, 0, 0.0, reviews, positions)


def test_tail_names_the_reviews_most_often_among_the_slowest_and_the_slice_start_share() -> None:
    # 200 requests: the two slowest are s31 (one of them due first in its slice), the rest fast.
    latencies = [0.001] * 198 + [0.009, 0.008]
    reviews = ["s07"] * 198 + ["s31", "s31"]
    positions = [50] * 198 + [0, 60]
    text = _result(latencies, reviews, positions).tail(q=0.99, first=8)
    assert text.startswith("2 requests; by review: s31 2 (100%)")
    assert "each review 50.0% of the mix" in text
    assert "due among a slice's first 8: 50% (of all requests 0.5%)" in text


def test_tail_pools_the_records_of_every_slice_and_round() -> None:
    pooled = _result([], [], []).empty()
    pooled.add(_result([0.001, 0.005], ["a", "b"], [0, 1]))
    pooled.add(_result([0.002], ["a"], [2]))
    assert pooled.reviews == ["a", "b", "a"] and pooled.positions == [0, 1, 2]
    assert pooled.tail(q=0.5).startswith("2 requests; by review: b 1 (50%), a 1 (50%)")


def test_tail_without_per_request_records_says_so() -> None:
    assert _result([0.001, 0.002], [], []).tail() == "no per-request record"
