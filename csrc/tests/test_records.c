/* The records as JSON lines (fpm_records.h): floats in orjson's form, one step and request record byte for byte,
 * whole records only when the room runs out, and the refusals. */
#include <math.h>
#include <string.h>

#include "../fpmcore.h"
#include "fpm_test.h"

static int double_is(double v, const char *want) {
    char buf[32];
    int64_t n = 0;
    if (fpm_format_double(v, buf, &n) != FPM_OK) return 0;
    return n == (int64_t)strlen(want) && memcmp(buf, want, (size_t)n) == 0;
}

static void test_doubles_as_orjson_writes_them(void) {
    CHECK(double_is(0.0, "0.0"));
    CHECK(double_is(-0.0, "-0.0"));
    CHECK(double_is(1.0, "1.0"));
    CHECK(double_is(0.1, "0.1"));
    CHECK(double_is(1e-5, "0.00001"));
    CHECK(double_is(1e-7, "1e-7"));
    CHECK(double_is(1.5e-7, "1.5e-7"));
    CHECK(double_is(1e15, "1000000000000000.0"));
    CHECK(double_is(1e16, "1e+16"));
    CHECK(double_is(1.2345678901234568e+17, "1.2345678901234568e+17"));
    CHECK(double_is(1.0 / 3.0, "0.3333333333333333"));
    CHECK(double_is(5e-324, "5e-324"));
    CHECK(double_is(1.7976931348623157e308, "1.7976931348623157e+308"));
    CHECK(double_is(NAN, "null"));
    CHECK(double_is(-INFINITY, "null"));
    CHECK(fpm_format_double(1.0, NULL, NULL) == FPM_EINVAL);
}

static const char IDS[] = "AB\\\"";
static const int64_t IDS_OFF[] = {0, 1, 4};
static const fpm_text_list ID_LIST = {IDS, IDS_OFF, 2, 3};

static void one_step(fpm_step_rec *s, fpm_sched_rec *sc, fpm_event_rec *ev, int64_t *held, fpm_replay_output *out) {
    memset(out, 0, sizeof *out);
    memset(s, 0, sizeof *s);
    s->step = 7;
    s->t_start = 1.0;
    s->t_end = 1.25;
    s->duration_s = 0.25;
    s->extrapolated = 1;
    s->sched_len = 2;
    s->event_len = 2;
    s->held_len = 1;
    s->running = 1;
    s->used_blocks_end = 3;
    sc[0] = (fpm_sched_rec){0, 8, 0};
    sc[1] = (fpm_sched_rec){1, 1, 4};
    ev[0] = (fpm_event_rec){FPM_EV_FINISHED, 1};
    ev[1] = (fpm_event_rec){FPM_EV_ADMITTED, 0};
    held[0] = 0;
    held[1] = 2;
    held[2] = 5;
    out->steps = s;
    out->nsteps = 1;
    out->sched = sc;
    out->nsched = 2;
    out->events = ev;
    out->nevents = 2;
    out->held = held;
    out->nheld = 3;
}

static const char STEP_LINE[] =
    "{\"step\":7,\"t_start\":1.0,\"t_end\":1.25,\"duration_s\":0.25,\"extrapolated\":true,"
    "\"scheduled\":[[\"A\",8,0],[\"B\\\"\",1,4]],\"num_prefill_requests\":0,\"sum_prefill_tokens\":0,"
    "\"sum_prefill_kv_tokens\":0,\"num_decode_requests\":0,\"sum_decode_kv_tokens\":0,\"admitted\":[\"A\"],"
    "\"preempted\":[],\"finished\":[\"B\\\"\"],\"rejected\":[],\"running\":1,\"waiting\":0,"
    "\"used_bytes_scheduled\":0,\"used_bytes_end\":0,\"used_blocks_scheduled\":0,\"used_blocks_end\":3,"
    "\"free_blocks\":7,\"held_blocks_end\":{\"A\":[2,5]}}\n";

static void test_a_step_record(void) {
    fpm_step_rec s;
    fpm_sched_rec sc[2];
    fpm_event_rec ev[2];
    int64_t held[3];
    fpm_replay_output out;
    one_step(&s, sc, ev, held, &out);
    fpm_step_shape shape = {2, 1, 10};
    static char buf[4096];
    int64_t len = -1, next = -1, need = -1;
    CHECK(fpm_format_steps(&out, 0, &shape, &ID_LIST, buf, sizeof buf, &len, &next, &need) == FPM_OK);
    CHECK(next == 1 && len == (int64_t)strlen(STEP_LINE) && memcmp(buf, STEP_LINE, (size_t)len) == 0);
    /* too little room: nothing written, the room the step takes said */
    CHECK(fpm_format_steps(&out, 0, &shape, &ID_LIST, buf, 100, &len, &next, &need) == FPM_ENOSPC);
    CHECK(len == 0 && next == 0 && need > 100);
    /* a request outside the ids, a list outside its buffer */
    sc[1].req = 2;
    CHECK(fpm_format_steps(&out, 0, &shape, &ID_LIST, buf, sizeof buf, &len, &next, &need) == FPM_EINVAL);
    sc[1].req = 1;
    s.event_len = 3;
    CHECK(fpm_format_steps(&out, 0, &shape, &ID_LIST, buf, sizeof buf, &len, &next, &need) == FPM_EINVAL);
    s.event_len = 2;
    shape.ngroups = 0;
    CHECK(fpm_format_steps(&out, 0, &shape, &ID_LIST, buf, sizeof buf, &len, &next, &need) == FPM_EINVAL);
}

