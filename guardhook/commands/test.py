"""`guardhook test DIR…`: run test suites, as `kyverno test` and `gator verify` do (issue 39).

A suite is a file named `guardhook-test.yaml` (every one under each DIR, or a file given by path):

    apiVersion: guardhook.io/v1alpha1
    kind: Test
    metadata: {name: worker-delete}
    clusterState: [../../guardhook/data/fleet]   # the view, as --cluster-state (required)
    config: config.yaml                           # optional, as --config
    resources: [pdb.yaml]                         # manifests, judged as `check` judges them
    reviews: [reviews/s01.json]                   # captured AdmissionReviews, judged as `review`
    results:
      - review: reviews/s01.json                  # or resource: {kind, namespace, name}
        policy: worker-delete
        result: denied                            # allowed|denied|warned|audited|patched|skipped|not-judged
        code: 403                                 # optional: the response's status.code
        patch: [{op: add, path: /x, value: "0"}]  # optional with patched: the decoded JSONPatch

Paths are relative to the suite file. Each review is judged alone against the cluster state (no
earlier request's effect, as `guardhook review`), mutate then validate as the API server does.
A policy's result is its decision's outcome ("mutated" reads "patched"); "skipped" when the
policy did not judge the object at all. A review that cannot be judged as a group (its pod's
LeaderWorkerSet, or the evicted pod, is not in the clusterState: `guardhook review` says "not
judged" and `--exit-code` exits 2) is "not-judged" for every policy, and fails unless that is the
result expected.

A result naming a review not listed in `reviews`, or a resource that nothing in `resources` is, is
a suite error (exit 2), as `kyverno test` fails on a resource it does not find: a typo'd name must
not pass as "skipped".

Prints one row per expected result (PASS or FAIL, and why) and a summary; exit 0 when every result
is as expected, 1 when one is not, 2 when a suite cannot be read (one line naming the file and key).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guardhook.commands.common import CommandError

if TYPE_CHECKING:
    from guardhook.commands.output import Output

SUITE_FILE = "guardhook-test.yaml"
API_VERSION = "guardhook.io/v1alpha1"
NOT_JUDGED = "not-judged"
RESULTS = ("allowed", "denied", "warned", "audited", "patched", "skipped", NOT_JUDGED)
SUITE_KEYS = {"apiVersion", "kind", "metadata", "clusterState", "config", "resources", "reviews", "results"}
RESULT_KEYS = {"review", "resource", "policy", "result", "code", "patch"}
EXIT_FAILED = 1


class SuiteError(CommandError):
    """A suite file cannot be read or says something impossible; the message names file and key."""


@dataclass(frozen=True)
class Row:
    """One expected result and what happened: `passed`, and `reason` when it did not."""

    suite: str
    number: int
    policy: str
    subject: str
    expected: str
    actual: str
    passed: bool
    reason: str = ""


def add_parser(commands: Any) -> None:
    """Register `guardhook test` on the CLI's subparsers."""
    cmd = commands.add_parser(
        "test", help="run test suites (guardhook-test.yaml): expected results per policy, like kyverno test"
    )
    cmd.add_argument(
        "paths", nargs="+", metavar="DIR", help="folders holding guardhook-test.yaml files, or files"
    )
    cmd.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    cmd.add_argument("--fail-only", action="store_true", help="list only the failed results")
    cmd.set_defaults(run=run_suites)


def run_suites(args: argparse.Namespace) -> int:
    """Run every suite under `args.paths`; print the table; exit 0 / 1 (a failure) / 2 (bad suite)."""
    from guardhook.commands.output import Output

    suites = find_suites(args.paths)
    rows = [row for suite in suites for row in run_suite(suite)]
    out = Output.from_args(args)
    if args.format == "json":
        import json

        document = {
            "results": [row.__dict__ for row in rows if not (args.fail_only and row.passed)],
            "passed": sum(r.passed for r in rows),
            "failed": sum(not r.passed for r in rows),
        }
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render(rows, out, fail_only=args.fail_only)
    return EXIT_FAILED if any(not r.passed for r in rows) else 0


