"""Recall's pure pipeline: scoring, selection, packing, abstain (no I/O)."""
