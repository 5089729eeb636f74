"""netarena: benchmark network servers honestly."""

__version__ = "0.1.0"
