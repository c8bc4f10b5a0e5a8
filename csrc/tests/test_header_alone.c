/* fpm_replay.h compiles on its own: it is the first include of this file and
 * nothing else is included before it (the Makefile also compiles every public
 * header alone with -fsyntax-only). */
#include "../fpm_replay.h"

/* Uses the header's types and its status codes, which come from fpm_status.h. */
fpm_status fpm_test_header_alone(const fpm_replay_config *cfg);

fpm_status fpm_test_header_alone(const fpm_replay_config *cfg) {
    return cfg && cfg->ngroups > 0 ? FPM_OK : FPM_EINVAL;
}
