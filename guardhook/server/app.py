"""The HTTP layer: decode AdmissionReview, ask the engine, encode the answer (design.md §3).

Endpoints: POST /validate, POST /mutate, GET /healthz, GET /readyz, GET /metrics. A body that is
not an AdmissionReview gets HTTP 400 with the reason; every decodable review gets HTTP 200. Errors
(400, an unknown path's 404, a wrong method's 405) are a JSON `Status` object, never Flask's HTML.

The two review endpoints are answered in front of flask (`ReviewFastPath`), the same answer in the
same werkzeug Response, without flask's request context, routing and signals: on this path those
cost about as much as judging a review (issue 26). Every other request goes through flask.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
from flask import Flask, Response, request
from werkzeug.wsgi import get_content_length, get_input_stream

from guardhook.admission.codec import MAX_BODY_BYTES, ReviewError, decode, encode
from guardhook.admission.engine import Endpoint, Engine
from guardhook.server.metrics import CONTENT_TYPE, GroupCollector, Metrics
from guardhook.server.spare_metrics import SpareGroupsCollector

log = logging.getLogger(__name__)

ENDPOINTS = "POST /validate, POST /mutate, GET /healthz, GET /readyz, GET /metrics"


class Runtime:
    """What the app serves from: the engine (with its view) and metrics. `refresh_metrics` is
    called before /metrics renders, so gauges computed from the view are current."""

    def __init__(self, engine: Engine, metrics: Metrics | None = None) -> None:
        self.engine = engine
        self.metrics = metrics or Metrics()
        self.collectors: list[Callable[[Runtime], None]] = []
        self.metrics.registry.register(GroupCollector(lambda: self.engine.view))
        self.metrics.registry.register(SpareGroupsCollector(lambda: self.engine.view))

    @property
    def ready(self) -> bool:
        """Ready once the view has synced for the first time (certificates are loaded before the
        server accepts connections). Never flips back on a later watch outage."""
        return self.engine.view.synced

    def refresh_metrics(self) -> None:
        view = self.engine.view
        self.metrics.view_synced.set(1 if view.synced else 0)
        self.metrics.view_stale_seconds.set(view.stale_seconds())
        for collect in self.collectors:
            collect(self)


def create_app(runtime: Runtime) -> Flask:
    """A flask app serving `runtime`."""
    app = Flask("guardhook")

    def review(endpoint: Endpoint, environ: dict[str, Any] | None = None) -> Response:
        started = time.perf_counter()
        body, too_large = _read_body(request.environ if environ is None else environ)
        if too_large:
            response = _bad_request(f"body is over the {MAX_BODY_BYTES}-byte cap")
            # An unread body would stall a kept-alive connection: close it.
            response.headers["Connection"] = "close"
        else:
            try:
                decoded = decode(body)
            except ReviewError as exc:
                response = _bad_request(str(exc))
            else:
                verdict = runtime.engine.judge(decoded.request, endpoint)
                runtime.metrics.observe(endpoint, verdict)
                payload = orjson.dumps(encode(decoded.api_version, verdict.response))
                response = Response(payload, status=200, mimetype="application/json")
        runtime.metrics.answered(endpoint, response.status_code, time.perf_counter() - started)
        return response

    @app.post("/validate")
    def validate() -> Response:
        return review("validate")

    @app.post("/mutate")
    def mutate() -> Response:
        return review("mutate")

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("ok\n", mimetype="text/plain")

    @app.get("/readyz")
    def readyz() -> Response:
        if runtime.ready:
            return Response("ready\n", mimetype="text/plain")
        return Response("cluster view has not synced yet\n", status=503, mimetype="text/plain")

    @app.get("/metrics")
    def metrics() -> Response:
        runtime.refresh_metrics()
        return Response(runtime.metrics.render(), content_type=CONTENT_TYPE)

    def http_error(exc: Exception) -> Response:
        # Flask would answer an HTML page; a client here reads JSON (the API server) or text.
        code = int(getattr(exc, "code", None) or 500)
        response = _status(code, _error_message(code, exc))
        if code == 405:  # as RFC 9110 asks of a 405
            response.headers["Allow"] = ", ".join(getattr(exc, "valid_methods", None) or ())
        return response

    for code in (400, 404, 405, 413, 500):  # werkzeug's HTTPExceptions flask can raise here
        app.register_error_handler(code, http_error)

    app.wsgi_app = ReviewFastPath(app, review)  # type: ignore[method-assign]
    return app


REVIEW_PATHS: dict[str, Endpoint] = {"/validate": "validate", "/mutate": "mutate"}


class ReviewFastPath:
    """WSGI in front of a flask app: `POST /validate` and `POST /mutate` are answered by `review`
    directly from the WSGI environ; every other request goes to flask's own `wsgi_app`. An
    exception from `review` is answered as flask answers one (the app's 500 `Status`, the
    traceback logged on the app's logger), or propagated when flask would (testing)."""

    def __init__(self, app: Flask, review: Callable[[Endpoint, dict[str, Any]], Response]) -> None:
        self.app = app
        self.flask_wsgi_app = app.wsgi_app
        self.review = review

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        endpoint = REVIEW_PATHS.get(environ.get("PATH_INFO", ""))
        if endpoint is None or environ.get("REQUEST_METHOD") != "POST":
            return self.flask_wsgi_app(environ, start_response)
        try:
            response = self.review(endpoint, environ)
        except Exception:
            if self.app.testing or self.app.config.get("PROPAGATE_EXCEPTIONS"):
                raise
            path = environ.get("PATH_INFO", "")
            self.app.logger.error("Exception on %s [POST]", path, exc_info=True)
            response = _status(500, f"POST {path}: Internal Server Error")
        return response(environ, start_response)


def _error_message(code: int, exc: Exception) -> str:
    """One line for an unknown path or a wrong method, naming the endpoints there are."""
    where = f"{request.method} {request.path}"
    if code == 404:
        return f"{where}: no such endpoint (served: {ENDPOINTS})"
    if code == 405:
        methods = getattr(exc, "valid_methods", None) or ()
        allowed = ", ".join(m for m in methods if m not in ("HEAD", "OPTIONS"))
        return f"{where}: method not allowed ({request.path} takes {allowed})"
    return f"{where}: {getattr(exc, 'name', 'error')}"


def _read_body(environ: dict[str, Any]) -> tuple[bytes, bool]:
    """The request body, or (b"", True) when it is over the cap (declared or actual); read as
    flask's `request.stream` reads it (werkzeug's own input stream of the environ)."""
    declared = get_content_length(environ)
    if declared is not None and declared > MAX_BODY_BYTES:
        return b"", True
    try:
        body = get_input_stream(environ).read(MAX_BODY_BYTES + 1)
    except TimeoutError:  # the client stalled mid-body (guardhook.server.tlssock): a 400, then closed
        return b"", False
    if len(body) > MAX_BODY_BYTES:
        return b"", True
    return body, False


def _bad_request(reason: str) -> Response:
    log.info("rejected a request body: %s", reason)
    return _status(400, reason)


def _status(code: int, message: str) -> Response:
    """An error answer as a Kubernetes `Status` object (JSON), the shape the API server logs."""
    payload = json.dumps(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message}
    )
    return Response(payload, status=code, mimetype="application/json")
