import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "virgo.settings")

django_application = get_wsgi_application()

# The public card's hot path answers current cards before Django is entered (cards.fastpath).
from cards.fastpath import PublicCardFastPath  # noqa: E402  (after Django is set up)

application = PublicCardFastPath(django_application)
