"""Planning in groups, offline and beside the webhook: what draining nodes does to each LWS
(`drain.plan_drain`) and how many more whole groups fit now (`spare.spare_groups`).

Built on the group-eviction policy's budget (guardhook.policies.group_eviction) and the capacity
solver (guardhook.capacity) as they are; nothing here reads the API server or knows of HTTP.
"""
