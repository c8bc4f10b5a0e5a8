/* Internal declarations of the replay engine, shared by its source files:
 *
 *   fpm_alloc.c    checked, zeroed allocations (a leaf: it calls no other file)
 *   fpm_latency.c  latency model (R-27 ... R-31)      <-> fpmcore/replay/latency.py
 *   fpm_align.c    the align split (04 G-2 ... G-6)    <-> fpmcore/replay/align.py
 *   fpm_pool.c     block-count pool (R-4 ... R-10)     <-> fpmcore/replay/pool.py
 *   fpm_prefix.c   prefix-caching pool (R-36 ... R-38) <-> fpmcore/replay/prefix.py
 *   fpm_prefix_pool.h  its block records, key map and free queue (included by fpm_prefix.c only)
 *   fpm_open.c     opening a replay: checks, settings  <-> the start of fpmcore/replay/reference.py
 *   fpm_replay.c   the scheduler loop (R-11 ... R-26)  <-> fpmcore/replay/reference.py
 *   fpm_waiting.c  the waiting queue: FCFS ring or priority heap
 *   fpm_jump.c     jumps over idle periods and decode-only stretches without step records (C only:
 *                  the same totals and records as stepping, which the reference does)
 *
 * Each file mirrors its Python twin function by function, under the same names.
 * Not part of the public API.
 */
#ifndef FPM_INTERNAL_H
#define FPM_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "fpmcore.h"

/* ---------------------------------------------------------------- helpers */

/* ceil(a / b) for 0 <= a, 0 < b (no intermediate overflow). */
static inline int64_t cdiv64(int64_t a, int64_t b) { return a / b + (a % b != 0); }
/* floor(a / b) for any a, 0 < b. */
static inline int64_t floordiv64(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && a < 0) ? q - 1 : q;
}
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* fpm_alloc.c: count * size bytes, or NULL when the product does not fit size_t or
 * count is negative; zeroed.  Every allocation of the library goes through it. */
void *fpm_calloc(int64_t count, size_t size);
/* The same, aligned to a 64-byte cache line; *block receives what free() takes (NULL on failure). */
void *fpm_calloc_lines(int64_t count, size_t size, void **block);
/* Give the whole pages of [base, base + bytes) back to the system (Linux madvise MADV_DONTNEED: they read as
 * zeros when touched again), from `released` bytes past the first whole page on, once at least 1 MiB more is
 * whole; returns the bytes released so far (pass it back).  Elsewhere it releases nothing. */
size_t fpm_release_front(void *base, size_t bytes, size_t released);
/* Grow *p (count elements of size) to new_count; new elements zeroed.  0 on failure (*p unchanged). */
int fpm_grow(void **p, int64_t count, int64_t new_count, size_t size);

/* A group that releases the blocks its attention skips: a sliding window, a convolution, a chunk. */
static inline int is_windowed(int32_t kind) {
    return kind == FPM_KIND_WINDOW || kind == FPM_KIND_CONV || kind == FPM_KIND_CHUNK;
}
static inline int is_attention(int32_t kind) { return kind == FPM_KIND_FULL || is_windowed(kind); }
/* the first logical block a windowed group still needs from computed c: the window's
 * (vLLM SlidingWindowManager.get_num_skipped_tokens) or the current chunk's
 * (ChunkedLocalAttentionManager.get_num_skipped_tokens: the chunks before c's one are skipped). */
static inline int64_t window_first(const fpm_group *g, int64_t c) {
    if (g->kind == FPM_KIND_CHUNK) return c / g->window * g->window / g->block;
    return max64(0, c - (g->window - 1)) / g->block;
}
/* The fewest computed tokens at which a windowed group holding blocks from lo on drops one:
 * the least c with window_first(g, c) > lo. */
static inline int64_t window_drop_at(const fpm_group *g, int64_t lo) {
    if (g->kind == FPM_KIND_CHUNK) return cdiv64((lo + 1) * g->block, g->window) * g->window;
    return (lo + 1) * g->block + g->window - 1;
}

/* ------------------------------------------------------- latency model */

/* The latency table's rows grouped once (lin_prepare), so that a step's
 * time interpolates only the knots around its point: the rows of a phase as
 * doubles, decode rows in groups of one batch size, prefill rows in groups of
 * one batch size and, inside, of one prefill-token count; the floors. */
