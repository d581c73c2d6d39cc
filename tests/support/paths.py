"""Paths of the checkout the tests belong to."""
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[2]
TESTS = CHECKOUT / "tests"
