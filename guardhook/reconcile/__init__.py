"""The machinery every guardhook reconciler shares (the per-group PDBs, group readiness): leader
election on a Lease (`guardhook.reconcile.election`) and the round loop over the cluster view
(`guardhook.reconcile.loop`). A reconciler supplies only its round: plan from a view, apply."""
