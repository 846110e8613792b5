"""`guardhook check PATH…`: the offline CI check of manifests (design.md §4).

Reads files, folders, multi-document YAML and `-` (standard input, e.g. `kustomize build .`),
builds a static cluster view from them plus context — `--cluster-state` manifests or dumps and the
cluster of `--kubeconfig`, which are never checked themselves — judges every input object through
the one Engine (as a CREATE; as an UPDATE from the context's copy when the context holds the same
object, as `kubectl apply` would) and prints one line per finding.

Pods of an LWS that neither the input nor the context holds stand for it (a LeaderWorkerSet read off
them: guardhook.commands.context.stand_in_lws). Objects a policy could not judge for lack of context
get a note (guardhook.commands.context).
A file that cannot be read is reported after the findings of the others.

Exit codes: 0 clean (or only Warn / Audit / Mutate results), 1 when a policy whose actions include
Deny is violated, 2 when an input file is unreadable, the input holds no Kubernetes object at all,
or the configuration or context is unusable.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from guardhook.commands.common import EXIT_USAGE, add_config_flags

if TYPE_CHECKING:
    from guardhook.cluster.view.manifests import Manifest, SkippedDocument
    from guardhook.commands.context import Unjudged
    from guardhook.commands.output import Output
    from guardhook.commands.scan import Finding, Located
    from guardhook.config import Config
    from guardhook.policies.base import Policy
    from guardhook.wire import KubeObject

EXIT_CLEAN = 0
EXIT_DENIED = 1
STDIN = "-"
NO_OBJECTS = "no Kubernetes object (a document with a kind) in the input"


@dataclass
class CheckResult:
    """What `check` found: every finding (passes included), the policies skipped and why, notes on
    objects a policy could not judge, and the input that could not be read."""

    findings: list[Finding]
    skipped: dict[str, str] = field(default_factory=dict)
    objects: int = 0
    unjudged: list[Unjudged] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped_documents: list[SkippedDocument] = field(default_factory=list)
    """Documents read that hold no Kubernetes object (guardhook.cluster.view.manifests.parse_documents):
    a note each, never an error (a kustomize JSON patch beside the manifests is one)."""

    @property
    def violations(self) -> list[Finding]:
        return [f for f in self.findings if f.violated]

    @property
    def exit_code(self) -> int:
        if self.errors or not self.objects:
            return EXIT_USAGE
        return EXIT_DENIED if any(f.outcome == "denied" for f in self.findings) else EXIT_CLEAN


class ReadManifests(NamedTuple):
    """What `read_manifests` read: the objects, one error line per path or file that could not be
    read, and one note line per document that holds no object."""

    located: list[Located]
    errors: list[str]
    skipped_documents: list[SkippedDocument]


def read_manifests(paths: Sequence[str], stdin: TextIO | None = None) -> ReadManifests:
    """Objects from files, folders and "-" (stdin), and one error line per path or file that could
    not be read (a missing path, bytes that are not UTF-8, text that is not YAML/JSON): one bad file
    never hides the objects of the others. A document that is no object (a YAML list, a mapping with
    no kind, a kustomize Kustomization, a patch a Kustomization beside it names) is noted, not an
    error."""
    from pathlib import Path

    from guardhook.cluster.view.manifests import (
        MANIFEST_SUFFIXES,
        ManifestError,
        kustomize_notes,
        parse_documents,
        read_manifest_file,
        walk_manifest_files,
    )
    from guardhook.commands.scan import Located
    from guardhook.commands.synthetic import with_namespace

    located: list[Located] = []
    errors: list[str] = []
    skipped: list[SkippedDocument] = []
    seen: set[Path] = set()

    def parse(text: str, source: str) -> None:
        manifests, not_objects = parse_documents(text, source)
        located.extend(Located(m.source, m.obj, m.document, m.line) for m in manifests)
        skipped.extend(not_objects)

    for path in paths:
        if path == STDIN:
            try:
                parse(_read_stdin(stdin), STDIN)
            except ManifestError as exc:
                errors.append(str(exc))
            continue
        files, problems = walk_manifest_files(Path(path))
        errors += problems
        if not files and not problems:  # an empty folder: a wrong path, never a clean check
            errors.append(f"{path}: the folder holds no manifest file ({', '.join(MANIFEST_SUFFIXES)})")
        files = [file for file in files if file.resolve() not in seen]  # given twice: read once
        seen.update(file.resolve() for file in files)
        kustomize = kustomize_notes(files)
        for file in files:
            if file in kustomize:
                skipped.append(kustomize[file])
                continue
            try:
                parse(read_manifest_file(file), str(file))
            except ManifestError as exc:
                errors.append(str(exc))
    located = [Located(i.source, with_namespace(i.obj), i.document, i.line) for i in located]
    return ReadManifests(located, errors, skipped)


def _read_stdin(stdin: TextIO | None) -> str:
    """Standard input's text: its bytes decoded as a file's are (manifest_text: the same words for
    bytes that are not UTF-8), or `stdin`'s text when it has no bytes (a StringIO). Raises
    ManifestError."""
    from guardhook.cluster.view.manifests import ManifestError, manifest_text

    stream = stdin or sys.stdin
    try:
        buffer = getattr(stream, "buffer", None)
        return manifest_text(buffer.read(), STDIN) if buffer is not None else stream.read()
    except OSError as exc:
        raise ManifestError(f"{STDIN}: cannot read standard input: {exc.strerror or exc}") from exc


def check(
    paths: Sequence[str],
    config: Config,
    cluster_state: Sequence[str] = (),
    policies: Sequence[Policy] | None = None,
    stdin: TextIO | None = None,
    context: Sequence[KubeObject] = (),
) -> CheckResult:
    """Judge every manifest under `paths` against a view of the manifests plus the context:
    `cluster_state` paths and `context` objects (e.g. listed from a cluster). Raises ManifestError
    when a `cluster_state` path is unreadable; unreadable input goes into CheckResult.errors."""
    from guardhook.cluster.view.manifests import load_paths
    from guardhook.cluster.view.static import view_from_objects
    from guardhook.cluster.view.store import object_key
    from guardhook.commands.context import stand_in_lws, unjudged
    from guardhook.commands.scan import scan, usable_policies
    from guardhook.commands.synthetic import with_namespace
    from guardhook.policies import REGISTRY

    policies = REGISTRY if policies is None else policies
    read, errors, skipped_documents = read_manifests(paths, stdin)
    manifests, invalid = valid_objects(read)
    extras, unserved = _usable_context(load_paths(cluster_state) if cluster_state else [])
    skipped_documents += unserved
    known = [*extras, *(with_namespace(obj) for obj in context)]

    def identity(obj: KubeObject) -> tuple[str, str, str]:
        return (str(obj.get("kind") or ""), *object_key(obj))

    checked = {identity(m.obj) for m in manifests}
    previous = {identity(obj): obj for obj in known if identity(obj) in checked}
    objects = [*(obj for obj in known if identity(obj) not in checked), *(m.obj for m in manifests)]
    # a dump's pods without their LWS stand for it: what beside them is judged as beside the LWS
    stand_ins = stand_in_lws(objects)
    view = view_from_objects([*objects, *stand_ins], source="check")
    usable = usable_policies(policies, view)
    skipped = {p.id: "no Nodes in the manifests or context" for p in policies if p not in usable}
    findings = scan(view, config, usable, manifests, previous=previous)
    active = [p.id for p in usable if config.settings(p.id).actions]
    # a policy that gave an object a finding did judge it (e.g. leader-service saying a selector
    # selects no pod): a note that it could not would contradict the finding
    judged = {(f.source, f.kind, f.namespace, f.name, f.policy) for f in findings if f.violated}
    notes = [
        note
        for note in unjudged(manifests, [*known, *stand_ins], active)
        if (note.source, note.kind, note.namespace, note.name, note.policy) not in judged
    ]
    return CheckResult([*invalid, *findings], skipped, len(read), notes, errors, skipped_documents)


def _usable_context(manifests: Sequence[Manifest]) -> tuple[list[KubeObject], list[SkippedDocument]]:
    """The `--cluster-state` objects to judge against, and a note for each left out: an object of a
    kind guardhook knows a CRD of in a version that CRD does not serve (an LWS written as
    `leaderworkerset.sigs.k8s.io/v1`) is no such object, and is not judged against as one."""
    from guardhook.cluster.view.manifests import SkippedDocument
    from guardhook.commands.schema import unserved_version
    from guardhook.commands.synthetic import with_namespace

    usable: list[KubeObject] = []
    notes: list[SkippedDocument] = []
    for manifest in manifests:
        why = unserved_version(str(manifest.obj.get("apiVersion") or ""), str(manifest.obj.get("kind") or ""))
        if why is None:
            usable.append(with_namespace(manifest.obj))
        else:
            notes.append(
                SkippedDocument(
                    manifest.source, manifest.document, manifest.line, f"not used as context: {why}"
                )
            )
    return usable, notes


SCHEMA_POLICY = "schema"
"""The `policy` of a finding that an object does not match its kind's schema."""
INVALID = "Invalid"
"""The `action` of such a finding: the object is not judged (its outcome is "denied": exit 1)."""


