# Empty compiler generated dependencies file for megamoe_testlib.
# This may be replaced when dependencies are built.
