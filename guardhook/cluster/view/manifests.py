"""Read Kubernetes manifests: files or folders of YAML/JSON, multi-document, `kind: List` dumps.

`kubectl get -o yaml` writes a `kind: List` (or `<Kind>List`) with `items`; Kustomize and Helm write
multi-document YAML. Both flatten to one list of objects.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from guardhook.wire import KubeObject

log = logging.getLogger(__name__)

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


class ManifestError(ValueError):
    """A manifest path or document could not be read; the message names the file."""


@dataclass(frozen=True)
class Manifest:
    """One object and where it came from (`source` is a path or "-" for stdin): the index of its
    YAML document in the file (0 for the first, and for JSON) and the line that document starts on
    (the items of a List share their document's)."""

    source: str
    obj: KubeObject
    document: int = 0
    line: int = 1


UTF8_BOM = "\ufeff"


def manifest_text(data: bytes, source: str) -> str:
    """The text of manifest bytes read from `source` (a path, or "-" for stdin): UTF-8, a leading
    byte order mark dropped (as kubectl reads it). Raises ManifestError naming `source` and the
    offset of the first byte that is not UTF-8 (not_utf8)."""
    try:
        return data.decode("utf-8").removeprefix(UTF8_BOM)
    except UnicodeDecodeError as exc:
        raise ManifestError(f"{source}: cannot read: {not_utf8(exc)}") from None


def not_utf8(exc: UnicodeDecodeError) -> str:
    """Why bytes are not text, plainly: "not UTF-8 text (byte 0x8f at offset 1)" — the offset counts
    bytes from 0 — never Python's codec wording. The one wording of `check`, `review` and
    `--cluster-state`."""
    return f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})"


def read_manifest_file(path: Path) -> str:
    """The text of manifest file `path` (manifest_text). Raises ManifestError naming the file when it
    cannot be read or is not UTF-8."""
    try:
        data = path.read_bytes()
    except OSError as exc:  # strerror: the message names the file once
        raise ManifestError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    return manifest_text(data, str(path))


def unpack(doc: Any) -> tuple[list[KubeObject], list[str]]:
    """The objects in one decoded document, List kinds unpacked (nested ones too), and why each
    part that holds none is skipped (not_an_object; a List's `items` that is no list, or an item
    that is no object). An empty document or item (a stray `---`, `{}`) says nothing."""
    why = not_an_object(doc)
    if why:
        return [], [why]
    if not doc:
        return [], []
    kind = doc["kind"]
    if not (kind.endswith("List") and "items" in doc):
        return [doc], []
    items = doc["items"]
    if items is None:
        return [], []
    if not isinstance(items, list):
        return [], [f"the items of a {kind} are not a list, so it holds no object"]
    objects: list[KubeObject] = []
    reasons: list[str] = []
    for number, item in enumerate(items):
        why = not_an_object(item)
        found, deeper = ([], [f"item {number} of a {kind} is {why}"]) if why else unpack(item)
        objects += found
        reasons += deeper
    return objects, reasons


# libyaml's parser when PyYAML was built with it (its wheels are): the pure-Python one takes ~1 s
# for the bundled sample fleet's 140 KB, libyaml a tenth of that. Construction stays SafeConstructor.
if TYPE_CHECKING:
    _SafeLoader = yaml.SafeLoader
else:
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):
    """A SafeLoader that rejects a mapping key given twice, as kubectl does ("mapping key already
    defined"), instead of silently keeping the last value (PyYAML's default)."""


def _construct_unique_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    loader.flatten_mapping(node)  # resolve `<<` merge keys first: those may repeat by design
    seen: set[Any] = set()
    for key_node, _value in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):
            continue  # construct_mapping reports an unhashable key itself
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


