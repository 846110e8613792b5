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


def test_quantities_above_int64_are_clamped_to_its_maximum() -> None:
    # Kubernetes reads quantities as int64; a larger one (1e999, 10Ei) must not become a
    # 1000-digit int that the capacity index's int64 arrays cannot hold.
    top = 2**63 - 1
    assert quantity_to_units("pods", "1e999") == top
    assert quantity_to_units("memory", "10Ei") == top
    assert quantity_to_units("memory", "8Ei") == top  # 2^63, one above the maximum
    assert quantity_to_units("memory", "7Ei") == 7 * 2**60  # fits: kept exact
    assert quantity_to_units("cpu", "10P") == top  # 1e16 cores is 1e19 millicores
    assert quantity_to_units("memory", "-1e999") == -(2**63)


def test_sums_of_huge_requests_saturate_at_int64() -> None:
    huge = {"resources": {"requests": {"memory": "6Ei"}}}
    spec = {"containers": [huge, huge], "overhead": {"memory": "6Ei"}}
    assert pod_requests(spec) == {"memory": 2**63 - 1}