typedef struct {
    int64_t nd;       /* decode: batch-size groups */
    double *d_beta;   /* nd: their batch sizes */
    int64_t *d_start; /* nd + 1: their rows [d_start[g], d_start[g + 1]) */
    double *d_x, *d_y; /* per decode row: KV read tokens, wall time */
    double *d_lo, *d_hi; /* nd: a group's first and last KV knot (-inf, inf for a single row: no flag) */
    double d_floor;    /* the least decode wall time */
    int64_t np;       /* prefill: batch-size groups */
    double *p_beta;   /* np: their batch sizes */
    int64_t *p_start; /* np + 1: their prefill-token groups [p_start[g], p_start[g + 1]) */
    double *p_tj;     /* per prefill-token group: its prefill tokens */
    int64_t *p_rows;  /* per prefill-token group + 1: its rows */
    double *p_tlo, *p_thi; /* np: a batch-size group's first and last prefill-token knot (as d_lo, d_hi) */
    double *p_klo, *p_khi; /* per prefill-token group: its first and last KV knot (as d_lo, d_hi) */
    double *p_x, *p_y; /* per prefill row: KV read tokens, wall time */
    double p_floor;    /* the least prefill wall time */
    double shared;     /* shared_step_seconds */
    int extrapolated;
} lin_ctx;

/* Group cfg's rows (valid: table_ok) into lc; 0 when out of memory.  lin_free releases it. */
int lin_prepare(lin_ctx *lc, const fpm_replay_config *cfg);
void lin_free(lin_ctx *lc);
int table_ok(const fpm_replay_config *cfg);
/* R-31 on the rows lin_prepare grouped; *missing = -1, or the phase without points. */
void step_time(lin_ctx *lc, int64_t np, int64_t pt, int64_t pkv, int64_t nd, int64_t dkv, double *sec,
               int32_t *extra, int32_t *missing);

/* ------------------------------------------------------------ align rule */

/* 04 G-3: ((x - 1) // u) * u, floored at 0. */
static inline int64_t align_pos(int64_t x, int64_t u) { return max64(floordiv64(x - 1, u) * u, 0); }
/* vLLM is_mamba_prefill_checkpoint_valid (04 G-4 conditions 3-7). */
int checkpoint_valid(int64_t start, int64_t end, int64_t ckpt, int64_t hash_block, int64_t block, int64_t align);
int64_t align_stop(const fpm_align_query *q);

/* ---------------------------------------------------------------- engine */

/* One request of the replay: what a step reads, one cache line. */
typedef struct {
    int64_t prompt_len;  /* P */
    int64_t output_len;  /* O */
    int64_t generated;   /* g: tokens sampled so far; len = P + g */
    int64_t computed;    /* c */
    int32_t slot;        /* holdings slot while it holds blocks, else -1 */
    int32_t status;      /* 0, FPM_RST_* */
    uint8_t prefill_chunk; /* its last scheduled chunk left its prompt (or re-prefill) unfinished */
    uint8_t admitted_once;
    uint8_t arrived;       /* its entry is written (all zero before its arrival) */
    /* with caching, a chunk with a - grow_at <= fill_only and c < shrink_at only fills blocks: it takes
     * and releases none (pc_fill_blocks); at most the tokens before a group needs a new block */
    uint32_t fill_only;
    /* the fast path of a running request (pool_thresholds, pc_thresholds): a chunk c -> a with
     * a <= grow_at and c < shrink_at changes nothing in the pool */
    int64_t grow_at;   /* fewest tokens at which a group needs a new block (or a block fills, with caching) */
    int64_t shrink_at; /* fewest computed tokens at which a group releases a block */
} request_t;
_Static_assert(sizeof(request_t) == 64, "a request of the replay is one cache line");

/* The rest of a request's record: read at arrival, admission, finish and output. */
typedef struct {
    int32_t reject_reason;
    int64_t reject_a, reject_b;
    int64_t hit_tokens;  /* prefix hit of the first admission */
    int64_t arrival_seq; /* order of arrival: the priority tie-break */
    int64_t junction;    /* kept while running */
    int64_t preemptions;
    double arrival_time, first_scheduled_time, first_token_time, finish_time;
} request_info_t;

static inline int64_t req_len(const request_t *r) { return r->prompt_len + r->generated; }

/* Holdings of the block-count pool, per slot and group (R-4 ... R-6). */
typedef struct {
    int64_t lo, hi;                /* attention: held logical blocks [lo, hi) */
    int64_t state;                 /* ring / Mamba (none): blocks held; Mamba align: running block */
    int64_t cols, trans, ckpt;     /* Mamba align: block columns covered, transient and checkpoint block */
} hold_t;

