"""The results store and what the book says from it: ``results/<gpu>/<benchmark>.json``.

``store`` reads and writes results with their provenance; ``labels`` turns the recorded doctor runs into
the book's "ran on ..." lines. The common names are here too: ``results.load``, ``results.records``, ...
"""
from .labels import label, recorded
from .store import RESULTS, column, environment, load, records, save, validate

__all__ = ["RESULTS", "column", "environment", "label", "load", "recorded", "records", "save", "validate"]
