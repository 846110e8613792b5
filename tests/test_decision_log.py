"""The decision log, `--log-format json|text` for guardhook's and gunicorn's lines, certificate
reload and view sync lines (issue 15 item 2), and the per-policy latency histogram (item 3)."""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from test_live_reflector import Scripted, fleet, page

from guardhook.admission.engine import Engine
from guardhook.cluster.view.live import Reflector
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.cluster.view.store import KINDS, ClusterView
from guardhook.server.certs import generate
from guardhook.server.logformat import JsonFormatter, TextFormatter
from guardhook.server.metrics import Metrics

from conftest import Server, load_review

FIELDS = {
    "uid",
    "operation",
    "resource",
    "subResource",
    "namespace",
    "name",
    "user",
    "dryRun",
    "policy",
    "action",
    "outcome",
    "message",
    "policyMs",
    "latencyMs",
}


def decision_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "guardhook.decisions"]


# --- the engine writes the lines ---------------------------------------------------------------


def test_a_denial_is_one_info_line_with_the_request_identity(caplog: pytest.LogCaptureFixture) -> None:
    review = load_review("s01-worker-delete.validating")
    engine = Engine(embedded_fleet_view(), log_decisions=True)
    with caplog.at_level(logging.INFO, logger="guardhook.decisions"):
        verdict = engine.judge(review["request"])
    assert verdict.response["allowed"] is False
    records = decision_records(caplog)
    assert len(records) == 1 and records[0].levelno == logging.INFO
    fields = records[0].fields  # type: ignore[attr-defined]
    assert set(fields) == FIELDS
    request = review["request"]
    assert fields["uid"] == request["uid"] and fields["operation"] == "DELETE"
    assert (fields["resource"], fields["namespace"], fields["name"]) == ("v1/pods", "serve", "llm-xl-0-2")
    assert fields["user"] == request["userInfo"]["username"]
    assert (fields["policy"], fields["action"], fields["outcome"]) == ("worker-delete", "Deny", "denied")
    assert fields["latencyMs"] >= fields["policyMs"] > 0


def test_never_the_objects_contents(caplog: pytest.LogCaptureFixture) -> None:
    review = load_review("s01-worker-delete.validating")
    request = review["request"]
    secret = "do-not-log-this-value"
    for key in ("object", "oldObject"):
        if isinstance(request.get(key), dict):
            request[key].setdefault("metadata", {}).setdefault("labels", {})["secret"] = secret
            request[key]["spec"] = {
                "containers": [{"name": "x", "env": [{"name": "TOKEN", "value": secret}]}]
            }
    with caplog.at_level(logging.DEBUG, logger="guardhook.decisions"):
        Engine(embedded_fleet_view(), log_decisions=True).judge(request)
    assert decision_records(caplog)
    text = "\n".join(JsonFormatter().format(r) + TextFormatter().format(r) for r in decision_records(caplog))
    assert secret not in text


def test_allows_only_at_debug_and_warnings_at_info(caplog: pytest.LogCaptureFixture) -> None:
    allowed = load_review("s02-leader-delete.validating")
    engine = Engine(embedded_fleet_view(), log_decisions=True)
    with caplog.at_level(logging.INFO, logger="guardhook.decisions"):
        assert engine.judge(allowed["request"]).response["allowed"] is True
    assert decision_records(caplog) == []
    with caplog.at_level(logging.DEBUG, logger="guardhook.decisions"):
        engine.judge(allowed["request"])
    debug = decision_records(caplog)
    assert debug and all(r.levelno == logging.DEBUG for r in debug)
    assert {r.fields["outcome"] for r in debug} == {"allowed"}  # type: ignore[attr-defined]


def test_offline_engines_log_no_decisions(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="guardhook.decisions"):
        Engine(embedded_fleet_view()).judge(load_review("s01-worker-delete.validating")["request"])
    assert decision_records(caplog) == []


# --- the two formats ----------------------------------------------------------------------------


def record(fields: dict[str, Any] | None = None) -> logging.LogRecord:
    made = logging.LogRecord("guardhook.decisions", logging.INFO, __file__, 1, "admission decision", (), None)
    if fields is not None:
        made.fields = fields
    return made