struct pc_pool;

typedef struct fpm_replay engine_t;

struct fpm_replay {
    fpm_replay_config cfg;       /* the caller's config (its arrays stay the caller's) */
    const fpm_replay_request *in;
    int64_t n;
    int32_t mode;
    int G;
    /* derived configuration */
    int block_mode, align_mode, split, ckpt_all, pc, has_windowed;
    int64_t usable, cap, first_align, sched_block, hash_block, fixed_bytes;
    int64_t token_budget;        /* min(max_num_scheduled_tokens, max_num_batched_tokens) */
    int64_t split_limit;         /* the align split's chunk limit (04 G-5) */
    int64_t active_limit;        /* max_num_active_seqs or max_num_seqs */
    int64_t interval;            /* prefill_schedule_interval */
    int64_t max_steps;
    int64_t nslots;
    /* requests and queues */
    request_t *req;       /* 64-byte aligned; a request's entry is written first at its arrival */
    void *req_block;      /* what holds req (free) */
    request_info_t *info; /* parallel to req */
    int64_t *order; /* arrival order */
    int64_t pend;   /* next index into order */
    /* fpm_replay_advance: requests [0, low) completed and their records written; the whole pages of req, info
     * and order[0, pend) before them given back (release_completed) */
    int64_t low;
    size_t req_released, info_released, order_released;
    int64_t *wq;    /* waiting: FCFS ring buffer of n, or a binary heap (priority) */
    int64_t wq_head, wq_len;
    int64_t *running;
    int64_t nrun;
    /* the block-count pool */
    hold_t *hold;   /* nslots * G */
    int64_t *free_slot;
    int64_t nfree_slot;
    int64_t used_blocks, used_bytes;
    struct pc_pool *pool; /* the prefix-caching pool, with prefix_caching */
    const int64_t *pc_free; /* its free-queue length (pc_free_count), read by every step's records */
    int32_t *ckpt_class;  /* per group: the first group of its block size and checkpoint setting (memo_checkpoint) */
    /* the current step */
    int64_t k;
    double t, t_start;
    int64_t budget;
    int64_t threshold; /* long-prefill cap of this step, 0: none */
    int defer;         /* prefill deferred by prefill_schedule_interval this step */
    int preempted, prefill_scheduled, prefill_admitted;
    int64_t *sched_req, *sched_n, *sched_c;
    int64_t nsched;
    int64_t np, pt, pkv, nd, dkv; /* the step's prefill and decode entries, counted as scheduled */
    fpm_event_rec *ev;
    int64_t nev, ev_cap;
    int64_t step_preempted, step_finished;
    fpm_step_rec rec; /* the step's scalars */
    int pending;      /* the step ran but its records are not written yet */
    /* cross-step state */
    int64_t executed, last_prefill_step; /* prefill_schedule_interval cadence */
    int capacity_bound;
    int64_t unfinished, queued_tokens;   /* the front end's counts (max_num_queued_*) */
    int64_t completed;
    int64_t *done_list;                  /* requests completed in the current step */
    int64_t ndone;
    lin_ctx lc;
    int ended;
    int32_t stop;        /* why the replay stopped: 0 while it runs, else FPM_RERR_* (output.error_code) */
    fpm_status failure;  /* FPM_OK, or FPM_ENOMEM when an allocation failed inside a step */
    int64_t err_i[5];
    double err_d;
    fpm_replay_totals totals;
    int64_t nsteps_total;
};

/* The holdings of r in group gi of the block-count pool (r holds a slot). */
static inline hold_t *hold_of(const engine_t *e, const request_t *r, int gi) { return &e->hold[(int64_t)r->slot * e->G + gi]; }

/* block-count pool (fpm_pool.c) */
void pool_project(const engine_t *e, const request_t *r, int64_t c, int64_t a, int64_t *new_blocks,
                  int64_t *new_bytes, int64_t *held_bytes);
/* R-7 step 1; 1 when it released anything (r's holding changed) */
int pool_release_skipped(engine_t *e, request_t *r, int64_t c);
void pool_commit(engine_t *e, request_t *r, int64_t c, int64_t a);
void pool_release_all(engine_t *e, request_t *r);
int64_t pool_held(const engine_t *e, const request_t *r, int gi);
int64_t fresh_bytes(const engine_t *e, int64_t c, int64_t a);
void input_need(const engine_t *e, const request_t *r, int64_t h, int64_t *blocks, int64_t *bytes);
int64_t mamba_checkpoint(const engine_t *e, const request_t *r, const fpm_group *g, int64_t c, int64_t a);
/* mamba_checkpoint of one request's c -> a, taken once per checkpoint class of one loop over the groups: it
 * depends on a group only through its block size and checkpoint setting, which a model's Mamba groups share
 * (GLM-5.3-Flash: four), so the groups that share them form one class (engine ckpt_class).  A loop starts
 * with CKPT_MEMO_NONE. */
