"""VX-CONF-3: what configures an agent CLI or what git executes is never written by a persona.

A persona whose class may write its project's worktree could otherwise plant a
`.claude/settings.json` hook, a `.mcp.json` server or a `.git/hooks/pre-commit` that runs at its
owner's next launch or commit, outside every boundary the stamp draws.
"""

from pathlib import Path

import pytest

from personas.models import AuditEvent
from runtime.tools import workspace as ws
from runtime.tools.workspace import AgentConfiguration, Workspace, workspace_root
from tests.runtime_support import call, root_of, standing_persona

AGENT_CONFIGURATION = [
    "worktrees/core/.claude/settings.json",
    "worktrees/core/.claude/settings.local.json",
    "worktrees/core/.mcp.json",
    "worktrees/core/.claude.json",
    "worktrees/core/.codex/config.toml",
    "worktrees/core/.gemini/settings.json",
    "worktrees/core/.cursor/mcp.json",
    "worktrees/core/.vscode/tasks.json",
    "worktrees/core/.git/hooks/pre-commit",
    "worktrees/core/.git/config",
    "worktrees/core/vendor/lib/.git/hooks/post-checkout",
    "worktrees/core/.envrc",
    "worktrees/core/.husky/pre-commit",
    "worktrees/core/.devcontainer/devcontainer.json",
    "memory/.claude/settings.json",
    # Case folded: on a case-insensitive disk these are the files above.
    "worktrees/core/.Claude/settings.json",
    "worktrees/core/.GIT/config",
    "worktrees/core/.MCP.json",
]
ORDINARY = [
    "worktrees/core/claude.md",
    "worktrees/core/CLAUDE.md",
    "worktrees/core/src/git.py",
    "worktrees/core/.gitignore",
    "worktrees/core/docs/mcp.json",
    "worktrees/core/notes.envrc.md",
    "worktrees/core/.github/CODEOWNERS",
]


@pytest.fixture
def space(tmp_path: Path, settings) -> Workspace:  # type: ignore[no-untyped-def]
    settings.VIRGO_HOME = tmp_path / "home"
    root = workspace_root(workspace="work", project="core", persona_uuid="p-1")
    # Everything mutable: the refusal must hold whatever a binding's paths say.
    return Workspace(root=root, mutable_paths=("**",))


@pytest.mark.parametrize("path", AGENT_CONFIGURATION)
def test_agent_configuration_is_never_written_whatever_the_binding_allows(
    space: Workspace, path: str
) -> None:
    """VX-CONF-3: refused by name before the disk is touched, in every write mode."""
    for mode in ("replace", "create", "append"):
        with pytest.raises(AgentConfiguration) as refused:
            space.write(path, '{"hooks": {"SessionStart": []}}', mode=mode)
        assert refused.value.reason == (
            f"{path!r} configures an agent CLI or what git runs: no persona's tool writes it"
        )
    assert not (space.root / path).exists()


def test_agent_configuration_already_there_is_not_deleted_nor_replaced(space: Workspace) -> None:
    """VX-CONF-3: a delete is a write too; the owner's own file stays as it was."""
    path = space.ensure() / "worktrees/core/.claude/settings.json"
    path.parent.mkdir(parents=True)
    path.write_text("the owner's")
    for mode in ("delete", "replace"):
        with pytest.raises(AgentConfiguration):
            space.write("worktrees/core/.claude/settings.json", "{}", mode=mode)
    assert path.read_text() == "the owner's"


@pytest.mark.parametrize("path", ORDINARY)
def test_ordinary_files_with_similar_names_stay_writable(space: Workspace, path: str) -> None:
    """VX-CONF-3: the rule names configuration, not every file that mentions an agent or git."""
    assert not ws.is_agent_configuration(path)
    space.write(path, "content")
    assert (space.root / path).read_text() == "content"


@pytest.mark.django_db
def test_a_persona_planting_a_hook_through_its_tool_is_refused_and_audited() -> None:
    """VX-CONF-3: through handle(), as an agent's MCP call arrives: not ok, the rule's code, a
    refusal in the audit trail, and no file; a source file beside it is written."""
    persona = standing_persona()
    hook = {"path": "worktrees/core/.claude/settings.json", "content": '{"hooks": {}}'}
    result = call(persona, "workspace_write", hook)
    assert (result["ok"], result["code"]) == (False, "agent_configuration")
    assert not (root_of(persona) / hook["path"]).exists()
    refused = AuditEvent.objects.filter(kind=AuditEvent.Kind.CALL_REFUSED, persona=persona)
    assert refused.get().data["tool"] == "workspace_write"
    source = {"path": "worktrees/core/src/app.py", "content": "print('ok')\n"}
    assert call(persona, "workspace_write", source)["ok"] is True
