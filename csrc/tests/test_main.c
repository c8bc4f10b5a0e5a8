#include <string.h>

#include "../fpmcore.h"
#include "fpm_test.h"

int fpm_test_failures_in_case = 0;

static void test_version_is_the_package_version(void) {
    const char *v = NULL;
    CHECK(fpm_version(&v) == FPM_OK);
    CHECK(v != NULL && strcmp(v, FPM_VERSION) == 0);
}

static void test_version_rejects_null(void) { CHECK(fpm_version(NULL) == FPM_EINVAL); }

static const fpm_test_case CASES[] = {
    {"version_is_the_package_version", test_version_is_the_package_version},
    {"version_rejects_null", test_version_rejects_null},
};

extern const fpm_test_case FPM_REPLAY_CASES[];
extern const size_t FPM_REPLAY_NCASES;
extern const fpm_test_case FPM_BOUNDARY_CASES[];
extern const size_t FPM_BOUNDARY_NCASES;
extern const fpm_test_case FPM_TRACE_CASES[];
extern const size_t FPM_TRACE_NCASES;
extern const fpm_test_case FPM_RECORDS_CASES[];
extern const size_t FPM_RECORDS_NCASES;

static void run_cases(const fpm_test_case *cases, size_t n, int *passed, int *failed) {
    for (size_t i = 0; i < n; i++) {
        fpm_test_failures_in_case = 0;
        cases[i].fn();
        if (fpm_test_failures_in_case == 0) {
            (*passed)++;
        } else {
            (*failed)++;
            fprintf(stderr, "FAILED %s\n", cases[i].name);
        }
    }
}

int main(void) {
    int passed = 0, failed = 0;
    run_cases(CASES, sizeof CASES / sizeof CASES[0], &passed, &failed);
    run_cases(FPM_REPLAY_CASES, FPM_REPLAY_NCASES, &passed, &failed);
    run_cases(FPM_BOUNDARY_CASES, FPM_BOUNDARY_NCASES, &passed, &failed);
    run_cases(FPM_TRACE_CASES, FPM_TRACE_NCASES, &passed, &failed);
    run_cases(FPM_RECORDS_CASES, FPM_RECORDS_NCASES, &passed, &failed);
    printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
