"""`guardhook review [FILE|-]`: judge one AdmissionReview offline and print the response.

`--format review` (default) prints the response AdmissionReview as the API server would receive
it (the patch base64-encoded); `text` prints the decision, warnings, audit annotations and the
decoded JSONPatch for a person, each operation after the id of the policy that made it
(`[leader-service] {"op": "add", …}`), as warnings carry theirs; `json` prints the same as one
JSON object (`patch`, and `patches`: the operations grouped by policy). `--exit-code` exits 1
when the request is denied, for scripts and CI.

A request about a pod whose LeaderWorkerSet the view does not hold (or an eviction of a pod the
view does not hold) cannot be judged as a group: it is printed with a "not judged" note, and
`--exit-code` exits 2, as `check` does, rather than passing what was never judged.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from guardhook.commands.common import EXIT_USAGE, add_view_flags, open_view, read_file

if TYPE_CHECKING:
    from collections.abc import Sequence

    from guardhook.admission.engine import Decision
    from guardhook.cluster.view.store import ClusterView
    from guardhook.wire import AdmissionRequest

EXIT_DENIED = 1
FORMATS = ("review", "text", "json")


def add_parser(commands: Any) -> None:
    """Register `guardhook review` on the CLI's subparsers."""
    review = commands.add_parser("review", help="judge one AdmissionReview offline and print the response")
    review.add_argument("file", nargs="?", default="-", help="review file, or - for standard input")
    review.add_argument(
        "--endpoint",
        choices=("both", "validate", "mutate"),
        default="both",
        help="both (default): mutate, apply the patch, then validate, as the API server does",
    )
    review.add_argument(
        "--format",
        choices=FORMATS,
        default="review",
        help="review (default): the response AdmissionReview; text: the decision, warnings and decoded "
        "patch for reading; json: the same as one JSON object",
    )
    review.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when the request is denied, 2 when it was not judged (its LWS is not in the cluster "
        "view) (default: 0 once read)",
    )
    add_view_flags(review, "judge against the cluster of this kubeconfig, listed once")
    review.set_defaults(run=run_review)


