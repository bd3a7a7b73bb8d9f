"""Plain helpers shared by the test suite (fixtures live in the conftest.py files; fakes
of the outside world in tests/fakes/).

- ``app``: the default test settings and constants, serving an app on loopback, ini files.
- ``clients``: WebTest clients for the JSON API and for pages, logged in or not.
- ``html``: reading rendered pages (title, heading, form errors, error pages).
- ``mail_links``: the links a customer gets by mail.
- ``account_data``, ``purchases``: a customer's paid orders, licenses and releases.
- ``store``, ``docs``, ``support``, ``outbox``, ``downloads``, ``licensing``,
  ``payments``: arranging and checking one feature's data; ``cli``: cmsshop-admin.
- ``browser`` (a pytest plugin of tests/conftest.py): real Chromium, axe-core,
  screenshots, logging in.
- ``fuzzing``: running schemathesis strategies.
"""
