"""LeaderWorkerSets served by Kthena (volcano-sh/kthena v1.0.0) instead of the LWS controller.

Facts from the Kthena source (pkg/model-serving-controller: controller/lws_controller.go,
plugins/lws_labels_plugin.go, utils/utils.go; pkg/apis/workload/v1alpha1):

- for each LWS Kthena creates a ModelServing of the same name (workload.serving.volcano.sh/v1alpha1,
  controller-owned by the LWS) with one role `default` per serving group, and the ModelServing
  controller creates the pods directly (no StatefulSets): the entry pod `<lws>-<g>-default-0-0`,
  workers `<lws>-<g>-default-0-<i>`, controller-owned by the ModelServing;
- its LWS-labels plugin writes the LWS name, `group-index` g, `worker-index` i and `group-key` =
  sha1 of `<lws>-<g>`; no size annotation (the size is the LWS's `leaderWorkerTemplate.size`);
- a broken group is recovered by the ModelServing's `recoveryPolicy` (ServingGroupRecreate,
  RoleRecreate — the CRD default, which the ModelServing built from an LWS keeps — or None), not
  by the LWS `restartPolicy`. With one role per group, both recreating policies recreate the group.
"""

from __future__ import annotations

from collections.abc import Iterable

from guardhook.cluster.model import OwnerRef
from guardhook.groups.ref import Recreator

KTHENA_API_GROUP = "workload.serving.volcano.sh"
MODEL_SERVING_KIND = "ModelServing"
ROLE = "default"
ROLE_RECREATE = "RoleRecreate"
SERVING_GROUP_RECREATE = "ServingGroupRecreate"
DEFAULT_RECOVERY_POLICY = ROLE_RECREATE
RECREATING = (ROLE_RECREATE, SERVING_GROUP_RECREATE)


def model_serving(owners: Iterable[OwnerRef]) -> OwnerRef | None:
    """The pod's controller when it is a Kthena ModelServing, else None."""
    for owner in owners:
        if owner.controller:
            kthena = owner.kind == MODEL_SERVING_KIND and owner.api_version.startswith(KTHENA_API_GROUP + "/")
            return owner if kthena else None
    return None


def entry_pod_name(serving: str, group: str) -> str:
    """Kthena's entry pod of serving group g: `<modelserving>-<g>-default-0-0`
    (utils.GeneratePodName of the group `<ms>-<g>` and role id `default-0`, pod index 0)."""
    return pod_name(serving, group, 0)


def pod_name(serving: str, group: str, index: int) -> str:
    """Kthena's pod `index` of serving group g (0: the entry pod): `<modelserving>-<g>-default-0-<i>`."""
    return f"{serving}-{group}-{ROLE}-0-{index}"


def recreator(policy: str = DEFAULT_RECOVERY_POLICY) -> Recreator:
    """How Kthena recovers a broken group under `recoveryPolicy` `policy`."""
    return Recreator("Kthena ModelServing controller", "recoveryPolicy", policy, policy in RECREATING)
