"""The records a suite is made of: problems, their cases, references, baselines and peak counts.

Pure Python (no Django): the `load_suite` and `import_nkibench` commands turn these into rows.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field

# NKIBench's correctness criterion (relative L2 error per output), defined once by the evaluation checks.
from engine.evaluator.checks import RELATIVE_L2_TOLERANCE as TOLERANCE


class SuiteError(ValueError):
    """A suite file, reference or NKIBench directory is malformed; the message names the file and field."""


@dataclass(frozen=True)
class PeakCounts:
    """Work a problem needs at minimum, from its math (NKIBench's counting rules).

    Vector FLOPs exclude operations on constant scalars (the hardware fuses them into a neighbouring
    instruction), matmul FLOPs are 2*M*N*K per product, and HBM bytes read each input once and write each
    output once.
    """

    vector_flops: int
    matmul_flops: int
    hbm_bytes: int

    def as_dict(self) -> dict[str, int]:
        return {"vector_flops": self.vector_flops, "matmul_flops": self.matmul_flops, "hbm_bytes": self.hbm_bytes}


@dataclass(frozen=True)
class ProblemSpec:
    """One problem: its math (the reference), its shape cases, a baseline kernel and its peak counts.

    `cases` maps a case name ("full", "mini", or an NKIBench case id) to the parameter values, e.g.
    {"M": 4096, "N": 7168}. `references` maps each case to the reference file text it renders from; for
    the built-in suite every case shares one file and only the module-level shape constants change.
    `baseline_source` is the baseline kernel (a function `kernel`); `case_baselines` overrides it for
    cases that have their own kernel (an imported NKIBench directory has one kernel per case), so ask
    `baseline_for(case)`. `peak_formulas` maps "vector_flops", "matmul_flops" and "hbm_bytes" to
    integer expressions over the parameters; it is empty when the counts are unknown (then
    `peak_counts` returns None).
    """

    slug: str
    family: str
    title: str
    description: str
    parameters: tuple[str, ...]
    cases: Mapping[str, Mapping[str, int]]
    references: Mapping[str, str]
    baseline_source: str
    peak_formulas: Mapping[str, str] = field(default_factory=dict)
    case_baselines: Mapping[str, str] = field(default_factory=dict)
    tolerance: float = TOLERANCE
    origin: str = ""  # where the spec was read from, for error messages and provenance

    @property
    def case_names(self) -> list[str]:
        return list(self.cases)

    def case(self, name: str) -> dict[str, int]:
        try:
            return dict(self.cases[name])
        except KeyError:
            raise KeyError(f"problem {self.slug!r} has no case {name!r}; it has {self.case_names}") from None

    def reference_source(self, case: str) -> str:
        """The reference file for `case`: module-level shape constants set to that case's values."""
        values = self.case(case)
        return render_reference(self.references[case], values, where=f"{self.origin} reference ({case})")

    def parameters_match(self, names: tuple[str, ...] | list[str]) -> bool:
        return sorted(self.parameters) == sorted(names)

    def baseline_for(self, case: str) -> str:
        self.case(case)  # an unknown case is an error, not the default baseline
        return self.case_baselines.get(case, self.baseline_source)

    def peak_counts(self, case: str) -> PeakCounts | None:
        if not self.peak_formulas:
            return None
        values = self.case(case)
        counts = {
            key: evaluate_count(self.peak_formulas[key], values, where=f"{self.slug}.peak.{key}")
            for key in ("vector_flops", "matmul_flops", "hbm_bytes")
        }
        return PeakCounts(**counts)


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    description: str
    problems: list[ProblemSpec]

    def problem(self, slug: str) -> ProblemSpec:
        for spec in self.problems:
            if spec.slug == slug:
                return spec
        raise KeyError(f"suite {self.name!r} has no problem {slug!r}; it has {[p.slug for p in self.problems]}")


def render_reference(template: str, values: Mapping[str, int], *, where: str = "reference") -> str:
    """Rewrite the module-level `NAME = <int>` lines of a reference for the given parameter values.

    Only top-level assignments of a single name are touched, so the rest of the file (comments,
    functions) stays byte-for-byte the same. Every parameter must be assigned at module level.
    """
    try:
        tree = ast.parse(template)
    except SyntaxError as error:
        raise SuiteError(f"{where}: line {error.lineno}: {error.msg}") from None
    lines = template.splitlines(keepends=True)
    found: dict[str, ast.Assign] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in values
        ):
            found[node.targets[0].id] = node
    missing = [name for name in values if name not in found]
    if missing:
        raise SuiteError(f"{where}: no module-level assignment for shape parameter(s) {missing}")
    # Replace from the bottom so earlier line numbers stay valid.
    for name, node in sorted(found.items(), key=lambda item: item[1].lineno, reverse=True):
        first, last = node.lineno - 1, (node.end_lineno or node.lineno) - 1
        if first != last or node.col_offset != 0:
            raise SuiteError(f"{where}: line {node.lineno}: shape parameter {name} must be a one-line assignment")
        ending = "\n" if lines[first].endswith("\n") else ""
        lines[first] = f"{name} = {int(values[name])}{ending}"
    return "".join(lines)


_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)


def evaluate_count(expression: str, values: Mapping[str, int], *, where: str = "count") -> int:
    """Evaluate an integer count such as "2*M*N*K + M*N" over the parameter values.

    Only integers, parameter names, + - * // and parentheses are allowed: counts are exact integers.
    """
    try:
        tree = ast.parse(str(expression), mode="eval")
    except SyntaxError:
        raise SuiteError(f"{where}: {expression!r} is not an arithmetic expression") from None

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise SuiteError(f"{where}: {expression!r} uses {node.id!r}, not one of {sorted(values)}")
            return int(values[node.id])
        if isinstance(node, ast.BinOp) and isinstance(node.op, _ALLOWED_BINOPS):
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Add):
                return left + right
            if isinstance(node.op, ast.Sub):
                return left - right
            if isinstance(node.op, ast.Mult):
                return left * right
            return left // right
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -walk(node.operand)
        raise SuiteError(
            f"{where}: {expression!r}: only integers, parameter names, + - * // and parentheses are allowed"
        )

    return walk(tree)
