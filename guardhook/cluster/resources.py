"""Pod resource requests counted the way kube-scheduler counts them.

Units: `cpu` in millicores, every other resource in its base unit rounded up (memory and storage in
bytes, `nvidia.com/gpu` and `pods` as counts). Rules (k8s.io/component-helpers resource.PodRequests):

- a container's request for a resource defaults to its limit when only the limit is set (the API
  server defaults this on pods, but not inside LWS templates, so we apply it ourselves);
- regular containers and sidecar init containers (`restartPolicy: Always`) are summed;
- a plain init container runs alone, beside the sidecars started before it: the pod needs the
  maximum of that and the steady-state sum;
- pod-level resources (`spec.resources`, KEP-2837, GA in 1.37): for cpu, memory and `hugepages-*`
  a pod-level request replaces the containers' sum (component-helpers `PodRequests`,
  `applyPodLevelResources`); where only a pod-level limit is set it stands as the request, and
  pod-level hugepages default to the containers' (the API server's defaulting, core/v1
  `defaultPodRequests`, which does not run inside LWS templates either);
- `spec.overhead` (set from the RuntimeClass at admission) is added on top;
- a bound pod in the middle of a pod-level in-place resize (KEP-5419) holds the larger of its
  pod-level spec and what the kubelet reports it allocated and actuated (`status.allocatedResources`,
  `status.resources.requests`, less overhead; the spec not at all when `PodResizePending` says
  `Infeasible`): `PodRequests` with `UseStatusResources` and
  `InPlacePodLevelResourcesVerticalScalingEnabled`, as the scheduler counts bound pods.
  (Container-level status resources are not read.)

Every field read here may have the wrong type in a manifest, a dump or an object the API server
did not validate (an LWS template): a field that is not what the API defines (`overhead` a string,
`containers` an object, `resources.requests` a list, a resource name that is not a string) counts
as absent, and no function here raises on one.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
from collections.abc import Callable, Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from guardhook.cluster import interning


def _load_parse_quantity() -> Callable[[Any], Decimal]:
    """`kubernetes.utils.parse_quantity`, the client library's own quantity parser. While the
    `kubernetes` package is not loaded yet, its `utils/quantity.py` (which imports only `decimal`)
    is loaded on its own: importing the package runs the whole generated client (~0.3 s), which a
    one-shot command such as `guardhook review` on manifests never otherwise needs."""
    loaded = sys.modules.get("kubernetes.utils")
    if loaded is not None:
        return loaded.parse_quantity
    package = importlib.util.find_spec("kubernetes")  # locates the package without importing it
    if package is not None and package.origin:
        path = Path(package.origin).parent / "utils" / "quantity.py"
        spec = importlib.util.spec_from_file_location("guardhook._kubernetes_quantity", path)
        if spec is not None and spec.loader is not None and path.is_file():
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module.parse_quantity
    from kubernetes.utils import parse_quantity

    return parse_quantity


parse_quantity = _load_parse_quantity()

Resources = dict[str, int]
"""Resource name -> amount (millicores for cpu, base units otherwise)."""

CPU = "cpu"

INT64_MAX = 2**63 - 1
"""The largest amount kept: Kubernetes reads quantities as int64 (resource.Quantity.Value), and the
capacity index stores them in int64 arrays; a larger quantity (`1e999`, `10Ei` of memory) is clamped
here rather than overflowing there."""
INT64_MIN = -(2**63)


def quantity_to_units(resource: str, quantity: Any) -> int:
    """Convert a Kubernetes quantity ("500m", "1500Gi", 8) to an int in this module's units,
    clamped to [INT64_MIN, INT64_MAX].

    Raises ValueError on a malformed quantity.
    """
    if isinstance(quantity, str):
        return _string_quantity_to_units(resource == CPU, quantity)
    return _to_units(resource == CPU, parse_quantity(quantity))


@functools.lru_cache(maxsize=4096)
def _string_quantity_to_units(is_cpu: bool, quantity: str) -> int:
    # A cluster repeats a few quantities across every pod: parsing each once makes a relist cheap.
    return _to_units(is_cpu, parse_quantity(quantity))


def _to_units(is_cpu: bool, value: Any) -> int:
    # Decimal compares exactly, so the clamp comes before math.ceil builds a 1000-digit int.
    scaled = value * 1000 if is_cpu else value
    if scaled >= INT64_MAX:
        return INT64_MAX
    if scaled <= INT64_MIN:
        return INT64_MIN
    return math.ceil(scaled)


def parse_resource_list(raw: Any) -> Resources:
    """Parse a ResourceList (`{"cpu": "2", "memory": "1Gi"}`); unparsable entries are skipped, and
    anything but an object (a string, a list, a number, null) is an empty list."""
    parsed: Resources = {}
    for name, quantity in _mapping(raw).items():
        if not isinstance(name, str):  # a YAML key such as 1: never a resource name, and unsortable
            continue
        try:
            parsed[name] = quantity_to_units(name, quantity)
        except (ValueError, ArithmeticError, TypeError):
            continue
    return parsed


def container_requests(container: Any) -> Resources:
    """Effective requests of one container: its requests, with limits standing in where unset
    (none for a container that is not an object)."""
    resources = _mapping(_mapping(container).get("resources"))
    effective = parse_resource_list(_mapping(resources.get("limits")))
    effective.update(parse_resource_list(_mapping(resources.get("requests"))))
    return effective


def _mapping(value: Any) -> Mapping[str, Any]:
    # Malformed input (a list where an object belongs) counts as empty rather than raising.
    return value if isinstance(value, Mapping) else {}


def add_into(total: Resources, extra: Mapping[str, int]) -> None:
    """Add `extra` into `total` in place, saturating at INT64_MAX (and INT64_MIN) so a sum of
    clamped quantities stays one the capacity index's int64 arrays hold."""
    for name, amount in extra.items():
        total[name] = max(INT64_MIN, min(INT64_MAX, total.get(name, 0) + amount))


