"""API clients for a live source (kubeconfig or in-cluster config), from the `kubernetes` library.

Only the cluster view, the eviction ledger, the PDB reconciler and `audit` talk to the API server;
policies never do.
"""

from __future__ import annotations

from kubernetes import client, config

from guardhook.sources import IN_CLUSTER, KUBECONFIG, Source


def api_client(source: Source) -> client.ApiClient:
    """A new ApiClient for a live `source`. Raises ValueError for a non-live source and the
    kubernetes library's ConfigException for an unusable kubeconfig or in-cluster config."""
    if source.kind == KUBECONFIG:
        return config.new_client_from_config(config_file=source.paths[0])
    if source.kind == IN_CLUSTER:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    raise ValueError(f"{source.describe()} is not a live source")
