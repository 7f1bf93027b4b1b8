"""The relay's hot modules compiled with mypyc, used only while they match the source.

`make native` (`make test` runs it; `proxy.native.main`) compiles COMPILED with mypyc
(mypy's wheel carries it; gcc and Python's headers build the C) into build/native/ of
this checkout, beside a manifest: the ABI, and the SHA-256 of every .py file of dpgate's
packages as they were compiled. `install` (proxy/__init__.py) puts a finder first on
sys.meta_path that serves those modules from there, and only while the manifest matches
the files as they are now. A file edited, added or removed after the build, in any of the
packages (compiled code relies on the types and constants of what it imports), leaves
every module on its .py: the .py files stay the source of truth, and a stale build never
shadows them. So does DPGATE_PURE_PYTHON=1, or no build at all (an installed wheel,
Docker). The same tests pass both ways (`make test` runs the relay's again in pure Python).

Measured in bench/README.md (the relay): the compiled modules cut the relay's Python per
transaction by a quarter (simple) to two fifths (prepared).
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from pathlib import Path

# What a relayed transaction runs through, compiled together (one shared library; calls
# between them are C calls).
COMPILED = (
    "proxy.pgwire.wire", "proxy.pgwire.hooked", "proxy.pgwire.running",
    "proxy.pgwire.outbox", "proxy.pgwire.client_stream",
    "proxy.server.relay", "proxy.server.fast_relay", "proxy.server.session",
    "proxy.server.extended", "proxy.server.prepared",
    "proxy.ops.hub", "proxy.ops.metrics", "proxy.ops.decision",
)
PACKAGES = ("proxy", "rewriter", "accounting", "mechanisms")
ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "native"
GROUP = "dpgate_native"  # the shared library's name: dpgate_native__mypyc
PURE_PYTHON = "DPGATE_PURE_PYTHON"


def _abi() -> str:
    return str(sysconfig.get_config_var("SOABI"))


def sources(root: Path = ROOT) -> dict[str, str]:
    """The SHA-256 of every .py file of dpgate's packages, by path from `root`."""
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for package in PACKAGES for path in sorted((root / package).rglob("*.py"))}


def fresh(build: Path = BUILD, root: Path = ROOT) -> bool:
    """Whether `build` holds modules compiled from the source as it is now, for this
    Python."""
    try:
        manifest = json.loads((build / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return manifest.get("abi") == _abi() and manifest.get("sources") == sources(root)


class _Finder(importlib.abc.MetaPathFinder):
    """Serves COMPILED (and their shared library) from a build, once it was found fresh
    (checked at the first of them imported, not at every `import proxy`)."""

    def __init__(self, build: Path, root: Path = ROOT):
        self.build = build
        self.root = root  # the source the build must match
        self.files: dict[str, Path] | None = None  # None: not checked yet

    def find_spec(self, name: str, path: Sequence[str] | None = None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name not in COMPILED and not name.startswith(GROUP):
            return None
        if self.files is None:
            self.files = self._served()
        file = self.files.get(name)
        return None if file is None else importlib.util.spec_from_file_location(name, file)

    def _served(self) -> dict[str, Path]:
        return usable(self.build, self.root)


def install(build: Path = BUILD) -> None:
    """Serve the compiled modules when a fresh build exists (and DPGATE_PURE_PYTHON is
    not set); before any of them is imported."""
    if os.environ.get(PURE_PYTHON, "") not in ("", "0") or not build.is_dir():
        return
    if not any(isinstance(finder, _Finder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _Finder(build))


def usable(build: Path = BUILD, root: Path = ROOT) -> dict[str, Path]:
    """The compiled files by module name when `build` is fresh and whole, else none."""
    if not fresh(build, root):
        return {}
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    files = {name: build / (name.replace(".", "/") + suffix) for name in COMPILED}
    files[f"{GROUP}__mypyc"] = build / f"{GROUP}__mypyc{suffix}"
    return files if all(file.is_file() for file in files.values()) else {}


def compiled(module: object) -> bool:
    """Whether a module was loaded from a compiled build."""
    return str(getattr(module, "__file__", "")).endswith(
        tuple(importlib.machinery.EXTENSION_SUFFIXES))


def build(root: Path = ROOT, target: Path = BUILD) -> bool:
    """Compile COMPILED into `target`, unless it is fresh already; whether it built.
    The new build replaces the old one whole (a process importing meanwhile sees one or
    the other). A build missing a file is made again."""
    if usable(target, root):
        return False
    from mypyc.build import mypycify  # mypy's wheel (the test extra); only to build
    from setuptools import setup

    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="native-", dir=target.parent))
    recorded = sources(root)  # before compiling: an edit meanwhile leaves it stale
    here = Path.cwd()
    try:
        os.chdir(root)  # mypy names the modules by their paths from here
        modules = mypycify([name.replace(".", "/") + ".py" for name in COMPILED],
                           target_dir=str(work / "c"), group_name=GROUP, multi_file=True)
        os.chdir(work)  # away from pyproject.toml: only these extensions are built
        setup(name=GROUP, ext_modules=modules, script_name="proxy.native",
              script_args=["-q", "build_ext", "--build-lib", str(work / "lib"),
                           "--build-temp", str(work / "obj"), "--parallel",
                           str(os.cpu_count() or 1)])
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    finally:
        os.chdir(here)
    (work / "lib" / "manifest.json").write_text(json.dumps(
        {"abi": _abi(), "modules": list(COMPILED), "sources": recorded}, indent=1))
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    (work / "lib").rename(target)
    shutil.rmtree(old, ignore_errors=True)
    shutil.rmtree(work, ignore_errors=True)
    return True


def main() -> None:
    """`make native`: build unless fresh."""
    built = build()
    print(f"{BUILD}: {'compiled' if built else 'up to date'} ({len(COMPILED)} modules)")
