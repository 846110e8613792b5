"""A ledger shared by every guardhook replica: one coordination.k8s.io/v1 Lease per LWS in
guardhook's own namespace, its entries in an annotation as JSON.

Atomicity comes from the API server's optimistic concurrency: a replace carries the
`metadata.resourceVersion` it read, and the API server answers 409 Conflict when another writer
got there first (a create of an existing Lease is 409 AlreadyExists); the update is then re-read,
re-planned and retried. The Lease lives in guardhook's namespace, which the webhooks exclude, so
guardhook's own writes never come back through admission (an annotation on the LWS would).

Garbage collection: an ownerReference cannot name the LWS (owners must be in the same namespace,
and the Lease is in guardhook's), so a Lease would outlive its LWS (a deleted namespace, say).
Instead `sweep` deletes every managed Lease whose entries have all expired: it holds nothing a
judgement reads (an expired entry counts for nothing), and the next eviction of that LWS creates
it again. `serve` sweeps every SWEEP_SECONDS (start_sweeper); a delete carries the
resourceVersion listed, so a Lease written meanwhile by another replica is kept.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from guardhook.ledger.base import Disruption, Entries, LedgerError, LedgerKey, Plan, StoredKey, T, stored_key

log = logging.getLogger(__name__)

ENTRIES_ANNOTATION = "guardhook.io/disruptions"
LWS_ANNOTATION = "guardhook.io/leaderworkerset"
MANAGED_BY = {"app.kubernetes.io/managed-by": "guardhook"}
NAME_PREFIX = "guardhook-eviction."
MAX_NAME = 253  # a Lease name is a DNS subdomain
MAX_ATTEMPTS = 8
REQUEST_TIMEOUT_SECONDS = 5.0
# The eviction webhook's timeoutSeconds is 10: give up (429, the drain retries) before the API
# server stops waiting and applies the failurePolicy instead.
UPDATE_BUDGET_SECONDS = 8.0
CONFLICT = 409
NOT_FOUND = 404
SWEEP_SECONDS = 600.0
"""How often `serve` deletes Leases whose entries all expired (entries live minutes)."""


def lease_name(target: LedgerKey) -> str:
    """`guardhook-eviction.<namespace>.<lws>` for a LeaderWorkerSet, `guardhook-eviction.<namespace>.
    <kind>.<name>` for another set (guardhook.ledger.base.stored_key: the names every earlier
    version used): unambiguous, since a namespace holds no dot. A name over 253 characters is
    shortened with a hash of the full one."""
    namespace, stored = stored_key(target)
    name = f"{NAME_PREFIX}{namespace}.{stored}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    return f"{name[: MAX_NAME - 17]}.{digest}"


def encode_entries(entries: Entries) -> str:
    return json.dumps([e.to_json() for e in entries], separators=(",", ":"), sort_keys=True)


def decode_entries(text: str | None) -> Entries:
    """Entries from the annotation; malformed JSON or entries are dropped with a log line (the
    worst case is budget freed early, never a crash)."""
    if not text:
        return ()
    try:
        raw = json.loads(text)
    except ValueError:
        log.warning("ignoring a malformed %s annotation", ENTRIES_ANNOTATION)
        return ()
    parsed = (Disruption.from_json(item) for item in raw) if isinstance(raw, list) else iter(())
    return tuple(e for e in parsed if e is not None)


class LeaseLedger:
    """`Ledger` kept in Leases in `namespace`, through `api` (a kubernetes ApiClient).

    `clock` returns Unix seconds (entries carry wall-clock expiries, since replicas share them).
    Raises LedgerError when the API server fails or `MAX_ATTEMPTS` writes in a row conflict.
    """

    def __init__(self, api: client.ApiClient, namespace: str, clock: Callable[[], float] = time.time) -> None:
        self.leases = client.CoordinationV1Api(api)
        self.namespace = namespace
        self.clock = clock

    def now(self) -> float:
        """`clock()`: stamps expiries and checks them."""
        return self.clock()

    def entries(self, target: LedgerKey) -> Entries:
        """The unexpired entries of set `target` (none when its Lease does not exist yet)."""
        return self._unexpired(self._read(stored_key(target)))

    def update(self, target: LedgerKey, plan: Plan[T]) -> T:
        """Read, plan, and write with a resourceVersion precondition; retry on 409. All attempts
        together take at most UPDATE_BUDGET_SECONDS; past that a LedgerError is raised."""
        lws = stored_key(target)
        deadline = time.monotonic() + UPDATE_BUDGET_SECONDS
        for attempt in range(MAX_ATTEMPTS):
            lease = self._read(lws, _timeout(deadline))
            result, written = plan(self._unexpired(lease))
            if written is None:
                return result
            try:
                self._write(lws, lease, written, _timeout(deadline))
                return result
            except ApiException as exc:
                if exc.status not in (CONFLICT, NOT_FOUND):
                    raise LedgerError(f"cannot write Lease {self._where(lws)}: {_reason(exc)}") from exc
                log.debug("Lease %s changed under us (attempt %d); retrying", self._where(lws), attempt + 1)
                time.sleep(random.uniform(0, 0.01 * (attempt + 1)))  # spread racing replicas apart
        raise LedgerError(f"Lease {self._where(lws)}: {MAX_ATTEMPTS} conflicting writes in a row")

    def _read(self, lws: StoredKey, timeout: float = REQUEST_TIMEOUT_SECONDS) -> Any:
        try:
            return self.leases.read_namespaced_lease(
                lease_name(lws), self.namespace, _request_timeout=timeout
            )
        except ApiException as exc:
            if exc.status == NOT_FOUND:
                return None
            raise LedgerError(f"cannot read Lease {self._where(lws)}: {_reason(exc)}") from exc
        except Exception as exc:  # connection refused, timeout, TLS: the API server is unreachable
            raise LedgerError(f"cannot read Lease {self._where(lws)}: {exc}") from exc

    def _unexpired(self, lease: Any) -> Entries:
        annotations = (lease.metadata.annotations or {}) if lease is not None else {}
        now = self.now()
        return tuple(e for e in decode_entries(annotations.get(ENTRIES_ANNOTATION)) if e.expires > now)

    def _write(self, lws: StoredKey, lease: Any, entries: Entries, timeout: float) -> None:
        """Create the Lease, or replace it at the resourceVersion read. Raises ApiException (409
        on a lost race) and LedgerError when the API server cannot be reached."""
        annotations = dict((lease.metadata.annotations or {}) if lease is not None else {})
        annotations[ENTRIES_ANNOTATION] = encode_entries(entries)
        annotations[LWS_ANNOTATION] = f"{lws[0]}/{lws[1]}"
        metadata = client.V1ObjectMeta(
            name=lease_name(lws),
            namespace=self.namespace,
            labels=dict(MANAGED_BY),
            annotations=annotations,
            resource_version=lease.metadata.resource_version if lease is not None else None,
        )
        body = client.V1Lease(
            api_version="coordination.k8s.io/v1", kind="Lease", metadata=metadata, spec=client.V1LeaseSpec()
        )
        try:
            if lease is None:
                self.leases.create_namespaced_lease(self.namespace, body, _request_timeout=timeout)
            else:
                self.leases.replace_namespaced_lease(
                    lease_name(lws), self.namespace, body, _request_timeout=timeout
                )
        except ApiException:
            raise
        except Exception as exc:
            raise LedgerError(f"cannot write Lease {self._where(lws)}: {exc}") from exc

    def sweep(self) -> list[str]:
        """Delete every managed eviction Lease in the namespace whose entries have all expired
        (each with a resourceVersion precondition: one written since the list stays). Returns the
        names deleted. Raises LedgerError when the Leases cannot be listed."""
        selector = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())
        try:
            listed = self.leases.list_namespaced_lease(
                self.namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT_SECONDS
            )
        except ApiException as exc:
            raise LedgerError(f"cannot list Leases in {self.namespace}: {_reason(exc)}") from exc
        except Exception as exc:
            raise LedgerError(f"cannot list Leases in {self.namespace}: {exc}") from exc
        deleted = []
        for lease in listed.items:
            meta: Any = lease.metadata
            name = str(meta.name or "")
            if not name.startswith(NAME_PREFIX) or self._unexpired(lease):
                continue
            options = client.V1DeleteOptions(
                preconditions=client.V1Preconditions(resource_version=meta.resource_version)
            )
            try:
                self.leases.delete_namespaced_lease(
                    name, self.namespace, body=options, _request_timeout=REQUEST_TIMEOUT_SECONDS
                )
                deleted.append(name)
            except ApiException as exc:
                if exc.status not in (CONFLICT, NOT_FOUND):
                    log.warning(
                        "cannot delete the expired Lease %s/%s: %s", self.namespace, name, _reason(exc)
                    )
        if deleted:
            log.info("deleted %d eviction-ledger Leases whose entries all expired", len(deleted))
        return deleted

    def _where(self, lws: StoredKey) -> str:
        return f"{self.namespace}/{lease_name(lws)}"


def start_sweeper(ledger: object, every_seconds: float = SWEEP_SECONDS) -> threading.Thread | None:
    """For a LeaseLedger, sweep (LeaseLedger.sweep) every `every_seconds` from a daemon thread
    (returned); other ledgers keep nothing in the cluster: None."""
    if not isinstance(ledger, LeaseLedger):
        return None

    def loop() -> None:
        while True:
            time.sleep(every_seconds)
            try:
                ledger.sweep()
            except LedgerError as exc:
                log.warning("eviction-ledger Lease sweep: %s", exc)

    thread = threading.Thread(target=loop, name="guardhook-lease-sweep", daemon=True)
    thread.start()
    return thread


def _timeout(deadline: float) -> float:
    """The per-call timeout (seconds) left before `deadline`. Raises LedgerError when none is."""
    left = deadline - time.monotonic()
    if left <= 0.05:
        raise LedgerError(f"the Lease update ran past its {UPDATE_BUDGET_SECONDS:.0f}s budget")
    return min(REQUEST_TIMEOUT_SECONDS, left)


def _reason(exc: ApiException) -> str:
    return f"HTTP {exc.status} {exc.reason}"
