"""Secrets: what the journal, the logs and tool results never hold in the clear.

``redaction`` walks values; ``clean_check`` tells from a document's JSON text that the walk
would change nothing; ``patterns`` is the rule table it runs on every string (each a
``rule``; ``key_names`` and ``named_values`` for the values under a sensitive name);
``masking`` / ``sources`` / ``sensitive_files`` / ``git_credentials`` find the exact values
Roost knows.
"""
