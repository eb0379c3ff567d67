"""The house rules that keep the layers one-way, read from the source (ast), not from our docs:
the engine (simulator/) never imports an operator package, module-level imports form no cycle,
and no source file or function grows past the size a newcomer can read."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("simulator", "ops")
MAX_LINES = 620
MAX_FUNCTION_LINES = 80
# functions allowed past MAX_FUNCTION_LINES, each with its reason
LONG_FUNCTIONS = {
    # the engine's per-instruction loop: each step split out would cost a call per instruction
    # (benchmarks/engine_speed.py), and its locals are the pipe's running figures
    "simulator/pipe_run.py:PipeRun.run": 110,
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")}


def _imports(name: str, path: Path, top_level_only: bool) -> set[str]:
    """Modules of this project that `name` imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    if top_level_only:      # `if TYPE_CHECKING:` blocks do not run
        nodes = [n for n in nodes if not (isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test))]
    out = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out |= {f"{mod}.{a.name}" for a in node.names}
    return {m for m in out if m.split(".")[0] in PACKAGES}


def test_the_engine_never_imports_an_operator():
    offenders = [(name, sorted(m for m in _imports(name, path, top_level_only=False) if m.split(".")[0] == "ops"))
                 for name, path in _sources().items() if name.split(".")[0] == "simulator"]
    assert [o for o in offenders if o[1]] == []


def test_module_level_imports_have_no_cycle():
    src = _sources()
    graph = {name: {m for m in _imports(name, path, top_level_only=True) if m in src and m != name}
             for name, path in src.items()}
    # a package's __init__ is imported on the way to any of its modules: importing a.b imports a
    for name in list(graph):
        graph[name] = {p for m in graph[name] for p in _parents(m) if p in src and p != name} | graph[name]
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1 and not _is_ancestor_init(nxt, node):
                cycle.extend(stack[stack.index(nxt):] + [node, nxt] if nxt in stack else [node, nxt])
                return True
            if nxt not in state and visit(nxt, stack + [node]):
                return True
        state[node] = 2
        return False

    for n in sorted(graph):
        if n not in state and visit(n, []):
            break
    assert cycle == [], " -> ".join(cycle)


def _parents(mod: str) -> list[str]:
    parts = mod.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _is_ancestor_init(pkg: str, mod: str) -> bool:
    """A package's __init__ importing its own submodules, which import siblings through the
    package, is how Python packages are built, not a cycle."""
    return mod.startswith(pkg + ".")


def test_no_source_file_is_too_long_to_read():
    long = {str(p.relative_to(ROOT)): n for p in _sources().values()
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def _functions(tree: ast.AST, prefix: str = ""):
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield f"{prefix}{node.name}", node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")


def test_no_function_is_too_long_to_read():
    sizes = {f"{p.relative_to(ROOT)}:{name}": node.end_lineno - node.lineno + 1
             for p in _sources().values() for name, node in _functions(ast.parse(p.read_text()))}
    assert {k: n for k, n in sizes.items() if n > LONG_FUNCTIONS.get(k, MAX_FUNCTION_LINES)} == {}
    # an exception that is no longer needed is dropped, not kept as head room
    assert {k: sizes.get(k) for k in LONG_FUNCTIONS if sizes.get(k, 0) <= MAX_FUNCTION_LINES} == {}
