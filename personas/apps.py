from django.apps import AppConfig


class PersonasConfig(AppConfig):
    name = "personas"
    default_auto_field = "django.db.models.BigAutoField"
