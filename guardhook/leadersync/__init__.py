"""The leader-service-sync reconciler: desired state (plan), apply, runner (issue 38)."""
