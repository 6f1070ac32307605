"""The command-line verbs, one module each (a dash in the verb is an underscore in the module's
name): ``HELP``, ``configure(parser)`` and ``run(args) -> int``.

Modules import heavy dependencies (aiohttp, the kubernetes client) inside ``run``, so that
``placement-webhook lint`` does not pay for the server.
"""

# In the order ``--help`` lists them.
NAMES = ("serve", "mutate", "explain", "audit", "lint", "schema", "test", "certs", "label-nodes", "extender", "spot-controller",
         "rebalance")
