"""Licensing: issuing license keys, activate/validate/deactivate, domain rules, lease signing."""
