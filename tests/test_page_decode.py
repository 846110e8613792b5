"""The live view's one JSON decoder (guardhook.cluster.paging.decode)."""

from __future__ import annotations

import json

import pytest

from guardhook.cluster.paging import decode


def test_decodes_bytes_and_text_alike() -> None:
    page = {"kind": "PodList", "metadata": {"continue": "x"}, "items": [{"metadata": {"name": "p"}}]}
    data = json.dumps(page)
    assert decode(data.encode()) == decode(data) == page


def test_an_integer_beyond_64_bits_does_not_fail_the_page() -> None:
    huge = 2**70
    data = json.dumps({"items": [{"spec": {"free": huge}}]}).encode()
    assert decode(data)["items"][0]["spec"]["free"] == huge


def test_not_json_raises_value_error() -> None:
    with pytest.raises(ValueError):
        decode(b"<html>not json</html>")
