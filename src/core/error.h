/* SPDX-License-Identifier: Apache-2.0 */
/* core/error.h: private helpers to fill an mm_error with a formatted message.
 *
 * Usage, in the style of one exit path per function:
 *     if (k > e) return mm_fail(err, MM_ERR_INVALID_ARGUMENT, "topk %d exceeds moe_expert_num %d", k, e);
 * The message should name the parameter, its value and the rule. */
#ifndef MEGAMOE_CORE_ERROR_H
#define MEGAMOE_CORE_ERROR_H

#include <stdarg.h>

#include "megamoe/status.h"

#if defined(__GNUC__)
#define MM_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define MM_PRINTF(fmt_idx, arg_idx)
#endif

/* Writes status and message into err (if not NULL) and returns status. */
mm_status mm_fail(mm_error *err, mm_status status, const char *fmt, ...) MM_PRINTF(3, 4);
/* mm_fail with the arguments as a va_list: for wrappers with their own variadic signature (the CLI's
 * cli_fail, tools/common/cli_util.h, fills an mm_error through it). */
mm_status mm_failv(mm_error *err, mm_status status, const char *fmt, va_list ap) MM_PRINTF(3, 0);

/* Prepends "context: " to the message already in err (keeps its status). Returns err's status. */
mm_status mm_error_prefix(mm_error *err, const char *fmt, ...) MM_PRINTF(2, 3);

#endif
