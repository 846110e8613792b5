"""The policy registry: one module per policy id, each exporting `POLICY`.

Order is the order results appear in a combined response.
"""

from __future__ import annotations

from guardhook.policies import (
    group_capacity,
    group_eviction,
    group_pdb,
    group_readiness,
    group_resize,
    group_spec,
    group_taint,
    leader_service,
    pod_counted_scaler,
    worker_delete,
)
from guardhook.policies.base import Policy

REGISTRY: tuple[Policy, ...] = (
    worker_delete.POLICY,
    group_eviction.POLICY,
    group_resize.POLICY,
    leader_service.POLICY,
    group_pdb.POLICY,
    pod_counted_scaler.POLICY,
    group_capacity.POLICY,
    group_spec.POLICY,
    group_taint.POLICY,
    group_readiness.POLICY,
)