def test_json_lines_carry_the_fields_at_the_top_level() -> None:
    line = json.loads(JsonFormatter().format(record({"policy": "worker-delete", "outcome": "denied"})))
    assert line["level"] == "INFO" and line["logger"] == "guardhook.decisions"
    assert line["msg"] == "admission decision" and line["time"].endswith("Z")
    assert (line["policy"], line["outcome"]) == ("worker-delete", "denied")


def test_text_lines_append_the_fields_as_key_value_pairs() -> None:
    line = TextFormatter().format(
        record({"policy": "worker-delete", "message": 'a "quoted" text', "name": ""})
    )
    assert line.endswith('admission decision policy=worker-delete message="a \\"quoted\\" text" name=""')
    assert TextFormatter().format(record()).endswith("guardhook.decisions: admission decision")


# --- the real server ---------------------------------------------------------------------------


def test_serve_writes_every_line_as_json_with_decisions_and_certificate_reloads(
    fresh_server: Callable[..., Server], tmp_path: Path
) -> None:
    server = fresh_server(log_format="json")
    assert server.review("/validate", "s01-worker-delete.validating")["allowed"] is False
    new = generate(tmp_path / "new", ["localhost", "127.0.0.1"])
    os.replace(new.key, server.cert_dir / "tls.key")
    os.replace(new.cert, server.cert_dir / "tls.crt")
    fresh = requests.Session()
    fresh.verify = str(new.ca)
    fresh.trust_env = False
    assert fresh.get(server.url + "/healthz", timeout=10).status_code == 200  # served with the new one
    server.stop()
    lines = [json.loads(line) for line in server.log.read_text().splitlines() if line.strip()]
    loggers = {line["logger"] for line in lines}
    assert "gunicorn.error" in loggers and "guardhook.decisions" in loggers  # one format for both
    denial = next(line for line in lines if line["logger"] == "guardhook.decisions")
    assert (denial["policy"], denial["outcome"], denial["name"]) == ("worker-delete", "denied", "llm-xl-0-2")
    messages = [line["msg"] for line in lines]
    assert any(m.startswith("loaded the serving certificate") for m in messages)
    assert any(m.startswith("reloaded the serving certificate") for m in messages)


def test_serve_text_format_is_the_default(server: Server) -> None:
    assert server.review("/validate", "s01-worker-delete.validating")["allowed"] is False
    uid = load_review("s01-worker-delete.validating")["request"]["uid"]  # the shared server logs others too
    line = next(x for x in server.logged(f"uid={uid}").splitlines() if f"uid={uid}" in x)
    assert "INFO guardhook.decisions: admission decision" in line
    assert "policy=worker-delete" in line and "outcome=denied" in line and "action=Deny" in line


# --- view sync ---------------------------------------------------------------------------------


def test_the_first_complete_sync_of_the_view_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    view = ClusterView("test")
    with caplog.at_level(logging.INFO, logger="guardhook.cluster.view.live"):
        for _ in range(2):  # a relist of every kind, twice: one "synced" line
            for kind in KINDS:
                items = fleet(kind) if kind in ("pods", "nodes", "leaderworkersets", "services") else []
                Reflector(kind, view, Scripted(pages=[page(copy.deepcopy(items), "900")])).relist()
    synced = [r for r in caplog.records if "cluster view synced" in r.getMessage()]
    assert view.synced and len(synced) == 1
    assert any("listed" in r.getMessage() for r in caplog.records)


# --- per-policy latency ------------------------------------------------------------------------


def test_each_policy_that_ran_has_its_own_latency_histogram() -> None:
    engine = Engine(embedded_fleet_view())
    verdict = engine.judge(load_review("s01-worker-delete.validating")["request"])
    assert set(verdict.timings) == {d.policy for d in verdict.decisions} and verdict.timings
    metrics = Metrics()
    metrics.observe("validate", verdict)
    metrics.observe("validate", verdict)
    text = metrics.render().decode()
    for policy in verdict.timings:
        assert f'guardhook_policy_duration_seconds_count{{endpoint="validate",policy="{policy}"}} 2.0' in text
    assert "guardhook_policy_duration_seconds_bucket" in text


