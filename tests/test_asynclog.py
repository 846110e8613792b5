"""`guardhook serve` writes its log lines from a background thread (guardhook.server.asynclog): a
request thread never waits on the log's reader, no line is dropped, and lines keep their format."""

from __future__ import annotations

import io
import logging
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from guardhook.admission.decisionlog import log_allowed_disruptions, log_decisions, write_lines_with
from guardhook.admission.engine import Decision
from guardhook.server.asynclog import BatchQueueHandler, BatchWriter, direct_line, write_in_background
from guardhook.server.logformat import JsonFormatter, StructuredLine, TextFormatter

from conftest import start_server


@pytest.fixture
def guardhook_root_handler() -> Iterator[tuple[logging.Handler, io.StringIO]]:
    """A root handler marked as logformat.configure marks its own, writing to a StringIO; the
    root logger's handlers and level are put back afterwards."""
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(TextFormatter())
    handler.guardhook = True  # type: ignore[attr-defined]
    root.handlers = [handler]
    root.setLevel(logging.INFO)
    yield handler, stream
    root.handlers, root.level = saved_handlers, saved_level


@pytest.fixture
def start_writer(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO],
) -> Iterator[Callable[..., BatchWriter]]:
    """Start `write_in_background` over the guardhook root handler; every writer is stopped after."""
    started: list[BatchWriter] = []

    def start(**kwargs: Any) -> BatchWriter:
        writer = write_in_background(**kwargs)
        assert writer is not None
        started.append(writer)
        return writer

    yield start
    for writer in started:
        writer.stop()


def test_lines_are_written_by_the_writer_thread_with_their_fields_args_and_traceback(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO], start_writer: Callable[..., BatchWriter]
) -> None:
    handler, stream = guardhook_root_handler
    writing_threads: set[str] = set()
    original_write = stream.write

    def write(text: str) -> int:
        writing_threads.add(threading.current_thread().name)
        return original_write(text)

    stream.write = write  # type: ignore[method-assign]
    writer = start_writer()
    root = logging.getLogger()
    assert [type(h) for h in root.handlers if getattr(h, "guardhook", False)] == [BatchQueueHandler]
    shown = ["before"]
    log = logging.getLogger("guardhook.test")
    log.info("args %s", shown, extra={"fields": {"policy": "worker-delete", "dryRun": False}})
    shown[0] = "after"  # rendered when logged, not when written
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    writer.stop()
    lines = stream.getvalue()
    assert "INFO guardhook.test: args ['before'] policy=worker-delete dryRun=False" in lines
    assert "ERROR guardhook.test: failed" in lines and "RuntimeError: boom" in lines
    assert handler not in root.handlers
    assert writing_threads == {"guardhook-log-writer"}  # never on the logging thread


def test_a_full_queue_blocks_the_logger_and_drops_nothing(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO], start_writer: Callable[..., BatchWriter]
) -> None:
    handler, stream = guardhook_root_handler
    release = threading.Event()
    original_write = stream.write

    def slow_write(text: str) -> int:
        release.wait(10)  # the reader stalls until released
        return original_write(text)

    stream.write = slow_write  # type: ignore[method-assign]
    writer = start_writer(max_lines=2)
    log = logging.getLogger("guardhook.test")
    done = threading.Event()

    def flood() -> None:
        for n in range(20):
            log.info("line %d", n)
        done.set()

    flooding = threading.Thread(target=flood)
    flooding.start()
    assert not done.wait(0.5)  # two queued, a batch being written: a later call waits
    release.set()
    flooding.join(10)
    writer.stop()
    written = [line.split(": ")[1] for line in stream.getvalue().splitlines()]
    assert written == [f"line {n}" for n in range(20)]


def test_a_batch_is_one_write_and_a_line_that_fails_to_format_loses_no_other(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO],
    start_writer: Callable[..., BatchWriter],
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, stream = guardhook_root_handler
    writes: list[str] = []
    original_write = stream.write

    def write(text: str) -> int:
        writes.append(text)
        return original_write(text)

    stream.write = write  # type: ignore[method-assign]

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    writer = start_writer(batch_seconds=0.3)
    log = logging.getLogger("guardhook.test")
    log.info("first")
    log.info("broken", extra={"fields": {"value": Unprintable()}})
    log.info("last")
    writer.stop()
    assert len(writes) == 1  # one write (and one flush) for the batch, not one per line
    assert [line.split(": ")[1] for line in stream.getvalue().splitlines()] == ["first", "last"]
    assert "RuntimeError: no text" in capsys.readouterr().err  # logging's own report of the bad line


def test_a_line_logged_after_the_writer_stopped_is_written_directly(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO], start_writer: Callable[..., BatchWriter]
) -> None:
    _, stream = guardhook_root_handler
    start_writer().stop()
    logging.getLogger("guardhook.test").warning("late line")
    assert "WARNING guardhook.test: late line" in stream.getvalue()


def test_no_guardhook_handler_leaves_logging_alone() -> None:
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = [logging.NullHandler()]
    try:
        assert write_in_background() is None
        assert not any(isinstance(h, BatchQueueHandler) for h in root.handlers)
    finally:
        root.handlers = saved


