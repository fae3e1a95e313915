/* SPDX-License-Identifier: Apache-2.0 */
/* core/version.c: the version string compiled into the library. */
#include "megamoe/version.h"

const char *mm_version(void) {
    return MEGAMOE_VERSION_STRING;
}
