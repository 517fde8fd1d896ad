"""The ``roost`` argument parser, one module per command group.

General layout: ``tree`` (the builder every group adds its commands through, and the options
and argument types several groups share), then ``daemon`` (``daemon ...`` and ``logs``),
``projects`` (``project ...``), ``conversations`` (``conversation ...``, ``send``, ``event``,
``cancel``, ``resume``, ``approve``, ``reject``, ``run-tool``) and ``history``
(``projection``, ``timeline``, ``incident``, ``tail``, ``verify``, ``export otel``).
``runtime.cli.app`` builds the whole parser from them; like it, they load the client side only.
"""
