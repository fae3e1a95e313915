file(REMOVE_RECURSE
  "CMakeFiles/megamoe_cli.dir/tools/main.c.o"
  "CMakeFiles/megamoe_cli.dir/tools/main.c.o.d"
  "megamoe"
  "megamoe.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/megamoe_cli.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
