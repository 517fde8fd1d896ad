"""Secrets: what the journal, the logs and tool results never hold in the clear.

``redaction`` / ``patterns`` (shapes), ``masking`` / ``sources`` / ``git_credentials``
(the exact values Roost knows).
"""
