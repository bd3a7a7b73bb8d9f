"""Fakes of external services (provider APIs), served on loopback for tests."""