def max_into(total: Resources, other: Mapping[str, int]) -> None:
    """Raise each entry of `total` to at least the one in `other`, in place."""
    for name, amount in other.items():
        if amount > total.get(name, 0):
            total[name] = amount


POD_LEVEL_RESOURCES = ("cpu", "memory")
HUGEPAGES_PREFIX = "hugepages-"


def pod_level_supported(name: str) -> bool:
    """Whether pod-level `spec.resources` may set `name`: cpu, memory and hugepages-*
    (component-helpers resource.IsSupportedPodLevelResource)."""
    return name in POD_LEVEL_RESOURCES or name.startswith(HUGEPAGES_PREFIX)


def pod_level_requests(spec: Any, containers: Mapping[str, int] | None = None) -> Resources:
    """The effective pod-level requests of a pod spec (`spec.resources`), supported resources
    only; empty when the pod sets none. As the API server defaults them: the pod-level request,
    else — when pod-level limits are set — the containers' hugepages (`containers`, their
    aggregate), else the pod-level limit."""
    resources = _mapping(_mapping(spec).get("resources"))
    requests = {
        k: v for k, v in parse_resource_list(resources.get("requests")).items() if pod_level_supported(k)
    }
    limits = {k: v for k, v in parse_resource_list(resources.get("limits")).items() if pod_level_supported(k)}
    if limits:
        for name, amount in (containers or {}).items():
            if name.startswith(HUGEPAGES_PREFIX):
                requests.setdefault(name, amount)
        for name, amount in limits.items():
            requests.setdefault(name, amount)
    return requests


def _supported(resources: Resources) -> Resources:
    return {name: amount for name, amount in resources.items() if pod_level_supported(name)}


