"""The text log format: the same line logging's own Formatter writes, plus the structured fields."""

from __future__ import annotations

import logging

from guardhook.server.logformat import TEXT_FORMAT, TextFormatter


def _record(created: float, fields: dict[str, object] | None = None) -> logging.LogRecord:
    record = logging.LogRecord(
        "guardhook.decisions", logging.INFO, __file__, 1, "admission decision", (), None
    )
    record.created, record.msecs = created, (created - int(created)) * 1000
    if fields is not None:
        record.fields = fields
    return record


def test_time_stamps_match_logging_within_and_across_seconds() -> None:
    ours, plain = TextFormatter(), logging.Formatter(TEXT_FORMAT)
    for created in (1764590400.001, 1764590400.999, 1764590401.0, 1764590400.5, 1764590461.25):
        assert ours.format(_record(created)) == plain.format(_record(created))


def test_fields_are_appended_and_quoted_only_when_needed() -> None:
    line = TextFormatter().format(
        _record(1764590400.0, {"policy": "worker-delete", "message": 'a "b"=c', "n": 3, "e": ""})
    )
    assert line.endswith(' policy=worker-delete message="a \\"b\\"=c" n=3 e=""')
