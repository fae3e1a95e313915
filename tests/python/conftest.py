# SPDX-License-Identifier: Apache-2.0
"""Fixtures of the Python tests (the independent format rules live in format_reference.py)."""
import numpy as np
import pytest


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
