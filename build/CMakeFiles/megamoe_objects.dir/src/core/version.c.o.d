CMakeFiles/megamoe_objects.dir/src/core/version.c.o: \
 /work/main/src/core/version.c /usr/include/stdc-predef.h \
 /work/main/include/megamoe/version.h
