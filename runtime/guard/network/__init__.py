"""Network egress: which targets a tool may reach, and why not.

``egress`` (the judgement; ``addresses``: the special addresses and names it refuses),
``targets`` / ``commands`` (finding targets in arguments and command text), ``pinning`` (an
HTTP client whose every connection passes the judgement).
"""
