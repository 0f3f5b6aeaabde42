"""docs/architecture.md stays true to the code: its package diagram is the import graph, and its layout
names every module.

The diagram is a list between `<!-- package-graph -->` markers, one line per package: `name ──► imported, …`.
It is recomputed here from the same import graph `test_code_shape.py` reads (every import, function-level
ones included); when it differs, the failure prints the block to paste.
"""

from __future__ import annotations

import re

from tests.test_code_shape import ROOT, import_graph, project_modules

DOC = ROOT / "docs" / "architecture.md"
ARROW = "──►"
# The diagram's nodes, most specific first: a module belongs to the first prefix it falls under.
NODES = (
    "engine.platforms.nki.simulator", "engine.platforms.nki.perf", "engine.platforms.nki.neuron",
    "engine.platforms.nki.suites", "engine.platforms.nki.rewrites", "engine.platforms.nki",
    "engine.platforms.triton.rewrites", "engine.platforms.triton", "engine.platforms.toy", "engine.platforms.registry",
    "engine.choices", "engine.evaluator.sandbox", "engine.evaluator", "engine.search", "engine.agents",
    "engine.memory", "accelopt_site", "accounts", "benchmark", "campaigns", "mcp_server", "memory", "optimizer",
)
# Not in the layout by name: a package's __init__ (its folder is), migrations, and the folders the layout
# names as a whole (commands, template tags, the suite's and samples' kernel files).
UNLISTED_PARTS = ("migrations", "management", "templatetags", "nkibench", "samples")


def node_of(module: str) -> str | None:
    return next((n for n in NODES if module == n or module.startswith(n + ".")), None)


def package_graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {n: set() for n in NODES}
    for module, imported in import_graph().items():
        source = node_of(module)
        for target in map(node_of, imported):
            if source and target and target != source:
                edges[source].add(target)
    return edges


def rendered(edges: dict[str, set[str]]) -> str:
    width = max(map(len, NODES))
    return "\n".join(f"{n:<{width}} {ARROW} {', '.join(sorted(edges[n])) or '(nothing of ours)'}" for n in NODES)


def documented_graph() -> str:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"<!-- package-graph -->\n```\n(.*?)\n```\n<!-- /package-graph -->", text, re.S)
    assert match, "docs/architecture.md lost its <!-- package-graph --> block (a ``` fence between the markers)"
    return match.group(1)


def test_the_package_diagram_is_the_import_graph():
    expected = rendered(package_graph())
    assert documented_graph() == expected, (
        "docs/architecture.md's package diagram differs from the code's imports; paste this between the "
        f"package-graph markers (inside the fence):\n{expected}")


def test_the_layout_names_every_module():
    text = DOC.read_text(encoding="utf-8")
    layout = text[text.index("## Layout"):text.index("## The dependency rule")]
    missing = []
    for module, path in project_modules().items():
        parts = path.relative_to(ROOT).parts
        if path.name == "__init__.py" or any(p in UNLISTED_PARTS for p in parts):
            continue
        if not re.search(rf"\b{re.escape(path.stem)}\b", layout):
            missing.append(module)
    assert not missing, f"docs/architecture.md's layout does not name these modules: {missing}"


def test_the_diagram_check_sees_a_new_arrow(monkeypatch):
    # The rule itself: an import from the registry into a platform folder shows up as an arrow.
    graph = {m: set(deps) for m, deps in import_graph().items()}
    graph["engine.choices"] = graph["engine.choices"] | {"engine.search.beam"}
    monkeypatch.setattr("tests.test_architecture_doc.import_graph", lambda: graph)
    assert "engine.search" in package_graph()["engine.choices"]


# The engine's shared packages: what they know of platforms, they learn from the registry.
SHARED = ("engine.evaluator", "engine.evaluator.sandbox", "engine.search", "engine.agents", "engine.memory",
          "engine.choices")


def test_the_shared_engine_imports_no_platform_folder_only_the_registry():
    edges = package_graph()
    folders = {shared: sorted(t for t in edges[shared] if t.startswith("engine.platforms.")
                              and t != "engine.platforms.registry") for shared in SHARED}
    assert not any(folders.values()), f"shared engine packages import platform folders directly: {folders}"
