"""Roost's own state: where it lives and how it is kept.

``roost_home`` (where it is, hidden from tools), ``statedir`` (its modes), ``pidfile`` (the
daemon's lock).
"""
