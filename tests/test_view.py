"""The static cluster view: manifest loading, indexes, group health."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from guardhook.capacity.index import index_for
from guardhook.cluster.view.live import Versions
from guardhook.cluster.view.manifests import ManifestError, load_paths
from guardhook.cluster.view.static import embedded_fleet_objects, embedded_fleet_view, view_from_paths
from guardhook.cluster.view.store import NODES, PODS, ClusterView
from guardhook.groups.health import group_health
from guardhook.groups.index import group_index, group_keys, group_pods, lws_pods
from guardhook.groups.placement import member_of_pod

from helpers import find, fleet_view, set_ready

GIB = 1024**3


def test_embedded_fleet_matches_the_fixture_description() -> None:
    view = embedded_fleet_view()
    assert view.synced and not view.is_stale()
    assert len(view.nodes()) == 22
    assert len(view.all_pods()) == 16
    lws = view.lws("serve", "llm-xl")
    assert lws is not None and (lws.replicas, lws.size) == (4, 4)
    assert view.statefulset("serve", "llm-xl-2") is not None


def test_group_pods_and_health() -> None:
    view = embedded_fleet_view()
    pods = group_pods(view, "serve", "llm-xl", "1")
    assert sorted(p.name for p in pods) == ["llm-xl-1", "llm-xl-1-1", "llm-xl-1-2", "llm-xl-1-3"]
    assert group_health("1", 4, pods).whole
    leader = view.pod("serve", "llm-xl-1")
    assert leader is not None
    member = member_of_pod(leader)
    assert member is not None and member.is_leader and member.size == 4


def test_unready_pod_breaks_its_group_and_says_why() -> None:
    view = fleet_view(lambda objs: set_ready(find(objs, "Pod", "llm-xl-2-3"), False))
    health = group_health("2", 4, group_pods(view, "serve", "llm-xl", "2"))
    assert not health.whole
    assert health.problems == ("not Ready: llm-xl-2-3",)


def test_node_requests_follow_pod_changes() -> None:
    view = embedded_fleet_view()
    assert view.node_requested("gpu-node-05") == {"cpu": 90_000, "memory": 1500 * GIB, "nvidia.com/gpu": 8}
    assert view.node_requested("gpu-node-16") == {}
    view.remove(PODS, ("serve", "llm-xl-1-1"))  # bound to gpu-node-05
    assert view.node_requested("gpu-node-05") == {}
    assert [p.name for p in group_pods(view, "serve", "llm-xl", "1")].count("llm-xl-1-1") == 0


def test_pods_in_namespace_follow_pod_changes() -> None:
    view = embedded_fleet_view()
    serve = {p.name for p in view.pods_in_namespace("serve")}
    assert serve == {p.name for p in view.all_pods() if p.namespace == "serve"} and len(serve) == 16
    assert view.pods_in_namespace("default") == []
    view.remove(PODS, ("serve", "llm-xl-1-1"))
    assert {p.name for p in view.pods_in_namespace("serve")} == serve - {"llm-xl-1-1"}
    view.replace_kind(PODS, [])
    assert view.pods_in_namespace("serve") == []


def test_a_page_applied_at_once_indexes_and_notifies_as_upsert_does() -> None:
    pods = [obj for obj in embedded_fleet_objects() if obj.get("kind") == "Pod"]
    one_by_one, paged, watched = ClusterView("a"), ClusterView("b"), ClusterView("c")
    for pod in pods:
        one_by_one.upsert(PODS, pod)
    heard: list[str] = []
    watched.subscribe(lambda kind, old, new: heard.append(new.name))
    keys = paged.upsert_all(PODS, pods)
    assert keys == [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods]
    assert watched.upsert_all(PODS, pods) == keys  # a pod's key as held, with a listener too
    assert heard == [p["metadata"]["name"] for p in pods]
    for view in (paged, watched):
        assert view.all_pods() == one_by_one.all_pods()
        assert group_pods(view, "serve", "llm-xl", "1") == group_pods(one_by_one, "serve", "llm-xl", "1")
        assert view.node_requested("gpu-node-05") == one_by_one.node_requested("gpu-node-05")
        assert view.generation(PODS) == one_by_one.generation(PODS) == len(pods)


def test_the_group_index_follows_the_view_whenever_it_was_built() -> None:
    # Built before the pods arrive (as `serve` warms it) or after (on first use), the index files
    # every pod under the group its placement gives, and refiles a pod an update moves.
    pods = [obj for obj in embedded_fleet_objects() if obj.get("kind") == "Pod"]
    early, late = ClusterView("early"), ClusterView("late")
    group_index(early)
    early.upsert_all(PODS, pods)
    late.upsert_all(PODS, pods)
    keys = group_keys(late, "serve", "llm-xl")
    assert keys == group_keys(early, "serve", "llm-xl") == ["0", "1", "2", "3"]
    for key in keys:
        assert group_pods(early, "serve", "llm-xl", key) == group_pods(late, "serve", "llm-xl", key)
    relabelled = copy.deepcopy(find(pods, "Pod", "llm-xl-3"))  # the leader StatefulSet's pod of group 3
    relabelled["metadata"]["labels"]["leaderworkerset.sigs.k8s.io/name"] = "other"
    # Released by its StatefulSet (no controller ownerReference): then its labels place it.
    moved = copy.deepcopy(relabelled)
    moved["metadata"]["ownerReferences"] = []
    for view in (early, late):
        view.upsert(PODS, relabelled)  # its owner still names llm-xl: a label alone moves nothing
        assert "llm-xl-3" in {p.name for p in group_pods(view, "serve", "llm-xl", "3")}
        view.upsert(PODS, moved)
        assert "llm-xl-3" not in {p.name for p in group_pods(view, "serve", "llm-xl", "3")}
        view.replace_kind(PODS, [])
        assert group_keys(view, "serve", "llm-xl") == [] and lws_pods(view, "serve", "llm-xl") == {}


def test_replace_kind_relists(tmp_path: Path) -> None:
    view = embedded_fleet_view()
    view.replace_kind(PODS, [])
    assert view.all_pods() == [] and view.node_requested("gpu-node-05") == {}


def test_manifests_from_folders_lists_multi_doc_and_json(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "multi.yaml").write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n---\n"
        "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n2}}\n---\n"
    )
    (tmp_path / "b.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n3"}})
    )
    (tmp_path / "notes.txt").write_text("ignored")
    manifests = load_paths([tmp_path])
    assert [m.obj["metadata"]["name"] for m in manifests] == ["n1", "n2", "n3"]
    assert sorted(n.name for n in view_from_paths([tmp_path]).nodes()) == ["n1", "n2", "n3"]


def test_unreadable_manifests_name_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: [unclosed")
    with pytest.raises(ManifestError, match="bad.yaml"):
        load_paths([bad])
    with pytest.raises(ManifestError, match="no such file"):
        load_paths([tmp_path / "missing"])


def test_malformed_objects_do_not_break_the_view() -> None:
    from guardhook.cluster.view.static import view_from_objects

    view = view_from_objects(
        [
            {"kind": "Pod", "metadata": {"name": "p", "labels": {"a": 1}}, "spec": "oops", "status": None},
            {"kind": "Node", "metadata": "x"},
        ]
    )
    pod = view.pod("", "p")
    assert pod is not None and pod.labels == {} and pod.requests == {}


def test_a_view_no_longer_used_is_freed_with_its_group_and_capacity_indexes() -> None:
    # Each index is kept in a weak mapping keyed by its view: it must not keep the view alive.
    import gc
    import weakref

    view = embedded_fleet_view()
    group_index(view)
    index_for(view).free(("cpu",))  # reads the view (device counts) through its reference
    gone = weakref.ref(view)
    del view
    gc.collect()
    assert gone() is None


def test_pods_are_held_by_namespace_and_name_and_counted_through_every_change() -> None:
    from guardhook.cluster.view.store import PODS, ClusterView

    def pod(namespace: str, name: str, node: str = "n1") -> dict[str, object]:
        return {"metadata": {"namespace": namespace, "name": name}, "spec": {"nodeName": node}}

    view = ClusterView("test")
    for namespace, name in (("a", "web-0"), ("b", "web-0"), ("a", "web-1")):
        view.upsert(PODS, pod(namespace, name))
    assert view.count(PODS) == 3 and sorted(view.keys(PODS)) == [
        ("a", "web-0"),
        ("a", "web-1"),
        ("b", "web-0"),
    ]
    view.upsert(PODS, pod("a", "web-0", node="n2"))  # replaced, not added
    assert view.count(PODS) == 3 and view.pod("a", "web-0").node_name == "n2"  # type: ignore[union-attr]
    assert view.keys_not_in(PODS, {("a", "web-0"), ("b", "web-0")}) == [("a", "web-1")]
    held = Versions()  # a reflector's: looked up by name within each namespace
    held[("a", "web-0")], held[("c", "web-1")] = 7, 8
    assert view.keys_not_in(PODS, held) == [("a", "web-1"), ("b", "web-0")]
    view.upsert(NODES, {"metadata": {"name": "n1"}})
    assert view.keys_not_in(NODES, held) == [("", "n1")] and view.keys_not_in(NODES, {("", "n1")}) == []
    view.remove(PODS, ("b", "web-0"))
    view.remove(PODS, ("b", "web-0"))  # twice: counted once
    view.remove(PODS, ("c", "absent"))
    assert view.count(PODS) == 2 and view.pod("b", "web-0") is None and view.pods_in_namespace("b") == []
    assert {p.name for p in view.all_pods()} == {"web-0", "web-1"}
    assert [p.name for p in view.pods_on_node("n1")] == ["web-1"]


def test_a_nodes_pods_keep_their_order_through_updates_moves_and_removals() -> None:
    from guardhook.cluster.view.store import PODS, ClusterView

    def pod(name: str, node: str, phase: str = "Running") -> dict[str, object]:
        return {
            "metadata": {"namespace": "a", "name": name},
            "spec": {"nodeName": node},
            "status": {"phase": phase},
        }

    view = ClusterView("test")
    for name in ("p0", "p1", "p2"):
        view.upsert(PODS, pod(name, "n1"))
    view.upsert(PODS, pod("p0", "n1"))  # an update moves it last, as a re-insert always did
    assert [p.name for p in view.pods_on_node("n1")] == ["p1", "p2", "p0"]
    view.upsert(PODS, pod("p1", "n2"))  # moved to another node
    view.upsert(PODS, pod("p2", "n1", phase="Succeeded"))  # terminal: on no node's list
    assert [p.name for p in view.pods_on_node("n1")] == ["p0"]
    assert [p.name for p in view.pods_on_node("n2")] == ["p1"]
    view.remove(PODS, ("a", "p0"))
    assert view.pods_on_node("n1") == [] and view.node_requested("n1") == {}


def test_a_slice_with_pods_already_held_files_them_as_upsert_does() -> None:
    # upsert_all files a pod the view does not hold inline and hands a held one (or one with
    # claims) to upsert's own path: a slice mixing them ends as one pod at a time does.
    pods = [obj for obj in embedded_fleet_objects() if obj.get("kind") == "Pod"]
    moved = copy.deepcopy(pods[0])
    moved["spec"]["nodeName"] = "gpu-node-16"
    done = copy.deepcopy(pods[1])
    done["status"]["phase"] = "Succeeded"
    claimed = copy.deepcopy(pods[2])
    claimed["metadata"]["name"] = "with-a-claim"
    claimed["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "claim-a"}]
    batch = [*pods[:5], moved, done, claimed, pods[0]]
    one_by_one, sliced = ClusterView("a"), ClusterView("b")
    heard: list[tuple[str | None, str]] = []
    sliced.subscribe(lambda kind, old, new: heard.append((old and old.node_name, new.node_name)))
    for pod in batch:
        one_by_one.upsert(PODS, pod)
    assert sliced.upsert_all(PODS, batch) == [
        (p["metadata"]["namespace"], p["metadata"]["name"]) for p in batch
    ]
    assert sliced.count(PODS) == one_by_one.count(PODS) == 6
    assert sliced.all_pods() == one_by_one.all_pods()
    for node in {p["spec"].get("nodeName") or "" for p in batch} | {"gpu-node-16"}:
        assert sliced.pods_on_node(node) == one_by_one.pods_on_node(node)
    namespace = claimed["metadata"]["namespace"]
    assert [p.name for p in sliced.pods_using_claim(namespace, "claim-a")] == ["with-a-claim"]
    assert sliced.generation(PODS) == one_by_one.generation(PODS) == len(batch)
    assert [old for old, _ in heard] == [None] * 5 + [
        pods[0]["spec"].get("nodeName"),
        pods[1]["spec"].get("nodeName"),
        None,
        "gpu-node-16",
    ]
