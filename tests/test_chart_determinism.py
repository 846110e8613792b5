"""Two `helm template` renders with the same values are byte-identical (issue 49), as GitOps tools
(Argo CD renders with `helm template`) need to see no change where none was made: in every
certificate mode guardhook offers for GitOps, the default self-managed one (the Secret ships empty,
guardhook's controller fills it) and cert-manager (with the chart's CA or an issuer of one's own).
With certs.source=self-signed each render makes a new CA and serving certificate (`helm template`
has no cluster to read them back from): there, everything else is identical."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helm_chart import CHART, NAMESPACE, RELEASE, run_helm
from test_chart_values import ALL, values_of

Object = dict[str, object]
DETERMINISTIC_MODES: dict[str, Object] = {
    "default": {},
    "self-managed": {"certs": {"source": "self-managed"}},
    "self-managed-short": {"certs": {"selfManaged": {"validity": "10m", "renewBefore": "5m"}}},
    "cert-manager": {"certs": {"source": "cert-manager"}},
    "cert-manager-own-issuer": {
        "certs": {
            "source": "cert-manager",
            "certManager": {"issuerRef": {"kind": "ClusterIssuer", "name": "ca"}},
        }
    },
}
# The generated certificate bytes and their expiry: what differs between two self-signed renders.
GENERATED = re.compile(r"(caBundle|ca\.crt|tls\.crt|tls\.key|guardhook\.io/not-after): \S+")


def _render(tmp_path: Path, values: Object) -> str:
    done = run_helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, values=values, tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("mode", list(DETERMINISTIC_MODES))
@pytest.mark.parametrize("switches", [(), tuple(n for n in ALL if n != "self-signed")], ids=["base", "all"])
def test_two_renders_are_byte_identical(tmp_path: Path, mode: str, switches: tuple[str, ...]) -> None:
    values = {**values_of(switches), **DETERMINISTIC_MODES[mode]}
    assert _render(tmp_path, values) == _render(tmp_path, values)


def test_self_signed_renders_differ_only_in_the_generated_certificates(tmp_path: Path) -> None:
    values = {"certs": {"source": "self-signed"}}
    first, second = _render(tmp_path, values), _render(tmp_path, values)
    assert first != second  # a new CA per render: the gap a self-managed certificate controller closes
    assert GENERATED.sub(r"\1: <generated>", first) == GENERATED.sub(r"\1: <generated>", second)
