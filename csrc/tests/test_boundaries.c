/* The C boundary: every range the header promises is checked (FPM_EINVAL),
 * no signed overflow at INT64_MAX inputs (UBSan), allocation sizes checked
 * before they are multiplied (FPM_ENOMEM, never a crash), no hang at huge
 * arrival steps; and the chunked API (open / advance / close). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../fpm_internal.h"
#include "../fpmcore.h"
#include "fpm_test.h"

fpm_status fpm_test_header_alone(const fpm_replay_config *cfg);

static fpm_group grp(int32_t kind, int64_t b, int64_t page, int64_t w, int64_t bpr) {
    fpm_group g = {kind, b, page, w, bpr, 0, 0};
    return g;
}

static fpm_replay_config base(const fpm_group *g, int32_t ng, int64_t cap) {
    fpm_replay_config c;
    memset(&c, 0, sizeof c);
    c.groups = g;
    c.ngroups = ng;
    c.capacity_bytes = cap;
    c.max_num_batched_tokens = 8;
    c.max_num_seqs = 2;
    c.max_model_len = 64;
    c.enable_chunked_prefill = 1;
    c.use_fixed_step = 1;
    c.fixed_step_seconds = 1.0;
    c.max_num_queued_reqs = -1;
    c.max_num_queued_tokens = -1;
    return c;
}

static fpm_replay_request req(int64_t p, int64_t o, int64_t step) {
    fpm_replay_request r = {p, o, step, 0.0, 0, 0, 0, 0};
    return r;
}

/* A sizing pass (no buffers): totals, counts and request outcomes. */
static fpm_status size_run(const fpm_replay_config *c, const fpm_replay_request *r, int64_t n, fpm_replay_output *o,
                           fpm_request_rec *recs) {
    memset(o, 0, sizeof *o);
    o->requests = recs;
    return fpm_replay_run(c, r, n, FPM_ARRIVE_STEP, o);
}

static void test_header_compiles_alone(void) {
    fpm_group g = grp(FPM_KIND_FULL, 4, 4, 0, 0);
    fpm_replay_config c = base(&g, 1, 64);
    CHECK(fpm_test_header_alone(&c) == FPM_OK);
    CHECK(fpm_test_header_alone(NULL) == FPM_EINVAL);
}

/* 01 P-14 / P-16 helpers at INT64_MAX: refused, no overflow (fpm_replay.c:11 before). */
static void test_sizing_helpers_at_int64_max(void) {
    fpm_group full = grp(FPM_KIND_FULL, 4, 4, 0, 0), win = grp(FPM_KIND_WINDOW, 4, 4, INT64_MAX, 0);
    int64_t f = 0, e = 0, n = 0;
    CHECK(fpm_block_range(&full, 0, INT64_MAX, &f, &e) == FPM_EINVAL);
    CHECK(fpm_block_range(&full, INT64_MAX, INT64_MAX, &f, &e) == FPM_EINVAL);
    CHECK(fpm_block_range(&win, 0, 8, &f, &e) == FPM_EINVAL);
    CHECK(fpm_peak_request_blocks(&full, INT64_MAX, 1, &n) == FPM_EINVAL);
    CHECK(fpm_peak_request_blocks(&win, 8, INT64_MAX, &n) == FPM_EINVAL);
    fpm_group big = grp(FPM_KIND_FULL, INT64_MAX, 4, 0, 0);
    CHECK(fpm_block_range(&big, 0, FPM_MAX_TOKENS, &f, &e) == FPM_OK && f == 0 && e == 1);
    CHECK(fpm_block_range(&full, 0, FPM_MAX_TOKENS, &f, &e) == FPM_OK && e == FPM_MAX_TOKENS / 4);
    fpm_group wmax = grp(FPM_KIND_WINDOW, 4, 4, FPM_MAX_TOKENS, 0);
    CHECK(fpm_peak_request_blocks(&wmax, FPM_MAX_TOKENS, FPM_MAX_TOKENS, &n) == FPM_OK && n == FPM_MAX_TOKENS / 4);
    fpm_align_query q;
    memset(&q, 0, sizeof q);
    q.block_size = q.hash_block_size = 4;
    q.num_new_tokens = INT64_MAX;
    q.prompt_len = q.num_tokens = INT64_MAX;
    int64_t k = 0;
    CHECK(fpm_align_stop(&q, &k) == FPM_EINVAL);
    q.num_new_tokens = q.prompt_len = q.num_tokens = FPM_MAX_TOKENS;
    q.junction = INT64_MAX;
    CHECK(fpm_align_stop(&q, &k) == FPM_EINVAL);
}

