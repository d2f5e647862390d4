"""Measuring dreamer: the LoCoMo evaluation harness (`dreamer eval locomo`)."""