static void test_request_records(void) {
    const int64_t prompt[] = {10, 20}, output[] = {3, 1};
    const double arrival[] = {0.5, NAN};
    fpm_trace_fields tr = {&ID_LIST, prompt, output, arrival};
    fpm_request_rec done[2];
    memset(done, 0, sizeof done);
    done[0] = (fpm_request_rec){FPM_RST_FINISHED, 0, 0, 0, 0.0, 1.0, 2.0, 4.0, 3, 0, 0, 0};
    done[1] = (fpm_request_rec){FPM_RST_REJECTED, FPM_REJ_PROMPT, 20, 16, 2.0, NAN, NAN, NAN, 0, 0, 0, 1};
    const char reason[] = "\"too long\"";
    const int64_t reason_off[] = {0, 0, 10};
    fpm_text_list reasons = {reason, reason_off, 2, 10};
    static char buf[4096];
    double ttft[2], tpot[2], e2e[2];
    fpm_request_sums sums;
    memset(&sums, 0, sizeof sums);
    int64_t len = -1, need = -1;
    CHECK(fpm_format_requests(done, 2, &tr, &reasons, buf, sizeof buf, &len, &need, ttft, tpot, e2e, &sums) == FPM_OK);
    const char want[] =
        "{\"request_id\":\"A\",\"arrival_time\":0.5,\"prompt_len\":10,\"output_len\":3,\"status\":\"finished\","
        "\"reject_reason\":null,\"first_scheduled_time\":1.0,\"first_token_time\":2.0,\"finish_time\":4.0,"
        "\"output_tokens\":3,\"preemptions\":0,\"prefix_hit_tokens\":0,\"ttft_s\":1.5,\"tpot_s\":1.0,\"e2e_s\":3.5}\n"
        "{\"request_id\":\"B\\\"\",\"arrival_time\":2.0,\"prompt_len\":20,\"output_len\":1,\"status\":\"rejected\","
        "\"reject_reason\":\"too long\",\"first_scheduled_time\":null,\"first_token_time\":null,\"finish_time\":null,"
        "\"output_tokens\":0,\"preemptions\":0,\"prefix_hit_tokens\":0,\"ttft_s\":null,\"tpot_s\":null,\"e2e_s\":null}\n";
    CHECK(len == (int64_t)strlen(want) && memcmp(buf, want, (size_t)len) == 0);
    CHECK(sums.finished == 1 && sums.rejected == 1 && sums.output_tokens == 3 && sums.nttft == 1 && sums.ntpot == 1);
    CHECK(ttft[0] == 1.5 && tpot[0] == 1.0 && e2e[0] == 3.5);
    CHECK(fpm_format_requests(done, 2, &tr, &reasons, buf, 64, &len, &need, ttft, tpot, e2e, &sums) == FPM_ENOSPC);
    CHECK(len == 0 && need > 64);
    done[1].request = 5;
    CHECK(fpm_format_requests(done, 2, &tr, NULL, buf, sizeof buf, &len, &need, ttft, tpot, e2e, &sums) == FPM_EINVAL);
}

static void test_sorts_latencies(void) {
    double v[] = {3.5, 0.0, 1e-300, 2.0, 0.0, 1e300, 2.0};
    CHECK(fpm_sort_doubles(v, 7) == FPM_OK);
    for (int i = 1; i < 7; i++) CHECK(v[i - 1] <= v[i]);
    CHECK(v[0] == 0.0 && v[2] == 1e-300 && v[6] == 1e300);
    CHECK(fpm_sort_doubles(NULL, 0) == FPM_OK && fpm_sort_doubles(NULL, 1) == FPM_EINVAL);
    double nan[] = {1.0, NAN};
    CHECK(fpm_sort_doubles(nan, 2) == FPM_EINVAL);
}

const fpm_test_case FPM_RECORDS_CASES[] = {
    {"doubles_as_orjson_writes_them", test_doubles_as_orjson_writes_them},
    {"a_step_record", test_a_step_record},
    {"request_records", test_request_records},
    {"sorts_latencies", test_sorts_latencies},
};
const size_t FPM_RECORDS_NCASES = sizeof FPM_RECORDS_CASES / sizeof FPM_RECORDS_CASES[0];
