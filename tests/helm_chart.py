"""Render charts/guardhook with the pinned Helm (.ci/helm.sh), for tests/test_chart*.py.

The helm binary: `$GUARDHOOK_HELM`, else `helm` on PATH. Without one the tests skip, unless
`GUARDHOOK_REQUIRE_HELM` is set (as .ci/run sets it), where they fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO

CHART = REPO / "charts" / "guardhook"
RELEASE = "guardhook"
NAMESPACE = "guardhook-system"
HOOK = "helm.sh/hook"

Object = dict[str, Any]


def helm() -> str:
    """The helm binary's path; skips (or fails under GUARDHOOK_REQUIRE_HELM) without one."""
    path = os.environ.get("GUARDHOOK_HELM") or shutil.which("helm")
    if path and Path(path).is_file():
        return path
    if os.environ.get("GUARDHOOK_REQUIRE_HELM"):
        pytest.fail("helm is required here (GUARDHOOK_REQUIRE_HELM) but GUARDHOOK_HELM names none")
    pytest.skip("helm not installed (GUARDHOOK_HELM=$(.ci/helm.sh) builds the pinned one; .ci/run does)")


def run_helm(
    *args: str, values: Object | None = None, tmp: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run helm with `args` (and `values` as a values file written under `tmp`); never raises on
    the exit code. HELM_* caches go under `tmp` so a test never writes into $HOME."""
    command = [helm(), *args]
    env = dict(os.environ)
    if tmp is not None:
        for var in ("HELM_CACHE_HOME", "HELM_CONFIG_HOME", "HELM_DATA_HOME"):
            env[var] = str(tmp / "helm-home" / var.lower())
        if values is not None:
            path = tmp / "values.json"
            path.write_text(json.dumps(values))
            command += ["-f", str(path)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)


def template(tmp: Path, values: Object | None = None, chart: Path = CHART) -> list[Object]:
    """`helm template` of `chart` into NAMESPACE with `values`: the rendered objects, hooks
    included (they carry the helm.sh/hook annotation). Fails the test on a render error."""
    done = run_helm("template", RELEASE, str(chart), "--namespace", NAMESPACE, values=values or {}, tmp=tmp)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def is_hook(obj: Object) -> bool:
    """Whether Helm runs `obj` as a hook (not part of the installed release)."""
    return HOOK in ((obj.get("metadata") or {}).get("annotations") or {})


def merged(*parts: Object) -> Object:
    """Deep merge of values maps, later ones winning (as several `-f` files)."""
    out: Object = {}
    for part in parts:
        for key, value in part.items():
            if isinstance(value, dict) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = value
    return out
