"""Response bodies of the scenario catalog (docs/scenarios.md)."""

HELLO = b"Hello, World!"
BYTES_SIZES = (40, 10000, 524288)
# Built once at start: the catalog measures serving a body, not building it.
BYTES_BODIES = {n: b"*" * n for n in BYTES_SIZES}
