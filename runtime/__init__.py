"""Roost's runtime: journal, policy, tools, sandbox, redaction, options, daemon, client, CLI."""
