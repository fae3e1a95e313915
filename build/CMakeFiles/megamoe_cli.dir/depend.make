# Empty dependencies file for megamoe_cli.
# This may be replaced when dependencies are built.
