"""`guardhook serve` writes its log lines from a background thread (guardhook.server.asynclog): a
request thread never waits on the log's reader, no line is dropped, and lines keep their format."""

from __future__ import annotations

import io
import logging
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from guardhook.server.asynclog import BatchQueueHandler, write_in_background
from guardhook.server.logformat import TextFormatter

from conftest import clean_env, free_port, load_review


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


def test_lines_are_written_by_the_listener_with_their_fields_args_and_traceback(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO],
) -> None:
    handler, stream = guardhook_root_handler
    listener = write_in_background()
    assert listener is not None
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
    listener.stop()
    lines = stream.getvalue()
    assert "INFO guardhook.test: args ['before'] policy=worker-delete dryRun=False" in lines
    assert "ERROR guardhook.test: failed" in lines and "RuntimeError: boom" in lines
    assert handler not in root.handlers


def test_a_full_queue_blocks_the_logger_and_drops_nothing(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO],
) -> None:
    handler, stream = guardhook_root_handler
    release = threading.Event()
    original_emit = handler.emit

    def slow_emit(record: logging.LogRecord) -> None:
        release.wait(10)  # the reader stalls until released
        original_emit(record)

    handler.emit = slow_emit  # type: ignore[method-assign]
    listener = write_in_background(max_lines=2)
    assert listener is not None
    log = logging.getLogger("guardhook.test")
    done = threading.Event()

    def flood() -> None:
        for n in range(20):
            log.info("line %d", n)
        done.set()

    writer = threading.Thread(target=flood)
    writer.start()
    assert not done.wait(0.5)  # two queued, one being written: the fourth call waits
    release.set()
    writer.join(10)
    listener.stop()
    written = [line.split(": ")[1] for line in stream.getvalue().splitlines()]
    assert written == [f"line {n}" for n in range(20)]


def test_a_line_logged_after_the_writer_stopped_is_written_directly(
    guardhook_root_handler: tuple[logging.Handler, io.StringIO],
) -> None:
    _, stream = guardhook_root_handler
    writer = write_in_background()
    assert writer is not None
    writer.stop()
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
    port = free_port()
    cert_dir = tmp_path / "certs"
    args = [sys.executable, "-m", "guardhook", "serve", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--cert-dir", str(cert_dir), "--threads", "4"]
    env = clean_env(tmp_path)
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    session = requests.Session()
    session.trust_env = False
    url = f"https://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None and time.monotonic() < deadline, "guardhook serve did not start"
            if (cert_dir / "ca.crt").exists():
                session.verify = str(cert_dir / "ca.crt")
                try:
                    if session.get(url + "/readyz", timeout=2).status_code == 200:
                        break
                except requests.RequestException:
                    pass
            time.sleep(0.1)
        review = load_review("s01-worker-delete.validating")
        answers = 400  # each a denial, logged at INFO: ~200 KB of lines, three pipes' worth
        for _ in range(answers):
            answer = session.post(url + "/validate", json=review, timeout=10)
            assert answer.status_code == 200 and answer.json()["response"]["allowed"] is False
    finally:
        process.terminate()
        output, _ = process.communicate(timeout=30)
    decisions = [line for line in output.decode().splitlines() if "guardhook.decisions" in line]
    assert len(decisions) == answers  # every queued line written before the worker ended
