"""Which functions of a module changed between two versions of its source, by mutmut's names.

mutmut mutates the bodies of a module's functions and of its classes' methods and numbers the
mutants of each in order, so a function whose code is the same in both versions has the same
mutants under the same names: their outcome at the older version still holds, as mutmut itself
keeps it when it runs again (mutation/run.py --changed).
"""

import ast


def _mangled(name: str, owner: str | None = None) -> str:
    """mutmut's name for a function (x_name) or a method (xǁClassǁname)."""
    return f"xǁ{owner}ǁ{name}" if owner else f"x_{name}"


def _function_trees(source: str) -> dict[str, ast.AST]:
    trees: dict[str, ast.AST] = {}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.parse(source).body:
        if isinstance(node, functions):
            trees[_mangled(node.name)] = node
        elif isinstance(node, ast.ClassDef):
            for member in node.body:
                if isinstance(member, functions):
                    trees[_mangled(member.name, node.name)] = member
    return trees


def function_bodies(source: str) -> dict[str, str]:
    """Each function and method of `source` by mutmut's name, as its syntax tree without
    positions (so moving it, or a comment or blank line in it, is not a change)."""
    return {name: ast.dump(tree) for name, tree in _function_trees(source).items()}


def _bindings(source: str) -> dict[str, str]:
    """What the module binds outside its functions, by name: imports, constants and classes
    (without their methods), each as its syntax tree; a statement binding no single name is
    keyed by itself, so only its going away or changing counts."""
    bindings: dict[str, str] = {}
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    for node in ast.parse(source).body:
        if isinstance(node, functions):
            continue
        if isinstance(node, ast.ClassDef):
            node.body = [member for member in node.body if not isinstance(member, functions)]
        names: list[str] = []
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                origin = f"{getattr(node, 'module', '')}.{alias.name}"
                bindings[alias.asname or alias.name.split(".")[0]] = origin
            continue
        if isinstance(node, ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            names = [target.id for target in [node.targets[0]] if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names = [node.target.id]
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            continue  # the module's docstring, or a string standing alone: read by nothing
        tree = ast.dump(node)
        bindings[names[0] if names else f"<statement {tree}>"] = tree
    return bindings


def _names_read(function: ast.AST) -> set[str]:
    return {node.id for node in ast.walk(function) if isinstance(node, ast.Name)}


def changed_functions(before: str, after: str) -> set[str]:
    """The functions of `after` that are new or differ from `before`, and those that read a
    module-level name bound differently (an import, a constant, a class); every function when
    a statement binding no single name changed."""
    old_bindings, new_bindings = _bindings(before), _bindings(after)
    rebound = {name for name, tree in old_bindings.items() if new_bindings.get(name) != tree}
    new = function_bodies(after)
    if any(name.startswith("<statement") for name in rebound):
        return set(new)
    old = function_bodies(before)
    trees = _function_trees(after)
    return {
        name
        for name, body in new.items()
        if old.get(name) != body or _names_read(trees[name]) & rebound
    }


def function_of(mutant: str) -> str:
    """The mangled function a mutant id names: pkg.module.x_name__mutmut_3 -> x_name."""
    return mutant.rsplit(".", 1)[1].rpartition("__mutmut_")[0]