def find_suites(paths: list[str]) -> list[Path]:
    """Every guardhook-test.yaml under the folders in `paths` (files given as they are), sorted;
    SuiteError for a missing path or a folder holding none."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found.append(path)
        elif path.is_dir():
            here = sorted(path.rglob(SUITE_FILE))
            if not here:
                raise SuiteError(f"{path}: no {SUITE_FILE} below it")
            found += here
        else:
            raise SuiteError(f"{path}: no such file or folder")
    return found


def run_suite(path: Path) -> list[Row]:
    """The rows of one suite file (module docstring)."""
    from guardhook.admission.codec import ReviewError, decode
    from guardhook.admission.engine import Engine
    from guardhook.admission.review import verdict_both
    from guardhook.cluster.view.manifests import ManifestError
    from guardhook.cluster.view.static import view_from_paths
    from guardhook.commands.review import not_judged
    from guardhook.config import load_config

    suite = _load(path)
    base = path.parent
    config = load_config(str(base / suite["config"]) if suite.get("config") else None)
    try:
        view = view_from_paths([base / p for p in _paths(suite, "clusterState", path, required=True)])
    except ManifestError as exc:  # name the suite and its key, not only the path it gave
        raise SuiteError(f"{path}: clusterState: {exc}") from exc
    engine = Engine(view, config, record=False)
    verdicts: dict[str, Any] = {}
    subjects: dict[str, str] = {}
    for name in _paths(suite, "reviews", path):
        try:
            decoded = decode((base / name).read_bytes())
        except OSError as exc:
            raise SuiteError(f"{path}: reviews: cannot read {name}: {exc.strerror or exc}") from exc
        except ReviewError as exc:
            raise SuiteError(f"{path}: reviews: {name} is not an AdmissionReview: {exc}") from exc
        verdicts[name] = _Judged(verdict_both(engine, decoded.request), not_judged(view, decoded.request))
        subjects[name] = _request_subject(decoded.request)
    outcomes = _resource_outcomes(path, suite, view, config)
    meta = suite.get("metadata")
    label = str((meta.get("name") if isinstance(meta, dict) else None) or path)
    return [
        _row(path, label, number, expected, verdicts, subjects, outcomes)
        for number, expected in enumerate(suite["results"], start=1)
    ]


@dataclass(frozen=True)
class _Judged:
    """A review's verdict, and why it could not be judged as a group (None: it was)."""

    verdict: Any
    not_judged: str | None


def _request_subject(request: Any) -> str:
    """`OPERATION Kind namespace/name` of a request, as a person names it (`CREATE Eviction
    serve/llm-xl-0-3`, `DELETE Pod serve/llm-xl-0-2`)."""
    kind = str((request.get("kind") or {}).get("kind") or "")
    namespace = str(request.get("namespace") or "")
    name = str(request.get("name") or "")
    where = f"{namespace}/{name}" if namespace else name
    return f"{request.get('operation')} {kind} {where}"


def _load(path: Path) -> dict[str, Any]:
    import yaml

    try:
        suite = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SuiteError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise SuiteError(f"{path}: not UTF-8 text") from exc
    except yaml.YAMLError as exc:
        from guardhook.cluster.view.manifests import yaml_error_line

        raise SuiteError(f"{path}: not valid YAML: {yaml_error_line(exc)}") from exc
    if not isinstance(suite, dict):
        raise SuiteError(f"{path}: a suite is a mapping (apiVersion: {API_VERSION}, kind: Test)")
    if suite.get("apiVersion") != API_VERSION or suite.get("kind") != "Test":
        raise SuiteError(f"{path}: apiVersion must be {API_VERSION} and kind Test")
    unknown = sorted(set(suite) - SUITE_KEYS)
    if unknown:
        raise SuiteError(f"{path}: unknown key {unknown[0]} (known: {', '.join(sorted(SUITE_KEYS))})")
    results = suite.get("results")
    if not isinstance(results, list) or not results:
        raise SuiteError(f"{path}: results must be a non-empty list")
    for number, entry in enumerate(results, start=1):
        _check_entry(path, number, entry)
    return suite


def _check_entry(path: Path, number: int, entry: Any) -> None:
    where = f"{path}: results[{number - 1}]"
    if not isinstance(entry, dict):
        raise SuiteError(f"{where} must be a mapping")
    unknown = sorted(set(entry) - RESULT_KEYS)
    if unknown:
        raise SuiteError(f"{where}: unknown key {unknown[0]} (known: {', '.join(sorted(RESULT_KEYS))})")
    if ("review" in entry) == ("resource" in entry):
        raise SuiteError(f"{where}: give exactly one of review and resource")
    if not isinstance(entry.get("policy"), str):
        raise SuiteError(f"{where}.policy must be a policy id")
    known = _policy_ids()
    if entry["policy"] not in known:
        # a misspelt id would otherwise read "expected denied, got skipped", a wrong failure
        raise SuiteError(f"{where}.policy: unknown policy {entry['policy']} (known: {', '.join(known)})")
    if entry.get("result") not in RESULTS:
        raise SuiteError(f"{where}.result must be one of {', '.join(RESULTS)}")
    if "patch" in entry and ("resource" in entry or entry["result"] != "patched"):
        raise SuiteError(f"{where}.patch goes with a review and result: patched")
    if entry["result"] == NOT_JUDGED and "resource" in entry:
        raise SuiteError(f"{where}.result {NOT_JUDGED} goes with a review")
    if "resource" in entry:
        resource = entry["resource"]
        if not isinstance(resource, dict) or not isinstance(resource.get("kind"), str):
            raise SuiteError(f"{where}.resource must be {{kind, namespace, name}}")


def _policy_ids() -> tuple[str, ...]:
    """The ids a result may name: every registered policy's, and `schema` for an invalid resource."""
    from guardhook.policies import REGISTRY

    return (*(policy.id for policy in REGISTRY), "schema")


def _paths(suite: dict[str, Any], key: str, path: Path, required: bool = False) -> list[str]:
    value = suite.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise SuiteError(f"{path}: {key} must be a list of paths")
    if required and not value:
        raise SuiteError(f"{path}: {key} is required (the cluster state the results hold for)")
    return value


