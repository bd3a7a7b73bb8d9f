"""The core edge, always on: health, bootstrap, the OpenAPI document, the home page and
the admin console's dashboard and error lookup."""
