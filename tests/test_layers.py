"""Floors: every import points down (docs/architecture.md draws them).

0 `common`: errors, strict JSON, locations, secrets, prompts, the reader-call contract, the
  configurable-class registry: what every floor shares.
1 the method `cmc` (records to CMC's read), the reader engines `readers`, the generation
  service `generation` (store, journal, sittings, locks) and pure statistics `scoring`:
  side by side, none imports another, so the method imports no engine, store or provenance.
2 `provenance` (bundle, manifest, vault) and the data `sources`, over the method and engines.
3 the evidence views and baselines `arms`, and `analysis` (tables, reports from bundles).
4 the stage driver `harness` and the run viewer `viewer`, not on each other.
5 the command line's dispatcher `harness.cli`, the one module that may import both; nothing
  imports it.
A data source does not import a frontend, and the viewer neither an arm nor an engine. Lazy
(function-level) and type-only imports count: they are dependencies all the same."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RANK = {"common": 0, "cmc": 1, "readers": 1, "generation": 1, "scoring": 1, "provenance": 2, "sources": 2,
        "arms": 3, "analysis": 3, "harness": 4, "viewer": 4, "harness.cli": 5}
PACKAGES = tuple(name for name in RANK if "." not in name)
# (importing module prefix, imported module prefix) pairs forbidden although the floors allow them
FORBIDDEN_WITHIN = (("sources", "cmc.frontends"), ("viewer", "arms"), ("viewer", "readers"))


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every import in the file, relative ones resolved."""
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            name = ".".join([*base, node.module] if node.module else base)
            found += [(node.lineno, name)]
            if node.module is None or node.level:  # `from . import x` may name modules
                found += [(node.lineno, f"{name}.{alias.name}") for alias in node.names]
    return found


def floor(module: str) -> tuple[int, str] | None:
    """(rank, name) of the longest RANK entry the module falls under; None outside the packages."""
    names = [name for name in RANK if module == name or module.startswith(name + ".")]
    return (RANK[max(names, key=len)], max(names, key=len)) if names else None


def violations(root: Path) -> list[str]:
    """Every import that points up a floor, sideways between arms and scoring, or across a
    forbidden pair inside the method."""
    out = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            importer = module_name(path, root)
            own = floor(importer)
            for line, imported in imported_modules(path, root):
                theirs = floor(imported)
                if theirs is not None and theirs[1] != own[1] and theirs[0] >= own[0]:
                    bad = True
                else:
                    bad = any(importer.startswith(a) and imported.startswith(b) for a, b in FORBIDDEN_WITHIN)
                if bad:
                    out.append(f"{path.relative_to(root)}:{line}: {importer} imports {imported}")
    return out


def test_every_import_points_down():
    assert violations(ROOT) == []


def test_the_walk_finds_upward_sideways_and_lazy_imports(tmp_path):
    files = {
        "common/__init__.py": "", "common/io.py": "from cmc.records import Record\n",
        "cmc/__init__.py": "", "cmc/core.py": "def f():\n    from harness.stages import run\n",
        "cmc/read.py": "from generation.store import PredictionStore\nfrom common.io import x\n",
        "sources/__init__.py": "from cmc.frontends.grammar import GrammarFrontend\n",
        "arms/__init__.py": "", "arms/x.py": "import analysis.tables\nfrom cmc.graph import Memory\n",
        "analysis/__init__.py": "", "analysis/y.py": "from . import tables\nfrom provenance import bundle\n",
        "harness/__init__.py": "", "harness/z.py": "from arms.x import y\nfrom analysis import tables\n",
        "harness/w.py": "import harness.cli\n", "harness/cli.py": "from viewer.load import x\nfrom harness.z import y\n",
        "viewer/__init__.py": "", "viewer/v.py": "from harness.cli import main\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert violations(tmp_path) == [
        "common/io.py:1: common.io imports cmc.records",
        "cmc/core.py:2: cmc.core imports harness.stages",
        "cmc/read.py:1: cmc.read imports generation.store",
        "sources/__init__.py:1: sources imports cmc.frontends.grammar",
        "arms/x.py:1: arms.x imports analysis.tables",
        "harness/w.py:1: harness.w imports harness.cli",
        "viewer/v.py:1: viewer.v imports harness.cli",
    ]


def test_modules_and_functions_stay_small():
    """One job per module (<= 300 lines) and per function (<= 60 lines), as the style asks."""
    too_big = []
    for package in (*PACKAGES, "scripts"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            if len(text.splitlines()) > 300:
                too_big.append(f"{path.relative_to(ROOT)}: {len(text.splitlines())} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                    too_big.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} is "
                                   f"{node.end_lineno - node.lineno + 1} lines")
    assert too_big == []


def test_the_architecture_page_draws_these_floors_and_maps_every_module():
    """docs/architecture.md's picture has the floors RANK has, and its map names every module."""
    lines = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()
    drawn = {}
    for line in lines:
        if match := re.match(r"floor (\d)  (.+?)   ", line):
            drawn |= {name.strip(): int(match[1]) for name in match[2].split("·")}
    assert drawn == RANK
    modules = {str(p.relative_to(ROOT)) for package in PACKAGES for p in (ROOT / package).rglob("*.py")}
    mapped = {match[1] for line in lines if (match := re.match(r"- `([\w/]+\.py)`: ", line))}
    assert mapped <= modules, mapped - modules
    assert all(path.endswith("__init__.py") for path in modules - mapped), modules - mapped
