"""Benchmarks and calibration reports (not part of the app)."""