/* Every config field at INT64_MAX is refused before any arithmetic
 * (fpm_replay.c:1133 and :1439 before: blocks_per_request and the watermark). */
static void test_config_fields_at_int64_max(void) {
    fpm_group g[2] = {grp(FPM_KIND_FULL, 4, 4, 0, 0), grp(FPM_KIND_RING, 1, 4, 0, 1)};
    fpm_replay_request r[1] = {req(8, 2, 0)};
    fpm_request_rec recs[1];
    fpm_replay_output o;
    fpm_replay_config c = base(g, 2, 64);
    CHECK(size_run(&c, r, 1, &o, recs) == FPM_ENOSPC && o.error_code == 0);
#define REFUSED(field, value)                                        \
    do {                                                             \
        fpm_replay_config x = base(g, 2, 64);                        \
        x.field = value;                                             \
        CHECK(size_run(&x, r, 1, &o, recs) == FPM_EINVAL);           \
    } while (0)
    REFUSED(capacity_bytes, INT64_MAX);
    REFUSED(max_num_batched_tokens, INT64_MAX);
    REFUSED(max_num_seqs, INT64_MAX);
    REFUSED(max_model_len, INT64_MAX);
    REFUSED(watermark_blocks, INT64_MAX);
    REFUSED(max_num_scheduled_tokens, INT64_MAX);
    REFUSED(max_num_active_seqs, INT64_MAX);
    REFUSED(long_prefill_token_threshold, INT64_MAX);
    REFUSED(prefill_schedule_interval, INT64_MAX);
    REFUSED(max_num_queued_reqs, INT64_MAX);
    REFUSED(max_num_queued_tokens, INT64_MAX);
    REFUSED(max_steps, INT64_MAX);
    REFUSED(policy, 7);
#undef REFUSED
    fpm_group bad[2] = {grp(FPM_KIND_FULL, 4, 4, 0, 0), grp(FPM_KIND_RING, 1, 4, 0, INT64_MAX)};
    c = base(bad, 2, 64);
    CHECK(size_run(&c, r, 1, &o, recs) == FPM_EINVAL);
    bad[1] = grp(FPM_KIND_RING, 1, INT64_MAX, 0, 1);
    CHECK(size_run(&c, r, 1, &o, recs) == FPM_EINVAL);
    bad[0] = grp(FPM_KIND_FULL, INT64_MAX, 4, 0, 0);
    bad[1] = grp(FPM_KIND_RING, 1, 4, 0, 1);
    CHECK(size_run(&c, r, 1, &o, recs) == FPM_EINVAL);
    /* the fixed state bytes of a request, summed over groups, stay <= 2**53 */
    fpm_group states[3] = {grp(FPM_KIND_FULL, 1, 1LL << 40, 0, 0), grp(FPM_KIND_RING, 1, 1LL << 40, 0, 4096),
                           grp(FPM_KIND_RING, 1, 1LL << 40, 0, 4097)};
    c = base(states, 3, 1LL << 52);
    c.max_model_len = 8;
    CHECK(size_run(&c, r, 1, &o, recs) == FPM_EINVAL);
    states[2] = grp(FPM_KIND_RING, 1, 1LL << 40, 0, 1);
    CHECK(size_run(&c, r, 1, &o, recs) == FPM_ENOSPC);
    /* requests */
    c = base(g, 2, 64);
    fpm_replay_request bad_r[1] = {req(INT64_MAX, 2, 0)};
    CHECK(size_run(&c, bad_r, 1, &o, recs) == FPM_EINVAL);
    bad_r[0] = req(8, INT64_MAX, 0);
    CHECK(size_run(&c, bad_r, 1, &o, recs) == FPM_EINVAL);
    bad_r[0] = req(8, 2, INT64_MAX);
    CHECK(size_run(&c, bad_r, 1, &o, recs) == FPM_EINVAL);
    bad_r[0] = req(8, 2, FPM_MAX_ARRIVAL_STEP + 1);
    CHECK(size_run(&c, bad_r, 1, &o, recs) == FPM_EINVAL);
    bad_r[0] = req(8, 2, 0);
    bad_r[0].priority = INT64_MAX;
    CHECK(size_run(&c, bad_r, 1, &o, recs) == FPM_EINVAL);
    bad_r[0].priority = INT64_MIN;
    CHECK(size_run(&c, bad_r, 1, &o, recs) == FPM_EINVAL);
    bad_r[0].priority = 0;
    bad_r[0].arrival_time = NAN;
    CHECK(size_run(&c, bad_r, 1, &o, recs) == FPM_EINVAL);
}

