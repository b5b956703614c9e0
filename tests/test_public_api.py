"""The package's front doors: each ``__all__`` is sorted, documented and listed in docs/api.md."""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import pkgutil
import re
import sys
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import agent_engine

API_PAGE = Path(__file__).resolve().parents[1] / "docs" / "api.md"
SECTION = re.compile(r"^## `([\w.]+)`$|^## (.+)$")
ENTRY = re.compile(r"^- `(\w+)` — (\S.*)$")
MOVED_HEADING = "Moved from the top level"

SUBPACKAGES = sorted(
    info.name
    for info in pkgutil.walk_packages(agent_engine.__path__, "agent_engine.")
    if info.ispkg and not info.name.split(".")[-1].startswith("_")
)
"""Every public subpackage of agent_engine (found, so a new one cannot be forgotten)."""

WITHOUT_API = frozenset({"agent_engine.bench"})
"""Subpackages with no names of their own to export: the benchmark suite runs as a command."""


def _api_page() -> dict[str, dict[str, str]]:
    """The entries of docs/api.md: each section's names with their one-line purpose."""
    sections: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in API_PAGE.read_text(encoding="utf-8").splitlines():
        heading = SECTION.match(line)
        if heading:
            current = sections.setdefault(heading.group(1) or heading.group(2), {})
            continue
        entry = ENTRY.match(line)
        if entry:
            assert current is not None, f"entry before any section: {line}"
            assert entry.group(1) not in current, f"listed twice: {entry.group(1)}"
            current[entry.group(1)] = entry.group(2)
    return sections


def _attribute_docstrings(module: ModuleType) -> dict[str, str]:
    """The docstrings written under a module's top-level assignments (``X = ...`` + string)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    for statement, after in zip(tree.body, tree.body[1:], strict=False):
        target = (
            statement.targets[0]
            if isinstance(statement, ast.Assign) and len(statement.targets) == 1
            else statement.target
            if isinstance(statement, ast.AnnAssign)
            else None
        )
        if (
            isinstance(target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[target.id] = after.value.value
    return found


def _docstring(name: str, value: object) -> str | None:
    """The docstring that explains ``value``: its own, or the one under its assignment.

    A class must carry its own (an inherited one explains the base, not it). A constant or
    type alias has no ``__doc__`` of its own, so its docstring is the string literal under
    the assignment that defines it, in whichever agent_engine module that is.
    """
    if inspect.isclass(value):
        doc = vars(value).get("__doc__")
        return doc if isinstance(doc, str) else None
    if inspect.isfunction(value) or inspect.ismodule(value):
        return value.__doc__
    for module_name, module in sorted(sys.modules.items()):
        if module_name.split(".")[0] != "agent_engine" or module is None:
            continue
        if vars(module).get(name) is value:
            doc = _attribute_docstrings(module).get(name)
            if doc is not None:
                return doc
    return None


def _is_ours(value: object) -> bool:
    """Whether ``value`` (or, for an instance, its class) is defined in agent_engine."""
    owner = value if inspect.isclass(value) or inspect.isfunction(value) else type(value)
    return str(getattr(owner, "__module__", "")).split(".")[0] == "agent_engine"


def _exports(package_name: str) -> list[str]:
    package = importlib.import_module(package_name)
    exported: list[str] = package.__all__
    return exported


class TestPublicApi:
    def test_all_is_sorted(self):
        """__all__ is kept sorted so diffs show additions plainly."""
        assert agent_engine.__all__ == sorted(agent_engine.__all__)

    def test_all_matches_public_attributes(self):
        """Every public attribute is exported, and every export exists.

        ``dir()``, not ``vars()``: the names that load on first use are not in the module's
        namespace until then, and ``getattr`` loads each one, so a lazy name that does not
        resolve fails here.
        """
        public = {
            name
            for name in dir(agent_engine)
            if not name.startswith("_")
            and not isinstance(getattr(agent_engine, name), type(agent_engine))
        }
        assert public | {"__version__"} == set(agent_engine.__all__)

    @pytest.mark.parametrize("name", agent_engine.__all__)
    def test_every_export_says_why_it_exists(self, name):
        """Each top-level name has a docstring of its own (constants: under the assignment)."""
        doc = _docstring(name, getattr(agent_engine, name))
        assert doc, f"agent_engine.{name} has no docstring"
        assert doc.strip()

    def test_version(self):
        """__version__ is exported: the installed distribution's version string."""
        assert "__version__" in agent_engine.__all__
        assert agent_engine.__version__ == importlib.metadata.version("agent-engine")

    def test_version_of_an_uninstalled_checkout(self, tmp_path):
        """Without metadata the version comes from pyproject.toml, else it is 0+unknown."""
        from agent_engine._version import UNKNOWN, _checkout_version  # noqa: PLC0415

        pyproject = tmp_path / "pyproject.toml"
        assert _checkout_version(pyproject) == UNKNOWN
        pyproject.write_text('[project]\nname = "agent-engine"\nversion = "1.2.3"\n')
        assert _checkout_version(pyproject) == "1.2.3"
        pyproject.write_text("[project\n")
        assert _checkout_version(pyproject) == UNKNOWN


