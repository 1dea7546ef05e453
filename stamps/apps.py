from django.apps import AppConfig


class StampsConfig(AppConfig):
    name = "stamps"
    default_auto_field = "django.db.models.BigAutoField"
