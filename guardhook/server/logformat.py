"""One log format for every line guardhook writes, gunicorn's included: `--log-format text|json`.

`text`: `2026-12-01 12:00:00,123 INFO guardhook.decisions: admission decision policy=... uid=...`
(the fields of a structured line as key=value pairs after the message). `json`: one JSON object
per line, `{"time": RFC 3339 UTC, "level", "logger", "msg", ...fields}`, for log pipelines
(Loki, Elasticsearch, Cloud Logging) that parse JSON. Neither writes a control character or a
bidi override raw (a name or user is the client's text): `text` escapes them in the message and
quotes a field holding one as a JSON string; `json` writes every non-ASCII character as a JSON
escape. A structured line passes its fields as `extra={"fields": {...}}`. Standard library only:
every command imports this at start-up.
"""

from __future__ import annotations

import datetime
import json
import json.encoder
import logging
import re
import sys
import time
from typing import Any

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_formatter: logging.Formatter | None = None


class TextFormatter(logging.Formatter):
    """The classic text line, with a structured line's fields appended as key=value."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)
        self._second: tuple[int, str] = (-1, "")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        """logging.Formatter's own `asctime`, with the seconds part formatted once per second (the
        decision log writes a line per denial: strftime on each was a tenth of a request's cost)."""
        if datefmt is not None:
            return super().formatTime(record, datefmt)
        return self._asctime(record.created, record.msecs)

    def _asctime(self, created: float, msecs: float) -> str:
        second = int(created)
        if self._second[0] != second:
            self._second = (second, time.strftime(self.default_time_format, self.converter(created)))
        if self.default_msec_format is None:
            return self._second[1]
        return self.default_msec_format % (self._second[1], msecs)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802
        """The line with the message's control and bidi characters escaped (see `escape_controls`)."""
        message = record.message
        record.message = escape_controls(message)
        try:
            return super().formatMessage(record)
        finally:
            record.message = message

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        fields = getattr(record, "fields", None)
        return line + _text_fields(fields) if isinstance(fields, dict) else line

    def format_line(self, line: StructuredLine) -> str:
        """What `format` writes for a record of `line`'s time, level, logger, message and fields
        (no exception), without a LogRecord (guardhook.server.asynclog's direct lines)."""
        text = TEXT_FORMAT % {
            "asctime": self._asctime(line.created, line.msecs),
            "levelname": logging.getLevelName(line.levelno),
            "name": line.name,
            "message": escape_controls(line.message),
        }
        return text + _text_fields(line.fields)


def _text_fields(fields: dict[str, Any]) -> str:
    """A structured line's fields as ` key=value` pairs ("" for none)."""
    if not fields:
        return ""
    return " " + " ".join([f"{key}={_text_value(value)}" for key, value in fields.items()])


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (RFC 3339, UTC, milliseconds), level, logger, msg, the
    record's fields, and `exc` with the traceback when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        line = _json_object(
            record.created,
            record.levelname,
            record.name,
            record.getMessage(),
            fields if isinstance(fields, dict) else {},
        )
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"))

    def format_line(self, line: StructuredLine) -> str:
        """What `format` writes for a record of `line`'s time, level, logger, message and fields
        (no exception), without a LogRecord (guardhook.server.asynclog's direct lines)."""
        out = _json_object(
            line.created, logging.getLevelName(line.levelno), line.name, line.message, line.fields
        )
        return json.dumps(out, default=str, separators=(",", ":"))


def _json_object(
    created: float, level: str, logger: str, message: str, fields: dict[str, Any]
) -> dict[str, Any]:
    """A JSON line's object: its time (RFC 3339, UTC, milliseconds), level, logger, message and fields."""
    stamp = datetime.datetime.fromtimestamp(created, tz=datetime.UTC)
    return {
        "time": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "level": level,
        "logger": logger,
        "msg": message,
        **fields,
    }


class StructuredLine:
    """A structured line handed to the log writer without a LogRecord: its time (seconds since
    the epoch, and the milliseconds part as a LogRecord's `msecs`), level, logger name, message
    (already rendered) and fields. `record()` makes the LogRecord logging would have made."""

    __slots__ = ("created", "fields", "levelno", "message", "msecs", "name")

    def __init__(self, levelno: int, name: str, message: str, fields: dict[str, Any]) -> None:
        now = time.time_ns()
        self.created = now / 1e9
        self.msecs = (now % 1_000_000_000) // 1_000_000 + 0.0
        self.levelno = levelno
        self.name = name
        self.message = message
        self.fields = fields

    def record(self) -> logging.LogRecord:
        """The LogRecord of this line (for a handler or formatter that takes only records)."""
        record = logging.LogRecord(self.name, self.levelno, "", 0, self.message, None, None)
        record.created, record.msecs, record.fields = self.created, self.msecs, self.fields
        return record


_NEEDS_QUOTES = re.compile(r'[ "=\n]')
_CONTROLS = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""C0 controls but TAB, DEL, C1 controls, and the bidirectional marks, embeddings, overrides and
isolates (Unicode TR9; CVE-2021-42574 "Trojan Source"): a user or object name carrying them could
move the cursor, erase a line, end it early (CR, NUL) or reorder what a reader sees."""


def escape_controls(text: str) -> str:
    """`text` with each control or bidi character (see _CONTROLS) written as a visible escape:
    `\\n`, `\\r`, `\\xNN` for the rest of C0/C1, `\\uNNNN` for bidi characters."""
    if _CONTROLS.search(text) is None:
        return text
    return _CONTROLS.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    char = match.group()
    if char == "\n":
        return "\\n"
    if char == "\r":
        return "\\r"
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


_PLAIN_TYPES = (bool, int, float)
"""Types whose str() is never empty and holds no space, quote, `=` or newline: never quoted."""
_quoted = json.encoder.encode_basestring_ascii  # what json.dumps does with a str, minus its call overhead


def _text_value(value: Any) -> str:
    kind = type(value)
    if kind in _PLAIN_TYPES:  # a decision line's dryRun, policyMs, latencyMs
        return str(value)
    text = value if kind is str else str(value)
    if not text or _NEEDS_QUOTES.search(text) or _CONTROLS.search(text):
        return _quoted(text)  # JSON string escapes for every control and non-ASCII character
    return text


def formatter() -> logging.Formatter:
    """The formatter `configure` chose (text before it was called)."""
    return _formatter or TextFormatter()


def configure(level: str = "INFO", fmt: str = "text") -> None:
    """Send the root logger's lines to stderr at `level` in `fmt` ("text" or "json"), replacing a
    handler an earlier call installed. Like `logging.basicConfig`, it leaves logging alone when
    someone else already gave the root logger a handler (an embedding program, a test harness);
    gunicorn's lines still use `fmt` (see `formatter`). Raises ValueError for another format."""
    global _formatter
    if fmt not in FORMATS:
        raise ValueError(f"unknown log format {fmt!r} (one of {', '.join(FORMATS)})")
    _formatter = JsonFormatter() if fmt == "json" else TextFormatter()
    root = logging.getLogger()
    for old in [h for h in root.handlers if getattr(h, "guardhook", False)]:
        root.removeHandler(old)
    if root.handlers:
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_formatter)
    handler.guardhook = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
