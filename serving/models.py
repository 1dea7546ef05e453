"""The toolkit's records as an owner knows them, for the admin (serving.admin): proxies, no
tables of their own."""

from oauth2_provider.models import Application, RefreshToken


class Client(Application):
    """An agent host's OAuth client, registered by an owner."""

    class Meta:
        proxy = True
        verbose_name = "client"
        verbose_name_plural = "clients"


class Connection(RefreshToken):
    """A client's standing grant to one persona: its live refresh token."""

    class Meta:
        proxy = True
        verbose_name = "connection"
        verbose_name_plural = "connections"
