/* Replay engine tests: the acceptance vectors of spec 06 §10 in C. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../fpmcore.h"
#include "fpm_test.h"

#define MAXR 8
#define STEPS_CAP 512

typedef struct {
    fpm_step_rec steps[STEPS_CAP];
    fpm_sched_rec sched[4096];
    fpm_event_rec events[1024];
    int64_t held[8192];
    fpm_request_rec reqs[MAXR];
    fpm_replay_output out;
} outbuf;

static outbuf *new_out(void) {
    outbuf *o = calloc(1, sizeof(outbuf));
    if (o == NULL) abort();
    o->out.steps = o->steps;
    o->out.steps_cap = STEPS_CAP;
    o->out.sched = o->sched;
    o->out.sched_cap = 4096;
    o->out.events = o->events;
    o->out.events_cap = 1024;
    o->out.held = o->held;
    o->out.held_cap = 8192;
    o->out.requests = o->reqs;
    return o;
}

static fpm_group grp(int32_t kind, int64_t b, int64_t page, int64_t w, int64_t bpr, int64_t ck, int64_t al) {
    fpm_group g = {kind, b, page, w, bpr, ck, al};
    return g;
}

static fpm_replay_config cfg_of(const fpm_group *g, int32_t ng, int64_t cap, int64_t budget) {
    fpm_replay_config c;
    memset(&c, 0, sizeof c);
    c.groups = g;
    c.ngroups = ng;
    c.capacity_bytes = cap;
    c.max_num_batched_tokens = budget;
    c.max_num_seqs = 3;
    c.max_model_len = 1 << 20;
    c.enable_chunked_prefill = 1;
    c.use_fixed_step = 1;
    c.fixed_step_seconds = 1.0;
    c.max_num_queued_reqs = -1;
    c.max_num_queued_tokens = -1;
    return c;
}

/* A request arriving at step 0 with its own content (a fresh own key, no shared prefix). */
static fpm_replay_request rq(int64_t p, int64_t o) {
    static int64_t next_key = 0;
    fpm_replay_request r = {p, o, 0, 0.0, next_key++, 0, 0, 0};
    return r;
}

/* tokens scheduled for request idx in step s, 0 if none */
static int64_t tok(const outbuf *o, int64_t s, int64_t idx) {
    const fpm_step_rec *st = &o->steps[s];
    for (int64_t i = 0; i < st->sched_len; i++)
        if (o->sched[st->sched_off + i].req == idx) return o->sched[st->sched_off + i].tokens;
    return 0;
}

static int has_event(const outbuf *o, int64_t s, int32_t kind, int64_t idx) {
    const fpm_step_rec *st = &o->steps[s];
    for (int64_t i = 0; i < st->event_len; i++)
        if (o->events[st->event_off + i].kind == kind && o->events[st->event_off + i].req == idx) return 1;
    return 0;
}

static int64_t held_of(const outbuf *o, int64_t s, int64_t idx, int g, int ng) {
    const fpm_step_rec *st = &o->steps[s];
    for (int64_t i = 0; i < st->held_len; i++) {
        const int64_t *h = &o->held[st->held_off + i * (1 + ng)];
        if (h[0] == idx) return h[1 + g];
    }
    return -1;
}

/* RV-1: window, long context, bounded storage. */
static void test_rv1(void) {
    fpm_group g[1] = {grp(FPM_KIND_WINDOW, 4, 8, 4, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 1, 24, 8);
    c.reserve_full_isl = 0;
    fpm_replay_request r[1] = {rq(32, 5)};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.nsteps == 8);
    static const int64_t used[8] = {16, 24, 24, 24, 16, 16, 16, 8};
    static const int64_t cb[8] = {0, 8, 16, 24, 32, 33, 34, 35};
    for (int s = 0; s < 8; s++) {
        CHECK(o->steps[s].used_bytes_scheduled == used[s]);
        CHECK(o->sched[o->steps[s].sched_off].computed_before == cb[s]);
        CHECK(tok(o, s, 0) == (s < 4 ? 8 : 1));
    }
    CHECK(o->steps[7].used_bytes_end == 0);
    CHECK(o->reqs[0].output_tokens == 5 && o->reqs[0].status == FPM_RST_FINISHED);
    CHECK(o->reqs[0].finish_time == 8.0 && o->reqs[0].first_token_time == 4.0);
    free(o);
}

