file(REMOVE_RECURSE
  "CMakeFiles/megamoe_testlib.dir/testlib.c.o"
  "CMakeFiles/megamoe_testlib.dir/testlib.c.o.d"
  "libmegamoe_testlib.a"
  "libmegamoe_testlib.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/megamoe_testlib.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
