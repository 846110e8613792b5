"""Leader election between guardhook replicas, one Lease per reconciler, with the `kubernetes`
library's `leaderelection` and its LeaseLock (coordination.k8s.io/v1 Leases in guardhook's own
namespace). Only the holder reconciles; a holder that cannot renew within the renew deadline
stops its work at once and campaigns again.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
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
) -> None:
    """Campaign for the Lease `namespace/lease_name` forever; while holding it run `work(stop)`,
    setting `stop` when the Lease is lost. `name` prefixes the log lines (the reconciler's name).
    Blocks: run it on a daemon thread. Connection errors end a term, never the campaign."""
    identity = identity or default_identity()
    name = name or lease_name
    while True:
        lock = LeaseLock(lease_name, namespace, identity)
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
        except (HTTPError, OSError) as exc:  # the lock lets connection errors through
            log.warning("%s: election against the API server failed: %s", name, exc)
        finally:
            term.set()
        log.warning("%s: not holding the Lease %s/%s; campaigning again", name, namespace, lease_name)
        time.sleep(RETRY_PERIOD_SECONDS)
