"""A bare allow-all admission webhook under guardhook's own gunicorn/TLS configuration
(guardhook.server.webhook_server.WebhookServer: gthread, one worker, same keep-alive, timeouts, TLS).

It does the least a valid webhook must: read the body, parse the JSON, and answer allowed with the
request's uid in the request's apiVersion. The load benchmark compares guardhook against it.
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


class BareServer(WebhookServer):
    """WebhookServer serving `bare_app` instead of guardhook's app; every setting is inherited."""

    def load(self) -> Callable[..., Any]:
        return bare_app()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert-dir", required=True)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    certs = ensure_certs(args.cert_dir)
    options = ServeOptions(host=args.host, port=args.port, threads=args.threads, certs=certs)

    def no_runtime() -> Runtime:
        raise AssertionError("the bare server has no runtime")

    BareServer(options, no_runtime).run()


if __name__ == "__main__":
    main()
