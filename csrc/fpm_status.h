/* Status codes of the fpmcore C library: every function returns one.
 *
 * This is the only place that defines them; fpmcore.h and fpm_replay.h
 * include it, and the Python binding reads them through cffi.
 */
#ifndef FPM_STATUS_H
#define FPM_STATUS_H

#include <stdint.h>

typedef int32_t fpm_status;

/* Marks a function of the public API: the only symbols a shared build of the
 * library exports.  The library is compiled with -fvisibility=hidden, so the
 * functions its files share (fpm_internal.h) stay inside it. */
#if defined(__GNUC__)
#define FPM_API __attribute__((visibility("default")))
#else
#define FPM_API
#endif

#define FPM_OK 0     /* success */
#define FPM_EINVAL 1 /* an argument is out of its documented range */
#define FPM_ENOMEM 2 /* an allocation failed, or its size does not fit size_t */
#define FPM_ERANGE 3 /* an arithmetic result exceeds its bound */
#define FPM_ENOSPC 4 /* an output buffer is too small: the counts say how large; call again */

#endif /* FPM_STATUS_H */
