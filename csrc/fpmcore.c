#include "fpmcore.h"

#ifndef FPM_VERSION
#error "FPM_VERSION must be defined by the build (the Python package version)"
#endif

fpm_status fpm_version(const char **out) {
    if (out == NULL) return FPM_EINVAL;
    *out = FPM_VERSION;
    return FPM_OK;
}
