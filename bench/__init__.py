"""Benchmarks: scripts that print tables (not tests; never part of ``make test``)."""
