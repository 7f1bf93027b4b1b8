"""proxy/ is layered: each sub-package imports only the layers below it, and no module
imports itself back through a cycle. Read from the source (ast), so a lazy import inside a
function counts too. Each package's docstring, the map a newcomer reads first, names all
its modules."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent

# What each part of proxy/ may import from dpgate (besides itself). The pure packages
# rewriter/, accounting/ and mechanisms/ never import proxy/ (checked below).
ALLOWED: dict[str, set[str]] = {
    "proxy.pgwire": {"rewriter.sqlstate"},  # the SQLSTATEs: a leaf module, no imports
    "proxy.config": {"rewriter", "mechanisms"},
    "proxy.engine": {"proxy.pgwire", "proxy.config", "rewriter", "accounting", "mechanisms"},
    "proxy.ops": {"proxy.engine", "proxy.pgwire", "proxy.config", "rewriter", "accounting",
                  "mechanisms"},
    "proxy.server": {"proxy.ops", "proxy.engine", "proxy.pgwire", "proxy.config",
                     "rewriter", "accounting", "mechanisms"},
    "proxy.demo": {"proxy.pgwire", "proxy.config", "accounting", "mechanisms"},
    "proxy.admin": {"proxy.server", "proxy.ops", "proxy.engine", "proxy.pgwire", "proxy.config",
                    "proxy.demo", "rewriter", "accounting", "mechanisms"},
    "proxy.__main__": {"proxy.admin"},
    "proxy.native": set(),  # the compiled modules' finder: the standard library only
    "proxy": {"proxy.native"},  # proxy/__init__.py: the docstring, and the finder first
}
DPGATE = ("proxy", "rewriter", "accounting", "mechanisms")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every dpgate module `path` imports, relative imports resolved."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from .pgwire import wire` imports the module proxy.pgwire.wire.
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                where = ROOT / candidate.replace(".", "/")
                is_module = where.with_suffix(".py").exists() or (where / "__init__.py").exists()
                found.add(candidate if is_module else base)
    return {module for module in found if module.split(".")[0] in DPGATE}


def _layer(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "proxy" and len(parts) > 1 else parts[0]


MODULES = {_module_name(path): path for path in sorted((ROOT / "proxy").rglob("*.py"))}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_layer_and_the_layers_below(module: str) -> None:
    layer = _layer(module)
    assert layer in ALLOWED, f"{module} is in no layer: add it to ALLOWED and a docstring"
    upward = sorted(imported for imported in _imports(MODULES[module])
                    if _layer(imported) != layer and _layer(imported) != "proxy"
                    and _layer(imported) not in ALLOWED[layer] and imported not in ALLOWED[layer])
    assert upward == []


@pytest.mark.parametrize("package", ["rewriter", "accounting", "mechanisms"])
def test_the_pure_packages_never_import_proxy(package: str) -> None:
    offenders = sorted(str(path.relative_to(ROOT)) for path in (ROOT / package).rglob("*.py")
                       if any(_layer(name).startswith("proxy") for name in _imports(path)))
    assert offenders == []


def _cycles(modules: dict[str, Path]) -> list[list[str]]:
    graph = {module: {imported for imported in _imports(path) if imported in modules
                      and imported != module}
             for module, path in modules.items()}
    cycles = []
    state: dict[str, int] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for imported in sorted(graph[module]):
            if state.get(imported) == 1:
                cycles.append(path[path.index(imported):] + [imported])
            elif imported not in state:
                visit(imported, path + [imported])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return cycles


def test_no_module_of_proxy_imports_itself_back_through_a_cycle() -> None:
    assert _cycles(MODULES) == []


@pytest.mark.parametrize("package", ["rewriter", "accounting", "mechanisms"])
def test_no_module_of_a_pure_package_imports_itself_back_through_a_cycle(package: str
                                                                          ) -> None:
    # A cycle hidden behind TYPE_CHECKING counts too: the two modules are one piece.
    modules = {_module_name(path): path for path in sorted((ROOT / package).rglob("*.py"))}
    assert _cycles(modules) == []


def test_the_sqlstate_module_imports_nothing_of_dpgate() -> None:
    assert _imports(ROOT / "rewriter" / "sqlstate.py") == set()


def test_every_sqlstate_is_written_in_one_module() -> None:
    # A five-character code in quotes anywhere else is a second definition.
    code = re.compile(r'"[0-9][0-9A-Z]{4}"')
    elsewhere = sorted(
        f"{path.relative_to(ROOT)}:{number}"
        for package in ("proxy", "rewriter", "accounting", "mechanisms")
        for path in (ROOT / package).rglob("*.py") if path.name != "sqlstate.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if code.search(line) and "OID" not in line)
    assert elsewhere == []


def test_every_sub_package_says_what_it_owns_and_what_it_may_import() -> None:
    for init in sorted((ROOT / "proxy").glob("*/__init__.py")):
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "May import" in docstring, init


def test_the_checker_resolves_relative_imports() -> None:
    # The walk above must resolve relative imports, or it would pass on anything.
    imports = _imports(ROOT / "proxy" / "server" / "session.py")
    assert "proxy.pgwire.wire" in imports
    assert "proxy.engine.dispatch" in imports
    assert _imports(ROOT / "proxy" / "__main__.py") == {"proxy.admin.cli"}


PACKAGES = sorted(init.parent for package in DPGATE for init in (ROOT / package).rglob(
    "__init__.py"))


def _listed(docstring: str) -> set[str]:
    """The names a docstring shows in backticks, each dotted part on its own."""
    return {part for quoted in re.findall(r"`([\w.]+)`", docstring) for part in
            quoted.split(".")}


@pytest.mark.parametrize("package", PACKAGES, ids=lambda path: _module_name(path / "x")[:-2])
def test_each_package_docstring_lists_its_modules(package: Path) -> None:
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    parts = {path.stem for path in package.glob("*.py") if path.name != "__init__.py"} | {
        path.parent.name for path in package.glob("*/__init__.py")}
    assert sorted(parts - _listed(docstring)) == []


def test_every_error_response_is_built_by_one_to_response() -> None:
    # FatalError, StatementError and the console's errors are ClientErrors
    # (proxy/pgwire/errors.py); an ErrorResponse built anywhere else is a second way.
    built = sorted(f"{path.relative_to(ROOT)}:{number}"
                   for path in (ROOT / "proxy").rglob("*.py")
                   if path.relative_to(ROOT).as_posix() != "proxy/pgwire/errors.py"
                   for number, line in enumerate(path.read_text().splitlines(), 1)
                   if "error_response(" in line and "def error_response" not in line)
    assert built == []
    letters = re.compile(r"""(\.get\(|\{|, )"[SVCMHP]"[,:)]""")
    literal = sorted(f"{path.relative_to(ROOT)}:{number}"
                     for path in (ROOT / "proxy").rglob("*.py")
                     for number, line in enumerate(path.read_text().splitlines(), 1)
                     if letters.search(line))
    assert literal == []  # ErrorField names the fields of an ErrorResponse
