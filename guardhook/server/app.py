"""The HTTP layer: decode AdmissionReview, ask the engine, encode the answer (design.md §3).

Endpoints: POST /validate, POST /mutate, GET /healthz, GET /readyz, GET /metrics. A body that is
not an AdmissionReview gets HTTP 400 with the reason; every decodable review gets HTTP 200. Errors
(400, an unknown path's 404, a wrong method's 405) are a JSON `Status` object, never Flask's HTML.

The two review endpoints are answered in front of flask (`ReviewFastPath`): the same status line,
headers and body as flask's routes for them send, written straight to WSGI, without flask's
request context, routing, signals and werkzeug's Response object: on this path those cost about as
much as judging a review (issue 26). Every other request goes through flask.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from flask import Flask, Response, request
from gunicorn.http.errors import NoMoreData, ParseException
from werkzeug.http import HTTP_STATUS_CODES
from werkzeug.wsgi import get_content_length, get_input_stream

from guardhook.admission.codec import MAX_BODY_BYTES, ReviewError, decode, encode
from guardhook.admission.engine import Endpoint, Engine
from guardhook.groups.stuck import stuck_after
from guardhook.server.clientauth import ClientAuth
from guardhook.server.metrics import (
    CONTENT_TYPE,
    GangCollector,
    GroupCollector,
    Metrics,
    RefusalCollector,
    StuckCollector,
)
from guardhook.server.spare_metrics import SpareGroupsCollector
from guardhook.server.status import status_body

log = logging.getLogger(__name__)

ENDPOINTS = "POST /validate, POST /mutate, GET /healthz, GET /readyz, GET /metrics"


class Runtime:
    """What the app serves from: the engine (with its view) and metrics. `refresh_metrics` is
    called before /metrics renders, so gauges computed from the view are current. `client_auth`,
    when set, is who may ask for a review (guardhook.server.clientauth)."""

    def __init__(
        self, engine: Engine, metrics: Metrics | None = None, client_auth: ClientAuth | None = None
    ) -> None:
        self.engine = engine
        self.metrics = metrics or Metrics()
        self.client_auth = client_auth
        self.collectors: list[Callable[[Runtime], None]] = []
        self.metrics.registry.register(GroupCollector(lambda: self.engine.view))
        self.metrics.registry.register(GangCollector(lambda: self.engine.view))
        self.metrics.registry.register(StuckCollector(lambda: self.engine.view, self._stuck_after))
        self.metrics.registry.register(SpareGroupsCollector(lambda: self.engine.view))
        self.metrics.registry.register(RefusalCollector())

    def _stuck_after(self) -> float:
        """group-eviction's `stuckAfterSeconds` in the current configuration."""
        return stuck_after(self.engine.config.settings("group-eviction").params)

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


PLAIN_TYPE = "text/plain; charset=utf-8"


def health_answer() -> tuple[int, str, bytes]:
    """`GET /healthz`: (status, Content-Type, body), 200 while the process serves; the same on the
    webhook port and the health port (guardhook.server.metricsport)."""
    return 200, PLAIN_TYPE, b"ok\n"


def ready_answer(runtime: Runtime) -> tuple[int, str, bytes]:
    """`GET /readyz`: (status, Content-Type, body), 200 once `runtime` is ready, else 503."""
    if runtime.ready:
        return 200, PLAIN_TYPE, b"ready\n"
    return 503, PLAIN_TYPE, b"cluster view has not synced yet\n"


def _plain(answer: tuple[int, str, bytes]) -> Response:
    status, content_type, body = answer
    return Response(body, status=status, content_type=content_type)


