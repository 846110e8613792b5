"""`guardhook serve` writes its log lines from a background thread, in batches, so a request
thread that logs a decision never waits on a write and never wakes a thread.

Why: on the request path a write to stderr (a pipe to the container runtime, a file) gives up the
GIL and must win it back from the other request threads, and a slow log reader blocks the writer
under the handler's lock, so every logging request thread waits on the slowest write (issue 26:
with the decision log on, the paced p99 was 1.9x the bare webhook's). A request thread now only
renders the message and appends the record to a queue (the standard library's QueueHandler in
front of a `queue.SimpleQueue`); a writer thread wakes at most every `BATCH_SECONDS` while lines
come, and hands the queued records to the original handlers: a plain StreamHandler's lines (the
one `logformat.configure` installs) in one write and one flush per batch, since each write gives up
the GIL and must win it back from the request threads. The standard library's
QueueListener wakes its thread for every record instead, which measured ~50 µs of CPU per line
here against ~8 µs for the batch (process CPU per line, lines a few ms apart).

A structured line (the decision log's) can skip the LogRecord altogether (`BatchWriter.direct`):
while the logger's lines reach only this writer's plain StreamHandlers with guardhook's formatters
and no filters, the request thread hands over a `StructuredLine` (its time, level, fields) and the
writer formats it (`format_line`, the same text): LogRecord's construction, the logger's handler
chain and the formatter's generic steps were about half of a decision line's cost (issue 53).

No line is dropped and memory stays bounded: past `MAX_QUEUED_LINES` waiting (a stalled reader) a
logging thread waits for room, as a direct write would wait. Lines still queued at exit are
written before the worker ends (`BatchWriter.stop`, at exit); a SIGKILL loses them.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from logging.handlers import QueueHandler
from typing import Any

from guardhook.server.logformat import JsonFormatter, StructuredLine, TextFormatter

Queued = logging.LogRecord | StructuredLine
"""What the writer's queue holds: records, and structured lines handed over without one."""

MAX_QUEUED_LINES = 10_000
"""Records waiting for the writer before a logging thread waits (~3 MB of decision lines)."""

BATCH_SECONDS = 0.02
"""How long the writer lets lines gather after the first one of a batch: a line is written at
most this much later than it was logged."""