def test_metrics_endpoint_shows_the_policy_histogram(server: Server) -> None:
    server.review("/validate", "s01-worker-delete.validating")
    text = server.session.get(server.url + "/metrics", timeout=10).text
    assert 'guardhook_policy_duration_seconds_count{endpoint="validate",policy="worker-delete"}' in text
    assert 'guardhook_request_duration_seconds_count{endpoint="validate"}' in text  # beside it


def test_configure_leaves_a_foreign_handler_alone_and_replaces_its_own() -> None:
    from guardhook.server.logformat import configure, formatter

    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    try:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        configure("WARNING", "json")
        configure("DEBUG", "text")  # called twice: still one handler, the last format
        (ours,) = root.handlers
        assert isinstance(ours.formatter, TextFormatter) and root.level == logging.DEBUG
        root.removeHandler(ours)
        foreign = logging.NullHandler()
        root.addHandler(foreign)
        configure("INFO", "json")
        assert root.handlers == [foreign]  # someone else's logging is left alone...
        assert isinstance(formatter(), JsonFormatter)  # ...but gunicorn's lines follow the flag
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved_handlers:
            root.addHandler(handler)
        root.setLevel(saved_level)


RAW_CONTROLS = [chr(c) for c in (*range(0x00, 0x09), *range(0x0A, 0x20), *range(0x7F, 0xA0))]
BIDI = ["\u202e", "\u202d", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f", "\u061c"]


@pytest.mark.parametrize("formatter", [TextFormatter(), JsonFormatter()], ids=["text", "json"])
def test_no_format_writes_controls_or_bidi_overrides_raw(
    caplog: pytest.LogCaptureFixture, formatter: logging.Formatter
) -> None:
    review = load_review("s01-worker-delete.validating")
    review["request"]["userInfo"]["username"] = "eve\x1b[2K\rFAKE\x00\x85"
    review["request"]["name"] = "worker-\u202egnp.exe"
    engine = Engine(embedded_fleet_view(), log_decisions=True)
    with caplog.at_level(logging.INFO, logger="guardhook.decisions"):
        engine.judge(review["request"])
    logging.getLogger("guardhook.server").warning("rejected a request body: %s", "bad\x1b]0;title\x07\u202e")
    records = [*decision_records(caplog), caplog.records[-1]]
    for record in records:
        line = formatter.format(record)
        assert not [c for c in RAW_CONTROLS + BIDI if c in line], repr(line)
    decision, rejected = (formatter.format(r) for r in records)
    if isinstance(formatter, JsonFormatter):  # the values survive a JSON parser unchanged
        assert json.loads(decision)["user"] == "eve\x1b[2K\rFAKE\x00\x85"
        assert json.loads(rejected)["msg"].endswith("\x07\u202e")
    else:
        assert 'user="eve\\u001b[2K\\rFAKE\\u0000\\u0085"' in decision
        assert 'name="worker-\\u202egnp.exe"' in decision
        assert "bad\\x1b]0;title\\x07\\u202e" in rejected


@pytest.mark.parametrize("dry", ["request", "body", None])
def test_an_allowed_disruption_is_info_unless_it_is_a_dry_run(
    dry: str | None, caplog: pytest.LogCaptureFixture
) -> None:
    """`serve` without client authentication logs every allow that spends a budget at INFO; a dry
    run (request.dryRun, or the Eviction's deleteOptions.dryRun) spends nothing, so stays DEBUG."""
    from guardhook.admission.decisionlog import log_allowed_disruptions, log_decisions

    request = load_review("s07-eviction-worker.validating")["request"]
    if dry == "request":
        request["dryRun"] = True
    elif dry == "body":
        request["object"]["deleteOptions"] = {"dryRun": ["All"]}
    decision = SimpleNamespace(policy="group-eviction", outcome="allowed", message="", action="", findings=())
    log_allowed_disruptions(True)
    try:
        with caplog.at_level(logging.INFO, logger="guardhook.decisions"):
            log_decisions(request, [decision], {}, 0.001)
    finally:
        log_allowed_disruptions(False)
    assert len(caplog.records) == (0 if dry else 1)