def create_app(runtime: Runtime) -> Flask:
    """A flask app serving `runtime`."""
    app = Flask("guardhook")

    def review(endpoint: Endpoint, environ: dict[str, Any]) -> ReviewAnswer:
        started = time.perf_counter()
        refused = _unauthenticated(runtime.client_auth, environ)
        if refused is not None:  # never decoded or judged: nothing reaches the ledger
            runtime.metrics.answered(endpoint, refused.status, time.perf_counter() - started)
            return refused
        try:
            body, too_large = _read_body(environ)
        except ReviewError as exc:  # the body's framing broke: its end is unknown, so close
            answer = _bad_request(str(exc), close=True)
            runtime.metrics.answered(endpoint, answer.status, time.perf_counter() - started)
            return answer
        coding = _content_coding(environ)
        media = _foreign_media_type(environ)
        if media:
            # The API server sends application/json (as controller-runtime's webhooks require);
            # a body declared as something else is refused by name, never judged as JSON.
            reason = f"Content-Type {media} is not supported: send the AdmissionReview as application/json"
            answer = ReviewAnswer(
                415, _status_body(415, reason), close=too_large, extra=(("Accept-Post", JSON_TYPE),)
            )
        elif coding:
            # The API server never compresses a review; a body we cannot read is refused by name
            # (RFC 9110 §15.5.16), not reported as "not UTF-8".
            reason = f"Content-Encoding {coding} is not supported: send the AdmissionReview uncompressed"
            answer = ReviewAnswer(
                415,
                _status_body(415, reason),
                close=too_large,
                extra=(("Accept-Encoding", "identity"),),
            )
        elif too_large:
            # An unread body would stall a kept-alive connection: close it.
            answer = _bad_request(f"body is over the {MAX_BODY_BYTES}-byte cap", close=True)
        else:
            try:
                decoded = decode(body)
            except ReviewError as exc:
                answer = _bad_request(str(exc))
            else:
                verdict = runtime.engine.judge(decoded.request, endpoint)
                runtime.metrics.observe(endpoint, verdict)
                answer = ReviewAnswer(200, orjson.dumps(encode(decoded.api_version, verdict.response)))
        runtime.metrics.answered(endpoint, answer.status, time.perf_counter() - started)
        return answer

    # No automatic OPTIONS answer (flask's is a 200 with an empty HTML body): OPTIONS gets the JSON 405.
    @app.post("/validate", provide_automatic_options=False)
    def validate() -> Response:
        return review("validate", request.environ).response()

    @app.post("/mutate", provide_automatic_options=False)
    def mutate() -> Response:
        return review("mutate", request.environ).response()

    @app.get("/healthz", provide_automatic_options=False)
    def healthz() -> Response:
        return _plain(health_answer())

    @app.get("/readyz", provide_automatic_options=False)
    def readyz() -> Response:
        return _plain(ready_answer(runtime))

    @app.get("/metrics", provide_automatic_options=False)
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

    for code in (400, 404, 405, 413, 415, 500):  # werkzeug's HTTPExceptions flask can raise here
        app.register_error_handler(code, http_error)

    app.wsgi_app = ReviewFastPath(app, review)  # type: ignore[method-assign]
    return app


REVIEW_PATHS: dict[str, Endpoint] = {"/validate": "validate", "/mutate": "mutate"}
JSON_TYPE = "application/json"


@dataclass(frozen=True)
class ReviewAnswer:
    """What a review request is answered: the HTTP status, the JSON body (an AdmissionReview, or
    a `Status` for a 400), and whether the connection closes after it."""

    status: int
    body: bytes
    close: bool = False
    extra: tuple[tuple[str, str], ...] = ()
    """Further headers (a 415's Accept-Encoding)."""

    def headers(self) -> list[tuple[str, str]]:
        """The headers werkzeug's Response would send for this answer, in its order."""
        headers = [("Content-Type", JSON_TYPE), ("Content-Length", str(len(self.body))), *self.extra]
        return [*headers, ("Connection", "close")] if self.close else headers

    def response(self) -> Response:
        """The same answer as a werkzeug Response (for flask's routes)."""
        response = Response(self.body, status=self.status, mimetype=JSON_TYPE)
        for name, value in self.extra:
            response.headers[name] = value
        if self.close:
            response.headers["Connection"] = "close"
        return response


