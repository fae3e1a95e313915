# SPDX-License-Identifier: Apache-2.0
"""Runs pytest on a folder of tests/python with the build tree's package importable (CTest calls this).

usage: run_pytest.py BUILD_PYTHON_DIR TEST_DIR [pytest args...]
Exits 77 (CTest's skip code) with one line when numpy or pytest is missing."""
import os
import sys

build_dir, test_dir, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
missing = []
for module in ("numpy", "pytest"):
    try:
        __import__(module)
    except ImportError:
        missing.append(module)
if missing:
    print(f"python tests skipped: {', '.join(missing)} missing for {sys.executable} "
          "(apt-get install python3-numpy python3-pytest)")
    sys.exit(77)
sys.path.insert(0, build_dir)
os.environ["PYTHONPATH"] = build_dir + os.pathsep + os.environ.get("PYTHONPATH", "")
import pytest  # noqa: E402

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", test_dir, test_dir] + extra))