# kubectl reads YAML with sigs.k8s.io/yaml (go-yaml v2 into JSON), which PyYAML's YAML 1.1 resolvers
# read differently: an unquoted date or timestamp stays a string there (go-yaml keeps timestamps
# strings when decoding into interface{}), `10:30` is no base-60 number, and `=` is a plain string,
# not YAML 1.1's "value" tag (which PyYAML cannot even construct). Dropped or narrowed here, so a
# manifest reads as the API server will receive it.
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_DROPPED = {"tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}
_NO_BASE_60 = {
    _INT: re.compile(
        r"""^(?:[-+]?0b[0-1_]+
        |[-+]?0[0-7_]+
        |[-+]?(?:0|[1-9][0-9_]*)
        |[-+]?0x[0-9a-fA-F_]+)$""",
        re.X,
    ),
    _FLOAT: re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
}
_UniqueKeyLoader.yaml_implicit_resolvers = {
    first: [(tag, _NO_BASE_60.get(tag, regexp)) for tag, regexp in resolvers if tag not in _DROPPED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _unique_json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    duplicates = sorted({k for k in keys if keys.count(k) > 1})
    if duplicates:
        raise ValueError(f"duplicate key {duplicates[0]!r}")
    return dict(pairs)


def parse_text(text: str, source: str) -> list[Manifest]:
    """Parse YAML (one or many documents) or JSON text. Raises ManifestError naming `source`,
    also for a mapping that repeats a key (kubectl refuses those too)."""
    return parse_documents(text, source)[0]


@dataclass(frozen=True)
class SkippedDocument:
    """A document read that holds no Kubernetes object, where it is (`document`: its index in the
    file, 0 for the first, as Manifest.document; `line`: the line it starts on) and why."""

    source: str
    document: int
    line: int
    why: str

    def text(self) -> str:
        """`source: document at line L skipped: why`."""
        return f"{self.source}: document at line {self.line} skipped: {self.why}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form, keyed like a finding's location (`message` holds the reason)."""
        return {
            "source": self.source,
            "document": self.document,
            "documentLine": self.line,
            "message": self.why,
        }


def parse_documents(text: str, source: str) -> tuple[list[Manifest], list[SkippedDocument]]:
    """`parse_text`, and a SkippedDocument for each non-empty document that holds no Kubernetes
    object (a YAML list such as a kustomize JSON patch, a scalar, a mapping without a kind, a
    kustomize Kustomization or Component). Raises ManifestError as parse_text."""
    try:
        docs = _documents(text)
    except yaml.YAMLError as exc:
        try:
            docs = [(1, json.loads(text, object_pairs_hook=_unique_json_object))]
        except ValueError:
            raise ManifestError(f"{source}: not valid YAML or JSON: {yaml_error_line(exc)}") from exc
    manifests: list[Manifest] = []
    skipped: list[SkippedDocument] = []
    for index, (line, doc) in enumerate(docs):
        objects, reasons = unpack(doc)
        manifests += [Manifest(source, obj, index, line) for obj in objects]
        skipped += [SkippedDocument(source, index, line, why) for why in reasons]
    return manifests, skipped


KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
"""The names kustomize reads a folder's Kustomization from (its RecognizedKustomizationFileNames)."""
KUSTOMIZE_BUILD = "give `kustomize build DIR`'s output instead"


def kustomize_notes(files: Sequence[Path]) -> dict[Path, SkippedDocument]:
    """The note for each of `files` that is kustomize's, not an object: a Kustomization (known by its
    file name; kustomize's default form has no kind) or a patch one names (`patches[].path`,
    `patchesStrategicMerge[]`, `patchesJson6902[].path`, relative to its folder). A Kustomization is
    looked for among `files` and in the folders above them up to the repository's root (the folder
    holding `.git`), as a patch is often given alone (pre-commit gives changed files). A patch is a
    fragment kustomize merges into an object: judged alone it is invalid. So is one a Kustomization
    names in a commented-out entry (_disabled_patch_names: kubebuilder's scaffold leaves patches so).
    A Helm chart's templates get their note too (helm_template_notes)."""
    kustomizations = {file.resolve() for file in files if file.name in KUSTOMIZATION_FILES}
    seen: set[Path] = set()
    for folder in {file.resolve().parent for file in files}:
        for above in (folder, *folder.parents):
            if above in seen:
                break  # walked from another file already
            seen.add(above)
            kustomizations.update(above / name for name in KUSTOMIZATION_FILES if (above / name).is_file())
            if (above / ".git").exists():
                break
    texts: dict[Path, str] = {}
    for kustomization in sorted(kustomizations):
        try:
            texts[kustomization] = kustomization.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    patches: dict[Path, tuple[Path, str]] = {}  # patch -> (its Kustomization, how it names it)
    for kustomization, text in texts.items():  # a patch left disabled in a comment, unless one is in use
        for name in _disabled_patch_names(text):
            patches[(kustomization.parent / name).resolve()] = (kustomization, "names it in a comment")
    for kustomization, text in texts.items():
        for name in _patch_names(text):
            patches[(kustomization.parent / name).resolve()] = (kustomization, "names it")
    notes: dict[Path, SkippedDocument] = helm_template_notes(files)
    for file in files:
        named = patches.get(file.resolve())
        if named is not None or file.name in KUSTOMIZATION_FILES:
            what = "Kustomization"
            if named is not None:
                # the Kustomization as the file was given: relative to a relative file, as every other path
                kustomization, how = named
                shown = kustomization if file.is_absolute() else Path(os.path.relpath(kustomization))
                what = f"patch ({shown} {how})"
            notes[file] = SkippedDocument(
                str(file), 0, 1, f"a kustomize {what}, not an object: {KUSTOMIZE_BUILD}"
            )
    return notes


HELM_TEMPLATE = "give `helm template`'s output instead"


def helm_template_notes(files: Sequence[Path]) -> dict[Path, SkippedDocument]:
    """The note for each of `files` that is a Helm chart's template: below the `templates/` folder
    of a folder holding `Chart.yaml` (looked for up to the repository's root, as a Kustomization
    is) and holding a template action (`{{`). Read alone it is no YAML (`{{- if … }}`) or an object
    with unrendered values; a template that is plain YAML is still judged."""
    notes: dict[Path, SkippedDocument] = {}
    for file in files:
        resolved = file.resolve()
        for above in resolved.parents:
            if (above / "Chart.yaml").is_file() and resolved.is_relative_to(above / "templates"):
                try:
                    templated = "{{" in resolved.read_text(encoding="utf-8", errors="replace")
                except OSError:
                    break  # reading it is then the reader's to report
                if templated:
                    chart = above / "Chart.yaml"
                    shown = chart if file.is_absolute() else Path(os.path.relpath(chart))
                    notes[file] = SkippedDocument(
                        str(file), 0, 1, f"a Helm chart template ({shown}), not an object: {HELM_TEMPLATE}"
                    )
                break
            if (above / ".git").exists():
                break
    return notes


PATCH_FIELDS = ("patches", "patchesStrategicMerge", "patchesJson6902")
"""The Kustomization fields that name patch files."""
_TOP_FIELD = re.compile(r"^(?:# ?)?([A-Za-z]\w*)\s*:(?:\s|$)")
_COMMENTED_ENTRY = re.compile(r"^\s*#+\s*(-\s*)?(path\s*:\s*)?([^\s#'\"]+)\s*$")


def _disabled_patch_names(text: str) -> list[str]:
    """The patch files a Kustomization names in commented-out entries — kubebuilder's scaffold
    leaves its webhook and cert-manager patches so (`#- path: manager_webhook_patch.yaml` under
    `patches:`, `#- patches/webhook_in_guestbooks.yaml` under `patchesStrategicMerge:`): a
    `path:` entry anywhere, or a list entry under a patch field (itself commented out or not)."""
    names: list[str] = []
    field = ""
    for line in text.splitlines():
        top = _TOP_FIELD.match(line)
        if top:
            field = top.group(1)
            continue
        entry = _COMMENTED_ENTRY.match(line)
        if entry and (entry.group(2) or (entry.group(1) and field in PATCH_FIELDS)):
            names.append(entry.group(3))
    return [name for name in names if name.endswith(MANIFEST_SUFFIXES)]


def _patch_names(text: str) -> list[str]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    if not isinstance(doc, dict):
        return []
    named: list[Any] = []
    for field_name in ("patches", "patchesJson6902"):
        entries = doc.get(field_name)
        named += [e.get("path") for e in entries if isinstance(e, dict)] if isinstance(entries, list) else []
    merges = doc.get("patchesStrategicMerge")
    named += merges if isinstance(merges, list) else []
    return [name for name in named if isinstance(name, str) and name and "\n" not in name]  # inline: newlines


KUSTOMIZE_KINDS = frozenset({"Kustomization", "Component"})
"""kustomize's own files (kustomize.config.k8s.io): build instructions, not objects of a cluster."""
_TYPE_NAMES = {"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean"}


def not_an_object(doc: Any) -> str:
    """Why a decoded document holds no Kubernetes object, or "" when it holds some or is empty (a
    stray `---`, `{}`)."""
    if doc is None or doc == {}:
        return ""
    if isinstance(doc, list):
        return "a list, not a Kubernetes object (a kustomize JSON patch is one)"
    if not isinstance(doc, dict):
        name = type(doc).__name__
        return f"{_TYPE_NAMES.get(name, 'a ' + name)}, not a Kubernetes object"
    kind = doc.get("kind")
    if kind is None or kind == "":
        return "a mapping with no kind, not a Kubernetes object"
    if not isinstance(kind, str):
        return f"a mapping whose kind is not a string ({kind!r}), not a Kubernetes object"
    if kind in KUSTOMIZE_KINDS and str(doc.get("apiVersion") or "").startswith("kustomize.config.k8s.io/"):
        return f"a kustomize {kind}, not a Kubernetes object: {KUSTOMIZE_BUILD}"
    return ""


MAX_EXPANDED_VALUES = 1_000_000
"""A document whose aliases expand it past this many values, and past 10 times the values it
writes out, is refused: a "billion laughs" of nine nested anchors of nine aliases each is 9^9
values that checking and judging would walk one by one (go-yaml, which kubectl uses, refuses
such "excessive aliasing" too)."""


def _refuse_alias_bomb(root: yaml.Node) -> None:
    """Raise a yaml.YAMLError (so the caller names the file) when `root`'s aliases expand it
    past MAX_EXPANDED_VALUES values and 10 times its distinct nodes."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:  # post-order, each distinct node once: an alias is the same node object again
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        sizes[id(node)] = 1 + sum(sizes.get(id(child), 1) for child in children)
    expanded = sizes[id(root)]
    if expanded > MAX_EXPANDED_VALUES and expanded > 10 * len(sizes):
        raise yaml.YAMLError(
            f"excessive aliasing: {len(sizes):,} values written expand to {expanded:,} (at most "
            f"{MAX_EXPANDED_VALUES:,} are read)"
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _documents(text: str) -> list[tuple[int, Any]]:
    """Each YAML document of `text` with the line (1-based) its content starts on; what
    yaml.load_all does, keeping the marks."""
    loader = _UniqueKeyLoader(text)  # a SafeLoader subclass
    anchors = "&" in text  # no anchor, no alias: a big `kubectl get -o yaml` dump is not walked twice
    try:
        docs = []
        while loader.check_node():
            node = loader.get_node()
            if node is not None:  # check_node said there is one
                if anchors:
                    _refuse_alias_bomb(node)
                docs.append((node.start_mark.line + 1, loader.construct_document(node)))
        return docs
    finally:
        loader.dispose()


def yaml_error_line(exc: yaml.YAMLError) -> str:
    """A PyYAML error on one line ("expected ..., but found ... (line 2, column 1)"): its own text
    spans several lines and quotes the source, which an error line on stderr must not."""
    if isinstance(exc, yaml.MarkedYAMLError):
        what = "; ".join(part for part in (exc.context, exc.problem) if part) or "invalid YAML"
        mark = exc.problem_mark or exc.context_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"{what}{where}"
    return " ".join(str(exc).split())


def files_under(path: Path) -> list[Path]:
    """Manifest files at `path`: the file itself, or every .yaml/.yml/.json below a folder, sorted.
    Raises ManifestError for a missing path, or for the first folder or symlink below it that was
    not read (walk_manifest_files): a view built from part of a folder would be wrong in silence."""
    files, problems = walk_manifest_files(path)
    if problems:
        raise ManifestError(problems[0])
    return files


def walk_manifest_files(path: Path) -> tuple[list[Path], list[str]]:
    """Manifest files at `path` (the file itself, or every .yaml/.yml/.json below a folder, sorted)
    and one line per thing below it that was not read: a missing `path`, a folder that cannot be
    listed, a symlink that leads out of the folder or nowhere. A symlink to a folder inside the
    tree is followed, once per real folder (so a loop ends). Never raises for what it reports.

    Why report rather than skip: a CI check that skips a folder passes what it never read."""
    if not path.is_dir():
        if path.is_file():
            return [path], []
        if path.is_symlink():
            return [], [f"{path}: symlink to {os.readlink(path)}, which does not exist"]
        return [], [f"{path}: no such file or folder"]
    root = path.resolve()
    found: list[Path] = []
    problems: list[str] = []
    seen: set[Path] = set()
    pending = [path]
    while pending:
        folder = pending.pop()
        real = folder.resolve()
        if real in seen:
            continue  # a symlink back to a folder already read: a loop, nothing new below it
        seen.add(real)
        try:
            with os.scandir(folder) as entries:
                listed = sorted(entries, key=lambda e: e.name)
        except OSError as exc:
            problems.append(f"{folder}: cannot read folder: {exc.strerror or exc}")
            continue
        for entry in listed:
            child = Path(folder) / entry.name
            if entry.is_symlink():
                problem = _symlink_problem(child, root)
                if problem:
                    problems.append(problem)
                    continue
            try:
                is_dir = entry.is_dir()
            except OSError as exc:
                problems.append(f"{child}: cannot read: {exc.strerror or exc}")
                continue
            if is_dir:
                pending.append(child)
            elif entry.name.endswith(MANIFEST_SUFFIXES):
                found.append(child)
    return sorted(found), problems


def _symlink_problem(link: Path, root: Path) -> str:
    """Why the symlink `link` is not followed ("" when it is: it leads to a file or folder inside
    `root`, the real path of the folder named on the command line)."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return f"{link}: symlink not followed: {os.readlink(link)} does not exist (or loops)"
    if target != root and root not in target.parents:
        return f"{link}: symlink not followed: it leads out of {root} (to {target})"
    return ""


def malformed_lws(obj: KubeObject) -> list[str]:
    """`LeaderWorkerSet ns/name: spec.replicas "four" is not an integer: read as 1`, one line per
    field of a LeaderWorkerSet manifest read leniently (guardhook.cluster.lws.lenient_readings);
    empty for any other kind."""
    from guardhook.cluster.lws import lenient_readings
    from guardhook.cluster.model import metadata

    if obj.get("kind") != "LeaderWorkerSet":
        return []
    meta = metadata(obj)
    where = "/".join(str(part) for part in (meta.get("namespace"), meta.get("name")) if part)
    return [f"LeaderWorkerSet {where}: {problem}" for problem in lenient_readings(obj)]


def load_paths(paths: Iterable[str | Path]) -> list[Manifest]:
    """Load every object from files and folders, logging a warning for each document that holds
    none (parse_documents). Raises ManifestError on a missing path, a file that is not YAML/JSON,
    or a path holding no Kubernetes object (an empty file or folder is a mistake, not an empty
    cluster: judging against it would judge against nothing)."""
    manifests: list[Manifest] = []
    for raw in paths:
        found: list[Manifest] = []
        files = files_under(Path(raw))
        kustomize = kustomize_notes(files)
        for file in files:
            if file in kustomize:
                log.warning("%s", kustomize[file].text())
                continue
            objects, skipped = parse_documents(read_manifest_file(file), str(file))
            found += objects
            for document in skipped:  # said, as `check` says it of its input: never in silence
                log.warning("%s", document.text())
            for manifest in objects:  # read leniently, so said: the API server would refuse it
                for problem in malformed_lws(manifest.obj):
                    log.warning("%s: %s", manifest.source, problem)
        if not any(m.obj.get("apiVersion") for m in found):
            raise ManifestError(f"{raw}: no Kubernetes object (a document with apiVersion and kind)")
        manifests += found
    return manifests