/* RV-2: full, window and convolution pages. */
static void test_rv2(void) {
    fpm_group g[3] = {grp(FPM_KIND_FULL, 4, 8, 0, 0, 0, 0), grp(FPM_KIND_WINDOW, 4, 4, 4, 0, 0, 0),
                      grp(FPM_KIND_CONV, 2, 2, 2, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 3, 100, 4);
    fpm_replay_request r[1] = {rq(16, 5)};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    static const int64_t used[5] = {16, 30, 38, 46, 52};
    for (int s = 0; s < 5; s++) CHECK(o->steps[s].used_bytes_scheduled == used[s]);
    CHECK(o->steps[o->out.nsteps - 1].used_bytes_end == 0);
    free(o);
}

/* RV-3: contention preempts and retries without leaking. */
static void test_rv3(void) {
    fpm_group g[2] = {grp(FPM_KIND_FULL, 4, 4, 0, 0, 0, 0), grp(FPM_KIND_WINDOW, 4, 4, 4, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 2, 24, 8);
    fpm_replay_request r[2] = {rq(4, 6), rq(4, 6)};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.nsteps == 11);
    static const int64_t used[11] = {16, 16, 16, 16, 12, 20, 16, 16, 16, 12, 20};
    static const int64_t ta[11] = {4, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    static const int64_t tb[11] = {4, 0, 0, 0, 0, 0, 5, 1, 1, 1, 1};
    for (int s = 0; s < 11; s++) {
        CHECK(o->steps[s].used_bytes_scheduled == used[s]);
        CHECK(tok(o, s, 0) == ta[s] && tok(o, s, 1) == tb[s]);
    }
    CHECK(has_event(o, 1, FPM_EV_PREEMPTED, 1));
    CHECK(has_event(o, 5, FPM_EV_FINISHED, 0) && has_event(o, 10, FPM_EV_FINISHED, 1));
    CHECK(o->reqs[1].preemptions == 1 && o->reqs[0].preemptions == 0);
    free(o);
}

/* RV-3 again: the R-35 totals, a sizing pass without buffers, and short
 * buffers (FPM_ENOSPC with the full counts; what fits is written as in a full run). */
static void test_rv3_sizing_pass_and_totals(void) {
    fpm_group g[2] = {grp(FPM_KIND_FULL, 4, 4, 0, 0, 0, 0), grp(FPM_KIND_WINDOW, 4, 4, 4, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 2, 24, 8);
    fpm_replay_request r[2] = {rq(4, 6), rq(4, 6)};
    outbuf *full = new_out();
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &full->out) == FPM_OK);
    const fpm_replay_totals *t = &full->out.totals;
    CHECK(t->first_t_start == 0.0 && t->last_t_end == 11.0);
    CHECK(t->preemptions == 1 && t->peak_running == 2 && t->peak_used_bytes == 20 && t->peak_used_blocks == 5);
    CHECK(t->extrapolated_steps == 0);

    fpm_request_rec reqs[2];
    fpm_replay_output size;
    memset(&size, 0, sizeof size);
    size.requests = reqs;
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &size) == FPM_ENOSPC);
    CHECK(size.nsteps == 11 && size.nsched == full->out.nsched && size.nevents == full->out.nevents &&
          size.nheld == full->out.nheld);
    CHECK(memcmp(&size.totals, t, sizeof *t) == 0);
    CHECK(memcmp(reqs, full->reqs, sizeof reqs) == 0);

    outbuf *part = new_out();
    part->out.steps_cap = 5;
    part->out.sched_cap = 3;
    part->out.held_cap = 7;
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &part->out) == FPM_ENOSPC);
    CHECK(part->out.nsteps == 11 && part->out.nsched == full->out.nsched && part->out.nheld == full->out.nheld);
    CHECK(memcmp(part->steps, full->steps, 5 * sizeof(fpm_step_rec)) == 0);
    CHECK(memcmp(part->sched, full->sched, 3 * sizeof(fpm_sched_rec)) == 0);
    CHECK(memcmp(part->held, full->held, 6 * sizeof(int64_t)) == 0); /* whole (1 + G) entries only */
    CHECK(part->held[6] == 0);
    CHECK(memcmp(part->reqs, full->reqs, 2 * sizeof(fpm_request_rec)) == 0);
    free(part);
    free(full);
}

