"""Constants of reference.netguard that other parts of the reference rely on by value.

Its public names are pinned with every other surface in ``tests/test_public_surfaces.py``.
"""

from __future__ import annotations

import reference.netguard as netguard


def test_the_pinned_address_extension_name_is_the_documented_one() -> None:
    """Other parts of the reference pass this literal; it must not drift."""
    assert netguard.PINNED_ADDRESS_EXTENSION == "genapi.pinned_address"
    assert netguard.MAX_URL_LENGTH == 2048
