file(REMOVE_RECURSE
  "libmegamoe.pdb"
  "libmegamoe.so"
  "libmegamoe.so.0"
  "libmegamoe.so.0.1.0"
)

# Per-language clean rules from dependency scanning.
foreach(lang C)
  include(CMakeFiles/megamoe_shared.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
