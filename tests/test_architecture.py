"""The import graph of Virgo's own packages (issue 14; no checklist id: nothing a user sees).

`make lint` runs import-linter over the contract in pyproject.toml (the layers point down);
these say what it cannot: that no module reaches itself through a circle of imports, and that
no app of the project stands outside the layers.
"""

import tomllib
from pathlib import Path

import grimp
from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every set of modules that import each other round a circle (Tarjan's strongly connected
    components of more than one module, and modules importing themselves), iteratively."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph.modules):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.find_modules_directly_imported_by(start))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            module, imported = work[-1]
            step = next(imported, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph.find_modules_directly_imported_by(step)))))
                elif step in on_stack:
                    low[module] = min(low[module], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1 or graph.direct_import_exists(
                    importer=module, imported=module
                ):
                    found.append(sorted(component))
    return found


def test_no_module_imports_itself_through_a_circle() -> None:
    """Issue 14: not one circle among the modules of Virgo's packages (imports inside
    functions and under TYPE_CHECKING count too), so each can be read from the bottom up."""
    graph = grimp.build_graph(*CONTRACT["root_packages"], cache_dir=None)
    assert circles(graph) == []


def test_the_circle_finder_finds_circles() -> None:
    """Issue 14: the check above would see a circle, long or of one module."""
    graph = grimp.ImportGraph()
    for importer, imported in (("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("e", "e")):
        graph.add_import(importer=importer, imported=imported)
    assert circles(graph) == [["a", "b", "c"], ["e"]]


def test_every_app_of_the_project_is_in_exactly_one_layer() -> None:
    """Issue 14: a new app of the project cannot stand outside the layers import-linter keeps."""
    [layers] = [c["layers"] for c in CONTRACT["contracts"] if c["type"] == "layers"]
    layered = [name.strip() for layer in layers for name in layer.split("|")]
    ours = {config.name for config in apps.get_app_configs() if Path(config.path).parent == ROOT}
    assert (
        sorted(layered) == sorted(set(layered)) == sorted(ours) == sorted(CONTRACT["root_packages"])
    )


def test_a_circle_under_type_checking_counts(tmp_path, monkeypatch) -> None:
    """Issue 14: the graph the first check reads holds the imports made only for type checking,
    so a circle closed under `if TYPE_CHECKING:` is still a circle."""
    package = tmp_path / "circled"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from circled import b\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from circled import a\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert circles(grimp.build_graph("circled", cache_dir=None)) == [["circled.a", "circled.b"]]
