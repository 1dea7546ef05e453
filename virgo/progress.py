"""Progress of long commands: a bar on a terminal, nothing when piped.

A command that may run long (`virgo check`, `virgo reconcile`, `virgo stamp build --all`) wraps
its work in `shown_on(sys.stderr)`; the loops that do the work, wherever they are, iterate
through `track()`. It costs nothing when no command shows progress: in a Celery task, a web
request, or a command whose stderr is not a terminal (piped, a log file, CI), so the same loops
serve them all. Each tracked loop draws its own bar, with rich on stderr, for as long as it runs,
and leaves its last state as one line: what the command prints afterwards comes below it, and
stdout, what a command prints for scripts (`--json | jq`), is never touched.
"""

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

_console: ContextVar[Console | None] = ContextVar("virgo_progress_console", default=None)


@contextmanager
def shown_on(stream: TextIO) -> Iterator[None]:
    """Show the progress of the loops that run inside on `stream`, if it is a terminal."""
    console = Console(file=stream)
    shown = console.is_terminal and not console.is_dumb_terminal
    token = _console.set(console if shown else None)
    try:
        yield
    finally:
        _console.reset(token)


def track[T](
    items: Iterable[T],
    description: str,
    *,
    total: int | Callable[[], int] | None = None,
    steps: Callable[[T], int] | None = None,
) -> Iterator[T]:
    """`items`, each `steps(item)` steps (one by default) of a bar of `total` steps.

    `total` defaults to len(items); a callable one is called only when the bar is shown (a count
    query a Celery task should not pay).
    """
    console = _console.get()
    if console is None:
        yield from items
        return
    if callable(total):
        total = total()
    elif total is None and hasattr(items, "__len__"):
        total = len(items)  # type: ignore[arg-type]
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # Nothing is redirected: stdout stays the command's own.
    with Progress(*columns, console=console, redirect_stdout=False, redirect_stderr=False) as bar:
        task = bar.add_task(description, total=total)
        for item in items:
            yield item
            bar.advance(task, 1 if steps is None else steps(item))
