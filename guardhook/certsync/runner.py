"""Running the certificate controller of `guardhook serve --manage-certs SECRET`.

Two phases, as open-policy-agent/cert-controller's rotator (Gatekeeper, LWS, Kueue) has them:

- At start (`wait_until_mounted`), before the server listens, in every replica whose certificate
  folder is still empty: rounds (`apply.sync_once`, safe without election, see `apply`) until the
  Secret holds certificates, then wait until the kubelet has put them in the mounted folder. The
  server therefore serves only once its certificate is in place.
- While serving (`start_background_sync`), in the holder of the Lease `guardhook-certs` only: a
  round every `interval` seconds rotates the certificates before they expire and puts the CA
  bundle back on any entry that lacks it (a `helm upgrade` that adds an entry). Every replica,
  not only the holder, picks up a rotated certificate from its mounted Secret: the server reloads
  changed files (`guardhook.server.certs.RotatingServerContext`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from kubernetes import client

from guardhook.certsync.apply import Outcome, Target, sync_once
from guardhook.certsync.issue import CERT_FILE, KEY_FILE
from guardhook.reconcile import loop

log = logging.getLogger(__name__)

NAME = "cert-sync"
LEASE_NAME = "guardhook-certs"
DEFAULT_INTERVAL_SECONDS = 10.0
MOUNT_POLL_SECONDS = 2.0


def mounted(folder: Path) -> bool:
    """Whether tls.crt and tls.key are in `folder` with content (the kubelet has written the Secret)."""
    try:
        return all((folder / name).stat().st_size > 0 for name in (CERT_FILE, KEY_FILE))
    except OSError:
        return False


def wait_until_mounted(
    api: client.ApiClient,
    target: Target,
    folder: Path,
    stop: threading.Event | None = None,
    poll: float = MOUNT_POLL_SECONDS,
    round_: Callable[[client.ApiClient, Target], Outcome] = sync_once,
) -> bool:
    """Run rounds until the Secret holds certificates, then wait until they are in `folder`.
    Returns True once they are there, False when `stop` was set first. Logs what it waits for."""
    stop = stop or threading.Event()
    written = False
    said = False
    while not stop.is_set():
        if mounted(folder):
            return True
        if not written:
            written = bool(round_(api, target).bundle)
        if written and not said:
            log.info(
                "certificates are in Secret %s/%s; waiting for the kubelet to mount them in %s",
                target.namespace,
                target.secret,
                folder,
            )
            said = True
        stop.wait(poll)
    return False


def run_until(api: client.ApiClient, target: Target, stop: threading.Event, interval: float) -> None:
    """A round every `interval` seconds until `stop` is set; a round that raises is logged and the
    next one runs as usual."""
    while not stop.is_set():
        try:
            sync_once(api, target)
        except Exception:  # one failed round must not end the controller
            log.exception("%s: round failed; trying again next round", NAME)
        stop.wait(interval)


def start_background_sync(
    api: client.ApiClient,
    target: Target,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    elect: bool = True,
    stop: threading.Event | None = None,
) -> threading.Thread:
    """Start the controller on a daemon thread until `stop` is set (for the life of the process
    without one): with `elect`, only while this replica holds the Lease `guardhook-certs` in the
    target's namespace (`guardhook.reconcile.loop.start_background`)."""

    def work(term: threading.Event) -> None:
        run_until(api, target, term, interval)

    if elect:
        return loop.start_background(NAME, work, api, target.namespace, LEASE_NAME, stop)
    return loop.start_background(NAME, work, stop=stop)
