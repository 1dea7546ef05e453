from django.apps import AppConfig


class ServingConfig(AppConfig):
    name = "serving"
    default_auto_field = "django.db.models.BigAutoField"
    verbose_name = "Remote access"
