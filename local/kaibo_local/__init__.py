"""Kaibo's local stack: an AWS emulator (moto, patched to behave like DynamoDB) and its helpers."""
