"""Pod requests counted as kube-scheduler counts them."""

from __future__ import annotations

from guardhook.cluster.resources import pod_requests, quantity_to_units


def test_quantities_convert_to_millicores_and_bytes() -> None:
    assert quantity_to_units("cpu", "500m") == 500
    assert quantity_to_units("cpu", "90") == 90_000
    assert quantity_to_units("memory", "1Gi") == 1024**3
    assert quantity_to_units("memory", "1.5k") == 1500
    assert quantity_to_units("nvidia.com/gpu", 8) == 8


def test_limits_stand_in_for_missing_requests() -> None:
    spec = {
        "containers": [
            {"resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "4"}, "requests": {"cpu": "2"}}}
        ]
    }
    assert pod_requests(spec) == {"nvidia.com/gpu": 8, "cpu": 2000}


def test_sidecars_add_and_init_containers_count_as_a_maximum() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "500m"}}},
            {"name": "big-init", "resources": {"requests": {"cpu": "3", "memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "100m"},
    }
    # steady: 1 + 0.5 = 1.5 cpu; init peak: 0.5 (sidecar) + 3 = 3.5 cpu, 1Gi; plus overhead 0.1.
    assert pod_requests(spec) == {"cpu": 3600, "memory": 1024**3}


def test_malformed_entries_are_skipped() -> None:
    spec = {"containers": [{"resources": {"requests": {"cpu": "lots", "memory": "1Mi"}}}, "junk"]}
    assert pod_requests(spec) == {"memory": 1024**2}