def valid_objects(objects: Sequence[Located]) -> tuple[list[Located], list[Finding]]:
    """`objects` that match their kind's schema (guardhook.commands.schema; an object of a kind
    with no schema counts as valid), and one finding per problem of the others: an invalid object
    is reported, never judged as if it were what it says, nor put in the view."""
    from guardhook.commands.scan import Finding
    from guardhook.commands.schema import validate

    valid: list[Located] = []
    findings: list[Finding] = []
    for located in objects:
        problems = validate(located.obj)
        if not problems:
            valid.append(located)
            continue
        meta = located.obj.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        name, namespace = meta.get("name"), meta.get("namespace")
        for problem in problems:
            findings.append(
                Finding(
                    source=located.source,
                    kind=str(located.obj.get("kind") or ""),
                    namespace=namespace if isinstance(namespace, str) else "",
                    name=name if isinstance(name, str) else "(no name)",
                    uid="",
                    api_version=str(located.obj.get("apiVersion") or ""),
                    policy=SCHEMA_POLICY,
                    action=INVALID,
                    outcome="denied",
                    message=problem,
                    document=located.document,
                    document_line=located.line,
                )
            )
    return valid, findings


def render_text(result: CheckResult, out: TextIO, err: TextIO, output: Output | None = None) -> None:
    """One line per finding on `out` (wrapped and coloured on a terminal: guardhook.commands.output);
    on `err`, skipped policies (once each), notes on what could not be judged or was skipped,
    unreadable input and the summary table (SUMMARY_HEADER); `output.quiet` keeps the findings and
    unreadable input only. Input with no object at all gets its skipped documents' notes and one
    error line (NO_OBJECTS), nothing else."""
    from guardhook.commands.output import Output

    output = output or Output(out, err)
    if not result.objects and not result.errors:  # nothing judged: why, and the notes that tell why
        for document in result.skipped_documents:
            output.note(f"guardhook check: note: {document.text()}")
        print(f"guardhook check: {NO_OBJECTS}", file=err)
        return
    for policy_id, why in result.skipped.items() if result.objects else ():  # none read: nothing to judge
        output.note(f"guardhook check: {policy_id} skipped: {why}")
    for finding in result.violations:
        output.finding(finding.line(), finding.action)
    for note in result.unjudged:
        output.note(f"guardhook check: note: {note.line()}")
    for document in result.skipped_documents:
        output.note(f"guardhook check: note: {document.text()}")
    for error in result.errors:
        print(f"guardhook check: {error}", file=err)
    if not output.quiet:
        output.table(SUMMARY_HEADER, [summary_row(result)], stream=err)


