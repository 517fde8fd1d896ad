"""Lifecycle: what happens when actors fail, and where signals are routed.

General layout: ``supervision`` (restart intensity within a period, backoff,
escalation), ``alerts`` (``alert_router`` dispatch of routed signals).

Imports ``runtime.agent`` and the layers below it.
"""
