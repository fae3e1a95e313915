/* SPDX-License-Identifier: Apache-2.0 */
/* megamoe/status.h: status codes and the error record every public function fills on failure.
 *
 * Every public function returns an mm_status. Functions that can fail take a trailing `mm_error *err`
 * (which may be NULL); on failure the library writes a one-line message into it that names the
 * parameter, its value and the rule broken, e.g. "topk_ids[17][3] = 70 is outside [0, 64)".
 * The library never prints, aborts or exits. mm_error is caller-owned, so ranks running as threads
 * in one process each keep their own. */
#ifndef MEGAMOE_STATUS_H
#define MEGAMOE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mm_status {
    MM_OK = 0,
    MM_ERR_INVALID_ARGUMENT = 1, /* a parameter breaks a documented rule (shape, dtype, range, ...) */
    MM_ERR_INVALID_FILE = 2,     /* a file (case file, safetensors) is malformed or inconsistent */
    MM_ERR_OUT_OF_MEMORY = 3,
    MM_ERR_IO = 4,          /* the operating system refused a read or write */
    MM_ERR_UNSUPPORTED = 5, /* valid request that this build cannot serve (e.g. MPI absent) */
    MM_ERR_TIMEOUT = 6,     /* a peer rank did not arrive in time; the message names it */
    MM_ERR_PEER = 7,        /* another rank of the collective failed; the message is its message */
    MM_ERR_INTERNAL = 8     /* a bug in megamoe: please report it with the message */
} mm_status;

#define MM_ERROR_MESSAGE_MAX 512

typedef struct mm_error {
    mm_status status;
    char message[MM_ERROR_MESSAGE_MAX];
} mm_error;

/* Stable lower-case name of a status ("ok", "invalid_argument", ...). Never NULL. */
const char *mm_status_name(mm_status status);

/* Reset an error record to MM_OK with an empty message. Accepts NULL. */
void mm_error_clear(mm_error *err);

/* True for the statuses that mean "the caller's input is wrong" (CLI exit status 2). */
int mm_status_is_input_error(mm_status status);

#ifdef __cplusplus
}
#endif
#endif
