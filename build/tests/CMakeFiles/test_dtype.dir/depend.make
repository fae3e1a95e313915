# Empty dependencies file for test_dtype.
# This may be replaced when dependencies are built.
