"""The admin article editor: the article list, the new/edit form with a Markdown
preview, publish/unpublish and delete, on the JSON admin routes' schema and services
(cmsshop.views.docs.admin_api, cmsshop.services.docs)."""

from __future__ import annotations

import colander
from pyramid.response import Response
from pyramid.view import view_config

from cmsshop.errors import ApiError, ValidationFailed
from cmsshop.security import ADMIN
from cmsshop.services.docs import articles
from cmsshop.services.docs.markdown import render_markdown
from cmsshop.views.docs.admin_api import ArticleSchema
from cmsshop.views.docs.pages import read_list_filters
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.confirm import carried_fields, confirm_page, confirmed
from cmsshop.views.shared.forms import FormInvalid, field_errors, read_form, see_other
from cmsshop.views.shared.json import read_page_request

NOTICES = {
    "article_created": "The article is saved.",
    "article_saved": "Your changes are saved.",
    "article_published": "The article is published.",
    "article_unpublished": "The article is unpublished: it is a draft again.",
    "article_deleted": "The article is deleted.",
}
FORM_FIELDS = ("slug", "title", "summary", "category", "body", "published")
EDITOR = "admin/docs/edit.html"


class FormCheckbox(colander.SchemaType):
    """An HTML checkbox: posted (``value="true"``) is true; a browser sends nothing for an
    unticked one, so absent falls to the node's ``missing`` (false)."""

    def deserialize(self, node, cstruct):
        if cstruct is colander.null:
            return cstruct
        if cstruct == "true":
            return True
        raise colander.Invalid(node, "must be ticked or not")


def article_form_schema() -> colander.SchemaNode:
    """The JSON admin routes' ArticleSchema, its ``published`` read from a checkbox."""
    # A clone: instances of a colander schema class share their field nodes, and the JSON
    # route's ``published`` must stay a strict boolean.
    schema = ArticleSchema().clone()
    schema["published"].typ = FormCheckbox()
    return schema


def article_form(article) -> dict:
    """An article's fields as the form shows them."""
    form = {name: getattr(article, name) for name in FORM_FIELDS if name != "published"}
    form["published"] = "true" if article.published else ""
    return form


def posted_form(request) -> dict:
    return {name: request.POST.get(name, "") for name in FORM_FIELDS}


def article_errors(exc: ApiError) -> dict[str, str]:
    """A service's refusal on the field it is about (a taken slug on ``slug``)."""
    if exc.code == "slug_taken":
        return {"slug": exc.message}
    return field_errors(exc)


def editor(request, *, article=None, form, errors=None, preview_html=None, status=200) -> dict:
    request.response.status = status
    no_store(request)
    return {
        "article": article,
        "form": form,
        "errors": errors or {},
        "preview_html": preview_html,
    }


def read_preview_body(request) -> str:
    """The posted Markdown, checked by the same schema node as a saved body."""
    try:
        return ArticleSchema()["body"].deserialize(request.POST.get("body", ""))
    except colander.Invalid as exc:
        raise ValidationFailed(exc.asdict()) from None


def preview(request, article) -> dict:
    """The form as typed, with its body rendered and sanitised as it would be when saved;
    nothing is saved."""
    form = posted_form(request)
    try:
        body = read_preview_body(request)
    except ValidationFailed as exc:
        return editor(request, article=article, form=form, errors=field_errors(exc), status=422)
    return editor(request, article=article, form=form, preview_html=render_markdown(body))


def wants_preview(request) -> bool:
    return request.POST.get("action") == "preview"


def find_article(request):
    return articles.find_article(request.db, request.matchdict["slug"], public=False)


def edit_path(article) -> str:
    return f"/admin/articles/{article.slug}/edit"


@view_config(
    route_name="pages.admin_articles",
    request_method="GET",
    renderer="admin/docs/index.html",
    permission=ADMIN,
)
def articles_index(request):
    no_store(request)
    filters = read_list_filters(request)
    page = articles.list_articles(request.db, read_page_request(request), **filters, public=False)
    return {"page": page, "q": filters["q"] or "", "category": filters["category"]}


@view_config(
    route_name="pages.admin_article_new", request_method="GET", renderer=EDITOR, permission=ADMIN
)
def new_article_page(request):
    return editor(request, form={"category": "general"})


