"""Measurement loops shared by bench, sweep and validate (engines do the launching)."""
