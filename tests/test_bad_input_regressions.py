"""Odd but legal requests and bad local input found by trying the README end to end: each is
answered with what happened and what to do, never a traceback or a misleading reason."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guardhook.admission.engine import Engine
from guardhook.commands import main as cli

from conftest import FIXTURES, Server, clean_env, free_port, load_review
from helpers import fleet_view, request_of


def without_old_object(name: str) -> Any:
    request = request_of(load_review(name))
    del request["oldObject"]
    return request


def test_worker_delete_without_old_object_is_judged_from_the_view() -> None:
    # The pod is in the view: its labels say worker 2 of a whole group, so the delete is denied.
    response = Engine(fleet_view()).judge(without_old_object("s01-worker-delete.validating")).response
    assert response["allowed"] is False
    assert "kubectl delete pod -n serve llm-xl-0" in response["status"]["message"]


def test_leader_delete_without_old_object_is_allowed() -> None:
    response = Engine(fleet_view()).judge(without_old_object("s02-leader-delete.validating")).response
    assert response["allowed"] is True


def pdb_review(spec: dict[str, Any]) -> dict[str, Any]:
    review = load_review("s18-pdb-lws-wide.validating")
    review["request"]["object"]["spec"] = spec
    return review


def test_a_policy_that_fails_says_so_instead_of_blaming_a_fresh_view(monkeypatch: pytest.MonkeyPatch) -> None:
    # group-pdb fails open, and must not claim the synced view is stale (it used to say "has not
    # been refreshed for 0s"). A malformed selector no longer makes it fail (issue 9's fuzzing
    # made that a selector error), so the failure is injected.
    from guardhook.policies.group_pdb import POLICY

    def broken(_ctx: object) -> None:
        raise AttributeError("boom")

    monkeypatch.setattr(POLICY, "judge", broken)
    review = pdb_review({"selector": {"matchLabels": {"app": "llm-xl"}}})
    response = Engine(fleet_view()).judge(request_of(review)).response
    assert response["allowed"] is True
    [warning] = response["warnings"]
    assert warning.startswith("[group-pdb] guardhook could not judge this request (AttributeError")
    assert "cluster view" not in warning


def test_fail_closed_policy_error_denies_with_the_error_not_staleness(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from guardhook.policies.worker_delete import POLICY

    def broken(_ctx: object) -> None:
        raise KeyError("boom")

    monkeypatch.setattr(POLICY, "judge", broken)
    response = Engine(fleet_view()).judge(request_of(load_review("s01-worker-delete.validating"))).response
    assert response["allowed"] is False
    assert response["status"]["message"].startswith(
        "[worker-delete] guardhook could not judge this request (KeyError"
    )


def test_certs_into_a_path_that_is_a_file_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    occupied = tmp_path / "certs"
    occupied.write_text("not a folder")
    assert cli.main(["certs", "--out", str(occupied)]) == 2
    err = capsys.readouterr().err
    # one line naming the path once, as every command error does (docs/commands.md)
    assert err == (
        f"guardhook certs: {occupied} is a file, not a folder: the certificates are the files ca.crt, "
        "tls.crt and tls.key inside a folder; give that folder\n"
    )
    assert occupied.read_text() == "not a folder"


@pytest.mark.parametrize("text", ["clusters: [\n", "- just\n- a list\n"])
def test_audit_with_a_kubeconfig_that_is_not_one_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(text)
    assert cli.main(["audit", "--kubeconfig", str(kubeconfig)]) == 2
    err = capsys.readouterr().err
    # one line naming the file once (PyYAML's own text spans three and names it again)
    assert err.startswith(f"guardhook audit: cannot use kubeconfig {kubeconfig}: not ")
    assert err.count("\n") == 1 and err.count(str(kubeconfig)) == 1, err


def test_a_test_suite_that_is_not_yaml_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    suite = tmp_path / "guardhook-test.yaml"
    suite.write_text("results: [\n")
    assert cli.main(["test", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"guardhook test: {suite}: not valid YAML: while parsing a flow node; expected the node "
        "content, but found '<stream end>' (line 2, column 1)\n"
    )


def test_check_refuses_a_manifest_that_repeats_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two files concatenated without `---`: PyYAML kept the last `kind` and judged a ConfigMap;
    # kubectl refuses such a file ("mapping key already defined"), so check must not pass it.
    manifest = tmp_path / "svc.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: serve}\n"
        "spec: {selector: {app: llm-xl}}\nkind: ConfigMap\n"
    )
    assert cli.main(["check", str(manifest)]) == 2
    assert "duplicate key 'kind'" in capsys.readouterr().err


def test_merge_keys_are_not_duplicates(tmp_path: Path) -> None:
    from guardhook.cluster.view.manifests import load_paths

    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: &m {name: a}\ndata:\n  <<: *m\n  x: y\n")
    [loaded] = load_paths([manifest])
    assert loaded.obj["data"] == {"name": "a", "x": "y"}


def test_serve_keeps_a_lone_ca_crt_instead_of_overwriting_it(tmp_path: Path) -> None:
    from guardhook.server.certs import CertificateError, ensure_certs

    (tmp_path / "ca.crt").write_text("my own CA")
    with pytest.raises(CertificateError, match="holds ca.crt but not both tls.crt and tls.key"):
        ensure_certs(tmp_path)
    assert (tmp_path / "ca.crt").read_text() == "my own CA"
    assert not (tmp_path / "tls.key").exists()


def test_certificates_that_do_not_load_are_refused_before_serving(tmp_path: Path) -> None:
    # `serve` used to start gunicorn and then fail every TLS handshake ("[SSL] PEM lib"), never
    # ready; ensure_certs (what `serve` calls before listening) now refuses them, and main exits 2.
    from guardhook.server.certs import CertificateError, ensure_certs

    for name in ("ca.crt", "tls.crt", "tls.key"):
        (tmp_path / name).write_text("junk\n")
    with pytest.raises(
        CertificateError, match=f"cannot load {tmp_path / 'tls.crt'} and {tmp_path / 'tls.key'}"
    ):
        ensure_certs(tmp_path)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        # was a traceback
        (["serve", "--port", "99999"], "argument --port: 99999 is not a port (0-65535; 0: any free port)"),
        (["serve", "--threads", "0"], "argument --threads: 0 must be at least 1"),  # was "failed to boot"
        (["pdb-sync", "--interval", "0"], "argument --interval: 0 must be a number of seconds above 0"),
        # A negative or endless wait was taken (and clamped, or waited for ever).
        (["uninstall", "--wait", "-5"], "argument --wait: -5 must be a number of seconds, 0 or more"),
        (["uninstall", "--wait", "inf"], "argument --wait: inf must be a number of seconds, 0 or more"),
        (["uninstall", "--wait", "soon"], "argument --wait: soon is not a number of seconds"),
        (["--log-level", "bogus", "certs"], "argument --log-level: invalid choice: 'BOGUS'"),  # was ignored
        # These wrote a certificate with an unusable SAN, or for a Service no cluster can have.
        (["certs", "--dns", ""], "argument --dns: '' is neither a DNS name nor an IP address"),
        (["certs", "--dns", "bad name!"], "argument --dns: 'bad name!' is neither a DNS name"),
        (["serve", "--dns", "a_b.example"], "argument --dns: 'a_b.example' is neither a DNS name"),
        (["certs", "--namespace", "Guardhook"], "argument --namespace: 'Guardhook' is not a valid name"),
        (["certs", "--service", "web.hook"], "argument --service: 'web.hook' is not a valid name"),
        (["serve", "--namespace", "kube_system"], "argument --namespace: 'kube_system' is not a valid name"),
        (["pdb-sync", "--namespace", "a" * 64], "is not a valid name"),
        (["group-readiness", "--namespace", "ns_1"], "argument --namespace: 'ns_1' is not a valid name"),
        # An empty node name was planned as "unknown node:  (not in …)".
        (["drain-plan", ""], "argument NODE: '' is not a valid name"),
        (["drain-plan", "gpu-node-01", "Node_B"], "argument NODE: 'Node_B' is not a valid name"),
    ],
)
def test_unusable_flag_values_exit_2_naming_the_flag(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    # one line, as any other bad input (the usage text argparse printed above it is --help's)
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith("guardhook") and ": error: " in line and said in line, line


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["drain", "--foo", "gpu-node-01"], "guardhook drain: error: unrecognized arguments: --foo"),
        (["check", "x.yaml", "--strict"], "guardhook check: error: unrecognized arguments: --strict"),
        (
            ["config", "validate", "x.yaml", "--bar"],
            "guardhook config validate: error: unrecognized arguments: --bar",
        ),
        (["config", "schema", "extra"], "guardhook config schema: error: unrecognized arguments: extra"),
    ],
)
def test_an_unknown_argument_is_the_commands_error(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # argparse named the top parser (`guardhook: error: unrecognized arguments: --foo`), unlike
    # every other error line, which names the command (docs/commands.md)
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    assert capsys.readouterr().err == said + "\n"


def test_an_error_of_config_validate_names_config_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # its argparse errors said `guardhook config validate: error: …`, its other errors
    # `guardhook config: …`: one command, one prefix
    assert cli.main(["config", "validate", str(tmp_path)]) == 2
    assert (
        capsys.readouterr().err
        == f"guardhook config validate: cannot read config {tmp_path}: Is a directory\n"
    )


# ---- a kubeconfig pointing at a server that is not a Kubernetes API server ---------------------
# It answers 404 for everything. A 404 used to mean "CRD not installed" for every kind, so serve
# became ready on an empty view (and worker-delete allowed every delete), review judged against
# nothing, and audit reported an empty cluster.


def test_reflector_treats_a_404_on_pods_as_a_failure_not_an_empty_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from test_live_reflector import Scripted

    from guardhook.cluster.view.live import Backoff, NotServed, Reflector
    from guardhook.cluster.view.store import PODS, ClusterView

    view = ClusterView("test")
    transport = Scripted(pages=[NotServed("404", 404)] * 50)
    reflector = Reflector(PODS, view, transport, backoff=Backoff(0.001, 0.002))
    stopper = threading.Timer(0.2, reflector.stop)
    stopper.start()
    with caplog.at_level(logging.WARNING, "guardhook.cluster.view.live"):
        reflector.run()
    assert PODS not in view._synced_kinds
    assert view.broken_seconds(PODS) > 0
    assert "answered 404 for pods, which every Kubernetes API server serves" in caplog.text


def test_snapshot_refuses_a_404_on_a_built_in_kind() -> None:
    from test_live_reflector import Scripted

    from guardhook.cluster.view.live import NotServed, WatchError, snapshot
    from guardhook.cluster.view.store import ClusterView

    with pytest.raises(WatchError, match="answered 404 for nodes"):
        snapshot(ClusterView("test"), Scripted(pages=[NotServed("404", 404)]))


def test_audit_of_a_server_that_serves_no_pods_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fake_apiserver import running_fake

    with running_fake(unserved={"pods", "nodes"}) as fake:
        kubeconfig = fake.write_kubeconfig(tmp_path / "kubeconfig")
        assert cli.main(["audit", "--kubeconfig", str(kubeconfig)]) == 2
    assert "which every Kubernetes API server serves" in capsys.readouterr().err


def test_a_uid_of_the_wrong_type_is_named_as_such(server: Server) -> None:
    # It used to say "request has no uid" for {"uid": 5}.
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}
    answer = server.post("/validate", body)
    assert answer.status_code == 400
    assert answer.json()["message"] == "request.uid must be a string, got int"


def test_a_zero_ledger_ttl_is_a_configuration_error() -> None:
    # ledgerTTLSeconds: 0 was accepted and forgot every allowed eviction at once, so 16 concurrent
    # evictions over the sample fleet broke all 4 groups of llm-xl under a budget of 1.
    from guardhook.config import ConfigError, build_config

    with pytest.raises(
        ConfigError, match="policies.group-eviction.ledgerTTLSeconds must be at least 1, got 0"
    ):
        build_config({"policies": {"group-eviction": {"ledgerTTLSeconds": 0}}})
    build_config({"policies": {"group-eviction": {"ledgerTTLSeconds": 1, "maxDisruptedGroups": 0}}})


def test_capacity_denial_of_pods_requesting_nothing_says_so() -> None:
    # The message used to read "the first needs 2 pods, each requesting  and the 0 eligible nodes".
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "w", "namespace": "serve"},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "workerTemplate": {
                    "spec": {"nodeSelector": {"no-node": "has-this"}, "containers": [{"name": "c"}]}
                },
            },
        },
    }
    resource = {"group": "leaderworkerset.x-k8s.io", "version": "v1", "resource": "leaderworkersets"}
    request: Any = {
        "uid": "u",
        "resource": resource,
        "operation": "CREATE",
        "namespace": "serve",
        "object": lws,
    }
    response = Engine(fleet_view()).judge(request).response
    assert response["allowed"] is False
    assert "each requesting no resources and the 0 eligible nodes" in response["status"]["message"]


def test_a_manifest_that_is_not_yaml_is_reported_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # PyYAML's message spans three lines and quotes "<unicode string>"; check prints one line per file.
    bad = tmp_path / "bad.yaml"
    bad.write_text("{{{\n")
    assert cli.main(["check", str(bad)]) == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if "bad.yaml" in x or "line 2" in x]
    assert line.endswith(
        f"{bad}: not valid YAML or JSON: while parsing a flow node; "
        "did not find expected node content (line 2, column 1)"
    )


@pytest.mark.parametrize("name", ["10.0.0.1", "::1", "*.example.com", "Guardhook.Example.COM", "localhost"])
def test_certs_accepts_ip_addresses_wildcards_and_dns_names(name: str, tmp_path: Path) -> None:
    assert cli.main(["certs", "--out", str(tmp_path / "c"), "--dns", name, "--namespace", "gh-1"]) == 0


def test_a_missing_kubeconfig_is_named_as_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The kubernetes library said only "Invalid kube-config file. No configuration found." for a
    # mistyped path, as if the file were there and wrong.
    missing = tmp_path / "prod.yaml"
    assert cli.main(["audit", "--kubeconfig", str(missing)]) == 2
    assert (
        capsys.readouterr().err.strip() == f"guardhook audit: cannot use kubeconfig {missing}: no such file"
    )
    assert cli.main(["drain-plan", "--kubeconfig", str(tmp_path), "n1"]) == 2
    assert capsys.readouterr().err.strip().endswith(f"kubeconfig {tmp_path}: not a file")


def test_a_kubeconfig_list_is_read_like_kubectl_reads_it(tmp_path: Path) -> None:
    # $KUBECONFIG may list files (a:b); missing ones are skipped, as by kubectl.
    from guardhook.cluster.kube import api_client
    from guardhook.cluster.sources import KUBECONFIG, Source

    good = tmp_path / "good.yaml"
    good.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )
    listed = api_client(Source(KUBECONFIG, (f"{tmp_path / 'missing.yaml'}:{good}",)))
    assert listed.configuration.host == "https://127.0.0.1:1"


@pytest.mark.parametrize("taken", ["--port", "--metrics-port"])
def test_serve_on_a_port_in_use_exits_2_with_one_line(taken: str, tmp_path: Path) -> None:
    # The webhook port used to give 5 s of gunicorn retries and exit 1; the metrics port (bound in
    # the worker) a traceback, "Worker failed to boot" and exit 3.
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        busy = holder.getsockname()[1]
        ports = (
            {"--port": busy, "--metrics-port": free_port()}
            if taken == "--port"
            else {"--port": free_port(), "--metrics-port": busy}
        )
        argv = [
            sys.executable,
            "-m",
            "guardhook",
            "serve",
            "--host",
            "127.0.0.1",
            "--cert-dir",
            str(tmp_path / "certs"),
            *(f"{k}={v}" for k, v in ports.items()),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=clean_env(tmp_path))
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.splitlines()[-1]
        == f"guardhook serve: cannot listen on 127.0.0.1:{busy}: Address already in use"
    )
    assert "Traceback" not in done.stderr


def test_serve_refuses_one_port_for_both_and_an_address_not_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = str(free_port())
    offline = ["--cluster-state", str(FIXTURES / "fleet"), "--cert-dir", str(tmp_path / "certs")]
    assert cli.main(["serve", *offline, "--host", "127.0.0.1", "--port", port, "--metrics-port", port]) == 2
    assert f"--port and --metrics-port must differ (both {port})" in capsys.readouterr().err
    assert cli.main(["serve", *offline, "--host", "name.invalid", "--port", port]) == 2
    assert f"cannot listen on name.invalid:{port}: " in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [
        ["review", str(FIXTURES / "reviews" / "s01-worker-delete.validating.json")],
        ["audit"],
        ["serve", "--host", "127.0.0.1"],
        ["check", str(FIXTURES / "fleet")],
        ["drain-plan", "gpu-node-01"],
        ["pdb-sync"],
        ["group-readiness", "--dry-run"],
    ],
)
@pytest.mark.parametrize("empty", ["file", "folder", "comments", "no-api-version", "list-of-5"])
def test_a_cluster_state_with_no_object_is_refused_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], empty: str
) -> None:
    # Was: judged against an empty cluster (review allowed everything, audit reported nothing).
    state = tmp_path / "state"
    if empty == "folder":
        state.mkdir()
    else:
        state.write_text(
            {
                "file": "",
                "comments": "# nothing here\n---\n",
                "no-api-version": "kind: Pod\nmetadata: {name: x}\n",
                "list-of-5": "apiVersion: v1\nkind: List\nitems: 5\n",
            }[empty]
        )
    argv = [*command, "--cluster-state", str(state)]
    if command[0] == "serve":
        argv += ["--port", str(free_port()), "--cert-dir", str(tmp_path / "certs")]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err == (
        f"guardhook {command[0]}: {state}: no Kubernetes object (a document with apiVersion and kind)\n"
    )


def test_serve_warns_of_the_sample_fleet_once(fresh_server: Callable[..., Server]) -> None:
    # It was logged twice: once by the fail-fast read before forking, once by the worker (whose
    # line the writer thread may write late: counted after stop).
    assert fresh_server().final_log().count("using the bundled sample fleet") == 1


def test_check_refuses_a_yaml_alias_bomb_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Nine anchors of nine aliases each ("billion laughs"): 38 values written, 490 million read;
    # check walked them and ran out of time and memory. kubectl (go-yaml) refuses such aliasing.
    lines = ["apiVersion: v1", "kind: ConfigMap", "metadata: {name: lol, namespace: default}"]
    lines.append('x0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]')
    lines += [f"x{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    manifest = tmp_path / "lol.yaml"
    manifest.write_text("\n".join(lines) + "\n")
    assert cli.main(["check", str(manifest)]) == 2
    assert (
        f"guardhook check: {manifest}: not valid YAML or JSON: excessive aliasing: 38 values written "
        "expand to 490,329,074 (at most 1,000,000 are read)"
    ) in capsys.readouterr().err.splitlines()
    # a few aliases, as a hand-written manifest uses them, are read as before
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default, labels: &l {a: b}, "
        "annotations: *l}\ndata: {x: y}\n"
    )
    assert cli.main(["check", str(manifest)]) == 0


@pytest.mark.parametrize("text", [None, "clusters: [\n", "- just\n- a list\n", b"\x8f\x90"])
def test_review_and_audit_word_an_unusable_kubeconfig_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | bytes | None
) -> None:
    # review said "cannot list the cluster of kubeconfig …" where audit said "cannot use kubeconfig …"
    kubeconfig = tmp_path / "kubeconfig"
    if isinstance(text, str):
        kubeconfig.write_text(text)
    elif text is not None:
        kubeconfig.write_bytes(text)
    said = {}
    for argv in (["audit"], ["review", str(FIXTURES / "reviews" / "s01-worker-delete.validating.json")]):
        assert cli.main([*argv, "--kubeconfig", str(kubeconfig)]) == 2
        err = capsys.readouterr().err
        assert (
            err.startswith(f"guardhook {argv[0]}: cannot use kubeconfig {kubeconfig}: ")
            and err.count("\n") == 1
        )
        said[argv[0]] = err.split(": ", 1)[1]
    assert said["review"] == said["audit"]