typedef struct {
    int32_t cls;
    int64_t value;
} ckpt_memo;
#define CKPT_MEMO_NONE {-1, 0}
static inline int64_t memo_checkpoint(const engine_t *e, const request_t *r, const fpm_group *g, int64_t c, int64_t a,
                                      ckpt_memo *m) {
    int32_t cls = e->ckpt_class[g - e->cfg.groups];
    if (m->cls != cls) {
        m->cls = cls;
        m->value = mamba_checkpoint(e, r, g, c, a);
    }
    return m->value;
}
int64_t window_admission_blocks(const engine_t *e, const fpm_group *g);
void pool_thresholds(engine_t *e, request_t *r);

/* prefix-caching pool (fpm_prefix.c) */
struct pc_pool *pc_new(const engine_t *e, int64_t maxc);
void pc_free(struct pc_pool *p);
/* where the pool keeps its free-queue length (R-38: the blocks an allocation may take), read through pc_free_count */
const int64_t *pc_free_queue_length(const struct pc_pool *p);
static inline int64_t pc_free_count(const engine_t *e) { return *e->pc_free; }
void pc_new_step(engine_t *e);
int64_t pc_lookup(engine_t *e, request_t *r, int *same_step);
void pc_need(const engine_t *e, const request_t *r, int64_t c, int64_t a, int hits, int64_t *need, int64_t *held);
int64_t pc_input_need(const engine_t *e, const request_t *r, int64_t h);
/* R-7 step 1 with prefix caching; 1 when it released anything */
int pc_release_skipped(engine_t *e, request_t *r, int64_t c);
int pc_commit(engine_t *e, request_t *r, int64_t c, int64_t a, int hits);
int pc_fill_blocks(engine_t *e, request_t *r, int64_t c, int64_t a);
void pc_release_all(engine_t *e, request_t *r);
int64_t pc_held(const engine_t *e, const request_t *r, int gi);

/* The pool's use, whichever pool the engine runs. */
static inline int64_t used_blocks(const engine_t *e) { return e->pc ? e->usable - pc_free_count(e) : e->used_blocks; }
static inline int64_t used_bytes(const engine_t *e) {
    return e->pc ? (e->usable - pc_free_count(e)) * e->cfg.groups[0].page : e->used_bytes;
}

/* A record count grows by n >= 0, held at INT64_MAX: a sizing pass that
 * passes it asks for more than any buffer holds, and no count wraps. */
static inline void count_add(int64_t *count, int64_t n) { *count = n > INT64_MAX - *count ? INT64_MAX : *count + n; }
/* The same by a * b (a, b >= 0): the records of a jump over a steps. */
static inline void count_add_product(int64_t *count, int64_t a, int64_t b) {
    if (a != 0 && b > (INT64_MAX - *count) / a)
        *count = INT64_MAX;
    else
        *count += a * b;
}

/* the waiting queue (fpm_waiting.c) */
void waiting_push_back(engine_t *e, int64_t idx);
void waiting_push_front(engine_t *e, int64_t idx);
int64_t waiting_head(const engine_t *e);
void waiting_pop(engine_t *e);

/* jumps without step records (fpm_jump.c) */
/* Steps k ... k + m - 1 repeat a step that scheduled nothing (no arrival in between). */
void jump_unchanged(engine_t *e, int64_t m, fpm_replay_output *out);
/* A decode-only stretch; returns the steps jumped (0: take a normal step). */
int64_t jump_decodes(engine_t *e, fpm_replay_output *out);

/* fpm_hash_origins with the chain map made at first_cap slots (a power of two), growing from there; first_cap <= 0:
 * at the size the estimate of the distinct chains asks for, as fpm_hash_origins makes it (fpm_trace.c) */
fpm_status hash_origins_from(int64_t n, const int64_t *prompt_len, const int64_t *hash_off, const int64_t *hash_ids,
                             int64_t hash_block_tokens, int64_t first_key, int64_t *upto, int64_t *key,
                             int64_t *nkeys, int64_t first_cap);

#endif /* FPM_INTERNAL_H */
