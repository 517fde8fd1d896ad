"""Shapes of untrusted input.

``schema`` (JSON Schema for arguments and options), ``safe_json`` (bounded nesting, no
repeated keys), ``untrusted_regex`` (RE2).
"""
