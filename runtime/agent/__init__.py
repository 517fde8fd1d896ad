"""The agent loop's core: a conversation as a plain step function.

General layout, one class built in layers from the bottom: ``state`` (``LoopState``: the
fold, the turn being run, event construction, budgets), ``calls`` (tool-call bookkeeping),
``rounds`` (model rounds), ``inbound`` (the requests a conversation serves), ``core``
(``ConversationCore``: what comes next, waiters, recovery); ``effects`` (what it asks its
actor shell to do); ``window`` (the messages a model request carries); ``snapshot`` (the
state as bytes).

Imports ``runtime.llm`` and the layers below it; never an actor.
"""
