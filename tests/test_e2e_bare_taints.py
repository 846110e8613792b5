"""e2e/bare.py gives the fleet's nodes back the taints of their dumps (issue 15 item 15): the API
server's TaintNodesAtCreation plugin adds `node.kubernetes.io/not-ready:NoSchedule` to every Node
it creates, and no node lifecycle controller runs in bare mode to remove it."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from envtest import api_server, requires_api_server

sys.path.insert(0, str(REPO / "e2e"))

from bare import create_with_status, fleet_objects  # noqa: E402

NOT_READY = {"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}


class Answer:
    def __init__(self, status: int, body: dict[str, Any]) -> None:
        self.status_code = status
        self._body = body
        self.text = json.dumps(body)

    def json(self) -> dict[str, Any]:
        return copy.deepcopy(self._body)


class TaintingApiServer:
    """What the API server does to Nodes here: CREATE runs TaintNodesAtCreation (adds the
    not-ready taint), a PUT of /status changes only the status, a PUT of the object only its
    spec and metadata (no plugin on UPDATE)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}

    def request(self, method: str, path: str, body: Any = None) -> Answer:
        body = copy.deepcopy(body)
        if method == "POST":
            if body["kind"] == "Node":
                body.setdefault("spec", {}).setdefault("taints", []).append(dict(NOT_READY))
            body.pop("status", None)
            self.objects[f"{path}/{body['metadata']['name']}"] = body
            return Answer(201, body)
        if method == "PUT" and path.endswith("/status"):
            stored = self.objects[path.removesuffix("/status")]
            stored["status"] = body["status"]
            return Answer(200, stored)
        if method == "PUT":
            stored = self.objects[path]
            stored["spec"], stored["metadata"] = body.get("spec", {}), body["metadata"]
            return Answer(200, stored)
        raise AssertionError(f"unexpected {method} {path}")


def test_created_nodes_lose_the_not_ready_taint_the_api_server_adds() -> None:
    api = TaintingApiServer()
    nodes = [o for o in fleet_objects() if o["kind"] == "Node"]
    for node in nodes:
        create_with_status(api, node)  # type: ignore[arg-type]
    assert len(nodes) == 22
    for node in nodes:
        stored = api.objects[f"/api/v1/nodes/{node['metadata']['name']}"]
        assert (stored["spec"].get("taints") or []) == (node["spec"].get("taints") or [])
        assert stored["status"] == node["status"]


def test_a_captured_taint_is_kept() -> None:
    api = TaintingApiServer()
    node = copy.deepcopy(next(o for o in fleet_objects() if o["kind"] == "Node"))
    gpu = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    node["spec"]["taints"] = [gpu]
    create_with_status(api, node)  # type: ignore[arg-type]
    assert api.objects[f"/api/v1/nodes/{node['metadata']['name']}"]["spec"]["taints"] == [gpu]


@pytest.mark.envtest
@requires_api_server
def test_a_real_api_server_keeps_the_nodes_untainted(tmp_path: Path) -> None:
    with api_server(tmp_path) as api:
        node = next(o for o in fleet_objects() if o["kind"] == "Node")
        create_with_status(api, node)
        stored = api.get(f"/api/v1/nodes/{node['metadata']['name']}")
        assert not stored["spec"].get("taints"), stored["spec"]
        conditions = {c["type"]: c["status"] for c in stored["status"]["conditions"]}
        assert conditions["Ready"] == "True"
