# Empty dependencies file for megamoe_objects.
# This may be replaced when dependencies are built.
