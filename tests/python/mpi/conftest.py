# SPDX-License-Identifier: Apache-2.0
"""The MPI tests (run under mpirun, one pytest per process) share the helpers of tests/python."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
