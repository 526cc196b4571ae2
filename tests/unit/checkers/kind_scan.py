"""The anomaly kinds checkers/ can report, read from its source: the kind argument of every
Finding(...) built there, followed back to the string literals it can hold, and the kind
constants modules declare (KIND, *_KIND, *KINDS, RULES and *_TOLERATED keys).

A kind built with an f-string cannot be found by grep; `scan` returns those apart, with their
source text, so that a test can name them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

CHECKERS = Path(__file__).resolve().parents[3] / "checkers"


@dataclass
class Scan:
    kinds: dict[str, set[str]] = field(default_factory=dict)  # kind -> files reporting it
    constants: dict[str, set[str]] = field(default_factory=dict)  # kind -> files declaring it
    unspelled: dict[str, set[str]] = field(default_factory=dict)  # f-string source -> files
    unresolved: list[str] = field(default_factory=list)  # "file:line: expression"


@dataclass
class _Module:
    path: str
    tree: ast.Module
    source: str
    parents: dict[ast.AST, ast.AST]
    constants: dict[str, str]  # module-level NAME = "literal"
    sequences: dict[str, ast.expr]  # module-level NAME = ("literal", ...) or [...]


def scan(root: Path = CHECKERS) -> Scan:
    modules = [_load(p, root) for p in sorted(root.rglob("*.py"))]
    out = Scan()
    for m in modules:
        _declared(m, out)
        for call in _calls(m.tree, "Finding"):
            arg = _argument(call, 0, "kind")
            if arg is not None:
                _resolve(arg, m, modules, out, depth=0)
    return out


def _load(path: Path, root: Path) -> _Module:
    source = path.read_text()
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    constants = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)
        for t in n.targets
        if isinstance(t, ast.Name) and isinstance(n.value.value, str)
    }
    sequences = {
        t.id: n.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, (ast.Tuple, ast.List))
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    rel = f"checkers/{path.relative_to(root).as_posix()}"
    return _Module(rel, tree, source, parents, constants, sequences)


def _calls(tree: ast.AST, name: str) -> list[ast.Call]:
    def called(f: ast.expr) -> str | None:
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None

    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and called(n.func) == name]


def _argument(call: ast.Call, index: int, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return call.args[index] if index < len(call.args) else None


def _resolve(expr: ast.expr, m: _Module, modules: list[_Module], out: Scan, depth: int) -> None:
    """Every string a kind expression can hold, into `out`."""
    if isinstance(expr, ast.Constant):
        if isinstance(expr.value, str):
            out.kinds.setdefault(expr.value, set()).add(m.path)
        return
    if isinstance(expr, ast.JoinedStr):
        text = ast.get_source_segment(m.source, expr) or ast.dump(expr)
        out.unspelled.setdefault(text, set()).add(m.path)
        return
    parts = (
        [expr.body, expr.orelse]
        if isinstance(expr, ast.IfExp)
        else expr.elts
        if isinstance(expr, (ast.Tuple, ast.List))
        else None
    )
    if parts is not None:
        for part in parts:
            _resolve(part, m, modules, out, depth)
        return
    if isinstance(expr, ast.Subscript) and _subscript_key(expr) == "kind":
        return  # a kind read back from serialised findings (Spark's rows): found where made
    if depth < 4 and isinstance(expr, ast.Name) and _resolve_name(expr, m, modules, out, depth):
        return
    followed = isinstance(expr, ast.Attribute) and expr.attr == "kind" and depth < 4
    if followed and _resolve_field(m, modules, out, depth):
        return
    out.unresolved.append(f"{m.path}:{expr.lineno}: {ast.get_source_segment(m.source, expr)}")


def _subscript_key(expr: ast.Subscript) -> object:
    return expr.slice.value if isinstance(expr.slice, ast.Constant) else None


def _resolve_name(
    name: ast.Name, m: _Module, modules: list[_Module], out: Scan, depth: int
) -> bool:
    fn = _enclosing_function(name, m)
    if fn is not None:
        # A local assignment (`kind = "a" if c else "b"`, `skip, back = kinds`).
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(
                name.id in {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
                for t in node.targets
            ):
                _resolve(node.value, m, modules, out, depth + 1)
                return True
        params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
        if name.id in params:
            index = params.index(name.id)
            # A private function is called from its own module only.
            callers = [m] if fn.name.startswith("_") else modules
            for caller in callers:
                for call in _calls(caller.tree, fn.name):
                    arg = _argument(call, index, name.id)
                    if arg is not None:
                        _resolve(arg, caller, modules, out, depth + 1)
            return True
    if name.id in m.constants:
        out.kinds.setdefault(m.constants[name.id], set()).add(m.path)
        return True
    if name.id in m.sequences:  # a tuple of kinds handed on whole (order.order_pair's `kinds`)
        _resolve(m.sequences[name.id], m, modules, out, depth + 1)
        return True
    return False


def _resolve_field(m: _Module, modules: list[_Module], out: Scan, depth: int) -> bool:
    """`x.kind`: the first argument of every construction of a class of this module whose first
    field is `kind` (cycles.Spec)."""
    classes = [
        c.name for c in m.tree.body if isinstance(c, ast.ClassDef) and _first_field(c) == "kind"
    ]
    for cls in classes:
        for call in _calls(m.tree, cls):
            arg = _argument(call, 0, "kind")
            if arg is not None:
                _resolve(arg, m, modules, out, depth + 1)
    return bool(classes)


def _first_field(c: ast.ClassDef) -> str | None:
    for s in c.body:
        if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
            return s.target.id
    return None


def _enclosing_function(node: ast.AST, m: _Module) -> ast.FunctionDef | None:
    while node in m.parents:
        node = m.parents[node]
        if isinstance(node, ast.FunctionDef):
            return node
    return None


def _declared(m: _Module, out: Scan) -> None:
    """Kinds named by module-level constants: KIND = "...", X_KINDS = (...), RULES = {kind:
    ...}, X_TOLERATED = {kind: ...} or {kind: ... for kind in (...)}."""
    for n in m.tree.body:
        if not isinstance(n, ast.Assign) or len(n.targets) != 1:
            continue
        target = n.targets[0]
        if not isinstance(target, ast.Name):
            continue
        name, value = target.id, n.value
        found: list[ast.expr] = []
        if name.endswith("KIND"):
            found = [value]
        elif name.endswith("KINDS") and isinstance(value, (ast.Tuple, ast.List, ast.Set)):
            found = list(value.elts)
        elif name == "RULES" or name.endswith("_TOLERATED"):
            if isinstance(value, ast.Dict):
                found = [k for k in value.keys if k is not None]
            elif isinstance(value, ast.DictComp):
                found = [
                    e
                    for g in value.generators
                    if isinstance(g.iter, (ast.Tuple, ast.List))
                    for e in g.iter.elts
                ]
        for e in found:
            if isinstance(e, ast.Constant) and isinstance(e.value, str):
                out.constants.setdefault(e.value, set()).add(m.path)
