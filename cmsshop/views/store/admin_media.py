"""Product images in the console and the admin API: upload (multipart: ``file`` and
``alt``), alt text, order (the first image is the card's and the sharing picture) and
delete. The rules are services/store/media.py's; this module reads and answers.

An upload is a POST of at most ``media.MAX_BYTES`` (plus the form's few fields): its
routes are upload routes (modules/store.py), so only an admin's session may send a body
past ``cmsshop.max_body_bytes``, and the service refuses a file past its own limit.
"""

from __future__ import annotations

import colander
from pyramid.view import view_config

from cmsshop.errors import ApiError, NotFound, UnsupportedMediaType, ValidationFailed
from cmsshop.security import ADMIN
from cmsshop.services.store import media, products
from cmsshop.util import isoformat_z
from cmsshop.views.shared.caching import no_store
from cmsshop.views.shared.forms import field_errors, posted_value, see_other
from cmsshop.views.shared.json import StrictMapping, parse_path_id, read_json
from cmsshop.views.shared.schema import int_node, text_node
from cmsshop.views.store.admin_pages import edit_page

NOTICES = {
    "image_added": "The image was added.",
    "image_saved": "The image's description was saved.",
    "image_moved": "The images were reordered.",
    "image_deleted": "The image was deleted.",
}
MAX_POSITION = 1000


def image_body(image) -> dict:
    sizes = {}
    for name, variant in image.variants.items():
        fallback = media.fallback_key(variant)
        sizes[name] = {
            "webp": media.media_url(variant["webp"]),
            "fallback": media.media_url(fallback),
            "fallbackType": media.CONTENT_TYPES[fallback.rsplit(".", 1)[1]],
            "width": variant["width"],
            "height": variant["height"],
        }
    return {
        "id": image.id,
        "position": image.position,
        "alt": image.alt,
        "width": image.width,
        "height": image.height,
        "sizes": sizes,
        "createdAt": isoformat_z(image.created_at),
    }


def _product(request):
    return products.find_product(request.db, request.matchdict["slug"], public=False)


def _image(request, product):
    image_id = parse_path_id(request.matchdict["image_id"])
    if image_id is None:
        raise NotFound("The product has no such image.", code="image_not_found")
    return media.find_image(request.db, product, image_id)


def read_upload(request) -> tuple[bytes, str]:
    """(file bytes, alt) of a multipart upload; 415 for another body, 422 for a missing
    part. At most ``media.MAX_BYTES + 1`` bytes are read: the service says what is over."""
    if request.content_type != "multipart/form-data":
        raise UnsupportedMediaType(
            "Send the image as multipart/form-data.",
            hints=["Parts: `file` (PNG, JPEG or WebP) and `alt` (what the picture shows)."],
        )
    try:
        posted = request.POST
        upload = posted.get("file")
        alt = posted_value(request, "alt")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise ApiError(
            "The multipart body could not be read.",
            code="malformed_multipart",
            hints=["Send multipart/form-data with a `file` part and an `alt` field."],
        ) from None
    if upload is None or isinstance(upload, str) or not hasattr(upload, "file"):
        raise ValidationFailed({"file": "choose a PNG, JPEG or WebP image"})
    return upload.file.read(media.MAX_BYTES + 1), alt


# --- JSON --------------------------------------------------------------------------------


class ImagePatchSchema(colander.MappingSchema):
    schema_type = StrictMapping
    alt = text_node(media.MAX_ALT, min_length=1, missing=colander.drop)
    position = int_node(0, MAX_POSITION, missing=colander.drop)


@view_config(
    route_name="store.admin_product_images",
    request_method="GET",
    renderer="json",
    permission=ADMIN,
)
def list_images(request):
    no_store(request)
    product = _product(request)
    return {"items": [image_body(image) for image in product.images]}


@view_config(
    route_name="store.admin_product_images",
    request_method="POST",
    renderer="json",
    permission=ADMIN,
)
def upload_image(request):
    product = _product(request)
    data, alt = read_upload(request)
    image = media.add_image(request.db, product, data, alt)
    request.response.status = 201
    return image_body(image)


@view_config(
    route_name="store.admin_product_image",
    request_method="PATCH",
    renderer="json",
    permission=ADMIN,
)
def update_image(request):
    product = _product(request)
    image = _image(request, product)
    changes = read_json(request, ImagePatchSchema())
    if "alt" in changes:
        media.set_alt(request.db, image, changes["alt"])
    if "position" in changes:
        media.move_image(request.db, product, image, changes["position"])
    return image_body(image)


@view_config(
    route_name="store.admin_product_image",
    request_method="DELETE",
    renderer="json",
    permission=ADMIN,
)
def delete_image(request):
    product = _product(request)
    image = _image(request, product)
    image_id = image.id
    media.delete_image(request.db, product, image)
    return {"id": image_id, "deleted": True}


# --- console -----------------------------------------------------------------------------


def _back(product, notice: str):
    return f"/admin/products/{product.slug}/edit#images", notice


@view_config(
    route_name="pages.admin_product_images",
    request_method="POST",
    renderer="admin/store/product_edit.html",
    permission=ADMIN,
)
def upload_image_page(request):
    product = _product(request)
    typed = {"alt": posted_value(request, "alt")}
    try:
        data, alt = read_upload(request)
        media.add_image(request.db, product, data, alt)
    except ApiError as exc:
        errors = field_errors(exc)
        if not set(errors) <= {"file", "alt"}:
            errors = {"file": exc.message} if exc.status in (413, 415) else {"form": exc.message}
        request.db.expire(product)
        return edit_page(request, product, image_form=typed, image_errors=errors, status=exc.status)
    location, notice = _back(product, "image_added")
    return see_other(request, location, notice=notice)


@view_config(
    route_name="pages.admin_product_image",
    request_method="POST",
    renderer="admin/store/product_edit.html",
    permission=ADMIN,
)
def change_image_page(request):
    """One image's forms: ``action`` is ``alt`` (save its description), ``up``, ``down``
    or ``delete``."""
    product = _product(request)
    image = _image(request, product)
    action = posted_value(request, "action")
    if action == "alt":
        try:
            media.set_alt(request.db, image, posted_value(request, "alt"))
        except ValidationFailed as exc:
            request.db.expire(image)
            return edit_page(
                request,
                product,
                alt_errors={image.id: field_errors(exc).get("alt", exc.message)},
                alt_typed={image.id: posted_value(request, "alt")},
                status=exc.status,
            )
        notice = "image_saved"
    elif action in ("up", "down"):
        step = -1 if action == "up" else 1
        media.move_image(request.db, product, image, image.position + step)
        notice = "image_moved"
    elif action == "delete":
        media.delete_image(request.db, product, image)
        notice = "image_deleted"
    else:
        raise ValidationFailed({"action": "one of: alt, up, down, delete"})
    location, notice = _back(product, notice)
    return see_other(request, location, notice=notice)