class ReviewFastPath:
    """WSGI in front of a flask app: `POST /validate` and `POST /mutate` are answered by `review`
    straight from the WSGI environ, with the status line and headers werkzeug's Response would
    send (no request context, routing, signals or Response object: on this path they cost about
    as much as judging a review); every other request goes to flask's own `wsgi_app`. An exception
    from `review` is answered as flask answers one (the app's 500 `Status`, the traceback logged on
    the app's logger), or propagated when flask would (testing)."""

    def __init__(self, app: Flask, review: Callable[[Endpoint, dict[str, Any]], ReviewAnswer]) -> None:
        self.app = app
        self.flask_wsgi_app = app.wsgi_app
        self.review = review

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        endpoint = REVIEW_PATHS.get(environ.get("PATH_INFO", ""))
        if endpoint is None or environ.get("REQUEST_METHOD") != "POST":
            return self.flask_wsgi_app(environ, start_response)
        try:
            answer = self.review(endpoint, environ)
        except Exception:
            if self.app.testing or self.app.config.get("PROPAGATE_EXCEPTIONS"):
                raise
            path = environ.get("PATH_INFO", "")
            self.app.logger.error("Exception on %s [POST]", path, exc_info=True)
            return _status(500, f"POST {path}: Internal Server Error")(environ, start_response)
        start_response(_STATUS_LINES.get(answer.status) or _status_line(answer.status), answer.headers())
        return [answer.body]


def _status_line(code: int) -> str:
    """The status line werkzeug writes for `code` (its reason phrase, upper-cased)."""
    return f"{code} {HTTP_STATUS_CODES.get(code, 'UNKNOWN').upper()}"


_STATUS_LINES = {code: _status_line(code) for code in (200, 400, 415)}


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
    flask's `request.stream` reads it (werkzeug's own input stream of the environ). Raises
    ReviewError when gunicorn's body reader finds the chunked framing broken or the body cut short."""
    declared = get_content_length(environ)
    if declared is not None and declared > MAX_BODY_BYTES:
        return b"", True
    try:
        body = get_input_stream(environ).read(MAX_BODY_BYTES + 1)
    except TimeoutError:  # the client stalled mid-body (guardhook.server.tlssock): a 400, then closed
        return b"", False
    except (ParseException, NoMoreData) as exc:  # a broken chunked body, or one cut short
        raise ReviewError(f"body cannot be read: {str(exc)[:200] or type(exc).__name__}") from None
    if len(body) > MAX_BODY_BYTES:
        return b"", True
    return body, False


def _unauthenticated(auth: ClientAuth | None, environ: dict[str, Any]) -> ReviewAnswer | None:
    """The 401/403 for a caller client authentication refuses (logged at WARNING with its
    address), or None when it may be judged or no client authentication is set."""
    refusal = auth.refusal(environ) if auth is not None else None
    if refusal is None:
        return None
    code, reason = refusal
    log.warning("refused a review from %s: %s", environ.get("REMOTE_ADDR", "an unknown address"), reason)
    return ReviewAnswer(code, _status_body(code, reason))


def _content_coding(environ: dict[str, Any]) -> str:
    """The request's Content-Encoding when it is not `identity` (none given: "")."""
    coding = str(environ.get("HTTP_CONTENT_ENCODING", "")).strip().lower()
    return "" if coding in ("", "identity") else coding[:40]


def _foreign_media_type(environ: dict[str, Any]) -> str:
    """The request's declared media type when it is not JSON ("" when none is declared, or it is
    `application/json` with any parameters): cut to 60 characters for the answer."""
    declared = str(environ.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower()
    return "" if declared in ("", "application/json") else declared[:60]


def _bad_request(reason: str, close: bool = False) -> ReviewAnswer:
    log.info("rejected a request body: %s", reason)
    return ReviewAnswer(400, _status_body(400, reason), close)


def _status(code: int, message: str) -> Response:
    """An error answer as a Kubernetes `Status` object (JSON), the shape the API server logs."""
    return Response(_status_body(code, message), status=code, mimetype=JSON_TYPE)


_status_body = status_body
