"""Paths: rules about path text and resolution beneath a root.

``rules`` (pure name rules: validation, sensitive and protected names), ``arguments``
(the paths in a tool call's arguments), ``walk`` /
``openat2`` (resolution beneath a root), ``safe_read`` (bounded reads of files a tool
process can write: no link followed, no FIFO or device).
"""