/* RV-5: oversized chunk stops the replay with the numbers of the diagnostic. */
static void test_rv5(void) {
    fpm_group g[1] = {grp(FPM_KIND_WINDOW, 4, 4, 4, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 1, 8, 8);
    fpm_replay_request r[1] = {rq(16, 2)};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.error_code == FPM_RERR_OVERSIZED);
    CHECK(o->out.err_i[0] == 12 && o->out.err_i[1] == 8 && o->out.err_i[2] == 8 && o->out.err_i[3] == 8 &&
          o->out.err_i[4] == 0);
    CHECK(o->out.nsteps == 1 && o->steps[0].used_bytes_end == 8);
    free(o);
}

/* RV-11: preemption and resume with a state group, gate off and on. */
static void test_rv11(void) {
    fpm_group g[2] = {grp(FPM_KIND_FULL, 4, 4, 0, 0, 0, 0), grp(FPM_KIND_RING, 1, 4, 0, 1, 0, 0)};
    static const int64_t end_off[12] = {3, 7, 7, 4, 7, 0, 3, 4, 4, 4, 4, 0};
    static const int64_t end_on[12] = {3, 7, 7, 4, 4, 0, 3, 4, 4, 4, 4, 0};
    for (int gate = 0; gate < 2; gate++) {
        fpm_replay_config c = cfg_of(g, 2, 28, 8);
        c.max_model_len = 24;
        c.reserve_full_isl = gate;
        fpm_replay_request r[2] = {rq(8, 6), rq(8, 6)};
        outbuf *o = new_out();
        CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
        CHECK(o->out.nsteps == 12);
        for (int s = 0; s < 12 && s < o->out.nsteps; s++)
            CHECK(o->steps[s].used_blocks_end == (gate ? end_on[s] : end_off[s]));
        CHECK(tok(o, 4, 1) == (gate ? 0 : 7));
        CHECK(o->reqs[1].preemptions == (gate ? 1 : 2));
        free(o);
    }
}

/* RV-14: GLM-5.3-Flash TP 4 with prefix caching (align mode, FlashKDA checkpoint). */
static void test_rv14(void) {
    const int64_t page = 13516800;
    fpm_group g[6];
    for (int i = 0; i < 4; i++) g[i] = grp(FPM_KIND_MAMBA, 2176, page, 0, 1, 1, 16);
    g[4] = grp(FPM_KIND_FULL, 2176, page, 0, 0, 0, 0);
    g[5] = grp(FPM_KIND_RING, 4, page, 0, 1, 0, 0);
    for (int pc = 0; pc < 2; pc++) {
        fpm_replay_config c = cfg_of(g, 6, 185126092800LL, 8192);
        c.max_num_seqs = 256;
        c.max_model_len = 1048576;
        c.reserve_full_isl = 1;
        c.prefix_caching = pc;
        c.hash_block_size = 2176;
        fpm_replay_request r[1] = {rq(10000, 3)};
        outbuf *o = new_out();
        CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
        CHECK(o->out.nsteps == 4);
        if (pc) {
            CHECK(tok(o, 0, 0) == 6528 && tok(o, 1, 0) == 3472);
            CHECK(o->steps[0].used_blocks_scheduled == 8 && o->steps[1].used_blocks_scheduled == 18);
            CHECK(o->steps[1].used_bytes_scheduled == 243302400LL);
            CHECK(held_of(o, 1, 0, 0, 6) == 3 && held_of(o, 1, 0, 4, 6) == 5);
        } else {
            CHECK(tok(o, 0, 0) == 8192 && tok(o, 1, 0) == 1808);
            CHECK(o->steps[0].used_blocks_scheduled == 9 && o->steps[1].used_blocks_scheduled == 10);
            CHECK(o->steps[0].used_bytes_scheduled == 121651200LL);
        }
        CHECK(o->steps[2].used_blocks_scheduled == 10 && o->steps[3].used_blocks_end == 0);
        free(o);
    }
}

/* RV-15: tiny hybrid, verified against vLLM 0.33.0. */
static void test_rv15(void) {
    fpm_group g[2] = {grp(FPM_KIND_FULL, 16, 512, 0, 0, 0, 0), grp(FPM_KIND_MAMBA, 16, 512, 0, 1, 1, 4)};
    fpm_replay_config c = cfg_of(g, 2, 15 * 512, 64);
    c.max_num_seqs = 4;
    c.max_model_len = 64;
    c.reserve_full_isl = 1;
    c.prefix_caching = 1;
    c.hash_block_size = 16;
    fpm_replay_request r[1] = {rq(40, 12)};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.nsteps == 12);
    static const int64_t freeb[12] = {10, 11, 11, 11, 11, 11, 11, 11, 11, 9, 10, 15};
    for (int s = 0; s < 12; s++) CHECK(15 - o->steps[s].used_blocks_end == freeb[s]);
    CHECK(held_of(o, 0, 0, 0, 2) == 3 && held_of(o, 0, 0, 1, 2) == 2);
    CHECK(held_of(o, 9, 0, 0, 2) == 4 && held_of(o, 9, 0, 1, 2) == 2);
    CHECK(held_of(o, 10, 0, 1, 2) == 1);
    free(o);
}

