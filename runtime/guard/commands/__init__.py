"""Command controls decided before anything runs.

``controls`` (blocklist and environment), ``blocklist`` / ``blocklist_rules`` /
``shellwords`` / ``shellquotes`` (reading shell text).
"""
