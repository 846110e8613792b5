"""Leader election between guardhook replicas, one Lease per reconciler, with the `kubernetes`
library's `leaderelection` and its LeaseLock (coordination.k8s.io/v1 Leases in guardhook's own
namespace). Only the holder reconciles; a holder that cannot renew within the renew deadline
stops its work at once and campaigns again.
"""

from __future__ import annotations

import logging
import socket
import threading
import uuid
from collections.abc import Callable

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock
from urllib3.exceptions import HTTPError

log = logging.getLogger(__name__)

LEASE_DURATION_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_PERIOD_SECONDS = 2

Work = Callable[[threading.Event], None]
"""What the holder runs: `work(stop)` returns soon after `stop` is set."""


class _Stopped(Exception):
    """Raised by `_StoppableLock` once the campaign's `stop` is set, to leave the library's loops."""


class _StoppableLock(LeaseLock):
    """A LeaseLock that raises `_Stopped` on its next call once `stop` is set: the `kubernetes`
    library's `LeaderElection.run` loops (acquire, renew) have no stop of their own and end only
    when the lock raises."""

    def __init__(self, name: str, namespace: str, identity: str, stop: threading.Event) -> None:
        super().__init__(name, namespace, identity)
        self.stop = stop

    def _check(self) -> None:
        if self.stop.is_set():
            raise _Stopped

    def get(self, name: str, namespace: str) -> tuple[bool, object]:
        self._check()
        return super().get(name, namespace)

    def create(self, name: str, namespace: str, election_record: object) -> bool:
        self._check()
        return super().create(name, namespace, election_record)

    def update(self, name: str, namespace: str, updated_record: object) -> bool:
        self._check()
        return super().update(name, namespace, updated_record)


def default_identity() -> str:
    """This replica's holder identity: the host (pod) name plus a random suffix."""
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


def run_elected(
    api: client.ApiClient,
    namespace: str,
    lease_name: str,
    work: Work,
    identity: str = "",
    name: str = "",
    stop: threading.Event | None = None,
) -> None:
    """Campaign for the Lease `namespace/lease_name` until `stop` is set (forever without one);
    while holding it run `work(term)`, setting `term` when the Lease is lost or `stop` is set.
    `name` prefixes the log lines (the reconciler's name). Blocks: run it on a daemon thread.
    Connection errors end a term, never the campaign. Returns within about RETRY_PERIOD_SECONDS
    (plus one API call) of `stop` being set; the Lease is left to expire, as a crashed holder's."""
    identity = identity or default_identity()
    name = name or lease_name
    stop = stop or threading.Event()
    while not stop.is_set():
        lock = _StoppableLock(lease_name, namespace, identity, stop)
        lock.api_instance = client.CoordinationV1Api(api)
        term = threading.Event()
        config = electionconfig.Config(
            lock,
            lease_duration=LEASE_DURATION_SECONDS,
            renew_deadline=RENEW_DEADLINE_SECONDS,
            retry_period=RETRY_PERIOD_SECONDS,
            onstarted_leading=lambda t=term: work(t),
            onstopped_leading=term.set,
        )
        try:
            leaderelection.LeaderElection(config).run()
        except _Stopped:
            return
        except (HTTPError, OSError) as exc:  # the lock lets connection errors through
            log.warning("%s: election against the API server failed: %s", name, exc)
        finally:
            term.set()
        if stop.is_set():
            return
        log.warning("%s: not holding the Lease %s/%s; campaigning again", name, namespace, lease_name)
        stop.wait(RETRY_PERIOD_SECONDS)