/* R-28 ... R-31 latency vectors of §10.6. */
static void test_latency_vectors(void) {
    static const fpm_prefill_row pre[8] = {{1, 64, 0, 0.030},   {1, 64, 2176, 0.034}, {1, 128, 0, 0.032},
                                           {1, 128, 2176, 0.038}, {2, 128, 0, 0.040},  {2, 128, 4352, 0.048},
                                           {2, 256, 0, 0.044},  {2, 256, 4352, 0.056}};
    static const fpm_decode_row dec[4] = {{1, 4096, 0.0070}, {1, 8192, 0.0074}, {2, 8192, 0.0075}, {2, 16384, 0.0080}};
    fpm_replay_config c;
    memset(&c, 0, sizeof c);
    c.prefill = pre;
    c.nprefill = 8;
    c.decode = dec;
    c.ndecode = 4;
    static const struct {
        int64_t b, t, k, d, dk;
        double want;
        int extra;
    } v[] = {
        {1, 96, 1088, 0, 0, 0.0335, 0}, {1, 64, 0, 0, 0, 0.030, 0},     {2, 192, 2176, 0, 0, 0.047, 0},
        {3, 192, 0, 0, 0, 0.050, 1},    {3, 192, 3264, 0, 0, 0.056, 1}, {1, 32, 0, 0, 0, 0.030, 1},
        {4, 8, 0, 0, 0, 0.05225, 1},    {0, 0, 0, 1, 6144, 0.0072, 0},  {0, 0, 0, 2, 12288, 0.00775, 0},
        {0, 0, 0, 1, 1024, 0.0070, 1},  {0, 0, 0, 3, 12288, 0.0080, 1}, {0, 0, 0, 4, 40000, 0.009508984375, 1},
        {1, 64, 0, 1, 4096, 0.037, 0},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        double s = -1;
        int32_t ex = -1, miss = -2;
        CHECK(fpm_step_time(&c, v[i].b, v[i].t, v[i].k, v[i].d, v[i].dk, &s, &ex, &miss) == FPM_OK);
        CHECK(miss == -1);
        CHECK(fabs(s - v[i].want) <= 1e-12 * v[i].want);
        CHECK(ex == v[i].extra);
    }
    double s;
    int32_t ex, miss;
    c.ndecode = 0;
    CHECK(fpm_step_time(&c, 0, 0, 0, 1, 10, &s, &ex, &miss) == FPM_OK && miss == 1);
    /* unsorted table refused */
    fpm_decode_row bad[2] = {{2, 8192, 0.0075}, {1, 4096, 0.0070}};
    c.decode = bad;
    c.ndecode = 2;
    CHECK(fpm_step_time(&c, 0, 0, 0, 1, 10, &s, &ex, &miss) == FPM_EINVAL);
}

/* TV-2: a mixed step is additive; timed arrivals with a table. */
static void test_tv2(void) {
    static const fpm_prefill_row pre[8] = {{1, 64, 0, 0.030},   {1, 64, 2176, 0.034}, {1, 128, 0, 0.032},
                                           {1, 128, 2176, 0.038}, {2, 128, 0, 0.040},  {2, 128, 4352, 0.048},
                                           {2, 256, 0, 0.044},  {2, 256, 4352, 0.056}};
    static const fpm_decode_row dec[4] = {{1, 4096, 0.0070}, {1, 8192, 0.0074}, {2, 8192, 0.0075}, {2, 16384, 0.0080}};
    fpm_group g[1] = {grp(FPM_KIND_FULL, 16, 1, 0, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 1, 10000, 512);
    c.use_fixed_step = 0;
    c.prefill = pre;
    c.nprefill = 8;
    c.decode = dec;
    c.ndecode = 4;
    fpm_replay_request r[2] = {{64, 2, 0, 0.0, 0, 0, 0, 0}, {64, 1, 0, 0.020, 1, 0, 0, 0}};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_TIME, &o->out) == FPM_OK);
    CHECK(o->out.nsteps == 2);
    CHECK(fabs(o->steps[1].duration_s - 0.037) <= 1e-12 * 0.037);
    CHECK(fabs(o->reqs[0].finish_time - 0.067) <= 1e-12 * 0.067);
    CHECK(fabs(o->reqs[1].first_token_time - 0.067) <= 1e-12 * 0.067);
    free(o);
}