class TestSubpackages:
    def test_subpackages_are_found(self):
        """The walk finds the subpackages, so the checks below cannot pass on an empty list."""
        assert {"agent_engine.assembler", "agent_engine.memory", "agent_engine.tiers"} <= set(
            SUBPACKAGES
        )

    @pytest.mark.parametrize("package", sorted(set(SUBPACKAGES) - WITHOUT_API))
    def test_all_is_sorted_and_complete(self, package):
        """Each subpackage exports a sorted __all__, and every public name of ours it holds.

        Helpers its ``__init__`` imports from outside agent_engine (``Sequence``, the
        ``annotations`` future) are not ours to export; anything of agent_engine is.
        """
        module = importlib.import_module(package)
        exported = _exports(package)
        assert exported == sorted(exported)
        ours = {
            name
            for name, value in vars(module).items()
            if not name.startswith("_") and not inspect.ismodule(value) and _is_ours(value)
        }
        assert ours <= set(exported)
        assert set(exported) <= set(dir(module))

    @pytest.mark.parametrize(
        ("package", "name"),
        [
            (package, name)
            for package in sorted(set(SUBPACKAGES) - WITHOUT_API)
            for name in _exports(package)
        ],
    )
    def test_every_export_imports_and_is_documented(self, package, name):
        """``from <subpackage> import <name>`` works, and the name has its own docstring."""
        namespace: dict[str, object] = {}
        exec(f"from {package} import {name}", namespace)  # noqa: S102 - the import statement is the point
        assert _docstring(name, namespace[name]), f"{package}.{name} has no docstring"


class TestApiPage:
    def test_top_level_names_are_listed_both_ways(self):
        """docs/api.md lists every top-level name, and nothing that is not one."""
        listed = _api_page()["agent_engine"]
        assert set(listed) == set(agent_engine.__all__)

    @pytest.mark.parametrize("package", sorted(set(SUBPACKAGES) - WITHOUT_API))
    def test_subpackage_additions_are_listed_both_ways(self, package):
        """A subpackage's section lists exactly the names it adds to the top level."""
        sections = _api_page()
        assert package in sections, f"docs/api.md has no section for {package}"
        assert set(sections[package]) == set(_exports(package)) - set(agent_engine.__all__)

    def test_no_section_for_a_package_that_does_not_exist(self):
        """Every section names the top level, a subpackage or the list of moved names."""
        assert set(_api_page()) <= {"agent_engine", *SUBPACKAGES, MOVED_HEADING}

    def test_moved_names_are_listed_with_their_new_home(self):
        """The moved names on the page are those the package still resolves, with their home."""
        listed = _api_page()[MOVED_HEADING]
        moved = agent_engine._MOVED
        assert set(listed) == set(moved)
        for name, home in moved.items():
            assert listed[name].startswith(f"`{home}`"), name


class TestMovedNames:
    @pytest.mark.parametrize(("name", "home"), sorted(agent_engine._MOVED.items()))
    def test_still_resolves_with_a_warning_naming_the_new_path(self, name, home):
        """A name moved off the top level is, for one release, the same object with a warning."""
        with pytest.warns(DeprecationWarning, match=re.escape(f"from {home} import {name}")):
            value = getattr(agent_engine, name)
        assert value is getattr(importlib.import_module(home), name)

    def test_from_import_warns_once_at_the_importing_line(self):
        """``from agent_engine import X`` warns once, attributed to the line that imports it."""
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            from agent_engine import rrf  # noqa: F401, PLC0415

        assert [warning.category for warning in caught] == [DeprecationWarning]
        assert caught[0].filename == __file__

    def test_moved_names_are_not_exported(self):
        """A moved name is neither in __all__ nor offered by dir()."""
        assert not set(agent_engine._MOVED) & set(agent_engine.__all__)
        assert not set(agent_engine._MOVED) & set(dir(agent_engine))

    def test_each_new_home_exports_the_name(self):
        """The path a warning names works, and (but for internals) is a subpackage's API."""
        for name, home in agent_engine._MOVED.items():
            module = importlib.import_module(home)
            assert hasattr(module, name)
            if home in SUBPACKAGES:
                assert name in module.__all__

    def test_capabilities_are_gone(self):
        """The removed capability flags do not resolve at all: nothing may branch on them."""
        with pytest.raises(AttributeError):
            _ = agent_engine.Capabilities  # type: ignore[attr-defined]
        from agent_engine.memory import InMemoryBackend  # noqa: PLC0415

        assert not hasattr(InMemoryBackend(), "capabilities")
