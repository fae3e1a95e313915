file(REMOVE_RECURSE
  "CMakeFiles/megamoe_objects.dir/src/core/error.c.o"
  "CMakeFiles/megamoe_objects.dir/src/core/error.c.o.d"
  "CMakeFiles/megamoe_objects.dir/src/core/version.c.o"
  "CMakeFiles/megamoe_objects.dir/src/core/version.c.o.d"
  "CMakeFiles/megamoe_objects.dir/src/format/dtype.c.o"
  "CMakeFiles/megamoe_objects.dir/src/format/dtype.c.o.d"
  "CMakeFiles/megamoe_objects.dir/src/format/format_table.c.o"
  "CMakeFiles/megamoe_objects.dir/src/format/format_table.c.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/megamoe_objects.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