class BatchWriter:
    """A daemon thread writing the records of `lines` to `handlers` (each by its level): it sleeps
    until `wake` is set, lets a batch gather for `batch_seconds`, writes what is queued, and
    sleeps again. `stop` writes what is left and ends the thread; it may be called again."""

    def __init__(
        self,
        lines: queue.SimpleQueue[Queued],
        handlers: Sequence[logging.Handler],
        batch_seconds: float = BATCH_SECONDS,
    ) -> None:
        self.lines = lines
        self.handlers = tuple(handlers)
        self.batch_seconds = batch_seconds
        self.wake = threading.Event()
        self.stopped = False
        self._thread = threading.Thread(target=self._run, name="guardhook-log-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def write(self, record: Queued) -> None:
        """Hand one record to the handlers now, on the caller's thread (once stopped)."""
        if isinstance(record, StructuredLine):
            record = record.record()
        for handler in self.handlers:
            if record.levelno >= handler.level:
                handler.handle(record)

    def formats_directly(self) -> bool:
        """Whether every handler can write a StructuredLine itself: a plain StreamHandler with
        guardhook's text or JSON formatter and no filters."""
        return all(
            type(h) is logging.StreamHandler
            and not h.filters
            and isinstance(h.formatter, TextFormatter | JsonFormatter)
            for h in self.handlers
        )

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.wake.set()
            self._thread.join()

    def _run(self) -> None:
        while not self.stopped:
            self.wake.wait()
            time.sleep(self.batch_seconds)
            self.wake.clear()  # before draining: a line queued from here on wakes the next round
            self._write_queued()
        self._write_queued()

    def _write_queued(self) -> None:
        records: list[Queued] = []
        while True:
            try:
                records.append(self.lines.get_nowait())
            except queue.Empty:
                break
        if not records:
            return
        for handler in self.handlers:
            mine = [r for r in records if r.levelno >= handler.level]
            if type(handler) is logging.StreamHandler:  # a subclass may emit otherwise: left to it
                write_batch(handler, mine)
            else:
                for record in mine:
                    handler.handle(record.record() if isinstance(record, StructuredLine) else record)


def write_batch(handler: logging.StreamHandler[Any], records: Sequence[Queued]) -> None:
    """What `handler.handle` does for each of `records` (filters, format, the handler's lock, a
    failed format reported by `handleError`), with one write and one flush for the batch: a write
    per line gave up and won back the GIL per line, against the request threads. A
    StructuredLine is formatted by the formatter's `format_line` (the same text as its record's)."""
    lines = []
    direct = getattr(handler.formatter, "format_line", None) if not handler.filters else None
    for record in records:
        if isinstance(record, StructuredLine) and direct is not None:
            try:
                lines.append(direct(record) + handler.terminator)
            except Exception:
                handler.handleError(record.record())
            continue
        if isinstance(record, StructuredLine):
            record = record.record()
        if not handler.filter(record):
            continue
        try:
            lines.append(handler.format(record) + handler.terminator)
        except Exception:
            handler.handleError(record)
    if not lines:
        return
    with handler.lock or contextlib.nullcontext():
        try:
            handler.stream.write("".join(lines))
            handler.flush()
        except Exception:
            last = records[-1]
            handler.handleError(last.record() if isinstance(last, StructuredLine) else last)


class BatchQueueHandler(QueueHandler):
    """A QueueHandler that renders the message now (its arguments may change after the call),
    keeps the record's other attributes, fields and exception included, for the writer's
    formatter, wakes the writer only when it sleeps, and waits for room past `max_lines`."""

    def __init__(self, writer: BatchWriter, max_lines: int = MAX_QUEUED_LINES) -> None:
        super().__init__(writer.lines)
        self.writer = writer
        self.max_lines = max_lines

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        record.msg = record.getMessage()
        record.args = None
        return record

    def direct(self, logger: logging.Logger) -> bool:
        """Whether a line of `logger` at any level it logs reaches exactly this handler and the
        writer's handlers, none filtering or emitting otherwise, so it may be handed to `enqueue`
        as a StructuredLine: no filter or handler on the logger and its ancestors but this one,
        on the root logger, and the writer running and formatting directly."""
        current: logging.Logger | None = logger
        while current is not None:
            if current.filters:
                return False
            if current.parent is None:  # the root logger
                return current.handlers == [self] and not self.filters and self.level == logging.NOTSET
            if current.handlers or not current.propagate:
                return False
            current = current.parent
        return False

    def enqueue(self, record: Queued) -> None:
        if self.writer.stopped:  # at exit, after the last batch: written directly
            self.writer.write(record)
            return
        lines, wake = self.writer.lines, self.writer.wake
        while lines.qsize() >= self.max_lines:  # a stalled reader: wait, as a direct write would
            wake.set()
            time.sleep(0.001)
        lines.put(record)
        if not wake.is_set():
            wake.set()


def write_in_background(
    max_lines: int = MAX_QUEUED_LINES, batch_seconds: float = BATCH_SECONDS
) -> BatchWriter | None:
    """Move the root logger's guardhook handlers (guardhook.server.logformat.configure's) behind
    one queue and a `BatchWriter`, started here and stopped (drained) at exit. Returns the
    writer, or None when the root logger has no guardhook handler (an embedding program's or a
    test harness's logging is left alone). Call it in the process that serves: threads do not
    survive a fork."""
    root = logging.getLogger()
    handlers = [h for h in root.handlers if getattr(h, "guardhook", False)]
    if not handlers:
        return None
    writer = BatchWriter(queue.SimpleQueue(), handlers, batch_seconds)
    front = BatchQueueHandler(writer, max_lines)
    front.guardhook = True  # type: ignore[attr-defined]  # a later configure() replaces it
    for handler in handlers:
        root.removeHandler(handler)
    root.addHandler(front)
    writer.start()
    atexit.register(writer.stop)
    global _front
    _front = front if writer.formats_directly() else None
    return writer


_front: BatchQueueHandler | None = None
"""The root logger's queue handler while `write_in_background` is in force with a writer that
formats structured lines itself."""


def direct_line(logger: logging.Logger, level: int, message: str, fields: dict[str, Any]) -> bool:
    """Hand a structured line of `logger` (at `level`, which the caller checked `logger` logs)
    to the background writer as a StructuredLine, without a LogRecord: True when done, False when
    the line must go through logging (no writer in force, the writer stopped, or another handler
    or filter on the way: a test's capture, an embedding program's logging)."""
    front = _front
    if front is None or front.writer.stopped or not front.direct(logger):
        return False
    front.enqueue(StructuredLine(level, logger.name, message, fields))
    return True
