/* fpmcore native library: grouped KV pool, scheduler and latency model.
 *
 * C11, no Python.h.  Every function returns an fpm_status (FPM_OK on
 * success); results come back through out-parameters.  Bound to Python
 * through cffi in API out-of-line mode (src/fpmcore/_native_build.py).
 */
#ifndef FPMCORE_H
#define FPMCORE_H

#include <stddef.h>
#include <stdint.h>

typedef int32_t fpm_status;

#define FPM_OK 0
#define FPM_EINVAL 1    /* an argument is out of its documented range */
#define FPM_ENOMEM 2    /* an allocation failed */
#define FPM_ERANGE 3    /* an arithmetic result exceeds its bound */

/* The library version, equal to the Python package version it was built
 * for (fpmcore.__version__); the binding refuses a stale build. */
fpm_status fpm_version(const char **out);

#include "fpm_replay.h"

#endif /* FPMCORE_H */
