"""Where the cluster view comes from, in the documented order."""

from __future__ import annotations

from pathlib import Path

from guardhook.cluster.sources import EMBEDDED, KUBECONFIG, STATE, choose_source


def test_order_of_sources(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert choose_source(["dump/"], "k", {"KUBECONFIG": "x"}, home).kind == STATE
    assert choose_source([], "k", {"KUBECONFIG": "x"}, home).paths == ("k",)
    assert choose_source([], None, {"KUBECONFIG": "x"}, home).paths == ("x",)
    assert choose_source([], None, {}, home).kind == EMBEDDED
    (home / ".kube").mkdir(parents=True)
    (home / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\n")
    found = choose_source([], None, {}, home)
    assert found.kind == KUBECONFIG and found.paths == (str(home / ".kube" / "config"),)
