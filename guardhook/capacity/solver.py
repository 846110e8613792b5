"""Exact feasibility of whole LWS groups on free node capacity.

A group is 1 leader (shape L) and size−1 workers (shape W). Within the model below the answer —
the largest k ≤ wanted such that k whole groups can be placed at once — is exact, not a heuristic:

- Capacity per node is a vector (free = allocatable − requests of bound, non-terminal pods, with
  the pod count as one more dimension); a set of pods fits on a node iff their summed requests fit
  in every dimension (kube-scheduler NodeResourcesFit). Eligibility per pod shape is a node mask
  (guardhook.capacity.index.CapacityIndex.eligible).
- Identical leader and worker shapes: a node holds cap_n = min_r ⌊free_r / req_r⌋ pods, and k
  groups fit iff Σ cap_n ≥ k·size (over eligible nodes; per domain for exclusive topology). This is
  how Kueue's topology-aware scheduling counts pods of one shape.
- Mixed shapes: with x leaders on node n, the node still holds y_n(x) = min_r ⌊(free_r − x·L_r) /
  W_r⌋ workers. k groups fit iff leader counts x_n with Σ x_n = k exist such that
  Σ y_n(x_n) ≥ k·(size−1), i.e. iff the least total worker loss Σ (y_n(0) − y_n(x_n)) leaves enough.
  An optimal choice uses at most k nodes, and for each count j only the k nodes with the smallest
  loss at j can matter (exchange argument: some of those k is unused, and swapping to it costs no
  more), so a small dynamic programme over at most k² candidate nodes is exact.
- Exclusive topology (`leaderworkerset.sigs.k8s.io/exclusive-topology: KEY`): a group lives in one
  domain of label KEY and each domain holds at most one group; domains already holding a group
  are taken. A domain hosts a group iff some leader-eligible node n in it leaves Σ_d y(0) − loss_n(1)
  ≥ size−1 workers; the answer is the number of such free domains.
- Pending pods (bound to no node) claim capacity first: each is placed on the eligible node where
  it fits most tightly, largest first. Their own node constraints are not in the view's compact pod
  records, so they are placed by resources and pod count alone.

Not modelled (docs/policies.md, group-capacity): pod affinity/anti-affinity other than exclusive topology,
topology spread constraints, volume and port conflicts, preemption, DaemonSet pods still to come.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from guardhook.capacity.derived import PendingPlan, plan_for
from guardhook.capacity.index import ABSENT, CapacityIndex, PendingClass
from guardhook.capacity.placing import place_pending, pod_caps, size_key, vector
from guardhook.capacity.shapes import PODS, PodShape

INF = float("inf")


# ---- the pure core (arrays in, counts out) ---------------------------------------------------


@dataclass(frozen=True)
class Capacity:
    """The arrays one decision reads, over the same rows (nodes) and columns (resources).

    `free`: rows × resources int64 free amounts; `leader` / `worker`: request vectors over the
    columns (pods slot included, so > 0 there); `leader_ok` / `worker_ok`: bool per row, the node
    masks of each template; `plan`: the index's kept arrays `free` comes from, when it does (its
    pod counts are kept per changed row: `caps`)."""

    free: np.ndarray
    leader: np.ndarray
    worker: np.ndarray
    leader_ok: np.ndarray
    worker_ok: np.ndarray
    plan: PendingPlan | None = field(default=None, compare=False, repr=False)

    def restricted(self, rows: np.ndarray) -> Capacity:
        """The same problem with both masks narrowed to `rows` (bool per row)."""
        return replace(self, leader_ok=self.leader_ok & rows, worker_ok=self.worker_ok & rows)

    def caps(self, request: np.ndarray, minus: np.ndarray | None = None) -> np.ndarray:
        """`pod_caps(free, request)` (of `max(free - minus, 0)` when `minus` is given), read from
        the plan's kept counts when `free` is the plan's; do not change the answer."""
        if self.plan is not None and self.plan.holds(self.free):
            return self.plan.caps(request, minus)
        return pod_caps(self.free if minus is None else np.maximum(self.free - minus, 0), request)


def worker_losses(cap: Capacity, k: int) -> tuple[np.ndarray, list[np.ndarray]]:
    """y(0) per row (workers a row holds with no leader) and, for j = 1..k, the workers lost by
    putting j leaders on the row (inf where j leaders do not fit or leaders are not eligible)."""
    y0 = np.where(cap.worker_ok, cap.caps(cap.worker), 0)
    losses: list[np.ndarray] = []
    for j in range(1, k + 1):
        rows = np.flatnonzero(cap.leader_ok & _holds_leaders(cap, j))
        if not len(rows):
            break
        # Only the rows where j leaders fit (often few) are divided again.
        yj = np.where(cap.worker_ok[rows], pod_caps(cap.free[rows] - j * cap.leader, cap.worker), 0)
        loss = np.full(len(y0), INF)
        loss[rows] = y0[rows] - yj
        losses.append(loss)
    return y0, losses


def _holds_leaders(cap: Capacity, j: int) -> np.ndarray:
    """Bool per row: `free >= j * leader` in every column. Where the leader asks for some of a
    column, that is `j` leaders fitting by `caps` (kept per changed row); the columns it asks
    nothing of are compared as they are."""
    holds = cap.caps(cap.leader) >= j
    for column in np.flatnonzero(cap.leader <= 0).tolist():
        holds &= cap.free[:, column] >= j * int(cap.leader[column])
    return holds


def least_losses(losses: list[np.ndarray], k: int) -> np.ndarray:
    """best[c] = least total worker loss of placing c leaders (c = 0..k), inf when impossible.

    Exact by the exchange argument in the module docstring: candidates are, for each leader count
    j, the k rows with the smallest loss at j."""
    best = np.full(k + 1, INF)
    best[0] = 0.0
    if not losses:
        return best
    candidates: set[int] = set()
    for loss in losses:
        finite = np.flatnonzero(np.isfinite(loss))
        if len(finite) > k:
            finite = finite[np.argpartition(loss[finite], k - 1)[:k]]
        candidates.update(int(r) for r in finite)
    for row in sorted(candidates):
        row_loss = [loss[row] for loss in losses]
        nxt = best.copy()
        for j, cost in enumerate(row_loss, start=1):
            if cost == INF:
                continue
            nxt[j:] = np.minimum(nxt[j:], best[: k + 1 - j] + cost)
        best = nxt
    return best


def max_groups(cap: Capacity, size: int, wanted: int, same_shape: bool = False) -> int:
    """The largest k ≤ wanted such that k groups (1 leader + size−1 workers each) fit at once,
    anywhere (no topology constraint). `same_shape` asserts leader == worker and equal masks."""
    if wanted <= 0:
        return 0
    if size == 1 or same_shape:
        shape, ok = (cap.leader, cap.leader_ok) if size == 1 else (cap.worker, cap.worker_ok)
        total = int(cap.caps(shape)[ok].sum())
        return min(wanted, total // size)
    lower, upper = group_bounds(cap, size, wanted)
    if lower >= upper:
        return lower
    y0, losses = worker_losses(cap, upper)
    total_workers = float(y0.sum())
    best = least_losses(losses, upper)
    for k in range(upper, lower, -1):
        if total_workers - best[k] >= k * (size - 1):
            return k
    return lower


def group_bounds(cap: Capacity, size: int, wanted: int) -> tuple[int, int]:
    """Cheap bounds on max_groups for mixed shapes, so the exact search runs only between them.

    Lower: a real placement — at most one leader per row, on the rows that lose the fewest
    workers. Upper: leaders and workers counted apart (each must fit on its own)."""
    y0 = np.where(cap.worker_ok, cap.caps(cap.worker), 0)
    total_workers = int(y0.sum())
    leaders = cap.caps(cap.leader)
    leader_rows = cap.leader_ok & (leaders >= 1)
    upper = min(wanted, int(leaders[cap.leader_ok].sum()), total_workers // (size - 1))
    if upper <= 0:
        return 0, 0
    y1 = np.where(cap.worker_ok, cap.caps(cap.worker, cap.leader), 0)
    losses = (y0 - y1)[leader_rows]
    if len(losses) > upper:  # only the `upper` smallest are read: select them, then sort those
        losses = np.partition(losses, upper - 1)[:upper]
    cheapest = np.sort(losses)[:upper]
    counts = np.arange(1, len(cheapest) + 1)
    lower = int((total_workers - np.cumsum(cheapest) >= counts * (size - 1)).sum())
    return min(lower, upper), upper


def domains_that_fit(cap: Capacity, size: int, domain: np.ndarray, domain_count: int) -> np.ndarray:
    """Bool per domain id: can one whole group be placed inside it? `domain` is the domain id per
    row (ABSENT for rows without the topology label, which no group may use)."""
    inside = domain != ABSENT
    y0, losses = worker_losses(cap.restricted(inside), 1)
    workers = np.bincount(domain[inside], weights=y0[inside], minlength=domain_count)
    least = np.full(domain_count, INF)
    if losses:
        finite = np.flatnonzero(inside & np.isfinite(losses[0]))  # inf lowers no minimum
        np.minimum.at(least, domain[finite], losses[0][finite])
    return np.isfinite(least) & (workers - least >= size - 1)


# ---- the index-level entry point -------------------------------------------------------------


@dataclass(frozen=True)
class GroupDemand:
    """What is asked: `count` new groups of 1 `leader` + `size`−1 `worker` pods, in `namespace`,
    one per domain of node label `exclusive_key` when set."""

    leader: PodShape
    worker: PodShape
    size: int
    count: int
    namespace: str
    exclusive_key: str | None = None


@dataclass(frozen=True)
class Fit:
    """The answer. `fits` ≤ `demand.count` groups can be placed.

    Diagnostics for messages: `nodes` (in the view), `eligible_leader` / `eligible_worker` (nodes
    each template may use), `pod_slots` (pods of the worker shape that still fit on eligible nodes,
    same-shape groups only, else -1), `limiting` (the resources too scarce for one worker on
    the most eligible nodes), `domains` / `domains_taken` / `domains_free_fitting` (exclusive topology).
    """

    demand: GroupDemand
    fits: int
    nodes: int
    eligible_leader: int
    eligible_worker: int
    pod_slots: int = -1
    limiting: str = ""
    domains: int = 0
    domains_taken: int = 0
    domains_free_fitting: int = 0
    model: tuple[str, ...] = ()
    needs_flagged_nodes: bool = False

    @property
    def all_fit(self) -> bool:
        return self.fits >= self.demand.count


@dataclass(frozen=True)
class Problem:
    """One demand against the index, pending pods placed: the `resources` (columns), the arrays
    (`cap`) and the rows already holding a group of the namespace (`taken_rows`). What it derives
    (counts, the message's limiting resources) is worked out once: a Problem is kept for the
    index's state (see `prepare`)."""

    resources: list[str]
    cap: Capacity
    taken_rows: np.ndarray
    flagged: np.ndarray
    """Bool per row: cordoned or NotReady (kube-scheduler still places pods there that tolerate it),
    or carrying a node lifecycle condition that announces maintenance or a drain (KEP-5683; it
    places pods there as on any node)."""

    @functools.cached_property
    def flagged_eligible(self) -> bool:
        """Whether a template may use a cordoned, NotReady or maintenance-bound row."""
        return bool((self.flagged & (self.cap.leader_ok | self.cap.worker_ok)).any())

    @functools.cached_property
    def eligible(self) -> tuple[int, int]:
        """(leader, worker) eligible rows."""
        return int(np.count_nonzero(self.cap.leader_ok)), int(np.count_nonzero(self.cap.worker_ok))

    @functools.cached_property
    def worker_slots(self) -> int:
        """Pods of the worker shape the eligible rows hold."""
        return int(self.cap.caps(self.cap.worker)[self.cap.worker_ok].sum())

    @functools.cached_property
    def limiting(self) -> str:
        """The resources too scarce for one worker on the most eligible rows (see `_limiting`)."""
        return _limiting(self.cap.free, self.cap.worker, self.cap.worker_ok, self.resources)


def prepare(index: CapacityIndex, demand: GroupDemand) -> Problem:
    """Free capacity after placing pending pods, with the demand's vectors and node masks; made
    once per index state and demand shapes (`CapacityIndex.remembered`: an autoscaler's retries,
    a `/scale` and its update, the spare-groups metric, and every LWS of the same shapes read one).
    Read-only. Hold the index's lock."""
    leader, worker = demand.leader, demand.worker
    key = ("problem", leader.requests, leader.constraints, worker.requests, worker.constraints)
    return index.remembered((*key, demand.namespace), lambda: _prepare(index, demand))


def _prepare(index: CapacityIndex, demand: GroupDemand) -> Problem:
    pending = index.pending()
    resources = _resource_names([demand.leader, demand.worker], pending)
    free, taken_rows, plan = index.remembered(
        ("free after pending", tuple(resources), demand.namespace),
        lambda: _free_after_pending(index, resources, demand.namespace),
    )
    leader = vector(demand.leader.request_map, resources)
    worker = vector(demand.worker.request_map, resources)
    leader.flags.writeable = worker.flags.writeable = False
    leader_ok = index.eligible(demand.leader)
    same_constraints = demand.leader.constraints == demand.worker.constraints
    worker_ok = leader_ok if same_constraints else index.eligible(demand.worker)
    flagged = index.cordoned() | index.not_ready() | index.maintenance()
    flagged.flags.writeable = False
    cap = Capacity(free, leader, worker, leader_ok, worker_ok, plan)
    return Problem(resources, cap, taken_rows, flagged)


def _free_after_pending(
    index: CapacityIndex, resources: list[str], namespace: str
) -> tuple[np.ndarray, np.ndarray, PendingPlan]:
    """Free capacity over `resources` once pending pods are placed (read-only, kept per changed
    row by the index's `PendingPlan`), the rows holding a group of `namespace` (bound pods, and
    pending ones where they will land), and the plan."""
    plan = plan_for(index, tuple(resources))
    taken_rows = index.holding_groups(namespace) | plan.group_rows(namespace)
    return plan.free(), taken_rows, plan


def fit_groups(index: CapacityIndex, demand: GroupDemand) -> Fit:
    """Decide how many of `demand.count` groups fit on the index's current free capacity, after
    placing pending pods. Takes the index's lock; reads only."""
    with index.lock:
        problem = prepare(index, demand)
        # The Fit is built once from its parts (dataclasses.replace per step cost a tenth of a decision).
        found = _solve(index, demand, problem)
        limiting, needs_flagged_nodes = "", False
        if found["fits"] >= demand.count:
            if problem.flagged_eligible:
                healthy = replace(problem, cap=problem.cap.restricted(~problem.flagged))
                needs_flagged_nodes = _solve(index, demand, healthy)["fits"] < demand.count
        else:
            limiting = problem.limiting  # for the message
        eligible_leader, eligible_worker = problem.eligible
        return Fit(
            demand=demand,
            nodes=index.node_count,
            eligible_leader=eligible_leader,
            eligible_worker=eligible_worker,
            limiting=limiting,
            model=capacity_model(index, problem.resources),
            needs_flagged_nodes=needs_flagged_nodes,
            **found,
        )


def _solve(index: CapacityIndex, demand: GroupDemand, problem: Problem) -> dict[str, int]:
    """The answer's fields of a Fit: `fits`, and `pod_slots` or the exclusive-topology domains."""
    cap = problem.cap
    if demand.exclusive_key:
        return _fit_exclusive(index, demand, cap, problem.taken_rows)
    same = demand.leader.requests == demand.worker.requests and cap.leader_ok is cap.worker_ok
    if not same:
        return {"fits": max_groups(cap, demand.size, demand.count), "pod_slots": -1}
    # Same shape: max_groups' own count (pods of the worker shape on eligible rows; the leader's
    # vector and mask are the worker's), counted once per Problem for both fields.
    total = problem.worker_slots
    fits = min(demand.count, total // demand.size) if demand.count > 0 else 0
    return {"fits": fits, "pod_slots": total - fits * demand.size}


def capacity_model(index: CapacityIndex, resources: Iterable[str]) -> tuple[str, ...]:
    """How the capacity of `resources` was counted, in a few words per point: DRA devices per
    DeviceClass (with selectors that could not be judged, and tainted devices), and the gated
    pods left out. Hold the index's lock."""
    model: list[str] = []
    devices = index.devices()
    for name in resources if devices.names else ():
        column = devices.column_of(name)
        if column is None:
            continue
        device_class = devices.classes[column]
        text = f"counted DRA devices for {name} (DeviceClass {device_class})"
        if devices.tainted.get(column):
            text += f", {devices.tainted[column]} tainted devices left out"
        if devices.partitioned.get(column):
            text += (
                "; partitionable devices counted by the DRA allocator's counter rule (a device is free "
                "only while the shared counters it consumes are; shared devices once per allocation "
                "their capacity still covers)"
            )
            if devices.held.get(column):
                text += f", {devices.held[column]} devices whose counters allocated devices take left out"
        if device_class in devices.unjudged:
            text += "; its CEL selectors need Kubernetes' CEL library, not judged: every device counted"
        model.append(text)
    if index.gated:
        model.append(f"{index.gated} gated pods ignored (spec.schedulingGates: not placed, claim nothing)")
    return tuple(model)


def _fit_exclusive(
    index: CapacityIndex, demand: GroupDemand, cap: Capacity, taken_rows: np.ndarray
) -> dict[str, int]:
    key = demand.exclusive_key or ""
    domain = index.label_column(key)
    count = index.label_value_count(key)
    live = np.zeros(count, dtype=bool)
    live_rows = index.alive()
    live[domain[live_rows & (domain != ABSENT)]] = True
    taken = np.zeros(count, dtype=bool)
    taken[domain[taken_rows & (domain != ABSENT)]] = True
    free_fitting = free_domains_that_fit(cap, demand.size, domain, count, taken)
    return {
        "fits": min(demand.count, free_fitting),
        "domains": int(live.sum()),
        "domains_taken": int((taken & live).sum()),
        "domains_free_fitting": free_fitting,
    }


def free_domains_that_fit(cap: Capacity, size: int, domain: np.ndarray, count: int, taken: np.ndarray) -> int:
    """How many domains not `taken` (bool per domain id) can each host one whole group."""
    return int((domains_that_fit(cap, size, domain, count) & ~taken).sum())


def _limiting(free: np.ndarray, request: np.ndarray, ok: np.ndarray, resources: list[str]) -> str:
    """The resources too scarce for even one pod on the most eligible nodes, comma-separated (for
    messages; ties are all named)."""
    if not ok.any():
        return ""
    short = np.count_nonzero((free < request) & ok[:, None], axis=0).tolist()
    counts = [count if amount > 0 else 0 for count, amount in zip(short, request.tolist(), strict=True)]
    most = max(counts)
    if most == 0:
        return ""
    return ", ".join(name for name, count in zip(resources, counts, strict=True) if count == most)


def _resource_names(shapes: Iterable[PodShape], pending: Iterable[PendingClass]) -> list[str]:
    names = {PODS}
    for shape in shapes:
        names.update(name for name, _ in shape.requests)
    for entry in pending:
        names.update(entry.requests)
    return sorted(names)


# ---- gangs of several pod shapes -----------------------------------------------------------


@dataclass(frozen=True)
class GangDemand:
    """What is asked: `count` new gangs in `namespace`, each of `members`: (pod shape, pods of it)
    pairs (a Grove PodCliqueSet replica: one per clique)."""

    members: tuple[tuple[PodShape, int], ...]
    count: int
    namespace: str

    @property
    def size(self) -> int:
        """Pods per gang."""
        return sum(n for _, n in self.members)


@dataclass(frozen=True)
class GangFit:
    """The answer: `fits` ≤ `demand.count` gangs can be placed; `exact` when the gang's shapes
    reduce to one LWS group's (one shape, or one pod of a shape beside pods of another: solved by
    `fit_groups`), else `fits` is what a greedy placement finds (a lower bound: a gang it places
    fits; one it does not may fit another way). `short`: the first member (by index in `members`)
    without room for the next gang's pods; `nodes` in the view; `model` as Fit's."""

    demand: GangDemand
    fits: int
    nodes: int
    exact: bool
    short: int = -1
    model: tuple[str, ...] = ()


def _as_group(demand: GangDemand) -> GroupDemand | None:
    """The GroupDemand a gang is, when its shapes reduce to one LWS group's (see GangFit)."""
    members = [(shape, n) for shape, n in demand.members if n > 0]
    shapes: dict[PodShape, int] = {}
    for shape, n in members:
        shapes[shape] = shapes.get(shape, 0) + n
    if len(shapes) == 1:
        ((shape, size),) = shapes.items()
        return GroupDemand(shape, shape, size, demand.count, demand.namespace)
    if len(shapes) == 2:
        (a, na), (b, nb) = shapes.items()
        if na == 1 or nb == 1:
            leader, worker = (a, b) if na == 1 else (b, a)
            return GroupDemand(leader, worker, na + nb, demand.count, demand.namespace)
    return None


def fit_gangs(index: CapacityIndex, demand: GangDemand) -> GangFit:
    """Decide how many of `demand.count` gangs fit on the index's current free capacity, after
    placing pending pods: exactly by `fit_groups` when the gang is an LWS group's shape, else by
    placing k gangs' pods at once, largest pods first, each shape on its eligible nodes where it
    fits most tightly (`place_pending`'s rule), for the largest k that places all (binary search).
    Takes the index's lock; reads only."""
    as_group = _as_group(demand)
    if as_group is not None:
        fit = fit_groups(index, as_group)
        return GangFit(demand, fit.fits, fit.nodes, True, -1, fit.model)
    members = [(shape, n) for shape, n in demand.members if n > 0]
    with index.lock:
        pending = index.pending()
        resources = _resource_names([shape for shape, _ in members], pending)
        free, _, _ = index.remembered(
            ("free after pending", tuple(resources), demand.namespace),
            lambda: _free_after_pending(index, resources, demand.namespace),
        )
        vectors = [vector(shape.request_map, resources) for shape, _ in members]
        masks = [index.eligible(shape) for shape, _ in members]
        order = sorted(range(len(members)), key=lambda i: size_key(vectors[i]), reverse=True)

        def short_at(k: int) -> int:
            """The first member whose pods of k gangs do not all place, else -1."""
            left = np.array(free, order="F", copy=True)
            for i in order:
                wanted = k * members[i][1]
                if len(place_pending(left, masks[i], [vectors[i]], [wanted])[0]) < wanted:
                    return i
            return -1

        low, high = 0, demand.count
        while low < high:  # the largest k in [0, count] whose gangs all place
            middle = (low + high + 1) // 2
            if short_at(middle) < 0:
                low = middle
            else:
                high = middle - 1
        short = short_at(low + 1) if low < demand.count else -1
        model = (*capacity_model(index, resources), "gangs of several pod shapes placed greedily")
        return GangFit(demand, low, index.node_count, False, short, model)
