"""The package's import graph has no cycle, function-level (lazy) imports included (annotation-only
imports under TYPE_CHECKING excluded), and layers
point one way: files → grid | privacy → opf → engine → runs → apps → studies → cli (docs/architecture.md;
`lint-imports` checks the same contracts, configured in pyproject.toml)."""

import ast
from pathlib import Path

import networkx as nx

import powerdp

ROOT = Path(powerdp.__file__).resolve().parent


def _modules() -> dict[str, Path]:
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    tree = ast.parse(path.read_text())
    typing_only = {  # `if TYPE_CHECKING:` imports are for annotations and never run
        id(n) for node in ast.walk(tree)
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
        for stmt in node.body for n in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:  # `from pkg import submodule` imports the submodule
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in modules else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m in modules and m != name}


def _graph() -> nx.DiGraph:
    modules = _modules()
    g = nx.DiGraph()
    for name, path in modules.items():
        g.add_node(name)
        g.add_edges_from((name, dep) for dep in _imports(name, path, modules))
    return g


def test_no_import_cycle():
    cycles = list(nx.simple_cycles(_graph()))
    assert cycles == [], f"import cycles: {cycles}"


LAYERS = {"files": 0, "grid": 1, "privacy": 1, "opf": 2, "engine": 3, "runs": 4, "apps": 5, "studies": 6, "cli": 7}


def test_layers_point_one_way():
    g = _graph()
    for a, b in g.edges:
        la, lb = a.split(".")[1] if a.count(".") else "", b.split(".")[1] if b.count(".") else ""
        if la in LAYERS and lb in LAYERS:
            assert LAYERS[lb] <= LAYERS[la], f"{a} imports {b}: a lower layer depends on a higher one"
    # the privacy maths builds no model and calls no solver
    assert not any(b.startswith(("powerdp.opf", "powerdp.engine", "powerdp.grid")) for a, b in g.edges if a.startswith("powerdp.privacy"))


def test_learning_uses_the_engine_not_power_flow():
    """powerdp.apps.learning imports the engine, privacy/ and the local-solver interface of opf/ (never the grid,
    the SOC model, or the other applications); and nothing below the applications imports it."""
    g = _graph()
    for a, b in g.edges:
        if a.startswith("powerdp.apps.learning"):
            assert not b.startswith(("powerdp.grid", "powerdp.apps.power_flow", "powerdp.apps.market")), f"{a} imports {b}"
            assert not b.startswith("powerdp.opf") or b in ("powerdp.opf.local_solver", "powerdp.opf.box"), f"{a} imports {b}"
        if b.startswith("powerdp.apps.learning"):
            assert (a.split(".") + [""])[1] not in ("files", "grid", "opf", "privacy", "engine", "runs"), f"{a} imports {b}"
    assert any(a.startswith("powerdp.apps.learning") and b.startswith("powerdp.engine") for a, b in g.edges)


def test_top_of_the_package_holds_only_the_entry_points():
    """Every module sits in the folder of its layer: at the top only __init__, __main__, errors, _version."""
    loose = sorted(p.name for p in ROOT.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "_version.py", "errors.py"], loose


def test_no_module_over_600_lines():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py") if (n := len(p.read_text().splitlines())) > 600}
    assert long == {}, f"files over 600 lines: {long}"
