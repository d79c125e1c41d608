"""Structuring: from an event's text to typed, time-bounded memories (docs/structuring.md)."""
