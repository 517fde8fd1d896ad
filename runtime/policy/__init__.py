"""Policy: the runtime options a project starts with, and the decision every call passes.

General layout: ``options`` (validation, normalization, defaults: SPEC section 5),
``decisions`` (allow / deny / ask for one call, with the signals that explain it).

Imports the layers below it: ``runtime.tools``, ``runtime.journal``, ``runtime.guard``,
``runtime.wire``.
"""
