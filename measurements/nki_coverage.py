"""Which names of the NKI 0.6 API reference the simulator defines, per platform (issue 34).

Reads the API reference's stubs from an aws-neuron-sdk checkout (nki/api/nki/{language,isa}/__init__.py: every
public function, class and constant, 134 + 67 names at SDK 2.32) and looks each name up in our top-level `nki`
namespace (engine.platforms.nki.simulator.semantics.namespaces). A name is *simulated* when we define it, *refused* when calling it raises
"unsupported by the CPU simulator". A name whose reference page says "Available only on NeuronCore-vN and newer" (or
"Supported arch versions: NeuronCore-vN+") is refused on older platforms (isa_v06.require_core, for the instructions we simulate).

    python measurements/nki_coverage.py --sdk PATH/aws-neuron-sdk [--markdown]

Prints the counts, and with --markdown the table docs/nki-coverage.md carries.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.platforms.nki.simulator.semantics import namespaces  # noqa: E402

PLATFORMS = ("trn1", "trn2", "trn3")
CORE = {"trn1": 2, "trn2": 3, "trn3": 4}
_ONLY = re.compile(r"Available only on NeuronCore-v(\d)|Supported arch versions: NeuronCore-v(\d)\+")


def reference_names(sdk: Path, module: str) -> list[tuple[str, int]]:
    """(name, oldest NeuronCore version) for each public name of the module's API stub."""
    path = sdk / "nki" / "api" / "nki" / module / "__init__.py"
    tree = ast.parse(path.read_text())
    out = []
    for node in tree.body:
        names: list[str] = []
        doc = ""
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names, doc = [node.name], ast.get_docstring(node) or ""
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        found = _ONLY.search(doc)
        for name in names:
            if not name.startswith("_"):
                out.append((name, int(found.group(1) or found.group(2)) if found else 2))
    return out


def simulated(module: object, name: str) -> bool:
    value = getattr(module, name, None)
    return value is not None and getattr(value, "__name__", "") != "missing"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sdk", type=Path, required=True, help="an aws-neuron-sdk checkout")
    parser.add_argument("--markdown", action="store_true", help="print the per-name table")
    args = parser.parse_args(argv)
    mods = namespaces.build()
    rows = []
    for module, ours in (("language", mods["nki.language"]), ("isa", mods["nki.isa"])):
        names = reference_names(args.sdk, module)
        have = [n for n, _ in names if simulated(ours, n)]
        print(f"nki.{module}: {len(have)} of {len(names)} names simulated")
        for name, version in names:
            cells = []
            for platform in PLATFORMS:
                if not simulated(ours, name):
                    cells.append("refused: unsupported by the CPU simulator")
                elif CORE[platform] < version:
                    cells.append(f"refused: NeuronCore-v{version} and newer")
                else:
                    cells.append("simulated")
            rows.append((f"nki.{module}.{name}", cells))
    if args.markdown:
        print()
        print("| Name | " + " | ".join(PLATFORMS) + " |")
        print("| --- | " + " | ".join("---" for _ in PLATFORMS) + " |")
        for name, cells in rows:
            print(f"| `{name}` | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
