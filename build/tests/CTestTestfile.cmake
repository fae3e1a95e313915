# CMake generated Testfile for 
# Source directory: /work/main/tests
# Build directory: /work/main/build/tests
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
add_test(test_dtype "/work/main/build/tests/test_dtype")
set_tests_properties(test_dtype PROPERTIES  TIMEOUT "300" _BACKTRACE_TRIPLES "/work/main/tests/CMakeLists.txt;21;add_test;/work/main/tests/CMakeLists.txt;0;")
