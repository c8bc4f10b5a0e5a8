/* A minimal test harness: CHECK records a failure and goes on; the runner
 * prints one line per failure and a closing "N passed, N failed" line. */
#ifndef FPM_TEST_H
#define FPM_TEST_H

#include <stdio.h>

extern int fpm_test_failures_in_case;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__,  \
                    #cond);                                                   \
            fpm_test_failures_in_case++;                                      \
        }                                                                     \
    } while (0)

typedef void (*fpm_test_fn)(void);
typedef struct {
    const char *name;
    fpm_test_fn fn;
} fpm_test_case;

#endif
