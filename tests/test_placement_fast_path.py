"""`group_of_pod`'s fast path for a consistent Ordinal LWS pod answers as the full rule does.

`group_of_pod` returns early when a pod's labels and its controller StatefulSet agree on an
Ordinal position (`placement._consistent_ordinal`); every other pod goes through `_placed`. These
tests generate pods around that boundary (numbers with leading zeros or odd digits, controllers
of other kinds, API groups and names, pod names that fit another position) and check the answer
equals the full rule's for each.
"""

from __future__ import annotations

import itertools

from guardhook.cluster.lws import GROUP_INDEX_LABEL, GROUP_KEY_LABEL, NAME_LABEL, WORKER_INDEX_LABEL
from guardhook.cluster.model import PodRecord
from guardhook.groups import placement

NUMBERS = ("0", "1", "3", "03", "²", "", "12345678901")
"""Group and worker indexes around the fast path's edges: leading zeros, a non-ASCII digit, none,
past `ORDINAL_DIGITS`."""


def _full_rule(pod: PodRecord) -> tuple[str, str] | None:
    if not pod.labels:
        return None
    found = placement._placed(pod.labels, pod.owners, pod.name)
    return None if found is None else (found[0], found[1][0])


def _pod(labels: dict[str, str], owners: list[dict[str, object]], name: str) -> PodRecord:
    return PodRecord.from_object(
        {"metadata": {"namespace": "ns", "name": name, "labels": labels, "ownerReferences": owners}}
    )


def test_the_fast_path_answers_as_the_full_rule() -> None:
    # Every combination (~50,000 pods): a generated sample rarely hits the narrow cases where a
    # wrong fast path would answer differently.
    fast = 0
    for lws_name, group, worker, key_label in itertools.product(
        ("lws", ""), NUMBERS, (None, *NUMBERS), (False, True)
    ):
        labels = {NAME_LABEL: lws_name, GROUP_INDEX_LABEL: group}
        if worker is not None:
            labels[WORKER_INDEX_LABEL] = worker
        if key_label:
            labels[GROUP_KEY_LABEL] = group
        for kind, api, owner_template, controller, other in itertools.product(
            ("StatefulSet", "ReplicaSet"),
            ("apps/v1", "v1"),
            ("{lws}", "{lws}-{group}", "{lws}-{other}", "other"),
            (True, False),
            ("0", "2"),
        ):
            owner_name = owner_template.format(lws=lws_name, group=group, other=other)
            owner = {
                "apiVersion": api,
                "kind": kind,
                "name": owner_name,
                "uid": "u",
                "controller": controller,
            }
            for second_owner, pod_template in itertools.product(
                (False, True), ("{owner}-{group}", "{owner}-{worker}", "{owner}-{other}", "{owner}")
            ):
                owners = [owner]
                if second_owner:  # the controller listed after an owner that is not one
                    owners.insert(
                        0, {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lws", "uid": "v"}
                    )
                name = pod_template.format(owner=owner_name, group=group, worker=worker or "", other=other)
                pod = _pod(labels, owners, name)
                assert placement.group_of_pod(pod) == _full_rule(pod), (labels, owners, name)
                fast += group is not None and placement._consistent_ordinal(lws_name, group, worker, pod)
    assert fast  # the fast path was taken


def test_a_healthy_ordinal_leader_and_worker_take_the_fast_path_to_the_same_answer() -> None:
    leader = _pod(
        {NAME_LABEL: "lws", GROUP_INDEX_LABEL: "3", WORKER_INDEX_LABEL: "0"},
        [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lws", "uid": "u", "controller": True}],
        "lws-3",
    )
    worker = _pod(
        {NAME_LABEL: "lws", GROUP_INDEX_LABEL: "3", WORKER_INDEX_LABEL: "2"},
        [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lws-3", "uid": "u", "controller": True}],
        "lws-3-2",
    )
    for pod in (leader, worker):
        assert placement._consistent_ordinal("lws", "3", pod.labels[WORKER_INDEX_LABEL], pod)
        assert placement.group_of_pod(pod) == _full_rule(pod) == ("lws", "3")


def test_a_number_with_a_leading_zero_is_left_to_the_full_rule() -> None:
    pod = _pod(
        {NAME_LABEL: "lws", GROUP_INDEX_LABEL: "03", WORKER_INDEX_LABEL: "0"},
        [{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "lws", "uid": "u", "controller": True}],
        "lws-03",
    )
    assert not placement._consistent_ordinal("lws", "03", "0", pod)
    assert placement.group_of_pod(pod) == _full_rule(pod) == ("lws", "3")
