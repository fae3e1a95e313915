
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/main/src/core/error.c" "CMakeFiles/megamoe_objects.dir/src/core/error.c.o" "gcc" "CMakeFiles/megamoe_objects.dir/src/core/error.c.o.d"
  "/work/main/src/core/version.c" "CMakeFiles/megamoe_objects.dir/src/core/version.c.o" "gcc" "CMakeFiles/megamoe_objects.dir/src/core/version.c.o.d"
  "/work/main/src/format/dtype.c" "CMakeFiles/megamoe_objects.dir/src/format/dtype.c.o" "gcc" "CMakeFiles/megamoe_objects.dir/src/format/dtype.c.o.d"
  "/work/main/src/format/format_table.c" "CMakeFiles/megamoe_objects.dir/src/format/format_table.c.o" "gcc" "CMakeFiles/megamoe_objects.dir/src/format/format_table.c.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
