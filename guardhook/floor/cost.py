"""An estimate of a CEL expression's worst-case evaluation cost, to print beside each exported
expression and keep it far under the API server's limits.

This is guardhook's own estimate, not the API server's checker: it walks cel-python's parse tree,
counts every access, call, literal and operator as 1, multiplies a comprehension's body by
LIST_BOUND iterations, an `in` over a list by its length (LIST_BOUND when not a literal), and
charges string functions by STRING_BOUND characters (0.1 per character, as cel-go's cost model
charges traversals), `matches` by the string times the pattern's length. What the API server
enforces is the runtime cost: PerCallLimit 1,000,000 per expression and RuntimeCELCostBudget
10,000,000 per binding evaluation (k8s.io/apiserver/pkg/apis/cel); the floor's expressions stay
orders of magnitude under both even for these generous bounds.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

LIST_BOUND = 100
"""Entries assumed in any list the request holds (ownerReferences, conditions, containers)."""
STRING_BOUND = 253
"""Characters assumed in any string (a DNS subdomain name, the longest name a pod can have)."""
PER_CALL_LIMIT = 1_000_000
"""The API server's runtime cost limit per expression (k8s.io/apiserver/pkg/apis/cel PerCallLimit)."""
COMPREHENSIONS = frozenset({"all", "exists", "exists_one", "map", "filter"})
STRING_FUNCTIONS = frozenset({"startsWith", "endsWith", "contains", "size", "string", "int"})


def _tree_types() -> tuple[Any, Any]:
    from lark import Token, Tree

    return Tree, Token


def _string_cost() -> int:
    return math.ceil(STRING_BOUND * 0.1)


def _node_cost(node: Any) -> int:
    tree, token = _tree_types()
    if isinstance(node, token) or not isinstance(node, tree):
        return 0
    children = node.children
    if node.data == "member_dot_arg":
        target, method, args = children[0], str(children[1]), children[2] if len(children) > 2 else None
        arg_nodes = list(args.children) if args is not None else []
        if method in COMPREHENSIONS and len(arg_nodes) >= 2:
            body = sum(_node_cost(a) for a in arg_nodes[1:])
            return _node_cost(target) + LIST_BOUND * (body + 1) + 1
        own = _string_cost()
        if method == "matches":
            pattern = max((len(str(t)) for t in _literals(args)), default=STRING_BOUND)
            own = _string_cost() * max(1, math.ceil(pattern * 0.25))
        return _node_cost(target) + sum(_node_cost(a) for a in arg_nodes) + own + 1
    if node.data == "relation_in":
        return sum(_node_cost(c) for c in children) + LIST_BOUND + 1
    if node.data == "literal":
        return 1
    own = 1 if node.data in {"member_dot", "member_index", "ident", "ident_arg", "primary"} else 0
    if node.data.startswith(("relation_", "addition_", "multiplication_", "unary_")):
        own += 1
    return own + sum(_node_cost(c) for c in children)


def _literals(node: Any) -> list[str]:
    tree, token = _tree_types()
    if isinstance(node, token):
        return [str(node)] if node.type == "STRING_LIT" or str(node).startswith(("'", '"')) else []
    if isinstance(node, tree):
        return [text for child in node.children for text in _literals(child)]
    return []


@cache
def estimated_cost(expression: str) -> int:
    """guardhook's worst-case cost estimate of `expression` (see the module docstring for the
    model). Raises celpy.CELParseError for an expression that does not parse."""
    from celpy.celparser import CELParser

    return _node_cost(CELParser().parse(expression))
