"""Count what the package layering allows and what it does not, from the imports in the code.

Reads the layers contract of ``[tool.importlinter]`` in ``pyproject.toml`` (its ``layers`` list, top
first; ``a | b`` siblings that must stay independent, ``a : b`` siblings that may import each other)
and prints, with runtime imports only (``if TYPE_CHECKING:`` blocks left out, imports inside functions
counted):

* **against the layers**: direct imports from a lower layer into a higher one, or between independent
  siblings (what the contract's ``ignore_imports`` must list for ``lint-imports`` to pass);
* **mutual package pairs**: top-level packages (or root modules) of ``switchboard`` that import each
  other, directly, in both directions;
* **file cycles**: groups of modules that import each other in a cycle (strongly connected
  components of the module import graph, more than one module each).

Usage::

    .venv/bin/python loadtests/import_layers.py            # the three counts and the cycles
    .venv/bin/python loadtests/import_layers.py --list     # also every import against the layers
    .venv/bin/python loadtests/import_layers.py --ignores  # those imports as ignore_imports lines

Uses ``grimp``, the import-graph library ``import-linter`` is built on.
"""

from __future__ import annotations

import argparse
import collections
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "switchboard"


def top(module: str) -> str:
    """``switchboard.channels.base`` → ``channels``; the package itself → ``(root)``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


def layer_contract() -> tuple[list[list[tuple[str, bool]]], str]:
    """The layers contract: per layer (top first) its ``(name, independent)`` siblings, and its name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    layers = []
    for line in contract["layers"]:
        independent = "|" in line
        names = [n.strip() for n in line.replace("|", ":").split(":") if n.strip()]
        layers.append([(name, independent) for name in names])
    return layers, contract["name"]


@dataclass
class Counts:
    against: list[str]
    """``importer -> imported`` lines, sorted."""
    mutual: list[tuple[str, ...]]
    """Package pairs importing each other."""
    cycles: list[list[str]]
    """Module groups in a cycle."""
    unlayered: list[str]
    """Top-level names in no layer."""


def counts(graph: grimp.ImportGraph, layers: list[list[tuple[str, bool]]]) -> Counts:
    """The counts of the module docstring for ``graph`` against ``layers``."""
    level: dict[str, int] = {}
    independent: dict[str, bool] = {}
    for index, siblings in enumerate(layers):
        for name, indep in siblings:
            level[name] = index
            independent[name] = indep
    against: list[str] = []
    edges: collections.Counter[tuple[str, str]] = collections.Counter()
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = top(module), top(imported)
            if a == b:
                continue
            edges[(a, b)] += 1
            if a in level and b in level:
                upward = level[b] < level[a]
                sideways = level[a] == level[b] and independent[a]
                if upward or sideways:
                    against.append(f"{module} -> {imported}")
    mutual = sorted({tuple(sorted(edge)) for edge in edges if (edge[1], edge[0]) in edges})
    names = {top(m) for m in graph.modules} - {"(root)"}
    return Counts(sorted(against), mutual, _cycles(graph), sorted(names - set(level)))


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    succ = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(succ):
        if start in index:
            continue
        work = [(start, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = counter
                counter += 1
                stack.append(node)
                on_stack.add(node)
            children = succ[node]
            if i < len(children):
                work.append((node, i + 1))
                child = children[i]
                if child not in index:
                    work.append((child, 0))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
    return sorted(found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print every import against the layers")
    parser.add_argument("--ignores", action="store_true", help="print them as ignore_imports entries")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "libs"))
    graph = grimp.build_graph(PACKAGE, exclude_type_checking_imports=True)
    layers, name = layer_contract()
    result = counts(graph, layers)
    if args.ignores:
        for line in result.against:
            print(f'    "{line}",')
        return 0
    print(f"contract: {name}")
    print(f"imports against the layers: {len(result.against)}")
    print(f"mutually importing package pairs: {len(result.mutual)}")
    for a, b in result.mutual:
        print(f"  {a} <-> {b}")
    print(f"file cycles: {len(result.cycles)}")
    for group in result.cycles:
        print("  " + " <-> ".join(group))
    if result.unlayered:
        print(f"in no layer: {', '.join(result.unlayered)}")
    if args.list:
        for line in result.against:
            print("  " + line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