SUMMARY_HEADER = ("OBJECTS", "FINDINGS", "BY ACTION", "DENIED", "NOT JUDGED", "UNREADABLE")
"""The columns of `check`'s summary table: BY ACTION counts the findings per enforcement action
("Deny 2, Warn 1"; "-" for none)."""


def summary_row(result: CheckResult) -> tuple[str, ...]:
    """The one row of the summary table for `result` (SUMMARY_HEADER)."""
    by_action: dict[str, int] = {}
    for finding in result.violations:
        by_action[finding.action] = by_action.get(finding.action, 0) + 1
    denied = sum(1 for f in result.violations if f.outcome == "denied")
    return (
        str(result.objects),
        str(len(result.violations)),
        ", ".join(f"{action} {count}" for action, count in sorted(by_action.items())) or "-",
        str(denied),
        str(len(result.unjudged)),
        str(len(result.errors)),
    )


def render_json(result: CheckResult, out: TextIO) -> None:
    """`{"objects", "violations": [Finding…], "notJudged": [Unjudged…], "skipped": {policy: why},
    "skippedDocuments": [SkippedDocument…], "errors": [line…], "exitCode"}` on `out` (camelCase keys
    throughout; a finding from a file says which YAML document (`document`, 0 for the first) and the
    line it starts on (`documentLine`))."""
    document = {
        "objects": result.objects,
        "violations": [f.as_dict() for f in result.violations],
        "notJudged": [n.as_dict() for n in result.unjudged],
        "skipped": result.skipped,
        "skippedDocuments": [document.as_dict() for document in result.skipped_documents],
        "errors": result.errors if result.objects or result.errors else [NO_OBJECTS],
        "exitCode": result.exit_code,
    }
    json.dump(document, out, indent=2)
    out.write("\n")


