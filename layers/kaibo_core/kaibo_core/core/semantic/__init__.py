"""Recall by meaning, the pure part: vectors on postings, cells of the inverted file, fusion."""
