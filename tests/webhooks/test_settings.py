"""Outgoing webhook settings that cannot work stop start-up, with the setting's name."""

from __future__ import annotations

import pytest
from pyramid.exceptions import ConfigurationError

from cmsshop.config import configure


@pytest.mark.parametrize(
    "overrides, named",
    [
        (
            {"cmsshop.environment": "production", "cmsshop.webhooks.allow_private_addresses": True},
            "allow_private_addresses",
        ),
        ({"cmsshop.webhooks.nameservers": "dns.example"}, "nameservers"),
        ({"cmsshop.webhooks.timeout": "0"}, "timeout"),
        ({"cmsshop.webhooks.retry_for": "5"}, "retry_for"),
        ({"cmsshop.webhooks.keep_days": "0"}, "keep_days"),
        ({"cmsshop.webhooks.worker_threads": "0"}, "worker_threads"),
        ({"cmsshop.webhooks.worker_threads": "100"}, "worker_threads"),
    ],
)
def test_settings_that_cannot_work_stop_start_up(settings, overrides, named):
    with pytest.raises(ConfigurationError, match=named):
        configure({**settings, "cmsshop.password_hashing": "default", **overrides})
