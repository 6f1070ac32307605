"""Builders and fakes the tests share: import them as ``tests.kit.<module>``."""
