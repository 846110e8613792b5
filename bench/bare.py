"""A bare allow-all admission webhook under guardhook's own gunicorn/TLS configuration
(guardhook.server.webhook_server.WebhookServer: gthread, one worker, same keep-alive, timeouts, TLS).

It does the least a valid webhook must: read the body, parse the JSON, and answer allowed with the
request's uid in the request's apiVersion. Two of them: `bare_app`, a flask app, and (`--wsgi`)
`bare_wsgi`, a WSGI callable with no framework at all, the stack's own cost (issue 53's bar). Both
parse and encode with the standard library's json, as a webhook without dependencies would. The
load benchmark compares guardhook against them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request

from guardhook.server.app import Runtime
from guardhook.server.certs import ensure_certs
from guardhook.server.webhook_server import ServeOptions, WebhookServer


def bare_app() -> Flask:
    """An allow-all webhook: POST /validate and /mutate, GET /healthz."""
    app = Flask("bare")

    def allow() -> Response:
        review = json.loads(request.get_data())
        answer = {
            "apiVersion": review["apiVersion"],
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        return Response(json.dumps(answer), mimetype="application/json")

    app.post("/validate")(allow)
    app.post("/mutate")(allow)
    app.get("/healthz")(lambda: Response("ok\n", mimetype="text/plain"))
    return app


_JSON_HEADERS = "application/json"
_NOT_FOUND = b'{"kind":"Status","apiVersion":"v1","status":"Failure","code":404}'


def bare_wsgi(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    """An allow-all webhook as a plain WSGI callable (no framework): POST /validate and /mutate
    read the body (its Content-Length), parse it, and answer allowed with its uid; GET /healthz
    answers ok; anything else 404."""
    path = environ.get("PATH_INFO", "")
    if environ.get("REQUEST_METHOD") == "POST" and path in ("/validate", "/mutate"):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        review = json.loads(environ["wsgi.input"].read(length))
        answer = {
            "apiVersion": review["apiVersion"],
            "kind": "AdmissionReview",
            "response": {"uid": review["request"]["uid"], "allowed": True},
        }
        body = json.dumps(answer).encode()
        start_response("200 OK", [("Content-Type", _JSON_HEADERS), ("Content-Length", str(len(body)))])
        return [body]
    if path == "/healthz":
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
        return [b"ok\n"]
    start_response(
        "404 NOT FOUND", [("Content-Type", _JSON_HEADERS), ("Content-Length", str(len(_NOT_FOUND)))]
    )
    return [_NOT_FOUND]


class BareServer(WebhookServer):
    """WebhookServer serving `bare_app` (or, with `wsgi`, `bare_wsgi`) instead of guardhook's app;
    every setting is inherited."""

    plain_wsgi = False

    def load(self) -> Callable[..., Any]:
        return bare_wsgi if self.plain_wsgi else bare_app()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert-dir", required=True)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--wsgi", action="store_true", help="serve the plain WSGI callable, not flask")
    args = parser.parse_args()
    certs = ensure_certs(args.cert_dir)
    options = ServeOptions(host=args.host, port=args.port, threads=args.threads, certs=certs)

    def no_runtime() -> Runtime:
        raise AssertionError("the bare server has no runtime")

    server = BareServer(options, no_runtime)
    server.plain_wsgi = args.wsgi
    server.run()


if __name__ == "__main__":
    main()
