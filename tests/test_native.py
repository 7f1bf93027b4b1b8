"""The compiled relay modules (proxy/native.py) are used only while their build matches
the source: never a stale build, never with DPGATE_PURE_PYTHON=1."""

from __future__ import annotations

import importlib.machinery
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxy import native

pytestmark = pytest.mark.end_to_end

SUFFIX = importlib.machinery.EXTENSION_SUFFIXES[0]


def _checkout(root: Path) -> Path:
    """A small tree of dpgate's packages with a build of it: its manifest, and a file
    where each compiled module and the shared library would be."""
    for package in native.PACKAGES:
        (root / package).mkdir(parents=True)
        (root / package / "__init__.py").write_text(f'"""{package}"""\n')
    (root / "proxy" / "server").mkdir()
    (root / "proxy" / "server" / "relay.py").write_text("X = 1\n")
    build = root / "build" / "native"
    for name in (*native.COMPILED, f"{native.GROUP}__mypyc"):
        file = build / (name.replace(".", "/") + SUFFIX)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_bytes(b"")
    (build / "manifest.json").write_text(json.dumps(
        {"abi": native._abi(), "sources": native.sources(root)}))
    return build


def _served(build: Path, root: Path) -> Path | None:
    """Where a finder over `build` would load proxy.server.relay from (None: its .py)."""
    spec = native._Finder(build, root).find_spec("proxy.server.relay")
    return None if spec is None or spec.origin is None else Path(spec.origin)


@pytest.mark.unit
def test_a_build_of_the_source_as_it_is_is_served(tmp_path: Path) -> None:
    build = _checkout(tmp_path)
    assert native.fresh(build, tmp_path)
    assert _served(build, tmp_path) == build / "proxy" / "server" / f"relay{SUFFIX}"


@pytest.mark.unit
@pytest.mark.parametrize("change", ["edit", "add", "remove", "abi"])
def test_a_build_older_than_any_source_file_is_never_served(tmp_path: Path,
                                                            change: str) -> None:
    build = _checkout(tmp_path)
    if change == "edit":  # not a compiled module: compiled code relies on its types too
        (tmp_path / "rewriter" / "__init__.py").write_text('"""rewriter, edited"""\n')
    elif change == "add":
        (tmp_path / "accounting" / "new.py").write_text("")
    elif change == "remove":
        (tmp_path / "proxy" / "server" / "relay.py").unlink()
    else:
        manifest = json.loads((build / "manifest.json").read_text())
        (build / "manifest.json").write_text(json.dumps({**manifest, "abi": "other"}))
    assert not native.fresh(build, tmp_path)
    assert _served(build, tmp_path) is None


@pytest.mark.unit
def test_a_build_missing_a_module_is_not_served_at_all(tmp_path: Path) -> None:
    build = _checkout(tmp_path)
    (build / "proxy" / "pgwire" / f"wire{SUFFIX}").unlink()
    assert native.fresh(build, tmp_path)
    assert _served(build, tmp_path) is None
    assert native.usable(build, tmp_path) == {}  # so `make native` builds it again


@pytest.mark.unit
def test_only_the_compiled_modules_are_looked_for(tmp_path: Path) -> None:
    build = _checkout(tmp_path)
    assert native._Finder(build, tmp_path).find_spec("proxy.engine.dispatch") is None


@pytest.mark.unit
def test_pure_python_installs_no_finder(tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    build = _checkout(tmp_path)
    monkeypatch.setattr(sys, "meta_path", [finder for finder in sys.meta_path
                                           if not isinstance(finder, native._Finder)])
    monkeypatch.setenv(native.PURE_PYTHON, "1")
    native.install(build)
    assert not any(isinstance(finder, native._Finder) for finder in sys.meta_path)
    monkeypatch.setenv(native.PURE_PYTHON, "0")
    native.install(build)
    assert isinstance(sys.meta_path[0], native._Finder)


def _loaded(pure: bool) -> tuple[bool, bool]:
    """Whether this checkout's build is fresh, and whether a new process of it loads
    the relay's modules compiled (all of them or none)."""
    code = ("import json, proxy.native as n, proxy.server.relay as r, "
            "proxy.server.session as s, proxy.pgwire.wire as w\n"
            "print(json.dumps([n.fresh(), [n.compiled(m) for m in (r, s, w)]]))")
    env = {key: value for key, value in os.environ.items() if key != native.PURE_PYTHON}
    if pure:
        env[native.PURE_PYTHON] = "1"
    output = subprocess.run([sys.executable, "-c", code], cwd=native.ROOT, env=env,
                            capture_output=True, text=True, check=True).stdout
    fresh, compiled = json.loads(output)
    assert len(set(compiled)) == 1, compiled
    return fresh, compiled[0]


def test_this_checkout_runs_compiled_exactly_when_its_build_is_fresh() -> None:
    # `make test-native` builds first: there this is the compiled case.
    fresh, compiled = _loaded(pure=False)
    assert compiled == fresh
    if os.environ.get("DPGATE_REQUIRE_NATIVE"):  # make test-native: built just now
        assert compiled
    assert _loaded(pure=True) == (fresh, False)
