import pytest

from multicta_kernels.hardware import BLACKWELL, HOPPER, tier


def pytest_collection_modifyitems(config, items):
    here = tier()
    for item in items:
        for mark, needed in (("hopper", HOPPER), ("blackwell", BLACKWELL)):
            if mark in item.keywords and not here.at_least(needed):
                item.add_marker(pytest.mark.skip(reason=f"needs {needed}; this machine: {here}"))