/* Arrival steps of 2**31 and up: no hang (the summary pass jumps over the idle
 * period in O(1)); with step records the step limit stops the replay. */
static void test_huge_arrival_steps_do_not_hang(void) {
    fpm_group g = grp(FPM_KIND_FULL, 4, 4, 0, 0);
    fpm_replay_config c = base(&g, 1, 64);
    fpm_request_rec recs[2];
    fpm_replay_output o;
    static const int64_t at[3] = {(int64_t)1 << 31, (int64_t)1 << 35, (int64_t)1 << 39};
    for (int i = 0; i < 3; i++) {
        fpm_replay_request r[2] = {req(8, 3, 0), req(8, 2, at[i])};
        CHECK(size_run(&c, r, 2, &o, recs) == FPM_ENOSPC);
        CHECK(o.error_code == 0 && o.nsteps == at[i] + 2 && o.steps_total == at[i] + 2);
        CHECK(recs[1].status == FPM_RST_FINISHED && recs[1].arrival_time == (double)at[i]);
        CHECK(o.totals.last_t_end == (double)(at[i] + 2) && o.totals.peak_running == 1);
        CHECK(o.nsched == 5 && o.nheld == 3 * 2);
    }
    /* the step limit stops a replay with records at the same step as one without */
    fpm_replay_request r[2] = {req(8, 3, 0), req(8, 2, (int64_t)1 << 31)};
    c.max_steps = 100;
    CHECK(size_run(&c, r, 2, &o, recs) == FPM_ENOSPC);
    CHECK(o.error_code == FPM_RERR_STEP_LIMIT && o.err_i[0] == 100 && o.err_i[1] == 100 && o.nsteps == 100);
    fpm_step_rec *steps = calloc(128, sizeof *steps);
    fpm_sched_rec sched[16];
    fpm_event_rec ev[16];
    int64_t held[64];
    fpm_replay_output full;
    memset(&full, 0, sizeof full);
    full.steps = steps;
    full.steps_cap = 128;
    full.sched = sched;
    full.sched_cap = 16;
    full.events = ev;
    full.events_cap = 16;
    full.held = held;
    full.held_cap = 64;
    full.requests = recs;
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &full) == FPM_OK);
    CHECK(full.error_code == FPM_RERR_STEP_LIMIT && full.nsteps == 100 && memcmp(&full.totals, &o.totals, sizeof o.totals) == 0);
    free(steps);
}

/* Allocation sizes are checked before they are multiplied: a prefix-caching
 * table of 2**40 columns is refused with FPM_ENOMEM, not a crash. */
