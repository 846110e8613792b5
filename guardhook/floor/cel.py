"""CEL text for the floor: literals, and the exemption conditions that mirror guardhook.config.Exemptions.

Kept to the CEL subset both the API server (cel-go with the Kubernetes libraries) and cel-python
evaluate: standard macros, `in`, `matches` (RE2 in both), `startsWith`, `size`, `string`, `int`;
no `substring`, `split`, `lowerAscii`, optionals or `now()`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from guardhook.config import NODE_USER_PREFIX, NODES_GROUP, Exemptions


def quote(text: str) -> str:
    """`text` as a single-quoted CEL string literal (backslashes, quotes and newlines escaped)."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    return f"'{escaped}'"


def string_list(items: Iterable[str]) -> str:
    """`items` as a CEL list literal of strings, e.g. `['a', 'b']`."""
    return "[" + ", ".join(quote(item) for item in items) + "]"


def glob_regex(pattern: str) -> str:
    """The RE2 regular expression (anchored, dot matching newlines) that matches what
    `fnmatch.fnmatchcase(name, pattern)` matches: `*` any run, `?` one character, `[...]` a class
    (`[!...]` negated), anything else literal. guardhook.config.Exemptions compiles the same globs."""
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        i += 1
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            end = pattern.find("]", i + 1 if pattern[i : i + 1] in ("!", "]") else i)
            if end < 0:
                out.append(re.escape(char))
                continue
            body = pattern[i:end].replace("\\", "\\\\")
            i = end + 1
            if body.startswith("!"):
                body = "^" + body[1:]
            elif body.startswith("^"):
                body = "\\" + body
            out.append(f"[{body}]")
        else:
            out.append(re.escape(char))
    return "^(?s:" + "".join(out) + ")$"


def user_condition(patterns: Iterable[str]) -> str:
    """A CEL condition, true when `request.userInfo.username` (non-empty) matches one of the glob
    `patterns` ("false" when there are none): exact names in one list, `prefix*` as startsWith,
    other globs as RE2 `matches`; a `system:node:` name only in the `system:nodes` group."""
    exact, prefixes, globs = [], [], []
    for pattern in dict.fromkeys(patterns):
        if not any(c in pattern for c in "*?["):
            exact.append(pattern)
        elif pattern.endswith("*") and not any(c in pattern[:-1] for c in "*?["):
            prefixes.append(pattern[:-1])
        else:
            globs.append(pattern)
    user = "request.userInfo.username"
    parts = [f"{user} in {string_list(exact)}"] if exact else []
    parts += [f"{user}.startsWith({quote(p)})" for p in prefixes]
    parts += [f"{user}.matches({quote(glob_regex(g))})" for g in globs]
    if not parts:
        return "false"
    # A `system:node:` name counts only in the `system:nodes` group (guardhook.config.Exemptions).
    node = (
        f"(!{user}.startsWith({quote(NODE_USER_PREFIX)}) || "
        f"(has(request.userInfo.groups) && {quote(NODES_GROUP)} in request.userInfo.groups))"
    )
    return f"(has({user}) && {user} != '' && ({' || '.join(parts)}) && {node})"


def exemption_conditions(exemptions: Iterable[Exemptions]) -> list[dict[str, str]]:
    """VAP `matchConditions` that skip every request the given exemptions (global, then the
    policy's own) exempt, as guardhook.admission.engine does: by username glob, group, namespace.
    Each condition is true when the request is NOT exempt (a policy applies only when all are)."""
    users: list[str] = []
    groups: list[str] = []
    namespaces: list[str] = []
    for each in exemptions:
        users += each.users
        groups += each.groups
        namespaces += each.namespaces
    conditions = []
    if users:
        conditions.append({"name": "not-exempt-user", "expression": f"!{user_condition(users)}"})
    if groups:
        in_groups = f"request.userInfo.groups.exists(g, g in {string_list(dict.fromkeys(groups))})"
        conditions.append(
            {"name": "not-exempt-group", "expression": f"!(has(request.userInfo.groups) && {in_groups})"}
        )
    if namespaces:
        conditions.append(
            {
                "name": "not-exempt-namespace",
                "expression": f"!(request.namespace in {string_list(dict.fromkeys(namespaces))})",
            }
        )
    return conditions