def container_total(spec: Any) -> Resources:
    """The containers' aggregate requests of a pod spec (regular, sidecar and init containers as
    the module docstring says), without pod-level resources and overhead."""
    spec = _mapping(spec)
    steady: Resources = {}
    for container in _containers(spec.get("containers")):
        add_into(steady, container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for init in _containers(spec.get("initContainers")):
        requests = container_requests(init)
        if init.get("restartPolicy") == "Always":
            add_into(sidecars, requests)
            add_into(steady, requests)
            continue
        running = dict(sidecars)
        add_into(running, requests)
        max_into(init_peak, running)
    max_into(steady, init_peak)
    return steady


def pod_requests(spec: Any, status: Any = None) -> Resources:
    """Total requests of a pod spec as the scheduler sees them (see module docstring): the
    containers' aggregate, pod-level requests in place of it where set (with a bound pod's
    `status`, the larger of those and its allocated / actuated pod-level requests), plus overhead.
    A spec that is not an object requests nothing. Never raises on malformed fields."""
    spec = _mapping(spec)
    steady = container_total(spec)
    if spec.get("resources"):
        steady.update(_with_status(pod_level_requests(spec, steady), spec, _mapping(status)))
    add_into(steady, parse_resource_list(spec.get("overhead")))
    return steady


def resized_status(status: Any) -> bool:
    """Whether a pod status carries pod-level resources the kubelet allocated or actuated
    (`status.allocatedResources`, `status.resources`: set on nodes with KEP-5419)."""
    status = _mapping(status)
    return bool(status.get("allocatedResources") or status.get("resources"))


def _with_status(pod_level: Resources, spec: Mapping[str, Any], status: Mapping[str, Any]) -> Resources:
    """component-helpers PodRequests' effectivePodLevelResources: max(spec, actuated, allocated)
    for the supported resources, the spec left out when the resize is Infeasible."""
    if not pod_level or not resized_status(status):
        return pod_level
    overhead = parse_resource_list(spec.get("overhead"))
    effective = {} if _resize_infeasible(status) else dict(pod_level)
    for raw in (_mapping(status.get("resources")).get("requests"), status.get("allocatedResources")):
        reported = parse_resource_list(raw)
        for name, amount in reported.items():
            if pod_level_supported(name):
                amount -= overhead.get(name, 0)
                if amount > effective.get(name, INT64_MIN):
                    effective[name] = amount
    return effective


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == "PodResizePending":
            return condition.get("reason") == "Infeasible"
    return False


def shared_pod_requests(spec: Any) -> Resources:
    """`pod_requests(spec)`, shared with the equal answer for another spec read recently (the pods
    of one template, an LWS template judged again): a spec without init containers, overhead or
    pod-level resources (most) is looked up by its containers' raw requests and limits, not parsed
    again. The result is shared: it must not be mutated."""
    containers = spec.get("containers") if type(spec) is dict else None
    if (
        type(containers) is list
        and not spec.get("initContainers")
        and not spec.get("overhead")
        and not spec.get("resources")
    ):
        try:
            return requests_of_raw(tuple(map(_raw_container_resources, containers)))
        except TypeError:  # a quantity that is not hashable (malformed): parsed uncached
            pass
    return _shared_resources(tuple(pod_requests(spec).items()))


def _raw_container_resources(container: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    # Equal keys hold equal quantities: strings compare exactly, and numbers that compare equal
    # (1, 1.0, True) read as the same amount.
    resources = container.get("resources") if type(container) is dict else None
    if type(resources) is not dict:
        return ((), ())
    requests, limits = resources.get("requests"), resources.get("limits")
    return (
        tuple(requests.items()) if type(requests) is dict else (),
        tuple(limits.items()) if type(limits) is dict else (),
    )


@functools.lru_cache(maxsize=interning.CACHE_SIZE)
def requests_of_raw(raw: tuple[tuple[tuple[Any, ...], tuple[Any, ...]], ...]) -> Resources:
    """The requests of a pod without init containers or overhead from its containers' raw
    (requests, limits) items, shared with the same answer for equal raw items. The result must
    not be mutated. Raises TypeError when a quantity is not hashable."""
    containers = [{"resources": {"requests": dict(req), "limits": dict(lim)}} for req, lim in raw]
    return pod_requests({"containers": containers})


@functools.lru_cache(maxsize=interning.CACHE_SIZE)
def _shared_resources(pairs: tuple[tuple[str, int], ...]) -> Resources:
    return dict(pairs)


def _containers(raw: Any) -> Iterable[Mapping[str, Any]]:
    if not isinstance(raw, list):
        return ()
    return (c for c in raw if isinstance(c, Mapping))
