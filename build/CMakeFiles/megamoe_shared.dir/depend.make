# Empty dependencies file for megamoe_shared.
# This may be replaced when dependencies are built.
