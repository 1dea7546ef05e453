"""`{% oidc_issuers as issuers %}`: the OpenID Connect issuers owners may sign in with
(personas.oidc), for the admin's login page and its user links."""

from django import template

from personas.oidc import Issuer, configured_issuers

register = template.Library()


@register.simple_tag
def oidc_issuers() -> list[Issuer]:
    return configured_issuers()