static void test_allocation_overflow_is_enomem(void) {
    fpm_group g = grp(FPM_KIND_FULL, 1, 1, 0, 0);
    fpm_replay_config c = base(&g, 1, 1 << 20);
    c.max_model_len = FPM_MAX_TOKENS;
    c.max_num_batched_tokens = 8;
    c.prefix_caching = 1;
    c.hash_block_size = 1;
    fpm_replay_request r[1] = {req(FPM_MAX_TOKENS - 1, 1, 0)};
    fpm_request_rec recs[1];
    fpm_replay_output o;
    CHECK(size_run(&c, r, 1, &o, recs) == FPM_ENOMEM);
    fpm_replay *rp = NULL;
    CHECK(fpm_replay_open(&c, r, 1, FPM_ARRIVE_STEP, &rp) == FPM_ENOMEM && rp == NULL);
}

/* A prefix-caching pool of 2**30 blocks costs memory only for the blocks used. */
static void test_large_prefix_pool_is_lazy(void) {
    fpm_group g = grp(FPM_KIND_FULL, 16, 1, 0, 0);
    fpm_replay_config c = base(&g, 1, (int64_t)1 << 30);
    c.prefix_caching = 1;
    c.hash_block_size = 16;
    c.max_num_batched_tokens = 64;
    c.max_model_len = 1024;
    fpm_replay_request r[2] = {req(100, 3, 0), req(100, 3, 0)};
    r[1].own_key = 1;
    fpm_request_rec recs[2];
    fpm_replay_output o;
    CHECK(size_run(&c, r, 2, &o, recs) == FPM_ENOSPC && o.error_code == 0);
    CHECK(recs[0].status == FPM_RST_FINISHED && recs[1].status == FPM_RST_FINISHED && o.totals.peak_used_blocks == 14);
}

/* open / advance / close: chunks of steps, a step kept when the buffers are full,
 * FPM_ENOSPC when not even one step fits; the same records as one run. */
static void test_chunked_advance(void) {
    fpm_group g[2] = {grp(FPM_KIND_FULL, 4, 4, 0, 0), grp(FPM_KIND_WINDOW, 4, 4, 4, 0)};
    fpm_replay_config c = base(g, 2, 24);
    fpm_replay_request r[2] = {req(4, 6, 0), req(4, 6, 0)};
    fpm_step_rec steps[32];
    fpm_sched_rec sched[64];
    fpm_event_rec ev[64];
    int64_t held[256];
    fpm_request_rec recs[2];
    fpm_replay_output whole;
    memset(&whole, 0, sizeof whole);
    whole.steps = steps;
    whole.steps_cap = 32;
    whole.sched = sched;
    whole.sched_cap = 64;
    whole.events = ev;
    whole.events_cap = 64;
    whole.held = held;
    whole.held_cap = 256;
    whole.requests = recs;
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &whole) == FPM_OK && whole.nsteps == 11);

    fpm_replay *rp = NULL;
    CHECK(fpm_replay_open(&c, r, 2, FPM_ARRIVE_STEP, &rp) == FPM_OK && rp != NULL);
    fpm_step_rec cs[3];
    fpm_sched_rec csch[8];
    fpm_event_rec cev[8];
    int64_t ch[24];
    fpm_request_rec done[2];
    fpm_replay_output o;
    memset(&o, 0, sizeof o);
    o.steps = cs;
    o.steps_cap = 3;
    o.sched = csch;
    o.sched_cap = 1; /* step 0 schedules two requests: it does not fit */
    o.events = cev;
    o.events_cap = 8;
    o.held = ch;
    o.held_cap = 24;
    o.done = done;
    o.done_cap = 2;
    CHECK(fpm_replay_advance(rp, 2, &o) == FPM_ENOSPC && o.nsteps == 1 && o.nsched == 2);
    o.sched_cap = 8;
    int64_t k = 0, ndone = 0, calls = 0;
    while (!o.ended && calls++ < 20) {
        CHECK(fpm_replay_advance(rp, 3, &o) == FPM_OK);
        CHECK(o.nsteps <= 3);
        for (int64_t i = 0; i < o.nsteps; i++, k++) {
            CHECK(cs[i].step == k && cs[i].used_bytes_scheduled == steps[k].used_bytes_scheduled);
            CHECK(cs[i].sched_len == steps[k].sched_len && cs[i].event_len == steps[k].event_len);
            for (int64_t s = 0; s < cs[i].sched_len; s++)
                CHECK(memcmp(&csch[cs[i].sched_off + s], &sched[steps[k].sched_off + s], sizeof(fpm_sched_rec)) == 0);
        }
        for (int64_t i = 0; i < o.ndone; i++, ndone++)
            CHECK(memcmp(&done[i], &recs[done[i].request], sizeof(fpm_request_rec)) == 0);
    }
    CHECK(o.ended && k == 11 && ndone == 2 && o.steps_total == 11 && o.completed_total == 2);
    CHECK(memcmp(&o.totals, &whole.totals, sizeof o.totals) == 0);
    CHECK(fpm_replay_advance(rp, 3, &o) == FPM_OK && o.nsteps == 0 && o.ended);
    CHECK(fpm_replay_advance(rp, 0, &o) == FPM_EINVAL && fpm_replay_advance(NULL, 1, &o) == FPM_EINVAL);
    fpm_replay_close(rp);
    fpm_replay_close(NULL);
}

