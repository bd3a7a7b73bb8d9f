"""Licensing: license keys, activate/validate/deactivate for product runtimes, domain
rules and signed leases.

Where things live:

- ``records``: the dataclasses a call carries -- LicensingPolicy (settings), LicenseRequest
  (the five parsed items), AuditRecord, LicenseFacts/ActivationFacts/LicensingResult
  (what the view serialises); fingerprint_hash, key_hint.
- ``problems``: every error a licensing call answers (typed ApiErrors with their codes).
- ``counting``: the rate policies (license.ip, license.key, license.churn), admit_call
  (count before work) and record_failure (audit a failed call afterwards).
- ``steps``: shared steps -- license checks, nonces, seat counts, lease claims, the Plan
  of a call and sign_and_commit (sign with no lock held, commit under the lock).
- ``seats``: activate and deactivate (the ORM, a short transaction of their own).
- ``validation``: validate, the hot path (plain SQL, see cmsshop.hotsql).
- ``domains``: site URL -> canonical host (WHATWG URL parsing) -> production/staging/local.
- ``signing``: the LeaseSigner interface and its backends (local keys, remote signer).
- ``issuing``: creating license keys for paid order items.
- ``features``: feature flags (names, the one normalising rule) signed into leases.
- ``updates``: update checks -- the newest release a license may install.
- ``offline``: offline activation -- request codes and leases for air-gapped installs.
"""
