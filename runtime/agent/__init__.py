"""The agent loop's core: a conversation as a plain step function.

General layout: ``core`` (``ConversationCore``: events in, effects out), ``effects`` (what
it asks its actor shell to do), ``state`` (the turn being run).

Imports ``runtime.llm`` and the layers below it; never an actor.
"""