/* vLLM scheduler settings on small hand-worked traces. */
static void test_scheduler_settings(void) {
    fpm_group g = grp(FPM_KIND_FULL, 4, 4, 0, 0);
    fpm_step_rec steps[64];
    fpm_sched_rec sched[256];
    fpm_event_rec ev[64];
    int64_t held[512];
    fpm_request_rec recs[3];
    fpm_replay_output o;
#define OUT()                   \
    memset(&o, 0, sizeof o);    \
    o.steps = steps;            \
    o.steps_cap = 64;           \
    o.sched = sched;            \
    o.sched_cap = 256;          \
    o.events = ev;              \
    o.events_cap = 64;          \
    o.held = held;              \
    o.held_cap = 512;           \
    o.requests = recs
    /* long_prefill_token_threshold 3 with two requests of 8 tokens and budget 8: 3 + 3, 3 + 3, 2 + 2 */
    fpm_replay_config c = base(&g, 1, 400);
    c.long_prefill_token_threshold = 3;
    fpm_replay_request r[3] = {req(8, 1, 0), req(8, 1, 0), req(8, 1, 0)};
    OUT();
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &o) == FPM_OK && o.nsteps == 3);
    CHECK(sched[0].tokens == 3 && sched[1].tokens == 3 && sched[4].tokens == 2 && sched[5].tokens == 2);
    /* alone, a request is not capped (vLLM: nobody to starve) */
    OUT();
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o) == FPM_OK && o.nsteps == 1 && sched[0].tokens == 8);
    /* max_num_active_seqs 1: one request runs at a time */
    c = base(&g, 1, 400);
    c.max_num_batched_tokens = 32;
    c.max_num_seqs = 3;
    c.max_num_active_seqs = 1;
    OUT();
    CHECK(fpm_replay_run(&c, r, 3, FPM_ARRIVE_STEP, &o) == FPM_OK && o.nsteps == 3 && o.totals.peak_running == 1);
    /* max_num_queued_reqs 2: the third arrival is rejected as vLLM's front end does */
    c = base(&g, 1, 400);
    c.max_num_batched_tokens = 32;
    c.max_num_seqs = 3;
    c.max_num_queued_reqs = 2;
    OUT();
    CHECK(fpm_replay_run(&c, r, 3, FPM_ARRIVE_STEP, &o) == FPM_OK);
    CHECK(recs[2].status == FPM_RST_REJECTED && recs[2].reject_reason == FPM_REJ_QUEUED_REQS && recs[2].reject_a == 2);
    /* priority: the lower priority value runs first, and is the last to be preempted */
    c = base(&g, 1, 400);
    c.policy = FPM_POLICY_PRIORITY;
    c.max_num_seqs = 1;
    r[0].priority = 5;
    r[1].priority = -1;
    OUT();
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &o) == FPM_OK && sched[0].req == 1);
#undef OUT
}

/* A decode stretch whose need in bytes passes INT64_MAX is measured against
 * the room, not summed unbounded (UBSan: signed overflow before): two full
 * groups of block 1 with pages 8000 and 8001 over 2**53 bytes, 1,100
 * requests of output 2**40 - 8.  The jump stops at the largest stretch that
 * fits, as stepping through it would. */
