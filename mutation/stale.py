"""`make mutation-stale`: which rows of docs/mutation.md no longer describe their module's code.

A row is a run at one commit; once a function it mutated changes, its score says nothing of
the new code. This lists each configured module with no row, or whose row's commit is not in
this repository, or with functions in the row's scope changed since (mutation/changes.py, the
same test MUTATION_CHANGED carries outcomes by), so a session knows what to run again.

    .venv/bin/python -m mutation.stale
"""

from mutation import changes, report, run


def stale_modules(document: str, modules: list[str]) -> list[tuple[str, str]]:
    """(module, why) for each of `modules` the report does not describe as its code is now."""
    kept = report.kept_modules(document)
    found = []
    for module in modules:
        if module not in kept:
            found.append((module, "no row"))
            continue
        cells = report.row_cells(kept[module].row)
        before = run.source_at(cells.commit, module)
        if before is None:
            found.append((module, f"its row's commit {cells.commit} is not in this repository"))
            continue
        after = (run.ROOT / module).read_text()
        scope = run.mangled_names(cells.scope)
        # A function gone since still counts in the row's mutants and score.
        gone = set(changes.function_bodies(before)) - set(changes.function_bodies(after))
        changed = sorted(
            name
            for name in changes.changed_functions(before, after) | gone
            if scope is None or name in scope
        )
        if changed:
            found.append((module, f"changed since {cells.commit}: {', '.join(changed)}"))
    return found


def main() -> None:
    found = stale_modules(run.DOC.read_text(), run.configured_modules())
    for module, why in found:
        print(f"{module}: {why}")
    print(f"{len(found)} of {len(run.configured_modules())} modules to run again")


if __name__ == "__main__":
    main()