/* 04 AS-1, AS-2, AS-10, AS-12, AS-14, AS-17, AS-19 through fpm_align_stop. */
static int64_t run_chunks(int64_t prompt, int64_t start, int64_t align, int64_t budget, int64_t b, int64_t junction,
                          int64_t *out, int64_t cap) {
    int64_t n = 0;
    while (start < prompt && n < cap) {
        fpm_align_query q;
        memset(&q, 0, sizeof q);
        q.start = start;
        q.num_new_tokens = prompt - start < budget ? prompt - start : budget;
        q.prompt_len = q.num_tokens = prompt;
        q.block_size = q.hash_block_size = b;
        q.max_num_batched_tokens = budget;
        q.checkpoint_alignment = align;
        q.junction = junction;
        int64_t k = 0;
        if (fpm_align_stop(&q, &k) != FPM_OK || k == 0) return -1;
        out[n++] = k;
        start += k;
    }
    return n;
}

static void test_align_stop_vectors(void) {
    int64_t c[16];
    CHECK(run_chunks(10000, 0, 16, 8192, 2176, 0, c, 16) == 2 && c[0] == 6528 && c[1] == 3472);
    CHECK(run_chunks(10000, 0, 0, 8192, 2176, 0, c, 16) == 3 && c[0] == 6528 && c[1] == 2176 && c[2] == 1296);
    CHECK(run_chunks(4368, 16, 16, 8192, 2176, 0, c, 16) == 2 && c[0] == 2160 && c[1] == 2192);
    CHECK(run_chunks(10000, 0, 16, 8192, 2176, 4352, c, 16) == 2 && c[0] == 4352 && c[1] == 5648);
    CHECK(run_chunks(8768, 0, 16, 2000, 2176, 0, c, 16) == 9 && c[0] == 2000 && c[1] == 176 && c[8] == 64);
    CHECK(run_chunks(3000, 0, 16, 8192, 2184, 0, c, 16) == 2 && c[0] == 2184 && c[1] == 816);
    CHECK(run_chunks(3000, 0, 8, 8192, 2184, 0, c, 16) == 1 && c[0] == 3000);
    fpm_align_query q;
    memset(&q, 0, sizeof q);
    q.num_new_tokens = 1192;
    q.prompt_len = q.num_tokens = 5000;
    q.block_size = q.hash_block_size = 2176;
    q.max_num_batched_tokens = 8192;
    q.checkpoint_alignment = 16;
    int64_t k = -1;
    CHECK(fpm_align_stop(&q, &k) == FPM_OK && k == 0);
    q.block_size = 0;
    CHECK(fpm_align_stop(&q, &k) == FPM_EINVAL);
    CHECK(fpm_align_stop(NULL, &k) == FPM_EINVAL);
}

/* Invalid inputs give FPM_EINVAL; short buffers FPM_ENOSPC; never a crash. */
static void test_invalid_inputs(void) {
    fpm_group g[1] = {grp(FPM_KIND_FULL, 4, 4, 0, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 1, 64, 8);
    fpm_replay_request r[1] = {rq(8, 2)};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(NULL, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_EINVAL);
    CHECK(fpm_replay_run(&c, NULL, 1, FPM_ARRIVE_STEP, &o->out) == FPM_EINVAL);
    CHECK(fpm_replay_run(&c, r, 1, 7, &o->out) == FPM_EINVAL);
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_TIME, &o->out) == FPM_EINVAL); /* timed needs a table */
    fpm_group bad = grp(FPM_KIND_WINDOW, 4, 4, 0, 0, 0, 0);
    fpm_replay_config cb = cfg_of(&bad, 1, 64, 8);
    CHECK(fpm_replay_run(&cb, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_EINVAL);
    fpm_replay_request z[1] = {rq(0, 2)};
    CHECK(fpm_replay_run(&c, z, 1, FPM_ARRIVE_STEP, &o->out) == FPM_EINVAL);
    c.max_num_seqs = 0;
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_EINVAL);
    c.max_num_seqs = 3;
    o->out.steps_cap = 1;
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_ENOSPC);
    o->out.steps_cap = STEPS_CAP;
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK && o->out.nsteps == 2);
    CHECK(fpm_replay_run(&c, r, 0, FPM_ARRIVE_STEP, &o->out) == FPM_OK && o->out.nsteps == 0);
    free(o);
}

