"""The agent loop's core: a conversation as a plain step function.

General layout: ``state`` (``LoopState``: the fold, the turn being run, event
construction, budgets); three groups of steps over it, side by side (none extends
another): ``calls`` (tool-call bookkeeping), ``rounds`` (model rounds), ``inbound`` (the
requests a conversation serves); ``core`` (``ConversationCore`` joins them: what comes
next, waiters, recovery); ``effects`` (what it asks its actor shell to do); ``window``
(the messages a model request carries); ``snapshot`` (the state as bytes).

Imports ``runtime.llm`` and the layers below it; never an actor.
"""
