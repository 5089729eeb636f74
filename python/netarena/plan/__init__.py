"""What a run will measure, planned before anything starts: a suite's plan (suite.py) and the plan of a server
netarena did not start (external.py, `run --url`), beside it. The plan imports neither the backends nor the
runner, which measure it (tests/test_layering.py)."""
