/* Replay engine: grouped KV pool, vLLM 0.33.0 scheduler loop, FPM latency
 * model (spec chapter 06, rules R-4 ... R-31), and with prefix_caching the
 * block pool of vLLM 0.33.0 with content keys, hits and eviction (R-36 ... R-38).
 *
 * One call, fpm_replay_run, replays a whole trace and fills caller-owned
 * output buffers.  The engine allocates its working memory once per call,
 * before the first step; the step loop itself never allocates.  Inputs are
 * validated by the Python host (fpmcore.replay) with the spec's diagnostics;
 * this library re-checks the ranges it relies on and answers FPM_EINVAL.
 */
#ifndef FPM_REPLAY_H
#define FPM_REPLAY_H

#include <stdint.h>

#define FPM_ENOSPC 4 /* an output buffer is too small: the counts say how large; call again */

/* Group kinds. */
#define FPM_KIND_FULL 0   /* attention, full history */
#define FPM_KIND_WINDOW 1 /* attention with a sliding window */
#define FPM_KIND_CONV 2   /* convolution (windowed) */
#define FPM_KIND_RING 3   /* state group without checkpoint fields */
#define FPM_KIND_MAMBA 4  /* state group with checkpoint fields (align mode with prefix caching) */

/* Arrival modes. */
#define FPM_ARRIVE_STEP 0 /* request enters at the start of step arrival_step */
#define FPM_ARRIVE_TIME 1 /* timed arrivals with a latency table; idle periods are no step */

/* Stop errors (output.error_code). */
#define FPM_RERR_OVERSIZED 1 /* err_i = {bytes, tokens, computed, capacity, fixed state bytes} */
#define FPM_RERR_STALL 2     /* err_i = {step, running, waiting}, err_d = t */
#define FPM_RERR_NO_PHASE 3  /* err_i[0] = 0 prefill, 1 decode */

/* Request outcome. */
#define FPM_RST_FINISHED 1
#define FPM_RST_REJECTED 2
#define FPM_REJ_PROMPT 1        /* a = prompt_len, b = max_model_len */
#define FPM_REJ_FINAL_FORWARD 2 /* a = bytes, b = capacity */
#define FPM_REJ_INPUT_SEQ 3     /* a = bytes, b = capacity */

/* Step events. */
#define FPM_EV_ADMITTED 0
#define FPM_EV_PREEMPTED 1
#define FPM_EV_FINISHED 2
#define FPM_EV_REJECTED 3

typedef struct {
    int32_t kind;
    int64_t block;               /* block_size_tokens (> 0) */
    int64_t page;                /* page_size_bytes (> 0) */
    int64_t window;              /* sliding_window for WINDOW/CONV, else 0 */
    int64_t blocks_per_request;  /* RING/MAMBA */
    int64_t checkpoint_blocks;   /* MAMBA: 0 or 1 */
    int64_t checkpoint_alignment;/* MAMBA: 0 = none */
} fpm_group;

typedef struct { int64_t batch_size, total_prefill_tokens, total_kv_read_tokens; double wall_time; } fpm_prefill_row;
typedef struct { int64_t batch_size, total_kv_read_tokens; double wall_time; } fpm_decode_row;

typedef struct {
    const fpm_group *groups;
    int32_t ngroups;
    int64_t capacity_bytes;
    int64_t max_num_batched_tokens;
    int64_t max_num_seqs;
    int64_t max_model_len;
    int32_t enable_chunked_prefill;
    int32_t reserve_full_isl;
    int32_t prefix_caching;
    int64_t watermark_blocks; /* floor(watermark x (usable_blocks + 1)), block mode only */
    int64_t hash_block_size;  /* with prefix_caching */
    int32_t use_fixed_step;   /* 1: every step lasts fixed_step_seconds */
    double fixed_step_seconds;
    const fpm_prefill_row *prefill; /* sorted by (batch, tokens, kv) */
    int64_t nprefill;
    const fpm_decode_row *decode;   /* sorted by (batch, kv) */
    int64_t ndecode;
    /* Content origins of the requests (R-36, read only with prefix_caching):
     * request i's pairs are origin_upto/origin_key[origin_off .. +origin_len). */
    const int64_t *origin_upto;
    const int64_t *origin_key;
    int64_t norigin;
} fpm_replay_config;

typedef struct {
    int64_t prompt_len;
    int64_t output_len;
    int64_t arrival_step;
    double arrival_time;
    int64_t own_key;    /* key of the request's own tokens (>= 0) */
    int64_t origin_off; /* its (upto, key) pairs in the config's origin arrays */
    int64_t origin_len;
} fpm_replay_request;

