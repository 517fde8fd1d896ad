"""Shapes of untrusted input.

``schema`` (JSON Schema for arguments and options), ``keywords`` (what a schema from a
file may say), ``safe_json`` (bounded nesting, no repeated keys, JSON type names),
``untrusted_regex`` (RE2).
"""
