"""Command controls decided before anything runs.

``controls`` (blocklist and environment), ``blocklist`` / ``blocklist_rules`` (the
destructive patterns), ``shellwords`` / ``shellquotes`` / ``substitutions`` (reading shell
text).
"""