@view_config(
    route_name="pages.admin_article_new", request_method="POST", renderer=EDITOR, permission=ADMIN
)
def new_article_submit(request):
    if wants_preview(request):
        return preview(request, None)
    try:
        data = read_form(request, article_form_schema())
        article = articles.create_article(request.db, data)
    except FormInvalid as exc:
        return editor(request, form=exc.form, errors=exc.errors, status=422)
    except ApiError as exc:
        return editor(
            request, form=posted_form(request), errors=article_errors(exc), status=exc.status
        )
    return see_other(request, edit_path(article), notice="article_created")


@view_config(
    route_name="pages.admin_article_edit", request_method="GET", renderer=EDITOR, permission=ADMIN
)
def edit_article_page(request):
    article = find_article(request)
    return editor(request, article=article, form=article_form(article))


@view_config(
    route_name="pages.admin_article_edit", request_method="POST", renderer=EDITOR, permission=ADMIN
)
def edit_article_submit(request):
    article = find_article(request)
    if wants_preview(request):
        return preview(request, article)
    if article.published and "published" not in request.POST and not confirmed(request):
        return confirm_unpublish(request, article, saving=True)
    try:
        data = read_form(request, article_form_schema())
        articles.update_article(request.db, article, data)
    except FormInvalid as exc:
        return editor(request, article=article, form=exc.form, errors=exc.errors, status=422)
    except ApiError as exc:
        return editor(
            request,
            article=article,
            form=posted_form(request),
            errors=article_errors(exc),
            status=exc.status,
        )
    return see_other(request, edit_path(article), notice="article_saved")


@view_config(route_name="pages.admin_article_publish", request_method="POST", permission=ADMIN)
def publish_article(request):
    article = find_article(request)
    articles.update_article(request.db, article, {"published": True})
    return see_other(request, edit_path(article), notice="article_published")


def confirm_unpublish(request, article, *, saving: bool = False):
    """The confirm step of unpublishing: the Unpublish button's, or saving the editor with
    the Published box unticked (``saving``: the typed fields are carried and saved)."""
    what = "Save the article" if saving else "Unpublish the article"
    return confirm_page(
        request,
        title=f"Unpublish “{article.title}”?",
        consequences=[
            f"{what} “{article.title}” as a draft: its URL /docs/{article.slug} will "
            "answer 404 and it leaves the documentation's lists and search.",
            "It stays here as a draft; publish it again to bring the page back.",
        ],
        action=f"/admin/articles/{article.slug}/{'edit' if saving else 'unpublish'}",
        button="Save and unpublish the article" if saving else "Unpublish the article",
        cancel=edit_path(article),
        section="articles",
        fields=carried_fields(request) if saving else None,
    )


@view_config(route_name="pages.admin_article_unpublish", request_method="POST", permission=ADMIN)
def unpublish_article(request):
    article = find_article(request)
    if not confirmed(request):
        return confirm_unpublish(request, article)
    articles.update_article(request.db, article, {"published": False})
    return see_other(request, edit_path(article), notice="article_unpublished")


def confirm_delete(request, article):
    gone = (
        f"its URL /docs/{article.slug} will answer 404"
        if article.published
        else "it is a draft, so no page on the site changes"
    )
    consequences = [
        f"Delete the article “{article.title}” ({article.slug}) for good: {gone}.",
        "This cannot be undone.",
    ]
    if article.published:
        consequences.append("To hide it but keep it, unpublish it instead.")
    return confirm_page(
        request,
        title=f"Delete “{article.title}”?",
        consequences=consequences,
        action=f"/admin/articles/{article.slug}/delete",
        button="Delete the article for good",
        cancel=edit_path(article),
        section="articles",
    )


@view_config(route_name="pages.admin_article_delete", request_method="GET", permission=ADMIN)
def delete_article_page(request):
    return confirm_delete(request, find_article(request))


@view_config(route_name="pages.admin_article_delete", request_method="POST", permission=ADMIN)
def delete_article_submit(request):
    article = find_article(request)
    if not confirmed(request):
        return confirm_delete(request, article)
    articles.delete_article(request.db, article)
    return see_other(request, "/admin/articles", notice="article_deleted")


@view_config(route_name="pages.admin_article_preview", request_method="POST", permission=ADMIN)
def preview_fragment(request):
    """The live preview of the editor's script (static/article-editor.js): the posted
    Markdown as sanitised HTML, the same as the Preview button shows."""
    body = read_preview_body(request)
    response = Response(render_markdown(body), content_type="text/html", charset="utf-8")
    response.cache_control = "no-store"
    return response
