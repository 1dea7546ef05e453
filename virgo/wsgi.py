import os

from django.core.wsgi import get_wsgi_application
from django.utils.module_loading import import_string

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")

django_application = get_wsgi_application()

from django.conf import settings  # noqa: E402  (after Django is set up)

# The WSGI layers in front of Django, outermost first, named by settings so that the ground
# imports no app: the public card's hot path answers current cards before Django is entered
# (cards.fastpath).
application = django_application
for layer in reversed(settings.VIRGO_WSGI_LAYERS):
    application = import_string(layer)(application)
