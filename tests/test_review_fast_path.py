"""POST /validate and /mutate are answered in front of flask (guardhook.server.app.ReviewFastPath):
the same status, headers and bytes as flask's own route for every captured review and for a
malformed body, and a failure inside is the app's JSON 500 `Status`, as flask answers one."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from guardhook.admission.codec import MAX_BODY_BYTES
from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.server.app import Runtime, create_app

from conftest import FIXTURES

REVIEWS = sorted((FIXTURES / "reviews").glob("*.json"))


def flask_route_only(app: Flask) -> Any:
    """The app's WSGI callable behind the fast path: flask's own routing for every request."""
    return app.wsgi_app.flask_wsgi_app  # type: ignore[attr-defined]


def answer(app: Flask, wsgi: Any, path: str, body: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    """The status line, the headers in order and the body of `wsgi`'s answer."""
    app.wsgi_app = wsgi  # type: ignore[method-assign]
    got = app.test_client().post(path, data=body, content_type="application/json")
    return got.status, list(got.headers.items()), got.data


@pytest.mark.parametrize("review", REVIEWS, ids=lambda p: p.stem)
def test_fast_path_answers_as_flask_routes_do(review: Path) -> None:
    path = "/mutate" if review.name.endswith(".mutating.json") else "/validate"
    body = review.read_bytes()
    # Two apps over two views: group-eviction records into its ledger, so one engine's second
    # answer to an eviction could differ from its first.
    fast_app = create_app(Runtime(Engine(embedded_fleet_view())))
    flask_app = create_app(Runtime(Engine(embedded_fleet_view())))
    fast = answer(fast_app, fast_app.wsgi_app, path, body)
    routed = answer(flask_app, flask_route_only(flask_app), path, body)
    assert fast[0] == routed[0] == "200 OK"
    assert fast == routed
    assert json.loads(fast[2])["response"]["uid"] == json.loads(body)["request"]["uid"]


@pytest.mark.parametrize(
    "body", [b"{not json", b'{"kind": "AdmissionReview"}', b"", b" " * (MAX_BODY_BYTES + 1)]
)
def test_fast_path_rejects_a_malformed_body_as_flask_routes_do(body: bytes) -> None:
    app = create_app(Runtime(Engine(embedded_fleet_view())))
    fast = answer(app, app.wsgi_app, "/validate", body)
    routed = answer(app, flask_route_only(app), "/validate", body)
    assert fast[0] == "400 BAD REQUEST"
    assert fast == routed
    assert (("Connection", "close") in fast[1]) == (len(body) > MAX_BODY_BYTES)


def test_a_failure_on_the_fast_path_is_the_apps_json_500(caplog: pytest.LogCaptureFixture) -> None:
    engine = Engine(embedded_fleet_view())

    def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("engine bug")

    engine.judge = broken  # type: ignore[method-assign]
    app = create_app(Runtime(engine))
    body = REVIEWS[0].read_bytes()
    with caplog.at_level(logging.ERROR):
        got = app.test_client().post("/validate", data=body, content_type="application/json")
    assert got.status_code == 500
    assert got.json == {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": 500,
        "message": "POST /validate: Internal Server Error",
    }
    assert any("Exception on /validate [POST]" in r.getMessage() and r.exc_info for r in caplog.records)
    app.testing = True  # as flask does when testing: the exception reaches the caller
    with pytest.raises(RuntimeError, match="engine bug"):
        app.test_client().post("/validate", data=body, content_type="application/json")


def test_other_methods_and_paths_still_go_through_flask() -> None:
    app = create_app(Runtime(Engine(embedded_fleet_view())))
    client = app.test_client()
    assert client.get("/validate").status_code == 405
    assert client.get("/validate").headers["Allow"]
    assert client.post("/validate/").status_code == 404
    assert client.get("/healthz").data == b"ok\n"