def run_review(args: argparse.Namespace) -> int:
    """Print the response; exit 2 when the input is not an AdmissionReview, 1 on a denial with
    `--exit-code`, else 0."""
    from guardhook.admission.codec import ReviewError, decode, encode
    from guardhook.admission.engine import Engine
    from guardhook.admission.review import verdict_both
    from guardhook.cluster.sources import choose_source
    from guardhook.cluster.view.manifests import ManifestError, manifest_text
    from guardhook.config import load_config

    config = load_config(args.config, args.enforcement)
    # the input first: a file that is no review ends it before any cluster is read or warned about
    body = sys.stdin.buffer.read() if args.file == "-" else read_file(args.file)
    try:
        # as `check` reads a manifest: a byte order mark dropped, bytes that are not UTF-8 in its words
        text = manifest_text(body, args.file)
    except ManifestError as exc:
        print(f"guardhook review: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        decoded = decode(text.encode())
    except ReviewError as exc:
        print(f"guardhook review: {args.file}: not an AdmissionReview: {exc}", file=sys.stderr)
        return EXIT_USAGE
    source = choose_source(args.cluster_state, args.kubeconfig)
    view = open_view(source, config.stale_after_seconds)
    engine = Engine(view, config, record=False)
    if args.endpoint == "both":
        verdict = verdict_both(engine, decoded.request)
    else:
        verdict = engine.judge(decoded.request, args.endpoint)
    response = dict(verdict.response)
    patches = patches_by_policy(verdict.decisions)
    note = not_judged(view, decoded.request)
    if args.format == "review":
        print(json.dumps(encode(decoded.api_version, response), indent=2))  # type: ignore[arg-type]
    elif args.format == "json":
        document = {**summary(response), "patches": patches, "notJudged": [note] if note else []}
        print(json.dumps(document, indent=2))
    else:
        render_text(response, sys.stdout, patches)
    if note:
        print(f"guardhook review: not judged: {note}", file=sys.stderr)
    if not args.exit_code:
        return 0
    if response.get("allowed") is False:
        return EXIT_DENIED
    return EXIT_USAGE if note else 0


def not_judged(view: ClusterView, request: AdmissionRequest) -> str | None:
    """Why the group policies could not judge `request` against `view`: "LeaderWorkerSet ns/name
    is not in the cluster view" for a pod (object or oldObject, by its group labels, as
    guardhook.groups.resolve_object places it) whose LWS the view lacks; "Pod ns/name is not in
    the cluster view" for an eviction of a pod the view lacks. None when the view holds what the
    request is about, or the request is not about a pod."""
    from guardhook.cluster.lws import LWS_KIND
    from guardhook.cluster.model import as_dict
    from guardhook.groups import resolve, resolve_object

    resource = as_dict(request.get("resource")).get("resource")
    if resource != "pods":
        return None
    namespace = str(request.get("namespace") or "")
    name = str(request.get("name") or "")
    if request.get("subResource") == "eviction":
        pod = view.pod(namespace, name)
        if pod is None:
            return f"Pod {namespace}/{name} is not in the cluster view"
        member = resolve(view, pod)
    elif request.get("subResource"):
        return None
    else:
        member = resolve_object(view, as_dict(request.get("object")) or as_dict(request.get("oldObject")))
    if member is None or member.set.kind != LWS_KIND:
        return None
    if view.lws(member.set.namespace or namespace, member.set.name) is not None:
        return None
    return f"LeaderWorkerSet {namespace}/{member.set.name} is not in the cluster view"


def decoded_patch(response: dict[str, Any]) -> list[Any] | None:
    """The response's JSONPatch operations, decoded from base64 JSON; None when there is no patch.
    A patch that does not decode is returned as one `{"undecodable": …}` entry, never raised."""
    patch = response.get("patch")
    if not patch:
        return None
    try:
        ops = json.loads(base64.b64decode(patch, validate=True))
    except (binascii.Error, ValueError) as exc:
        return [{"undecodable": f"{exc}"}]
    return ops if isinstance(ops, list) else [ops]


def patches_by_policy(decisions: Sequence[Decision]) -> list[dict[str, Any]]:
    """`[{"policy": id, "patch": [ops]}]`, one per policy whose decision patched the request, in
    the order the engine applied them (their operations, joined, are the response's patch)."""
    return [{"policy": d.policy, "patch": list(d.patch)} for d in decisions if d.patch]


def summary(response: dict[str, Any]) -> dict[str, Any]:
    """The response as one flat object with the patch decoded: `allowed`, `code`, `reason`,
    `message`, `warnings`, `auditAnnotations`, `patch` (JSONPatch operations or null)."""
    status = response.get("status") or {}
    return {
        "allowed": bool(response.get("allowed")),
        "code": status.get("code"),
        "reason": status.get("reason"),
        "message": status.get("message"),
        "warnings": list(response.get("warnings") or []),
        "auditAnnotations": dict(response.get("auditAnnotations") or {}),
        "patch": decoded_patch(response),
    }


def render_text(response: dict[str, Any], out: TextIO, patches: Sequence[dict[str, Any]] = ()) -> None:
    """The decision on the first line (`allowed`, or `denied CODE REASON: message`), then one line
    per warning, audit annotation and JSONPatch operation, each operation after the id of the
    policy that made it (from `patches`, patches_by_policy; unattributed when it is not there)."""
    brief = summary(response)
    if brief["allowed"]:
        print("allowed", file=out)
    else:
        reason = " ".join(str(part) for part in (brief["code"], brief["reason"]) if part)
        print(f"denied {reason}: {brief['message']}".replace(" :", ":"), file=out)
    for warning in brief["warnings"]:
        print(f"warning: {warning}", file=out)
    for key, value in brief["auditAnnotations"].items():
        print(f"audit: {key}: {value}", file=out)
    if brief["patch"] is None:
        return
    print("patch (JSONPatch):", file=out)
    attributed = [(f"[{p['policy']}] ", op) for p in patches for op in p["patch"]]
    if [op for _, op in attributed] != brief["patch"]:  # not the decisions' patch: say it as it is
        attributed = [("", op) for op in brief["patch"]]
    for policy, op in attributed:
        print(f"  {policy}{json.dumps(op, separators=(', ', ': '))}", file=out)