@dataclass(frozen=True)
class _Outcomes:
    """The suite's resources judged: (kind, namespace, name, policy) -> (outcome, message), and
    the (kind, namespace, name) of every resource read."""

    by_policy: dict[tuple[str, str, str, str], tuple[str, str]]
    resources: frozenset[tuple[str, str, str]]


def _resource_outcomes(path: Path, suite: dict[str, Any], view: Any, config: Any) -> _Outcomes:
    """The suite's resources judged as `check` judges manifests (a schema problem is policy
    `schema`, outcome denied); SuiteError when one cannot be read."""
    from guardhook.commands.check import read_manifests, valid_objects
    from guardhook.commands.scan import scan
    from guardhook.policies import REGISTRY

    names = _paths(suite, "resources", path)
    if not names:
        return _Outcomes({}, frozenset())
    located, errors, _ = read_manifests([str(path.parent / n) for n in names])
    if errors:
        raise SuiteError(f"{path}: resources: {errors[0]}")
    valid, invalid = valid_objects(located)
    outcomes: dict[tuple[str, str, str, str], tuple[str, str]] = {}
    for finding in [*invalid, *scan(view, config, REGISTRY, valid)]:
        key = (finding.kind, finding.namespace, finding.name, finding.policy)
        if finding.violated or key not in outcomes:
            outcomes[key] = (finding.outcome, finding.message)
    return _Outcomes(outcomes, frozenset(_identity(item.obj) for item in located))


def _identity(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name) of a manifest, as a result's `resource:` names it."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    return (str(obj.get("kind") or ""), str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def _row(
    path: Path,
    label: str,
    number: int,
    expected: dict[str, Any],
    verdicts: dict[str, _Judged],
    subjects: dict[str, str],
    outcomes: _Outcomes,
) -> Row:
    policy = expected["policy"]
    want = expected["result"]
    if "review" in expected:
        review = expected["review"]
        judged = verdicts.get(review)
        if judged is None:
            raise SuiteError(f"{path}: results[{number - 1}].review {review} is not listed in reviews")
        subject = subjects[review]
        if judged.not_judged:
            actual, message = NOT_JUDGED, judged.not_judged
            problem = "" if want == NOT_JUDGED else f"expected {want}, got {NOT_JUDGED}"
        else:
            actual, message = _review_outcome(judged.verdict, policy)
            problem = _review_problem(expected, judged.verdict, actual)
    else:
        resource = expected["resource"]
        namespace = str(resource.get("namespace") or "")
        name = str(resource.get("name") or "")
        subject = f"{resource['kind']} {namespace}/{name}" if namespace else f"{resource['kind']} {name}"
        if (resource["kind"], namespace, name) not in outcomes.resources:
            raise SuiteError(f"{path}: results[{number - 1}].resource {subject} is not in resources")
        outcome, message = outcomes.by_policy.get(
            (resource["kind"], namespace, name, policy), ("skipped", "")
        )
        actual = "patched" if outcome == "mutated" else outcome
        problem = "" if actual == want else f"expected {want}, got {actual}"
    if problem and message:
        problem += f": {message}"
    return Row(label, number, policy, subject, want, actual, not problem, problem)


def _review_outcome(verdict: Any, policy: str) -> tuple[str, str]:
    decisions = [d for d in verdict.decisions if d.policy == policy]
    if not decisions:
        return "skipped", ""
    for outcome in ("denied", "warned", "audited", "mutated", "error"):
        for decision in decisions:
            if decision.outcome == outcome:
                return ("patched" if outcome == "mutated" else outcome), decision.message
    return "allowed", ""


def _review_problem(expected: dict[str, Any], verdict: Any, actual: str) -> str:
    from guardhook.commands.review import decoded_patch

    want = expected["result"]
    if actual != want:
        return f"expected {want}, got {actual}"
    code = (verdict.response.get("status") or {}).get("code")
    if "code" in expected and expected["code"] != code:
        return f"expected code {expected['code']}, got {code}"
    if "patch" in expected and expected["patch"] != decoded_patch(dict(verdict.response)):
        return f"expected patch {expected['patch']}, got {decoded_patch(dict(verdict.response))}"
    return ""


def render(rows: list[Row], out: Output, fail_only: bool = False) -> None:
    """The table (ID, SUITE, POLICY, RESOURCE, RESULT, REASON), one row per expected result, then
    `Test summary: N passed, M failed`."""
    # IDs count every row, so a failure keeps its ID under --fail-only
    shown = [(i, r) for i, r in enumerate(rows, start=1) if not (fail_only and r.passed)]
    out.table(
        ("ID", "SUITE", "POLICY", "RESOURCE", "RESULT", "REASON"),
        [(str(i), r.suite, r.policy, r.subject, "PASS" if r.passed else "FAIL", r.reason) for i, r in shown],
        styles={4: lambda cell: "green" if cell == "PASS" else "red"},
    )
    failed = sum(not r.passed for r in rows)
    out.line(f"Test summary: {len(rows) - failed} passed, {failed} failed")