static void test_decode_stretch_need_past_int64_max(void) {
    fpm_group g[2] = {grp(FPM_KIND_FULL, 1, 8000, 0, 0), grp(FPM_KIND_FULL, 1, 8001, 0, 0)};
    fpm_replay_config c = base(g, 2, FPM_MAX_BYTES);
    c.max_model_len = FPM_MAX_TOKENS;
    c.max_num_batched_tokens = 2048;
    c.max_num_seqs = 2048;
    enum { N = 1100 };
    fpm_replay_request *r = calloc(N, sizeof *r);
    for (int i = 0; i < N; i++) r[i] = req(1, FPM_MAX_TOKENS - 8, 0);
    fpm_replay *rp = NULL;
    CHECK(fpm_replay_open(&c, r, N, FPM_ARRIVE_STEP, &rp) == FPM_OK);
    fpm_request_rec done[N];
    fpm_replay_output o;
    memset(&o, 0, sizeof o);
    o.done = done;
    o.done_cap = N;
    /* step 0 prefills every request (16,001 bytes each); then each decode step takes 16,001 bytes a request */
    const int64_t per_step = (int64_t)N * 16001, room = FPM_MAX_BYTES - per_step;
    for (int call = 0; call < 2; call++) CHECK(fpm_replay_advance(rp, 1, &o) == FPM_OK && o.error_code == 0);
    CHECK(o.steps_total == 1 + room / per_step && o.completed_total == 0);
    CHECK(o.totals.peak_used_bytes == per_step * (1 + room / per_step) && o.totals.peak_running == N);
    CHECK(o.totals.peak_used_bytes <= FPM_MAX_BYTES && FPM_MAX_BYTES - o.totals.peak_used_bytes < per_step);
    fpm_replay_close(rp);
    free(r);
}

/* A sizing pass whose record counts pass INT64_MAX says INT64_MAX, never a
 * wrapped count (UBSan: signed overflow before): 1,024 requests over 8,192
 * full groups of block 2**40 decode 2**40 - 9 tokens in one jump, whose held
 * records are (2**40 - 10) x 1,024 x 8,193 int64 values.  The jump looks for
 * its peak in the last period of the windowed groups' blocks only (a full
 * group's holding only grows): before, the block of 2**40 made it scan every
 * step of the stretch. */
static void test_sizing_counts_past_int64_max(void) {
    enum { G = 8192, N = 1024 };
    fpm_group *g = calloc(G, sizeof *g);
    for (int i = 0; i < G; i++) g[i] = grp(FPM_KIND_FULL, FPM_MAX_TOKENS, 1, 0, 0);
    fpm_replay_config c = base(g, G, (int64_t)1 << 24);
    c.max_model_len = FPM_MAX_TOKENS;
    c.max_num_batched_tokens = N;
    c.max_num_seqs = N;
    fpm_replay_request *r = calloc(N, sizeof *r);
    fpm_request_rec *recs = calloc(N, sizeof *recs);
    for (int i = 0; i < N; i++) r[i] = req(1, FPM_MAX_TOKENS - 8, 0);
    fpm_replay_output o;
    CHECK(size_run(&c, r, N, &o, recs) == FPM_ENOSPC && o.error_code == 0);
    /* step 0 prefills, one jump decodes, the last step finishes every request */
    CHECK(o.steps_total == FPM_MAX_TOKENS - 8 && o.nsteps == FPM_MAX_TOKENS - 8);
    CHECK(o.nsched == (int64_t)N * (FPM_MAX_TOKENS - 8) && o.nevents == 2 * N);
    CHECK(o.nheld == INT64_MAX);
    CHECK(recs[0].status == FPM_RST_FINISHED && recs[N - 1].output_tokens == FPM_MAX_TOKENS - 8);
    CHECK(o.totals.peak_used_blocks == (int64_t)N * G && o.totals.peak_running == N);
    free(recs);
    free(r);
    free(g);
}

