file(REMOVE_RECURSE
  "libmegamoe.a"
  "libmegamoe.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/megamoe_static.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
