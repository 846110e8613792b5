"""Pieces several policies share, kept apart from the one-module-per-policy-id files beside them:
the group disruption budget (`group_budget`: `group-eviction`, delete-based drains of
`worker-delete`, `group-taint`, and `guardhook drain-plan` through `group-eviction`), what a
NoExecute taint breaks in whole groups (`taint_blast`), and which pods a DeviceTaintRule evicts
(`device_taint_rules`, the DRA half of `group-taint`). Nothing here is a policy: no module exports
`POLICY`, and none imports a policy module.
"""
