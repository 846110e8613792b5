"""A response the transport stops reading early never goes back to the connection pool open.

A watch stream left part-read on a kept-alive connection still has bytes in flight (events, the
chunked end); the next request sent on that connection would read them as its own answer (the
group-readiness PATCH did, as BadStatusLine). `paging.finish` closes such a connection and pools
only answers read to their end. The fake API server keeps connections alive here (`keep_alive`),
as a real API server does, and records which connection each request came on (`peers`).

With urllib3 2.x the end-to-end tests pass without `finish` too: urllib3 closes a chunked
stream's connection itself when its read times out or its generator is abandoned. They pin the
behaviour; the stand-in response below (which, like any stream abandoned outside urllib3's own
reads, does not close itself) is what fails when a path gives back a part-read connection.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from urllib3.exceptions import ProtocolError, ReadTimeoutError

from guardhook.cluster.kube_transport import KubeTransport
from guardhook.cluster.paging import request_page
from guardhook.cluster.view.live import Reflector
from guardhook.cluster.view.store import ClusterView

from fake_apiserver import FakeApiServer, running_fake

WATCH_SECONDS = 3  # the server ends each watch after this: its end chunk is still to come meanwhile


def node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}


def _listed(transport: KubeTransport) -> tuple[list[str], str]:
    page = transport.list_page("nodes", None, 50)
    return sorted(item["metadata"]["name"] for item in page["items"]), page["metadata"]["resourceVersion"]


def _connection_of(fake: FakeApiServer, nth_from_end: int) -> int:
    return fake.peers[-nth_from_end]


def test_a_list_after_a_watch_went_idle_gets_its_own_answer() -> None:
    with running_fake(keep_alive=True) as fake:
        fake.put("nodes", node("a"))
        transport = KubeTransport(fake.api_client(), idle_seconds=0.3)
        _, version = _listed(transport)
        assert list(transport.watch("nodes", version, WATCH_SECONDS)) == []  # idle: ended by the client
        fake.put("nodes", node("b"))  # an event on the abandoned stream, after the client stopped reading
        assert _listed(transport)[0] == ["a", "b"]
        assert _connection_of(fake, 1) != _connection_of(fake, 2)  # not the watch's connection


def test_a_list_after_a_watch_stopped_part_way_gets_its_own_answer() -> None:
    with running_fake(keep_alive=True) as fake:
        fake.put("nodes", node("a"))
        transport = KubeTransport(fake.api_client(), idle_seconds=10)
        _, version = _listed(transport)
        fake.put("nodes", node("b"))
        events = transport.watch("nodes", version, WATCH_SECONDS)
        assert next(events)["object"]["metadata"]["name"] == "b"
        events.close()  # as the reflector does when stopped, or when an event fails to apply
        assert _listed(transport)[0] == ["a", "b"]
        assert _connection_of(fake, 1) != _connection_of(fake, 2)


def test_a_reflector_whose_event_fails_ends_its_watch_before_it_relists() -> None:
    with running_fake(keep_alive=True) as fake:
        fake.put("nodes", node("a"))
        view = ClusterView(source="test")
        transport = KubeTransport(fake.api_client(), idle_seconds=10)
        reflector = Reflector("nodes", view, transport, watch_timeout_seconds=WATCH_SECONDS)
        reflector.relist()
        fake.put("nodes", node("b"))

        def failing(event: dict[str, Any]) -> None:
            raise RuntimeError("a bug applying an event")

        reflector.apply = failing  # type: ignore[method-assign]
        with pytest.raises(RuntimeError):
            reflector.watch_once()
        reflector.relist()
        assert sorted(name for _, name in view.keys("nodes")) == ["a", "b"]
        assert _connection_of(fake, 1) != _connection_of(fake, 2)


def test_a_watch_the_server_ended_gives_its_connection_back_for_reuse() -> None:
    with running_fake(keep_alive=True) as fake:
        fake.put("nodes", node("a"))
        transport = KubeTransport(fake.api_client(), idle_seconds=10)
        _, version = _listed(transport)
        assert list(transport.watch("nodes", version, 1)) == []  # the server's timeout ends it
        assert _listed(transport)[0] == ["a"]
        assert _connection_of(fake, 1) == _connection_of(fake, 2)  # read to its end: kept


class _Response:
    """A urllib3-like response that, abandoned, leaves its connection as it is: urllib3 closes a
    connection only when one of its own reads fails, and its stream of a body that is not chunked
    is abandoned between reads. Records how it was given back."""

    def __init__(self, lines: list[bytes], then: Exception | None = None, data: bytes = b"{}") -> None:
        self.lines, self.then, self._data = lines, then, data
        self.calls: list[str] = []

    def stream(self, amt: Any = None, decode_content: Any = None) -> Iterator[bytes]:
        yield from self.lines
        if self.then is not None:
            raise self.then

    @property
    def data(self) -> bytes:
        if self.then is not None:
            raise self.then
        return self._data

    def close(self) -> None:
        self.calls.append("close")

    def release_conn(self) -> None:
        self.calls.append("release")


EVENT = b'{"type": "ADDED", "object": {"metadata": {"name": "a"}}}\n'
TIMEOUT = ReadTimeoutError(None, "", "Read timed out.")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("response", "taken", "given_back"),
    [
        (_Response([EVENT, EVENT]), None, ["release"]),  # the server ended the stream
        (_Response([EVENT], then=TIMEOUT), None, ["close", "release"]),  # idle past the read timeout
        (_Response([EVENT, EVENT]), 1, ["close", "release"]),  # the reader stopped part-way
        (_Response([EVENT, b"not json\n", EVENT]), None, ["close", "release"]),  # a line that is no JSON
        (_Response([EVENT], then=ProtocolError("reset")), None, ["close", "release"]),
    ],
    ids=["ended", "idle", "stopped", "bad-line", "broken"],
)
def test_every_watch_stopped_early_closes_its_connection_before_giving_it_back(
    response: _Response, taken: int | None, given_back: list[str]
) -> None:
    transport = KubeTransport(api=None, idle_seconds=1)  # type: ignore[arg-type]
    events = transport._events(response)
    try:
        if taken is None:
            list(events)
        else:
            for _ in range(taken):
                next(events)
            events.close()
    except (ValueError, ProtocolError):
        pass
    assert response.calls == given_back


@pytest.mark.parametrize(
    ("response", "given_back"),
    [(_Response([]), ["release"]), (_Response([], then=ProtocolError("reset")), ["close", "release"])],
    ids=["read", "broken"],
)
def test_a_list_page_read_part_way_closes_its_connection(response: _Response, given_back: list[str]) -> None:
    if response.then is None:
        assert request_page(lambda **_: response, None, 10, (1.0, 1.0)) == {}
    else:
        with pytest.raises(ProtocolError):
            request_page(lambda **_: response, None, 10, (1.0, 1.0))
    assert response.calls == given_back
