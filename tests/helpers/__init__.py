"""Plain helpers shared by the test suite (fixtures live in conftest.py files).

- ``app``: the test settings, constants, serving an app on loopback, ini files.
- ``clients``: WebTest clients for the JSON API and for pages, logging in.
- ``html``: reading rendered pages (title, heading, form errors, error pages).
- ``mail_links``: the links a customer gets by mail.
- ``account_data``, ``purchases``: a customer's paid orders, licenses and releases.
- ``store``, ``docs``, ``support``, ``outbox``, ``downloads``, ``payments``,
  ``licensing``, ``signing``, ``cli``: arranging and checking one feature's data.
- ``browser`` (a pytest plugin): real Chromium, axe-core, screenshots.
- ``fuzzing``: running schemathesis strategies.
"""
