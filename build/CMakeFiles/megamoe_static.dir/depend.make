# Empty dependencies file for megamoe_static.
# This may be replaced when dependencies are built.
