"""Network egress: which targets a tool may reach, and why not.

``egress`` (the judgement), ``targets`` / ``commands`` (finding targets in arguments and
command text), ``pinning`` (an HTTP client whose every connection passes the judgement).
"""
