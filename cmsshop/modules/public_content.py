"""Settings shared by the modules that serve public, cacheable content (store and docs).

Each of them declares these, so either works alone; declaring twice is harmless.
"""

from __future__ import annotations

from cmsshop.settings import as_int

PUBLIC_CONTENT_SETTINGS = {
    # Cache-Control max-age of the public catalogue and docs answers (they carry ETags).
    "cmsshop.public_max_age": (as_int, 60, "CMSSHOP_PUBLIC_MAX_AGE"),
}