def test_a_stalled_log_reader_does_not_stall_the_answers(tmp_path: Path) -> None:
    """stderr is a pipe nobody reads (a stuck log collector): with lines written on the request
    threads, the pipe's 64 KiB fill after ~130 denial lines and every later answer waits."""
    server = start_server(tmp_path, stdout=subprocess.PIPE)
    answers = 400  # each a denial, logged at INFO: ~200 KB of lines, three pipes' worth
    try:
        for _ in range(answers):
            assert server.review("/validate", "s01-worker-delete.validating")["allowed"] is False
    finally:
        server.process.terminate()
        output, _ = server.process.communicate(timeout=30)
    decisions = [line for line in output.decode().splitlines() if "guardhook.decisions" in line]
    assert len(decisions) == answers  # every queued line written before the worker ended


REQUEST = {
    "uid": "u-1",
    "operation": "DELETE",
    "resource": {"group": "", "version": "v1", "resource": "pods"},
    "namespace": "serve",
    "name": 'llm "x"\n0',  # a quote and a control character: quoted and escaped the same either way
    "userInfo": {"username": "someone", "groups": ["a"]},
}


@contextmanager
def _only_guardhook_handlers() -> Iterator[None]:
    """Without pytest's own capture handlers on the root logger (added around each test's call,
    after the fixtures): while they listen, every line goes through logging."""
    root = logging.getLogger()
    pytest_handlers = [h for h in root.handlers if not getattr(h, "guardhook", False)]
    for listening in pytest_handlers:
        root.removeHandler(listening)
    try:
        yield
    finally:
        for listening in pytest_handlers:
            root.addHandler(listening)


def _decision_lines(stream: io.StringIO) -> list[str]:
    """The decision lines written, without their time (the two paths log at different instants)."""
    lines = stream.getvalue().splitlines()
    return [re.sub(r'^\S+ \S+ |"time":"[^"]*",', "", line) for line in lines if "admission decision" in line]


@pytest.mark.parametrize("formatter", [TextFormatter, JsonFormatter])
def test_a_structured_line_formats_as_its_log_record_time_included(
    formatter: type[logging.Formatter],
) -> None:
    fields = {
        "uid": "u-1",
        "user": "evil\u202ename",
        "message": 'a "b"=c',
        "dryRun": False,
        "policyMs": 0.125,
    }
    for level in (logging.DEBUG, logging.INFO, logging.WARNING):
        line = StructuredLine(level, "guardhook.decisions", "admission\ndecision", dict(fields))
        for created in (1764590400.001, 1764590400.999, 1764590461.25):  # within and across seconds
            line.created, line.msecs = created, (created - int(created)) * 1000
            ours = formatter()
            assert ours.format_line(line) == ours.format(line.record())  # type: ignore[attr-defined]
            assert formatter().format(line.record()) == ours.format_line(line)  # type: ignore[attr-defined]


@pytest.mark.parametrize("formatter", [TextFormatter, JsonFormatter])
def test_a_decision_line_reaches_the_writer_without_a_log_record_and_reads_the_same(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO],
    start_writer: Callable[..., BatchWriter],
    monkeypatch: pytest.MonkeyPatch,
    formatter: type[logging.Formatter],
) -> None:
    handler, stream = guardhook_root_handler
    handler.setFormatter(formatter())
    decisions = [
        Decision("worker-delete", "denied", "would break group 0", "Deny"),
        Decision("group-eviction", "allowed"),
    ]
    timings = {"worker-delete": 0.0001, "group-eviction": 0.0002}
    log_allowed_disruptions(True)
    try:
        with _only_guardhook_handlers():
            writer = start_writer()
            log_decisions(REQUEST, decisions, timings, 0.0004)  # through logging: LogRecords
            write_lines_with(direct_line)
            made: list[logging.LogRecord] = []
            real = logging.Logger.makeRecord
            monkeypatch.setattr(
                logging.Logger, "makeRecord", lambda *a, **k: made.append(real(*a, **k)) or made[-1]
            )
            log_decisions(REQUEST, decisions, timings, 0.0004)
            writer.stop()
    finally:
        write_lines_with(None)
        log_allowed_disruptions(False)
    assert made == []  # no LogRecord on the request thread
    lines = _decision_lines(stream)
    assert len(lines) == 4 and lines[:2] == lines[2:]  # the same lines either way


@pytest.mark.parametrize("listening_on", ["", "guardhook", "guardhook.decisions"])
def test_decision_lines_go_through_logging_while_another_handler_listens(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO],
    start_writer: Callable[..., BatchWriter],
    listening_on: str,
) -> None:
    _, stream = guardhook_root_handler
    start_writer()
    write_lines_with(direct_line)
    captured: list[logging.LogRecord] = []
    listener = logging.Handler()
    listener.emit = captured.append  # type: ignore[method-assign]
    try:
        with _only_guardhook_handlers():  # the listener alone turns the direct path off
            # on the root logger as pytest's caplog does, or on a logger on the way to it
            logging.getLogger(listening_on or None).addHandler(listener)
            log_decisions(REQUEST, [Decision("worker-delete", "denied", "no", "Deny")], {}, 0.001)
    finally:
        logging.getLogger(listening_on or None).removeHandler(listener)
        write_lines_with(None)
    assert [r.fields["policy"] for r in captured] == ["worker-delete"]  # type: ignore[attr-defined]