SARIF_LEVELS = {"denied": "error", "warned": "warning"}
"""A finding's SARIF level by outcome; the others (audited, mutated) are "note"."""


def render_sarif(result: CheckResult, out: TextIO) -> None:
    """The violations as one SARIF 2.1.0 run (OASIS; what GitHub code scanning and other CI UIs
    read): one rule per policy id, one result per finding, located at the file and the line its
    YAML document starts on, the object named as a logical location; unreadable input and a
    check of nothing become tool notifications."""
    from guardhook import __version__

    rules = sorted({f.policy for f in result.violations})
    results = []
    for finding in result.violations:
        where = f"{finding.namespace}/{finding.name}" if finding.namespace else finding.name
        location: dict[str, Any] = {
            "logicalLocations": [{"fullyQualifiedName": f"{finding.kind} {where}", "kind": "object"}]
        }
        if finding.source != STDIN:
            physical: dict[str, Any] = {"artifactLocation": {"uri": finding.source}}
            if finding.document_line is not None:
                physical["region"] = {"startLine": finding.document_line}
            location["physicalLocation"] = physical
        results.append(
            {
                "ruleId": finding.policy,
                "ruleIndex": rules.index(finding.policy),
                "level": SARIF_LEVELS.get(finding.outcome, "note"),
                "message": {"text": f"{finding.action}: {finding.message}"},
                "locations": [location],
            }
        )
    problems = result.errors if result.objects or result.errors else [NO_OBJECTS]
    run = {
        "tool": {
            "driver": {
                "name": "guardhook",
                "version": __version__,
                "rules": [{"id": rule, "name": rule} for rule in rules],
            }
        },
        "invocations": [
            {
                "executionSuccessful": result.exit_code != EXIT_USAGE,
                "exitCode": result.exit_code,
                "toolExecutionNotifications": [
                    *({"level": "error", "message": {"text": problem}} for problem in problems),
                    *(
                        {"level": "note", "message": {"text": f"{policy} skipped: {why}"}}
                        for policy, why in result.skipped.items()
                    ),
                    *(
                        {"level": "note", "message": {"text": document.text()}}
                        for document in result.skipped_documents
                    ),
                ],
            }
        ],
        "results": results,
    }
    document = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    json.dump(document, out, indent=2)
    out.write("\n")


SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def add_parser(commands: Any) -> None:
    """Register `guardhook check` on the CLI's subparsers."""
    check_cmd = commands.add_parser("check", help="offline CI check of manifests (judged as CREATEs)")
    check_cmd.add_argument("paths", nargs="+", metavar="PATH", help="manifest files or folders, - for stdin")
    check_cmd.add_argument(
        "--format",
        choices=("text", "json", "sarif"),
        default="text",
        help="output format (default text); sarif is SARIF 2.1.0, for code-scanning UIs",
    )
    check_cmd.add_argument(
        "--cluster-state",
        action="append",
        default=[],
        metavar="PATH",
        help="context, not checked: objects for the view, e.g. Nodes (enables group-capacity) or the "
        "LeaderWorkerSets a PDB, Service or scaler refers to (repeatable)",
    )
    check_cmd.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="context, not checked: list this cluster once and judge the input against it",
    )
    add_config_flags(check_cmd)
    check_cmd.set_defaults(run=run_check)


def run_check(args: argparse.Namespace) -> int:
    """Print the findings; the exit code is CheckResult.exit_code."""
    from guardhook.config import load_config

    config = load_config(args.config, args.enforcement)
    context = _cluster_objects(args.kubeconfig) if args.kubeconfig else []
    result = check(args.paths, config, args.cluster_state, context=context)
    if args.format == "json":
        render_json(result, sys.stdout)
    elif args.format == "sarif":
        render_sarif(result, sys.stdout)
    else:
        from guardhook.commands.output import Output

        render_text(result, sys.stdout, sys.stderr, Output.from_args(args))
    return result.exit_code


def _cluster_objects(kubeconfig: str) -> list[KubeObject]:
    """Every object guardhook reads, listed once from the cluster of `kubeconfig`. Raises
    SourceError when the kubeconfig is unusable or the cluster cannot be listed."""
    from guardhook.cluster.listing import list_cluster
    from guardhook.cluster.sources import KUBECONFIG, Source
    from guardhook.commands.common import live_client, using_source

    source = Source(KUBECONFIG, (kubeconfig,))
    api = live_client(source, retries=False)
    listed = using_source(source, "list objects from", lambda: list_cluster(api))
    for note in listed.notes:
        print(f"guardhook check: {note}", file=sys.stderr)
    return listed.objects
