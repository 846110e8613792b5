"""manifests/monitoring/: the PrometheusRule passes `promtool test rules` on synthetic series
(tests/monitoring/rules-test.yaml), every dashboard query parses, every metric the rules and panels
query is one a live guardhook server exports, and docs/monitoring.md documents each alert and panel."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from docs_helpers import DOCS
from docs_helpers import anchors as doc_anchors
from prometheus_client.parser import text_string_to_metric_families

from conftest import REPO, Server

MONITORING = REPO / "manifests" / "monitoring"
RULE_TESTS = REPO / "tests" / "monitoring" / "rules-test.yaml"
MONITORING_DOC = DOCS / "monitoring.md"

# Metrics the rules read that no guardhook process can export: they describe guardhook from outside.
EXTERNAL = {
    "up": "Prometheus's own scrape health of each target (job from the ServiceMonitor)",
    "apiserver_admission_webhook_rejection_count": "kube-apiserver: failed calls to a Fail webhook",
    "apiserver_admission_webhook_fail_open_count": "kube-apiserver: failed calls to an Ignore webhook",
}
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_count", "_sum", "_created")}
KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "offset",
    "bool",
}
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$namespace": ".*"}


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((MONITORING / name).read_text())


def rules() -> list[dict[str, Any]]:
    return [rule for group in load("prometheus-rule.yaml")["spec"]["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    return json.loads(load("grafana-dashboard.yaml")["data"]["guardhook.json"])


def panels() -> list[dict[str, Any]]:
    return [p for p in dashboard()["panels"] if p["type"] != "row"]


def panel_queries() -> list[str]:
    queries = [target["expr"] for panel in panels() for target in panel["targets"]]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            queries.append(re.sub(r"^label_values\((.*),\s*\w+\)$", r"\1", variable["definition"]))
    return queries


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: identifiers left once strings, label
    matchers, ranges, grouping clauses, function calls and keywords are taken out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        following = text[match.end() :].lstrip()
        if match.group() in KEYWORDS or following.startswith("("):
            continue
        if match.start() > 0 and (text[match.start() - 1].isdigit() or text[match.start() - 1] == "."):
            continue  # a unit or exponent of a number (5m, 1e3)
        names.add(match.group())
    return names


def queried() -> set[str]:
    names: set[str] = set()
    for expr in [rule["expr"] for rule in rules()] + panel_queries():
        names |= metric_names(expr)
    return names


def exported(server: Server) -> set[str]:
    text = server.session.get(server.url + "/metrics", timeout=10).text
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
        names.update(sample.name for sample in family.samples)
    return names


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("GUARDHOOK_REQUIRE_PROMTOOL"):
            pytest.fail("promtool is required here (GUARDHOOK_REQUIRE_PROMTOOL) but not installed")
        pytest.skip("promtool not installed (Debian: apt-get install prometheus; .ci/run installs it)")
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, timeout=120)


# ---- the alert rules -----------------------------------------------------------------------------


def test_the_rules_pass_promtool_unit_tests(tmp_path: Path) -> None:
    tool = promtool()
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(load("prometheus-rule.yaml")["spec"]))
    shutil.copy(RULE_TESTS, tmp_path / "rules-test.yaml")
    checked = run(tool, "check", "rules", str(tmp_path / "rules.yaml"))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = run(tool, "test", "rules", str(tmp_path / "rules-test.yaml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    cases = yaml.safe_load(RULE_TESTS.read_text())["tests"]
    checks = [check for case in cases for check in case["alert_rule_test"]]
    for rule in rules():
        mine = [c for c in checks if c["alertname"] == rule["alert"]]
        assert any(c["exp_alerts"] for c in mine), f"{rule['alert']} is never expected to fire"
        assert any(not c["exp_alerts"] for c in mine), f"{rule['alert']} is never expected to stay quiet"


def test_the_rule_is_a_prometheus_operator_object_with_summaries_and_runbooks() -> None:
    rule = load("prometheus-rule.yaml")
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    anchors = doc_anchors(MONITORING_DOC)
    alerts = {r["alert"] for r in rules()}
    assert alerts >= {
        "GuardhookGroupsBelowDesired",
        "GuardhookLeaderReadyGroupIncomplete",
        "GuardhookNoSpareGroup",
        "GuardhookClusterViewStale",
        "GuardhookDenialsRising",
        "GuardhookWebhookUnreachable",
    }
    for entry in rules():
        annotations = entry["annotations"]
        assert annotations["summary"] and entry["labels"]["severity"] in ("warning", "critical")
        page, _, anchor = annotations["runbook"].partition("#")
        assert page == "docs/monitoring.md" and anchor in anchors, annotations["runbook"]


# ---- the dashboard ---------------------------------------------------------------------------------


def test_the_dashboard_is_a_configmap_for_the_grafana_sidecar() -> None:
    configmap = load("grafana-dashboard.yaml")
    assert configmap["kind"] == "ConfigMap"
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    titles = {p["title"] for p in panels()}
    assert {
        "Whole / desired groups",
        "Broken groups",
        "Spare groups",
        "Decisions by policy and outcome",
    } <= titles
    rows = [p["title"] for p in dashboard()["panels"] if p["type"] == "row"]
    assert rows == ["Groups per LeaderWorkerSet", "Decisions", "Cluster view", "Traffic to leaders"]


def test_every_dashboard_query_parses(tmp_path: Path) -> None:
    tool = promtool()
    recorded = []
    for number, expr in enumerate(panel_queries()):
        for variable, value in GRAFANA_VARIABLES.items():
            expr = expr.replace(variable, value)
        recorded.append({"record": f"guardhook:dashboard_query_{number}", "expr": expr})
    path = tmp_path / "queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": recorded}]}))
    checked = run(tool, "check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


# ---- metrics queried are metrics exported --------------------------------------------------------


def test_metric_names_are_read_from_promql() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, endpoint) (rate(a_bucket{x="y"}[5m]))) > 3 * '
        '(sum without (pod) (b_total offset 1h) or on (policy) c{d=~"e.+"}) and up{job="j"} == 0'
    )
    assert metric_names(expr) == {"a_bucket", "b_total", "c", "up"}


def test_every_metric_queried_is_exported(server: Server) -> None:
    names = queried()
    assert {
        "guardhook_lws_groups_whole",
        "guardhook_lws_groups_desired",
        "guardhook_lws_leader_ready_group_incomplete",
        "guardhook_lws_spare_groups",
        "guardhook_decisions_total",
        "guardhook_cluster_view_stale",
    } <= names
    missing = names - set(EXTERNAL) - exported(server)
    assert not missing, f"queried but not exported by guardhook: {sorted(missing)}"


# ---- the docs ---------------------------------------------------------------------------------------


def test_the_monitoring_page_tables_name_every_alert_and_panel() -> None:
    text = MONITORING_DOC.read_text()
    for rule in rules():
        assert f"| `{rule['alert']}` |" in text, rule["alert"]
    for panel in panels():
        assert f"| {panel['title']} |" in text, panel["title"]
