"""JobSet (kubernetes-sigs/jobset, `jobset.x-k8s.io/v1alpha2`): one replica of a replicatedJob
is one group when its pods run as one.

A JobSet `J` creates, for replicatedJob `R` with `replicas: N`, the Jobs `J-R-0` ... `J-R-<N-1>`
(pkg/util/placement GenJobName), each owned by the JobSet; the Job controller creates the pods,
each controlled by its Job. The JobSet controller labels (and annotates) every Job and its pod
template (pkg/controllers/jobset_controller.go labelAndAnnotateObject; api/jobset/v1alpha2
jobset_types.go):

| label | value |
|---|---|
| `jobset.sigs.k8s.io/jobset-name` | J |
| `jobset.sigs.k8s.io/replicatedjob-name` | R |
| `jobset.sigs.k8s.io/job-index` | the Job's index in R |
| `jobset.sigs.k8s.io/job-key` | SHA-1 of `<namespace>/<Job name>` (jobHashKey) |
| `jobset.sigs.k8s.io/restart-attempt` | the JobSet's restart count |

and, when set on the JobSet or the replicatedJob, the annotation
`alpha.jobset.sigs.k8s.io/exclusive-topology` (one Job per topology domain: a multi-host TPU or
GPU slice).

guardhook's group is one Job of the JobSet: set = the JobSet, key = the Job's name. Such a Job is
a group (issue 51) when its pods run as one — more than one pod (an Indexed Job's pods: more than
one held, or a `batch.kubernetes.io/job-completion-index` above 0), or exclusive placement per
topology domain — or when its failure restarts the whole JobSet: the JobSet's `spec.failurePolicy`
(guardhook.cluster.jobsets.JobSetRecord.restarts_whole: the first rule for the Job's replicatedJob
and a lost pod's failure reason `BackoffLimitExceeded`, else the default `RestartJobSet`) recreates
every Job, so one lost pod costs every Job's progress. A one-pod Job whose failure does not (no
failure policy: the JobSet fails; a `RestartJob` or `FailJobSet` rule) or whose JobSet the view
does not hold is no group (a drain moves it as any pod). Membership is read from the controller
ownerReference first (a `batch` Job named `J-R-<i>`) and labels second. Size: the pods held, or
the highest completion index plus one, whichever is more.
"""

from __future__ import annotations

from dataclasses import dataclass

from guardhook.cluster.model import OwnerRef, PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.podgangs import PodReadMaker
from guardhook.groups.ref import JOBSET, Recreator

JOBSET_API_GROUP = "jobset.x-k8s.io"
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
JOBSET_KIND = "JobSet"
JOB_KIND = "Job"

JOBSET_MARK = "jobset.sigs.k8s.io/"
"""The prefix of the JobSet controller's labels and annotations on a Job's pods."""
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX_LABEL = "jobset.sigs.k8s.io/job-index"
EXCLUSIVE_ANNOTATION = "alpha.jobset.sigs.k8s.io/exclusive-topology"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
"""The Job controller's label and annotation on an Indexed Job's pods (k8s.io/api batch/v1)."""

JOBSET_CONTROLLER = "system:serviceaccount:jobset-system:jobset-controller-manager"
"""The JobSet controller as its release manifests install it: service account `controller-manager`
with the kustomize prefix `jobset-`, in `jobset-system` (config/default/kustomization.yaml,
config/components/rbac/service_account.yaml). The Helm chart names it `<release>-jobset-controller`."""


@dataclass(frozen=True, slots=True)
class JobSetMember:
    """Where a JobSet pod stands: its JobSet, replicatedJob, Job (the group's key), completion
    index, and whether the pod asks for exclusive placement; `inconsistent` says how its labels
    disagreed with its controller ("" when they agree)."""

    namespace: str
    jobset: str
    replicated_job: str
    job: str
    completion_index: int | None
    exclusive: bool
    inconsistent: str = ""


def _job_owner(pod: PodRecord) -> OwnerRef | None:
    """The pod's controller ownerReference when it is a `batch` Job, else None."""
    for owner in pod.owners:
        if owner.controller and owner.kind == JOB_KIND and owner.api_version.startswith("batch/"):
            return owner
    return None


def _completion_index(pod: PodRecord) -> int | None:
    raw = pod.labels.get(COMPLETION_INDEX) or pod.annotations.get(COMPLETION_INDEX, "")
    return int(raw) if raw.isdigit() else None


