"""AdmissionReview decoding and encoding."""

from __future__ import annotations

import json

import pytest

from guardhook.admission.codec import MAX_BODY_BYTES, ReviewError, decode, encode

from conftest import load_review


def body(**request: object) -> bytes:
    return json.dumps(
        {
            "kind": "AdmissionReview",
            "apiVersion": "admission.k8s.io/v1",
            "request": {"uid": "u", "operation": "CREATE", **request},
        }
    ).encode()


@pytest.mark.parametrize("version", ["admission.k8s.io/v1", "admission.k8s.io/v1beta1"])
def test_both_versions_decode_and_answer_in_kind(version: str) -> None:
    review = load_review("s01-worker-delete.validating")
    review["apiVersion"] = version
    decoded = decode(json.dumps(review).encode())
    assert decoded.api_version == version
    assert decoded.request["uid"] == review["request"]["uid"]
    answer = encode(decoded.api_version, {"uid": "u", "allowed": True})
    assert answer == {
        "apiVersion": version,
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True},
    }


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"", "not JSON"),
        (b"{", "not JSON"),
        (b"[1]", "not a JSON object"),
        (
            b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v2","request":{"uid":"u"}}',
            "apiVersion",
        ),
        (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}', "no request"),
        (b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":""}}', "uid"),
        (body(kind="Pod"), "request.kind"),
        (body(resource={"group": 1}), "request.resource.group"),
        (body(oldObject=[1]), "request.oldObject"),
        (body(name=5), "request.name"),
        (body(dryRun="yes"), "request.dryRun"),
        (b"[" * 100000 + b"]" * 100000, "not JSON"),
    ],
)
def test_bad_bodies_raise_with_a_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(ReviewError, match=reason):
        decode(raw)


def test_body_over_the_cap_is_refused_before_parsing() -> None:
    with pytest.raises(ReviewError, match="cap"):
        decode(b" " * (MAX_BODY_BYTES + 1))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "body is not JSON: it is empty"),
        (b'{"kind":', "body is not JSON: it ends early (line 1, column 9)"),
        (b'{"a":"\xff"}', "body is not JSON: not UTF-8 text (invalid start byte at byte 6)"),
        (
            b'{"a":"\\ud800"}',
            "body is not JSON: a \\u escape is half of a UTF-16 surrogate pair (line 1, column 7)",
        ),
        (b"[" * 2000 + b"]" * 2000, "body is not JSON: nested too deeply (line 1, column 1026)"),
        (b"{}", "kind is missing, expected AdmissionReview"),
        (b'{"kind":null}', "kind is null, expected AdmissionReview"),
        (b'{"kind":"Pod"}', 'kind is "Pod", expected AdmissionReview'),
        (
            b'{"kind":"AdmissionReview"}',
            "apiVersion is missing, expected admission.k8s.io/v1 or admission.k8s.io/v1beta1",
        ),
    ],
)
def test_reasons_speak_of_the_body_not_of_python_or_the_parser(raw: bytes, message: str) -> None:
    # Was: "kind is None, expected 'AdmissionReview'", and invalid UTF-8 as "str is not valid
    # UTF-8: surrogates not allowed".
    with pytest.raises(ReviewError) as raised:
        decode(raw)
    assert str(raised.value) == message
    assert "None" not in message and "surrogates not allowed" not in message
