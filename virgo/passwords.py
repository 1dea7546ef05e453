"""A password change is a sign-in, and it ends what the old password opened (VX-SEC-17).

The admin's password change checks the old password: through `authenticate()`, so it counts
against the same sign-in budgets as the login page and the token endpoint (virgo.signin) and is
refused, with the same 429 page, while one is spent. Once the password changes, by any door (the
admin, `virgo` commands, `set_password` anywhere), the account's API tokens are deleted: whoever
held one because they knew the old password holds nothing now (Django storing the same password
under a stronger hash at a sign-in is no change). Its other sessions end on their
next request, as Django's session hash (derived from the password) no longer matches; the session
that made the change is kept (PasswordChangeView updates its hash).
"""

from typing import Any

from django.contrib.admin.forms import AdminPasswordChangeForm
from django.contrib.auth import authenticate, get_user_model
from django.contrib.auth.hashers import get_hasher, identify_hasher
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import ValidationError
from django.db.models.signals import pre_save
from django.http import HttpRequest, HttpResponse

from virgo import signin


class LimitedPasswordChangeForm(AdminPasswordChangeForm):
    """The old password is checked as a sign-in is: counted when wrong, refused while locked."""

    def __init__(self, user: Any, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self) -> str:
        old_password = self.cleaned_data["old_password"]
        signed_in = authenticate(
            self.request, username=self.user.get_username(), password=old_password
        )
        if signed_in is None or signed_in.pk != self.user.pk:
            raise ValidationError(
                self.error_messages["password_incorrect"], code="password_incorrect"
            )
        return old_password


class LimitedPasswordChangeView(PasswordChangeView):
    form_class = LimitedPasswordChangeForm

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}


def password_change(request: HttpRequest, **view_options: Any) -> HttpResponse:
    """The admin's password change, answered with the lockout page while a budget is spent, and
    with 503 while the counts cannot be reached, as the login page is."""
    try:
        if request.method == "POST":
            seconds = signin.refused(request, request.user.get_username())
            if seconds is not None:
                return signin.locked_out_page(request, seconds)
        return LimitedPasswordChangeView.as_view(**view_options)(request)
    except signin.Unavailable as unavailable:
        return signin.unavailable_page(request, unavailable.retry_after)


def end_what_the_old_password_opened(sender: Any, instance: Any, **kwargs: Any) -> None:
    """pre_save of the user model: a changed password deletes the account's API tokens."""
    from rest_framework.authtoken.models import Token

    update_fields = kwargs.get("update_fields")
    if instance.pk is None or kwargs.get("raw"):
        return
    # Most saves of an account are a sign-in's last_login: no password, no query.
    if update_fields is not None and "password" not in update_fields:
        return
    stored = sender.objects.filter(pk=instance.pk).values_list("password", flat=True).first()
    if stored is None or stored == instance.password or _rehashed(instance, stored):
        return
    Token.objects.filter(user_id=instance.pk).delete()


def _rehashed(instance: Any, stored: str) -> bool:
    """Whether this save is Django's rehash of a password it has just verified: the same
    password stored under the current hasher's parameters, which ends nothing.

    check_password's setter marks such a save as Django's own password_changed does, by leaving
    `_password` unset (set_password sets it); only a stored hash the current hasher would
    replace can be rehashed, and only into one it would keep."""
    # AbstractBaseUser, which every user model extends, declares `_password`.
    if instance._password is not None:
        return False
    preferred = get_hasher("default")
    try:
        before, after = identify_hasher(stored), identify_hasher(instance.password)
    except ValueError:
        # An unusable password (`!` and random letters) names no hasher, so it is refused here.
        return False
    outdated = before.algorithm != preferred.algorithm or preferred.must_update(stored)
    return (
        outdated
        and after.algorithm == preferred.algorithm
        and not preferred.must_update(instance.password)
    )


def connect() -> None:
    # Connected once per receiver and sender: Django keys a connection by both.
    pre_save.connect(end_what_the_old_password_opened, sender=get_user_model())
