"""The one paging loop for list calls (`limit`/`continue`, as the API server's list chunking
documents), shared by the live view's reflectors and `audit`'s one-shot lists."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import orjson

Page = dict[str, Any]
"""A decoded `{Kind}List`: `items` and `metadata.continue` / `metadata.resourceVersion`."""


def pages(fetch_page: Callable[[str | None], Page]) -> Iterator[Page]:
    """Every page of one list: calls `fetch_page(continue_token)` (None for the first page) until a
    page carries no `metadata.continue`. Raises whatever `fetch_page` raises."""
    token: str | None = None
    while True:
        page = fetch_page(token)
        yield page
        meta = page.get("metadata")
        token = str(meta.get("continue") or "") if isinstance(meta, dict) else ""
        if not token:
            return


def decode(data: bytes | str) -> Any:
    """A list page or watch event as the API server sent it (JSON bytes), decoded: the one JSON
    decoder of the live view (orjson: about 1.4x faster than `json` on list pages, and it shares
    the strings of repeated keys). What orjson refuses but `json` reads (an integer beyond 64 bits
    in a CRD's free-form field) is read by `json`, so one such object never fails a whole list.
    Raises ValueError when it is not JSON."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def request_page(
    call: Callable[..., Any],
    continue_token: str | None,
    limit: int,
    timeout: tuple[float, float],
    decoder: Callable[[bytes], Any] = decode,
) -> Any:
    """One page from a `kubernetes` client list call as raw JSON decoded by `decoder`
    (`_preload_content=False`: the client's typed models are never built), the connection
    released. Raises the client's ApiException, urllib3 errors, and ValueError when the answer is
    not JSON."""
    kwargs: dict[str, Any] = {"limit": limit}
    if continue_token:
        kwargs["_continue"] = continue_token
    response = call(_preload_content=False, _request_timeout=timeout, **kwargs)
    read_to_end = False
    try:
        data = response.data
        read_to_end = True
    finally:
        finish(response, read_to_end)
    return decoder(data)


def finish(response: Any, read_to_end: bool) -> None:
    """Give back the connection of a urllib3 `response` read with `_preload_content=False`: to the
    pool only when the answer was read to its end. A response abandoned part-way (a watch stopped
    or timed out, a read that failed) still has bytes in flight on its connection, which the next
    request on a kept-alive connection would read as its own answer (BadStatusLine, or another
    answer's body): its connection is closed first, so the pool opens a fresh one. This does not
    rely on urllib3 closing an abandoned stream itself, which it does only inside its own reads."""
    if not read_to_end:
        response.close()  # urllib3: closes the socket too, not only the body
    response.release_conn()
