"""The group-readiness reconciler (issue 16): sets the pod condition `guardhook.io/group-ready` on
each gated leader so the leader is Ready only while its whole group is. `desired` plans purely from
a ClusterView, `apply` patches pods/status, `runner` runs rounds on the shared reconcile machinery
(`guardhook.reconcile`)."""
