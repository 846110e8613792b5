"""Error answers as a Kubernetes `Status` object (JSON), the shape the API server logs, for every
error the webhook port sends: the app's (400, 404, 405, 415) and those gunicorn's HTTP parser
raises before the app sees a request (400, 414, 417, 431), which gunicorn would answer in HTML.
"""

from __future__ import annotations

import json

from gunicorn.http import errors as http_errors
from werkzeug.http import HTTP_STATUS_CODES

JSON_TYPE = "application/json"


def status_body(code: int, message: str) -> bytes:
    """The JSON `Status` (apiVersion v1, status Failure) for HTTP `code` with `message`."""
    status = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "message": message}
    return json.dumps(status).encode()


def raw_answer(code: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A whole HTTP/1.1 answer (status line, headers, `Status` body) that closes the connection:
    for a request gunicorn's parser refused, whose framing cannot be trusted for a next request."""
    body = status_body(code, message)
    reason = HTTP_STATUS_CODES.get(code, "Error")
    lines = [f"HTTP/1.1 {code} {reason}", "Connection: close", f"Content-Type: {JSON_TYPE}"]
    lines += [f"Content-Length: {len(body)}", *(f"{name}: {value}" for name, value in headers)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


# gunicorn's parser errors (gunicorn/workers/base.py handle_error maps the same ones) -> HTTP code
# and the words the message starts with. Order matters: subclasses first.
_PROTOCOL_ERRORS: tuple[tuple[type[Exception], int, str], ...] = (
    (http_errors.LimitRequestLine, 414, "request line too long"),
    (http_errors.LimitRequestHeaders, 431, "request header fields too large"),
    (http_errors.ExpectationFailed, 417, "expectation failed"),
    # 400, not the 501 RFC 9112 §6.1 suggests: the API server sends no transfer coding but chunked,
    # and a 5xx would read as the webhook's own failure.
    (http_errors.UnsupportedTransferCoding, 400, "unsupported Transfer-Encoding"),
    (http_errors.InvalidRequestLine, 400, "invalid request line"),
    (http_errors.InvalidRequestMethod, 400, "invalid method"),
    (http_errors.InvalidHTTPVersion, 400, "invalid HTTP version"),
    (http_errors.InvalidHeaderName, 400, "invalid header name"),
    (http_errors.InvalidHeader, 400, "invalid header"),
    (http_errors.ParseException, 400, "malformed request"),
)


def protocol_error(exc: BaseException) -> tuple[int, str] | None:
    """(HTTP code, message) for an HTTP parser error of gunicorn's, or None for anything else (an
    application fault: a 500). An InvalidHeader on Content-Length (duplicate, negative, not a
    number, or beside chunked) is named so, as RFC 9112 §6.3 asks such a request be refused."""
    for kind, code, words in _PROTOCOL_ERRORS:
        if isinstance(exc, kind):
            detail = str(exc).strip()
            if isinstance(exc, http_errors.InvalidHeader) and "CONTENT-LENGTH" in detail.upper():
                return code, "invalid Content-Length: duplicate, negative, not a number, or beside chunked"
            return code, f"{words}: {detail[:200]}" if detail else words
    return None
