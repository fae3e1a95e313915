/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/version.h: library version, for programs that link megamoe and for case-file metadata. */
#ifndef MEGAMOE_VERSION_H
#define MEGAMOE_VERSION_H

#ifdef __cplusplus
extern "C" {
#endif

#define MEGAMOE_VERSION_MAJOR 0
#define MEGAMOE_VERSION_MINOR 1
#define MEGAMOE_VERSION_PATCH 0

/* "MAJOR.MINOR.PATCH" of the library actually linked. */
const char *mm_version(void);

#ifdef __cplusplus
}
#endif
#endif
