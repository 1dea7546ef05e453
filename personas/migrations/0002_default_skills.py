"""The default verb->skill map. Staff change it afterwards through the admin."""

from django.db import migrations

DEFAULT_SKILLS = [
    ("delegate-work", "Delegate work", "Creates todos for other queues.", ["create_for"], ["todos"]),
    ("work-todos", "Work through todos", "Lists, claims and completes todos in its queues.",
     ["claim", "complete", "list_todos"], ["todos"]),
    ("deploy-releases", "Deploy releases", "Triggers deployment webhooks, each confirmed by a human.",
     ["trigger_webhook"], ["deployment"]),
    ("assign-tasks", "Assign tasks", "Assigns tasks to other personas.", ["assign_task"], ["tasks"]),
    ("resolve-decisions", "Resolve decisions", "Raises decisions and relays their resolution.",
     ["raise_decision", "resolve_decision"], ["decisions"]),
    ("track-runs", "Track runs", "Creates and advances runs and records their artifacts.",
     ["advance_run", "create_run", "record_artifact"], ["runs"]),
    ("talk-to-humans", "Talk to humans", "Messages and replies to humans on bound surfaces.",
     ["reply_human_message", "send_human_message"], ["human-surface"]),
    ("answer-from-context", "Answer from context", "Answers from the project's graph context.",
     ["query_graph_context"], ["knowledge"]),
    ("keep-notes", "Keep workspace notes", "Reads and writes its workspace notes.",
     ["workspace_read", "workspace_write"], ["workspace"]),
]  # fmt: skip


def load(apps, schema_editor):
    Skill = apps.get_model("personas", "Skill")
    for slug, name, description, verbs, tags in DEFAULT_SKILLS:
        Skill.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "description": description,
                "required_verbs": sorted(verbs),
                "tags": tags,
            },
        )


def unload(apps, schema_editor):
    apps.get_model("personas", "Skill").objects.filter(
        slug__in=[row[0] for row in DEFAULT_SKILLS]
    ).delete()


class Migration(migrations.Migration):
    dependencies = [("personas", "0001_initial")]
    operations = [migrations.RunPython(load, unload)]
