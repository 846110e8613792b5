"""API clients for a live source (kubeconfig or in-cluster config), from the `kubernetes` library.

Only the cluster view, the eviction ledger, the reconcilers (per-group PDBs, group readiness) and
`audit` talk to the API server; policies never do.
"""

from __future__ import annotations

import json
import os

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config import ConfigException

from guardhook.cluster.sources import IN_CLUSTER, KUBECONFIG, Source


def api_client(source: Source, retries: bool = True) -> client.ApiClient:
    """A new ApiClient for a live `source`; `retries=False` turns off urllib3's own connection
    retries (for callers that back off themselves or answer within a deadline: a refused or
    timed-out connection then reaches them at once). Raises ValueError for a non-live source and the
    kubernetes library's ConfigException for an unusable kubeconfig (also one that is not YAML or
    not a mapping, which the library lets through as other errors) or in-cluster config."""
    api = _configured_client(source)
    if retries:
        return api
    configuration = api.configuration
    configuration.retries = False  # read when the client builds its connection pool
    return client.ApiClient(configuration)


def api_error(exc: ApiException) -> str:
    """One line for an API error: "HTTP 403 Forbidden: <the Status message>". The library's own
    str() spans the response headers and body over several lines; the API server's reason is the
    `message` of the metav1.Status body, when the body is one."""
    line = f"HTTP {exc.status} {exc.reason}"
    try:
        message = json.loads(exc.body or "").get("message")
    except (ValueError, TypeError, AttributeError):
        message = None
    return f"{line}: {message}" if isinstance(message, str) and message else line


def _configured_client(source: Source) -> client.ApiClient:
    if source.kind == KUBECONFIG:
        # Like kubectl, the library reads a list of files ($KUBECONFIG's `a:b`) and skips missing
        # ones; with none there it says only "No configuration found". Name the missing file.
        files = [p for p in source.paths[0].split(os.pathsep) if p]
        if not any(os.path.isfile(p) for p in files):
            if len(files) > 1:
                raise ConfigException(f"none of these files exists: {', '.join(files)}")
            raise ConfigException("not a file" if files and os.path.exists(files[0]) else "no such file")
        try:
            return config.new_client_from_config(config_file=source.paths[0])
        except yaml.YAMLError as exc:
            # PyYAML's own text spans lines and names the file again: one line, as every error
            from guardhook.cluster.view.manifests import yaml_error_line

            raise ConfigException(f"not valid YAML: {yaml_error_line(exc)}") from exc
        except UnicodeDecodeError as exc:
            raise ConfigException("not UTF-8 text") from exc
        except (TypeError, AttributeError) as exc:  # YAML, but a list or a scalar where a map goes
            raise ConfigException("not a kubeconfig (a mapping of clusters, contexts and users)") from exc
    if source.kind == IN_CLUSTER:
        configuration = client.Configuration()
        config.load_incluster_config(client_configuration=configuration)
        return client.ApiClient(configuration)
    raise ValueError(f"{source.describe()} is not a live source")
