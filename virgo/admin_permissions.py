"""Admin permission pieces shared by the apps' admins."""

from typing import Any

from django.http import HttpRequest


class NoEditsMixin:
    """Rows written only by the domain (audit trail, stamps, runtime records): nobody adds,
    changes or deletes them in the admin. Works for ModelAdmin and inlines alike; who may view
    is left to each admin."""

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
