"""Execution: one tool call from admission to its result.

General layout: ``pipeline`` (``ToolPipeline``: decide → admit → execute → release, the one
path of every caller: model calls, ``run_tool``, workflow steps), ``runner`` (quotas, running
with a timeout, workflows), ``results`` (caps, the sensitivity scan, redaction, the block
the model reads), ``workers`` (the threads tool functions run on), ``direct`` (a client's
``run_tool`` call: its call, its record).

Imports ``runtime.policy`` and the layers below it.
"""
