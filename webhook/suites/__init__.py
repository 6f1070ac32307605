"""Policy test suites (``*.suite.yaml``), shaped like ``gator verify``: model, load, run, checks, report, update."""
