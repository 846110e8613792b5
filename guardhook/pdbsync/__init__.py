"""The per-group PodDisruptionBudget reconciler: desired state, apply, runner."""