/* fpm_replay_advance gives back the memory of completed requests and writes each request's entry at its
 * arrival: a trace of 60,000 one-step requests advanced in chunks gives the records fpm_replay_run gives
 * (which keeps every entry), releases the whole pages before the first request not completed (on Linux),
 * and a run stopped by max_steps reports the requests that never arrived as before (nothing happened). */
static void test_completed_requests_released(void) {
    enum { N = 60000 };
    fpm_group g = grp(FPM_KIND_FULL, 4, 4, 0, 0);
    fpm_replay_config c = base(&g, 1, 64);
    fpm_replay_request *r = calloc(N, sizeof *r);
    fpm_request_rec *recs = calloc(N, sizeof *recs), done[256];
    CHECK(r != NULL && recs != NULL);
    if (r == NULL || recs == NULL) return;
    for (int64_t i = 0; i < N; i++) r[i] = req(4 + i % 3, 1 + i % 2, i);
    fpm_replay_output whole;
    CHECK(size_run(&c, r, N, &whole, recs) == FPM_ENOSPC && whole.completed_total == N); /* a sizing pass */
    fpm_replay *rp = NULL;
    CHECK(fpm_replay_open(&c, r, N, FPM_ARRIVE_STEP, &rp) == FPM_OK);
    fpm_replay_output o;
    memset(&o, 0, sizeof o);
    o.done = done;
    o.done_cap = 256;
    int64_t ndone = 0, mismatches = 0, calls = 0;
    while (!o.ended && calls++ < 10 * N) {
        CHECK(fpm_replay_advance(rp, 97, &o) == FPM_OK);
        for (int64_t i = 0; i < o.ndone; i++, ndone++)
            mismatches += memcmp(&done[i], &recs[done[i].request], sizeof(fpm_request_rec)) != 0;
        CHECK(rp->low <= rp->pend);
    }
    CHECK(o.ended && ndone == N && mismatches == 0 && rp->low == N);
#if defined(__linux__)
    CHECK(rp->req_released >= ((size_t)1 << 20) && rp->info_released >= ((size_t)1 << 20));
    CHECK(rp->req_released <= (size_t)N * sizeof(request_t) && rp->info_released <= (size_t)N * sizeof(request_info_t));
#endif
    fpm_replay_close(rp);
    /* stopped after 10 steps: requests 10 ... N - 1 never arrived */
    c.max_steps = 10;
    CHECK(size_run(&c, r, N, &whole, recs) == FPM_ENOSPC && whole.error_code == FPM_RERR_STEP_LIMIT);
    CHECK(recs[N - 1].status == 0 && recs[N - 1].request == N - 1 && isnan(recs[N - 1].arrival_time) &&
          isnan(recs[N - 1].finish_time) && recs[N - 1].output_tokens == 0 && recs[N - 1].reject_reason == 0);
    CHECK(recs[0].status == FPM_RST_FINISHED && recs[0].arrival_time == 0.0);
    free(r);
    free(recs);
}

const fpm_test_case FPM_BOUNDARY_CASES[] = {
    {"completed_requests_released", test_completed_requests_released},
    {"header_compiles_alone", test_header_compiles_alone},
    {"sizing_helpers_at_int64_max", test_sizing_helpers_at_int64_max},
    {"config_fields_at_int64_max", test_config_fields_at_int64_max},
    {"huge_arrival_steps_do_not_hang", test_huge_arrival_steps_do_not_hang},
    {"allocation_overflow_is_enomem", test_allocation_overflow_is_enomem},
    {"large_prefix_pool_is_lazy", test_large_prefix_pool_is_lazy},
    {"chunked_advance", test_chunked_advance},
    {"scheduler_settings", test_scheduler_settings},
    {"decode_stretch_need_past_int64_max", test_decode_stretch_need_past_int64_max},
    {"sizing_counts_past_int64_max", test_sizing_counts_past_int64_max},
};
const size_t FPM_BOUNDARY_NCASES = sizeof FPM_BOUNDARY_CASES / sizeof FPM_BOUNDARY_CASES[0];
