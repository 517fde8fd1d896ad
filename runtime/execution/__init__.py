"""Execution: one tool call from admission to its result.

General layout: ``runner`` (the ToolRunner's core: schema, env, policy, quotas, run with a
timeout), ``results`` (caps, the sensitivity scan, redaction, the block the model reads).

Imports ``runtime.policy`` and the layers below it.
"""