def _labelled(marks: dict[str, str]) -> tuple[str, str, str] | None:
    """(JobSet, replicatedJob, job index) as `marks` (a pod's labels, or its annotations: the JobSet
    controller writes both) say, or None when one is missing."""
    jobset = marks.get(JOBSET_NAME_LABEL, "")
    rjob = marks.get(REPLICATED_JOB_LABEL, "")
    index = marks.get(JOB_INDEX_LABEL, "")
    return (jobset, rjob, index) if jobset and rjob and index.isdigit() else None


def _names(owner: OwnerRef, said: tuple[str, str, str] | None) -> bool:
    return said is not None and owner.name == f"{said[0]}-{said[1]}-{said[2]}"


def jobset_member(pod: PodRecord, view: ClusterView | None = None) -> JobSetMember | None:
    """The JobSet Job `pod` belongs to, or None for a pod of no JobSet. A pod whose labels name a
    Job other than its controller Job is placed by its controller: by its JobSet annotations (the
    same keys and values), else by the labels of the view's other pods of that Job, when they agree
    with the Job's name; a pod with no JobSet mark at all is a plain Job's (a Job's name alone does
    not say whether a JobSet made it, and the view's pods are not searched for it)."""
    owner = _job_owner(pod)
    if owner is None:
        return None
    exclusive = EXCLUSIVE_ANNOTATION in pod.annotations
    index = _completion_index(pod)
    said = _labelled(pod.labels)
    if said is not None and _names(owner, said):
        return JobSetMember(pod.namespace, said[0], said[1], owner.name, index, exclusive)
    found = _labelled(pod.annotations)
    if not _names(owner, found):
        found = None
        if view is None or not any(k.startswith(JOBSET_MARK) for k in (*pod.labels, *pod.annotations)):
            return None
        for other in view.pods_in_namespace(pod.namespace):
            theirs = _labelled(other.labels)
            mine = _job_owner(other)
            if mine is not None and mine.uid == owner.uid and other.uid != pod.uid and _names(owner, theirs):
                found = theirs
                exclusive = exclusive or EXCLUSIVE_ANNOTATION in other.annotations
                break
    if found is None:
        return None
    why = (
        f"{JOBSET_NAME_LABEL}/{REPLICATED_JOB_LABEL}/{JOB_INDEX_LABEL} say "
        f"{'/'.join(said) if said else '(missing)'}, but its controller is Job {owner.name}"
    )
    return JobSetMember(pod.namespace, found[0], found[1], owner.name, index, exclusive, why)


def job_size(pods: list[PodRecord]) -> int:
    """A Job's size from its pods (terminal ones aside): the pods held or the highest completion
    index plus one, whichever is more; at least 1."""
    live = [p for p in pods if not p.terminal]
    highest = max((i for p in live if (i := _completion_index(p)) is not None), default=-1)
    return max(1, len(live), highest + 1)


def is_group(member: JobSetMember, pods: list[PodRecord], view: ClusterView | None = None) -> bool:
    """Whether the Job of `member` (with `pods`, the view's pods of it) is a group: more than one
    pod, exclusive placement per topology domain, or a failure that restarts the whole JobSet (its
    failure policy as `view` holds it; see the module docstring)."""
    return member.exclusive or job_size(pods) > 1 or bool(restarts_whole(member, view))


def restarts_whole(member: JobSetMember, view: ClusterView | None) -> str:
    """Why a failure of `member`'s Job restarts its whole JobSet, or "" when it does not or the
    view does not hold the JobSet (guardhook.cluster.jobsets.JobSetRecord.restarts_whole)."""
    jobset = view.jobset(member.namespace, member.jobset) if view is not None else None
    return jobset.restarts_whole(member.replicated_job) if jobset is not None else ""


def _place(pod: PodRecord, view: ClusterView | None) -> tuple[str, str, str] | None:
    member = jobset_member(pod, view)
    return None if member is None else (member.jobset, member.job, member.inconsistent)


def _is_group(pod: PodRecord, pods: list[PodRecord], view: ClusterView) -> bool:
    member = jobset_member(pod, view)
    return member is not None and is_group(member, pods, view)


JOBSET_MAKER = PodReadMaker(
    name="JobSet",
    flavour=JOBSET,
    kind=JOBSET_KIND,
    # A failed Job fails the JobSet, or under its failurePolicy's rules (RestartJobSet by default)
    # gets every Job recreated.
    recreator=Recreator("JobSet controller", "failurePolicy", "RestartJobSet (the default action)", True),
    place=_place,
    size=lambda pods, view: job_size(pods),
    is_group=_is_group,
    gang_controllers=(JOBSET_CONTROLLER,),
)
"""JobSet Jobs whose pods run as one, as groups (guardhook.groups.maker.GroupMaker)."""
