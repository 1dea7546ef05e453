"""The tool families the runtime provides, beside the enforcement core in `runtime/` that runs them.

- `params` and `toolkit`: how a tool declares its arguments (`@takes(Param, ...)`) and what every
  implementation shares (the `ToolCall`, scope and peer helpers, the errors);
- the families, one module each: `workspace` (the persona's files), `coordination` (inbox,
  broker, presence, peers), `work` (tasks and todos), `decisions`, `runs`, `graph`, `webhooks`;
- `binding`: each family's table, bound into the handler registry by `bind_all`.

`bind_all` imports the binding only when it is called. The core reads the declarations here
(`runtime.operations` imports `params` and `workspace`, `runtime.handler` imports `toolkit`),
and importing any module of this package runs this file first; were the binding imported here,
loading the core would load every family, and the families import the core back.
"""


def bind_all() -> None:
    """Bind every tool implementation; called once when the runtime app is ready."""
    from runtime.tools.binding import bind_all

    bind_all()