typedef struct {
    int64_t step;
    double t_start, t_end, duration_s;
    int32_t extrapolated;
    int64_t sched_off, sched_len;   /* into output.sched */
    int64_t event_off, event_len;   /* into output.events */
    int64_t held_off, held_len;     /* held_len running requests; (1 + ngroups) int64 each in output.held */
    int64_t num_prefill_requests, sum_prefill_tokens, sum_prefill_kv_tokens;
    int64_t num_decode_requests, sum_decode_kv_tokens;
    int64_t running, waiting;
    int64_t used_bytes_scheduled, used_bytes_end, used_blocks_scheduled, used_blocks_end;
} fpm_step_rec;

typedef struct { int64_t req, tokens, computed_before; } fpm_sched_rec;
typedef struct { int32_t kind; int64_t req; } fpm_event_rec;

typedef struct {
    int32_t status;        /* 0 never arrived, FPM_RST_* */
    int32_t reject_reason; /* FPM_REJ_* */
    int64_t reject_a, reject_b;
    double arrival_time, first_scheduled_time, first_token_time, finish_time; /* NaN when unset */
    int64_t output_tokens, preemptions, prefix_hit_tokens;
} fpm_request_rec;

/* R-35 aggregates over the completed steps, filled whatever the buffer sizes. */
typedef struct {
    double first_t_start, last_t_end; /* of the first and the last step (0 without steps) */
    int64_t preemptions;              /* FPM_EV_PREEMPTED events */
    int64_t peak_running;             /* max over steps of running + requests finished in the step */
    int64_t peak_used_bytes;          /* max used_bytes_scheduled */
    int64_t peak_used_blocks;         /* max used_blocks_scheduled */
    int64_t extrapolated_steps;
} fpm_replay_totals;

/* Caller-owned output.  A buffer may be NULL with capacity 0.  The engine
 * always runs the whole trace: records past a capacity are counted but not
 * written, so after FPM_ENOSPC nsteps/nsched/nevents/nheld are the sizes a
 * complete call needs, and requests, totals and the error are complete. */
typedef struct {
    fpm_step_rec *steps;
    int64_t steps_cap, nsteps;
    fpm_sched_rec *sched;
    int64_t sched_cap, nsched;
    fpm_event_rec *events;
    int64_t events_cap, nevents;
    int64_t *held;
    int64_t held_cap, nheld; /* in int64 values */
    fpm_request_rec *requests; /* one per input request */
    int32_t error_code;
    int64_t err_i[5];
    double err_d;
    fpm_replay_totals totals;
} fpm_replay_output;

/* Replay a whole trace (R-11 ... R-31).  Returns FPM_OK (also when the run
 * stopped with output.error_code set), FPM_EINVAL for an input out of range,
 * FPM_ENOMEM, or FPM_ENOSPC when a step buffer is too small (every count is
 * the full need: allocate that much and call again; a call with all step
 * capacities 0 is a sizing pass). */
fpm_status fpm_replay_run(const fpm_replay_config *cfg, const fpm_replay_request *reqs, int64_t nreqs,
                          int32_t arrival_mode, fpm_replay_output *out);

/* One evaluation of vLLM 0.33.0's Mamba align split (04 G-2 ... G-6).
 * checkpoint_alignment 0 means "no checkpoint rule" (ckpt_all false). */
typedef struct {
    int64_t start, num_new_tokens, prompt_len, num_tokens, block_size, hash_block_size;
    int64_t max_num_batched_tokens, checkpoint_alignment, junction;
    int32_t junction_checkpoint;
} fpm_align_query;
fpm_status fpm_align_stop(const fpm_align_query *q, int64_t *out);

/* The latency model (R-28 ... R-31) on its own: the step time of a step with
 * the given prefill and decode entries; *missing_phase is -1, or 0/1 when the
 * table has no prefill/decode points that the step needs. */
fpm_status fpm_step_time(const fpm_replay_config *cfg, int64_t nprefill, int64_t prefill_tokens,
                         int64_t prefill_kv, int64_t ndecode, int64_t decode_kv, double *seconds,
                         int32_t *extrapolated, int32_t *missing_phase);

/* 01 P-14: the logical block range [*first, *end) group g holds during a
 * forward computing tokens computed .. target (target >= computed). */
fpm_status fpm_block_range(const fpm_group *g, int64_t computed, int64_t target, int64_t *first, int64_t *end);

/* 01 P-16 in blocks: the most one request holds in group g at context tokens
 * with max_num_tokens per step (context, max_num_tokens > 0). */
fpm_status fpm_peak_request_blocks(const fpm_group *g, int64_t context, int64_t max_num_tokens, int64_t *out);

#endif /* FPM_REPLAY_H */
