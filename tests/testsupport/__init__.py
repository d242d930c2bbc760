"""Helpers shared by the test suite (real servers on loopback, backend URLs)."""
