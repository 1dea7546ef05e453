from django.db import models


class WorkspaceDirectory(models.Model):
    """The installation's one workspace directory: one row (pk 1) holding the marker that its
    file `$VIRGO_HOME/workspaces/.virgo-workspaces` holds (runtime.workspace_directory). Every
    machine that serves personas' tools must find that file there: its workspaces are then the
    ones every other machine reads and writes."""

    marker = models.CharField(max_length=64)
    recorded_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.marker
