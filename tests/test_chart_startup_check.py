"""The chart's post-install check (issue 49), as cert-manager's startupapicheck and Gatekeeper's
post-install probe: a post-install/post-upgrade hook Job that waits until guardhook answers a
review with the certificate its webhook configuration's caBundle trusts, so `helm install` returns
only once the webhook works. It runs where the chart's other pods run, as guardhook's own
ServiceAccount (which may read the webhook configurations), within timeoutSeconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helm_chart import is_hook, template

Object = dict[str, Any]


def _job(objects: list[Object]) -> Object:
    (job,) = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"] == "guardhook-startup-check"]
    return job


def test_a_hook_job_waits_until_the_webhook_answers(tmp_path: Path) -> None:
    values = {
        "startupCheck": {"timeoutSeconds": 120},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    }
    objects = template(tmp_path, values)
    job = _job(objects)
    assert is_hook(job)
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "post-install,post-upgrade"
    assert "hook-succeeded" in annotations["helm.sh/hook-delete-policy"]  # a failed one stays to read
    assert job["spec"]["activeDeadlineSeconds"] == 150 and job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "guardhook"
    assert pod["tolerations"] == values["tolerations"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert "priorityClassName" not in pod  # a short check: the cluster's default class
    assert (
        job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] != "guardhook"
    )  # not a webhook pod
    (container,) = pod["containers"]
    script = container["args"][0]
    compile(script, "startup-check", "exec")  # the script is Python that parses
    assert 'namespace, seconds = "guardhook-system", 120' in script
    assert "validatingwebhookconfigurations/guardhook" in script and "caBundle" in script
    # guardhook's ServiceAccount may read that configuration
    (view,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "guardhook-view"]
    assert any(
        "validatingwebhookconfigurations" in rule["resources"] and "get" in rule["verbs"]
        for rule in view["rules"]
    )


def test_it_can_be_turned_off(tmp_path: Path) -> None:
    objects = template(tmp_path, {"startupCheck": {"enabled": False}})
    assert not [o for o in objects if o["metadata"]["name"] == "guardhook-startup-check"]
