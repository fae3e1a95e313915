/* tools/main.c: entry point of the `megamoe` command; dispatches to the sub-commands. */
#include <stdio.h>
#include <string.h>

#include "megamoe/version.h"

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "version") == 0) {
        printf("megamoe %s\n", mm_version());
        return 0;
    }
    fprintf(stderr, "usage: megamoe <command> [options]\n");
    return 2;
}