/* a head that can never be scheduled without chunked prefill stalls the replay. */
static void test_stall(void) {
    fpm_group g[1] = {grp(FPM_KIND_FULL, 4, 4, 0, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 1, 64, 8);
    c.enable_chunked_prefill = 0;
    fpm_replay_request r[1] = {rq(12, 2)};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.error_code == FPM_RERR_STALL && o->out.err_i[0] == 0 && o->out.err_i[1] == 0 &&
          o->out.err_i[2] == 1 && o->out.err_d == 0.0);
    free(o);
}

/* RV-16: GLM-like TP 1 hybrid, shared prefix X of 9,300 tokens, B hits A's checkpoint state at 9,216. */
static void test_rv16(void) {
    const int64_t page = 52322688;
    fpm_group g[6];
    for (int i = 0; i < 4; i++) g[i] = grp(FPM_KIND_MAMBA, 4608, page, 0, 1, 1, 16);
    g[4] = grp(FPM_KIND_FULL, 4608, page, 0, 0, 0, 0);
    g[5] = grp(FPM_KIND_RING, 16, page, 0, 1, 0, 0);
    static const int64_t upto[2] = {9300, 9300}, key[2] = {0, 0};
    fpm_replay_config c = cfg_of(g, 6, 1145 * page, 8192);
    c.max_num_seqs = 256;
    c.max_model_len = 131072;
    c.reserve_full_isl = 1;
    c.prefix_caching = 1;
    c.hash_block_size = 4608;
    c.origin_upto = upto;
    c.origin_key = key;
    c.norigin = 2;
    fpm_replay_request r[3] = {{10000, 4, 0, 0.0, 1, 0, 1, 0}, {3000, 3, 0, 0.0, 2, 0, 0, 0}, {12000, 3, 4, 0.0, 3, 1, 1, 0}};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 3, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.nsteps == 7 && o->out.error_code == 0);
    static const int64_t used[7] = {12, 22, 8, 8, 12, 8, 0};
    for (int s = 0; s < 7 && s < o->out.nsteps; s++) CHECK(o->steps[s].used_blocks_end == used[s]);
    CHECK(tok(o, 0, 0) == 4608 && tok(o, 0, 1) == 3000 && tok(o, 1, 0) == 5392 && tok(o, 4, 2) == 2784);
    CHECK(held_of(o, 1, 0, 0, 6) == 3 && held_of(o, 4, 2, 0, 6) == 2 && held_of(o, 4, 2, 4, 6) == 3);
    CHECK(o->reqs[2].prefix_hit_tokens == 9216 && o->reqs[0].prefix_hit_tokens == 0);
    free(o);
}

/* RV-17: (a) attention blocks cached in a step are hit at once; (b) a Mamba state is not. */
static void test_rv17(void) {
    static const int64_t upto_a[1] = {256}, key_a[1] = {0};
    fpm_group ga[1] = {grp(FPM_KIND_FULL, 16, 1, 0, 0, 0, 0)};
    fpm_replay_config c = cfg_of(ga, 1, 99, 1024);
    c.max_num_seqs = 256;
    c.max_model_len = 1024;
    c.reserve_full_isl = 1;
    c.prefix_caching = 1;
    c.hash_block_size = 16;
    c.origin_upto = upto_a;
    c.origin_key = key_a;
    c.norigin = 1;
    fpm_replay_request ra[2] = {{300, 2, 0, 0.0, 0, 0, 0, 0}, {300, 2, 0, 0.0, 1, 0, 1, 0}};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, ra, 2, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.nsteps == 2 && tok(o, 0, 0) == 300 && tok(o, 0, 1) == 44);
    CHECK(held_of(o, 0, 0, 0, 1) == 19 && held_of(o, 0, 1, 0, 1) == 19);
    CHECK(99 - o->steps[0].used_blocks_end == 77 && o->steps[1].used_blocks_end == 0);
    free(o);

    static const int64_t upto_b[1] = {36}, key_b[1] = {0};
    fpm_group gb[2] = {grp(FPM_KIND_FULL, 16, 512, 0, 0, 0, 0), grp(FPM_KIND_MAMBA, 16, 512, 0, 1, 1, 4)};
    fpm_replay_config cb = cfg_of(gb, 2, 15 * 512, 64);
    cb.max_num_seqs = 4;
    cb.max_model_len = 64;
    cb.reserve_full_isl = 1;
    cb.prefix_caching = 1;
    cb.hash_block_size = 16;
    cb.origin_upto = upto_b;
    cb.origin_key = key_b;
    cb.norigin = 1;
    fpm_replay_request rb[2] = {{40, 3, 0, 0.0, 0, 0, 0, 0}, {40, 3, 0, 0.0, 1, 0, 1, 0}};
    o = new_out();
    CHECK(fpm_replay_run(&cb, rb, 2, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.nsteps == 4 && tok(o, 0, 1) == 0 && tok(o, 1, 1) == 8);
    static const int64_t freeb[4] = {10, 8, 11, 15};
    for (int s = 0; s < 4 && s < o->out.nsteps; s++) CHECK(15 - o->steps[s].used_blocks_end == freeb[s]);
    CHECK(held_of(o, 1, 1, 0, 2) == 3 && held_of(o, 1, 1, 1, 2) == 2 && o->reqs[1].prefix_hit_tokens == 32);
    free(o);
}

