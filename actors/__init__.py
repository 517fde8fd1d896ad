"""Roost's Thespian actors: thin shells routing messages to the runtime's plain code."""
