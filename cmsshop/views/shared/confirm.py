"""The confirm step of the console's destructive actions (revoke a license, reset its
activations, unpublish or delete an article, archive a product, disable a currency).

Without JavaScript: the action's own button posts to the action's URL without
``confirm=1``; that post changes nothing and answers this page, which names exactly what
will happen. Only its form's post (``confirm=1`` and the CSRF token, checked for every
POST by the app's CSRF policy) acts. Each action gives only its wording; one template
(templates/admin/confirm.html, macro ``confirm_step`` of templates/admin/macros.html)
draws them all. The JSON admin API has no such step: a client confirms by calling.
"""

from __future__ import annotations

from pyramid.renderers import render_to_response

from cmsshop.views.shared.caching import no_store

TEMPLATE = "admin/confirm.html"
# Fields of the first post that are not carried into the confirm form.
NOT_CARRIED = ("csrf_token", "confirm")


def confirmed(request) -> bool:
    """Whether this POST is the confirm form's (``confirm=1``): only then does it act."""
    return request.method == "POST" and request.POST.get("confirm") == "1"


def carried_fields(request) -> list[tuple[str, str]]:
    """The first post's fields (not its token), for the confirm form to send again as
    they were: an edit form's fields when saving it is the destructive step."""
    return [
        (name, value)
        for name, value in request.POST.items()
        if name not in NOT_CARRIED and isinstance(value, str)
    ]


def confirm_page(
    request,
    *,
    title: str,
    consequences: list[str],
    action: str,
    button: str,
    cancel: str,
    section: str | None = None,
    fields: list[tuple[str, str]] | None = None,
):
    """The confirmation page: ``title`` (a question naming the object), ``consequences``
    (one sentence each: what will happen), a form posting to ``action`` with
    ``confirm=1`` and ``fields``, its ``button``, and a link back to ``cancel``."""
    no_store(request)
    return render_to_response(
        TEMPLATE,
        {
            "admin_section": section,
            "confirm": {
                "title": title,
                "consequences": consequences,
                "action": action,
                "button": button,
                "cancel": cancel,
                "fields": list(fields or []),
            },
        },
        request=request,
    )