/* RV-18: the free-queue order decides that E hits A's 32 tokens. */
static void test_rv18(void) {
    static const int64_t upto[1] = {32}, key[1] = {0};
    fpm_group g[1] = {grp(FPM_KIND_FULL, 16, 1, 0, 0, 0, 0)};
    fpm_replay_config c = cfg_of(g, 1, 6, 128);
    c.max_num_seqs = 4;
    c.max_model_len = 96;
    c.reserve_full_isl = 1;
    c.prefix_caching = 1;
    c.hash_block_size = 16;
    c.origin_upto = upto;
    c.origin_key = key;
    c.norigin = 1;
    fpm_replay_request r[4] = {
        {32, 1, 0, 0.0, 0, 0, 0, 0}, {40, 1, 0, 0.0, 1, 0, 0, 0}, {32, 1, 1, 0.0, 2, 0, 0, 0}, {48, 1, 2, 0.0, 3, 0, 1, 0}};
    outbuf *o = new_out();
    CHECK(fpm_replay_run(&c, r, 4, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
    CHECK(o->out.nsteps == 3 && tok(o, 2, 3) == 16 && o->reqs[3].prefix_hit_tokens == 32);
    for (int s = 0; s < 3 && s < o->out.nsteps; s++) CHECK(o->steps[s].used_blocks_end == 0);
    free(o);
}

/* RV-4, RV-9, RV-10, RV-12: byte-mode vectors with windows and state groups (gate off). */
static void test_rv4_rv9_rv10_rv12(void) {
    {
        fpm_group g[1] = {grp(FPM_KIND_WINDOW, 4, 4, 4, 0, 0, 0)};
        fpm_replay_config c = cfg_of(g, 1, 12, 8);
        fpm_replay_request r[2] = {rq(8, 2), rq(8, 2)};
        outbuf *o = new_out();
        CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
        CHECK(o->out.nsteps == 4 && tok(o, 1, 1) == 0 && tok(o, 2, 1) == 8 && o->steps[1].used_bytes_end == 0);
        CHECK(o->reqs[1].preemptions == 0);
        free(o);
    }
    {
        fpm_group g[2] = {grp(FPM_KIND_FULL, 4, 8, 0, 0, 0, 0), grp(FPM_KIND_RING, 1, 16, 0, 1, 0, 0)};
        fpm_replay_config c = cfg_of(g, 2, 100, 8);
        fpm_replay_request r[1] = {rq(12, 3)};
        outbuf *o = new_out();
        CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
        static const int64_t used[4] = {32, 40, 48, 48};
        CHECK(o->out.nsteps == 4);
        for (int s = 0; s < 4; s++) CHECK(o->steps[s].used_bytes_scheduled == used[s]);
        CHECK(o->steps[3].used_bytes_end == 0);
        free(o);
    }
    {
        fpm_group g[2] = {grp(FPM_KIND_WINDOW, 4, 8, 4, 0, 0, 0), grp(FPM_KIND_RING, 1, 64, 0, 2, 0, 0)};
        fpm_replay_config c = cfg_of(g, 2, 256, 8);
        fpm_replay_request r[1] = {rq(20, 4)};
        outbuf *o = new_out();
        CHECK(fpm_replay_run(&c, r, 1, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
        static const int64_t used[6] = {144, 152, 144, 144, 144, 144};
        CHECK(o->out.nsteps == 6);
        for (int s = 0; s < 6; s++) CHECK(o->steps[s].used_bytes_scheduled == used[s]);
        CHECK(o->steps[5].used_bytes_end == 0);
        free(o);
    }
    for (int gate = 0; gate < 2; gate++) {
        fpm_group g[2] = {grp(FPM_KIND_WINDOW, 4, 4, 4, 0, 0, 0), grp(FPM_KIND_RING, 1, 4, 0, 1, 0, 0)};
        fpm_replay_config c = cfg_of(g, 2, 20, 8);
        c.reserve_full_isl = gate;
        fpm_replay_request r[2] = {rq(8, 3), rq(8, 2)};
        outbuf *o = new_out();
        CHECK(fpm_replay_run(&c, r, 2, FPM_ARRIVE_STEP, &o->out) == FPM_OK);
        static const int64_t end[5] = {12, 12, 0, 12, 0};
        CHECK(o->out.nsteps == 5);
        for (int s = 0; s < 5; s++) CHECK(o->steps[s].used_bytes_scheduled == 12 && o->steps[s].used_bytes_end == end[s]);
        CHECK(tok(o, 3, 1) == 8);
        free(o);
    }
}

/* RV-7: window(16, 160, 32), T = 128, and a state group of 2 x 64 bytes. */
static void test_rv7_sizing(void) {
    fpm_group w = grp(FPM_KIND_WINDOW, 16, 160, 32, 0, 0, 0), st = grp(FPM_KIND_RING, 1, 64, 0, 2, 0, 0);
    fpm_group full = grp(FPM_KIND_FULL, 16, 160, 0, 0, 0, 0);
    int64_t n = 0, f = 0, e = 0, s2 = 0;
    CHECK(fpm_peak_request_blocks(&w, 4096, 128, &n) == FPM_OK && n * 160 == 1760);
    CHECK(fpm_peak_request_blocks(&w, 4096, 1, &n) == FPM_OK && n * 160 == 480);
    CHECK(fpm_peak_request_blocks(&st, 4096, 128, &s2) == FPM_OK && s2 * 64 == 128);
    CHECK(fpm_peak_request_blocks(&w, 4096, 128, &n) == FPM_OK && n * 160 + s2 * 64 == 1888);
    CHECK(fpm_peak_request_blocks(&w, 4096, 1, &n) == FPM_OK && n * 160 + s2 * 64 == 608);
    CHECK(fpm_block_range(&w, 32, 33, &f, &e) == FPM_OK && f == 0 && e == 3);
    CHECK(fpm_block_range(&w, 48, 49, &f, &e) == FPM_OK && f == 1 && e == 4);
    CHECK(fpm_block_range(&w, 64, 65, &f, &e) == FPM_OK && (e - f) * 160 == 480);
    CHECK(fpm_block_range(&full, 64, 65, &f, &e) == FPM_OK && (e - f) * 160 == 800);
    CHECK(fpm_block_range(&w, 512, 640, &f, &e) == FPM_OK && f == 30 && e == 40 && (e - f) * 160 == 1600);
    CHECK(fpm_block_range(&w, 33, 32, &f, &e) == FPM_EINVAL);
    CHECK(fpm_peak_request_blocks(&w, 0, 128, &n) == FPM_EINVAL);
}

const fpm_test_case FPM_REPLAY_CASES[] = {
    {"replay_rv7_sizing", test_rv7_sizing},
    {"replay_rv4_rv9_rv10_rv12", test_rv4_rv9_rv10_rv12},
    {"replay_rv16_shared_prefix_checkpoint_hit", test_rv16},
    {"replay_rv17_same_step_hits", test_rv17},
    {"replay_rv18_free_queue_order", test_rv18},
    {"replay_rv1_window", test_rv1},
    {"replay_rv2_full_window_conv", test_rv2},
    {"replay_rv3_preemption", test_rv3},
    {"replay_rv3_sizing_pass_and_totals", test_rv3_sizing_pass_and_totals},
    {"replay_rv5_oversized", test_rv5},
    {"replay_rv11_state_resume", test_rv11},
    {"replay_rv14_glm_align", test_rv14},
    {"replay_rv15_tiny_hybrid", test_rv15},
    {"replay_latency_vectors", test_latency_vectors},
    {"replay_tv2_mixed_step", test_tv2},
    {"replay_align_stop_vectors", test_align_stop_vectors},
    {"replay_invalid_inputs", test_invalid_inputs},
    {"replay_stall", test_stall},
};
const size_t FPM_REPLAY_NCASES = sizeof FPM_REPLAY_CASES / sizeof FPM_REPLAY_CASES[0];
