/* fpmcore native library: grouped KV pool, scheduler and latency model.
 *
 * C11, no Python.h.  Every function returns an fpm_status (FPM_OK on
 * success, the codes of fpm_status.h); results come back through
 * out-parameters.  Bound to Python through cffi in API out-of-line mode
 * (src/fpmcore/_native_build.py), which reads the declarations from these
 * headers.
 */
#ifndef FPMCORE_H
#define FPMCORE_H

#include <stddef.h>
#include <stdint.h>

#include "fpm_status.h"

/* The library version, equal to the Python package version it was built
 * for (fpmcore.__version__); the binding refuses a stale build. */
FPM_API fpm_status fpm_version(const char **out);

#include "fpm_replay.h"
#include "fpm_trace.h"
#include "fpm_records.h"

#endif /* FPMCORE_H */
