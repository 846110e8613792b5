"""`guardhook serve` writes its log lines from a background thread (the standard library's
QueueHandler and QueueListener), so a request thread that logs a decision never waits on a write.

Why: on the request path a write to stderr (a pipe to the container runtime, a file) gives up the
GIL and must win it back from the other request threads, and a slow log reader blocks the writer
under the handler's lock, so every logging request thread waits on the slowest write (issue 26:
with the decision log on, guardhook's server CPU per request was ~80 µs above its own with the log
off). A request thread now only renders the message and queues the record; the listener formats
and writes it. The queue is bounded and a full one blocks (as a synchronous write would): no line
is ever dropped, and memory stays bounded when the reader stalls. Lines still queued at exit are
written before the worker ends (`QueueListener.stop`, at exit).
"""

from __future__ import annotations

import atexit
import logging
import queue
from logging.handlers import QueueHandler, QueueListener

MAX_QUEUED_LINES = 10_000
"""Records waiting for the writer before a logging thread blocks (~3 MB of decision lines)."""


class BlockingQueueHandler(QueueHandler):
    """A QueueHandler that renders the message now (its arguments may change after the call) and
    keeps the record's other attributes, fields and exception included, for the writer's
    formatter; a full queue blocks instead of dropping the record."""

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        record.msg = record.getMessage()
        record.args = None
        return record

    def __init__(self, lines: queue.Queue[logging.LogRecord]) -> None:
        super().__init__(lines)
        self.lines = lines

    def enqueue(self, record: logging.LogRecord) -> None:
        self.lines.put(record)


class DrainingListener(QueueListener):
    """A QueueListener whose `stop` (write what is queued, end the thread) may be called again."""

    _stopped = False

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            super().stop()


def write_in_background(max_lines: int = MAX_QUEUED_LINES) -> DrainingListener | None:
    """Move the root logger's guardhook handlers (guardhook.server.logformat.configure's) behind
    one queue and a listener thread, started here and stopped (drained) at exit. Returns the
    listener, or None when the root logger has no guardhook handler (an embedding program's or a
    test harness's logging is left alone). Call it in the process that serves: threads do not
    survive a fork."""
    root = logging.getLogger()
    handlers = [h for h in root.handlers if getattr(h, "guardhook", False)]
    if not handlers:
        return None
    lines: queue.Queue[logging.LogRecord] = queue.Queue(max_lines)
    listener = DrainingListener(lines, *handlers, respect_handler_level=True)
    front = BlockingQueueHandler(lines)
    front.guardhook = True  # type: ignore[attr-defined]  # a later configure() replaces it
    for handler in handlers:
        root.removeHandler(handler)
    root.addHandler(front)
    listener.start()
    atexit.register(listener.stop)
    return listener
