/* Replay engine: grouped KV pool, vLLM's scheduler loop, FPM latency model
 * (spec chapter 06, rules R-4 ... R-31), and with prefix_caching the block
 * pool of vLLM with content keys, hits and eviction (R-36 ... R-38).
 *
 * A replay is opened once (fpm_replay_open), advanced in chunks of steps
 * (fpm_replay_advance: the caller can show progress and stream the records
 * of each chunk) and closed (fpm_replay_close); fpm_replay_run replays a
 * whole trace in one call.  Working memory is bounded by the number of
 * requests and the pool, never by the number of steps.
 *
 * Inputs are validated by the Python host (fpmcore.replay) with the spec's
 * diagnostics; this library re-checks every range it relies on (the FPM_MAX_*
 * bounds below) and answers FPM_EINVAL, so a direct caller can neither hang
 * it nor overflow its integers.
 */
#ifndef FPM_REPLAY_H
#define FPM_REPLAY_H

#include <stdint.h>

#include "fpm_status.h"

/* Bounds checked at the boundary (FPM_EINVAL beyond them). */
#define FPM_MAX_TOKENS 1099511627776LL       /* 2**40: prompt, output, max_model_len, token budgets, thresholds */
#define FPM_MAX_BYTES 9007199254740992LL     /* 2**53: capacity, pages and every holding in bytes */
#define FPM_MAX_ARRIVAL_STEP 1099511627776LL /* 2**40: arrival_step */
#define FPM_MAX_STEPS 1099511627776LL        /* 2**40: max_steps */
#define FPM_MAX_PRIORITY 4611686018427387904LL /* 2**62: |priority| */

/* Group kinds. */
#define FPM_KIND_FULL 0   /* attention, full history */
#define FPM_KIND_WINDOW 1 /* attention with a sliding window */
#define FPM_KIND_CONV 2   /* convolution (windowed) */
#define FPM_KIND_RING 3   /* state group without checkpoint fields */
#define FPM_KIND_MAMBA 4  /* state group with checkpoint fields (align mode with prefix caching) */
#define FPM_KIND_CHUNK 5  /* chunked-local attention: only the current chunk of `window` tokens is attended */

/* Arrival modes. */
#define FPM_ARRIVE_STEP 0 /* request enters at the start of step arrival_step */
#define FPM_ARRIVE_TIME 1 /* timed arrivals with a latency table; idle periods are no step */

/* Scheduling policies (vLLM --scheduling-policy). */
#define FPM_POLICY_FCFS 0
#define FPM_POLICY_PRIORITY 1

/* Stop errors (output.error_code). */
#define FPM_RERR_OVERSIZED 1  /* err_i = {bytes, tokens, computed, capacity, fixed state bytes} */
#define FPM_RERR_STALL 2      /* err_i = {step, running, waiting}, err_d = t */
#define FPM_RERR_NO_PHASE 3   /* err_i[0] = 0 prefill, 1 decode */
#define FPM_RERR_STEP_LIMIT 4 /* the replay reached config.max_steps steps: err_i = {max_steps, step} */

/* Request outcome. */
#define FPM_RST_FINISHED 1
#define FPM_RST_REJECTED 2
#define FPM_REJ_PROMPT 1        /* a = prompt_len, b = max_model_len */
#define FPM_REJ_FINAL_FORWARD 2 /* a = bytes, b = capacity */
#define FPM_REJ_INPUT_SEQ 3     /* a = bytes, b = capacity */
#define FPM_REJ_QUEUED_REQS 4   /* max_num_queued_reqs: a = unfinished requests, b = the limit */
#define FPM_REJ_QUEUED_TOKENS 5 /* max_num_queued_tokens: a = prompt tokens in prefill, b = the limit */

/* Step events. */
#define FPM_EV_ADMITTED 0
#define FPM_EV_PREEMPTED 1
#define FPM_EV_FINISHED 2
#define FPM_EV_REJECTED 3

typedef struct {
    int32_t kind;
    int64_t block;               /* block_size_tokens (> 0) */
    int64_t page;                /* page_size_bytes (> 0) */
    int64_t window;              /* sliding_window for WINDOW/CONV, attention_chunk_size for CHUNK, else 0 */
    int64_t blocks_per_request;  /* RING/MAMBA */
    int64_t checkpoint_blocks;   /* MAMBA: 0 or 1 */
    int64_t checkpoint_alignment;/* MAMBA: 0 = none */
} fpm_group;

typedef struct { int64_t batch_size, total_prefill_tokens, total_kv_read_tokens; double wall_time; } fpm_prefill_row;
typedef struct { int64_t batch_size, total_kv_read_tokens; double wall_time; } fpm_decode_row;

/* Rules that differ between runtime releases: the switches of fpmcore.replay.rules.ReplayRules, with the
 * same names in the same order and the same polarity (tests/replay/test_rules_vocabulary.py).  All zero is the
 * engine's reference runtime (vLLM 0.33.0); each field names how a release departs from it. */
typedef struct {
    int32_t check_before_release;  /* drop window blocks and align extras only after a successful check */
    int32_t free_uncached_to_back; /* freed blocks without content join the back of the queue too */
    int32_t mamba_hits_same_step;  /* a Mamba state cached in this step can be hit at once */
    int32_t window_cap_exact;      /* the window cap without vLLM's extra alignment block */
    int32_t long_prefill_cap_always;  /* the long-prefill cap also while one request runs or waits */
    int32_t budget_scheduled_only;    /* max_num_scheduled_tokens alone is a step's budget (not capped by
                                         max_num_batched_tokens) */
    int32_t priority_self_preemption_stops; /* priority: the running scan ends when a request preempted itself */
    int32_t priority_shift_if_scheduled;    /* priority: only a victim scheduled in the step moves the scan back */
    int32_t dense_retention;          /* every full block of a windowed or Mamba group is cached */
    int32_t align_last_stop_at_tokens;/* G-6: the last cacheable stop is at or below the tokens, not below */
    int32_t mamba_boundary_recached;  /* a Mamba state keyed at the prompt boundary is keyed again (cached this step)
                                         when its request is scheduled from there */
    int32_t no_mamba_checkpoints;     /* the release has no Mamba prefill checkpoint blocks (refused) */
    int32_t no_ring_groups;           /* the release has no ring state groups (refused) */
} fpm_replay_rules;

typedef struct {
    const fpm_group *groups;
    int32_t ngroups;
    int64_t capacity_bytes;
    int64_t max_num_batched_tokens;   /* input budget of a step */
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
    double shared_step_seconds;     /* a step with both phases pays it once (RD-16); 0: P + D */
    /* Content origins of the requests (R-36, read only with prefix_caching):
     * request i's pairs are origin_upto/origin_key[origin_off .. +origin_len). */
    const int64_t *origin_upto;
    const int64_t *origin_key;
    int64_t norigin;
    /* vLLM scheduler settings (0 or negative: vLLM's default). */
    int64_t max_num_scheduled_tokens;     /* token budget of a step; 0: max_num_batched_tokens */
    int64_t max_num_active_seqs;          /* admission limit into running; 0: max_num_seqs */
    int64_t long_prefill_token_threshold; /* 0: no cap */
    int32_t long_prefill_adaptive;        /* floor the cap at max_num_batched_tokens / (running + waiting) */
    int64_t prefill_schedule_interval;    /* admit prefill once every N executed steps; 0 or 1: every step */
    int32_t policy;                       /* FPM_POLICY_* */
    int64_t max_num_queued_reqs;          /* < 0: no limit */
    int64_t max_num_queued_tokens;        /* < 0: no limit */
    int64_t max_steps;                    /* steps before FPM_RERR_STEP_LIMIT (jumped ones too); 0: FPM_MAX_STEPS */
    fpm_replay_rules rules;
} fpm_replay_config;

typedef struct {
    int64_t prompt_len;
    int64_t output_len;
    int64_t arrival_step;
    double arrival_time;
    int64_t own_key;    /* key of the request's own tokens (>= 0) */
    int64_t origin_off; /* its (upto, key) pairs in the config's origin arrays */
    int64_t origin_len;
    int64_t priority;   /* policy priority: lower is scheduled first */
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
    int32_t status;        /* 0 not completed, FPM_RST_* */
    int32_t reject_reason; /* FPM_REJ_* */
    int64_t reject_a, reject_b;
    double arrival_time, first_scheduled_time, first_token_time, finish_time; /* NaN when unset */
    int64_t output_tokens, preemptions, prefix_hit_tokens;
    int64_t request; /* the request's index in the input */
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

/* Caller-owned output.  A buffer may be NULL with capacity 0.
 *
 * fpm_replay_advance fills the step buffers from their start with the
 * steps of this call (counts nsteps ... ndone are this call's) and stops
 * before a step whose records would not fit: that step is kept and written
 * first by the next call.  Without step buffers (steps == NULL) no step
 * record is written and the engine jumps over idle periods and decode-only
 * stretches in O(1) per request (the totals and request records are the
 * same as with records).  done receives the requests completed (finished or
 * rejected) in this call.
 *
 * fpm_replay_run always runs the whole trace: records past a capacity are
 * counted but not written, so after FPM_ENOSPC nsteps/nsched/nevents/nheld
 * are the sizes a complete call needs; requests (one per input request),
 * totals and the error are complete. */
typedef struct {
    fpm_step_rec *steps;
    int64_t steps_cap, nsteps;
    fpm_sched_rec *sched;
    int64_t sched_cap, nsched;
    fpm_event_rec *events;
    int64_t events_cap, nevents;
    int64_t *held;
    int64_t held_cap, nheld; /* in int64 values */
    fpm_request_rec *done;   /* fpm_replay_advance */
    int64_t done_cap, ndone;
    fpm_request_rec *requests; /* fpm_replay_run: one per input request */
    int32_t ended;             /* the replay is over: every request completed, or it stopped (error_code) */
    int32_t error_code;
    int64_t err_i[5];
    double err_d;
    fpm_replay_totals totals;  /* of every step so far */
    int64_t steps_total;       /* steps so far (the next step's number) */
    int64_t completed_total;   /* requests completed so far */
} fpm_replay_output;

/* One replay in progress (opaque). */
typedef struct fpm_replay fpm_replay;

/* Open a replay of nreqs requests (R-11 ... R-31).  The library keeps
 * pointers to cfg's arrays and to reqs: they must outlive the replay.
 * Returns FPM_EINVAL for an input out of range, FPM_ENOMEM. */
FPM_API fpm_status fpm_replay_open(const fpm_replay_config *cfg, const fpm_replay_request *reqs, int64_t nreqs,
                           int32_t arrival_mode, fpm_replay **out);

/* Run up to max_steps more steps (max_steps >= 1), fewer when the replay
 * ends or an output buffer fills.  Returns FPM_OK, or FPM_ENOSPC when not
 * even one step fits the buffers (the counts are that step's needs). */
FPM_API fpm_status fpm_replay_advance(fpm_replay *rp, int64_t max_steps, fpm_replay_output *out);

FPM_API void fpm_replay_close(fpm_replay *rp);

/* Replay a whole trace.  Returns FPM_OK (also when the run stopped with
 * output.error_code set), FPM_EINVAL for an input out of range,
 * FPM_ENOMEM, or FPM_ENOSPC when a step buffer is too small (every count is
 * the full need: allocate that much and call again; a call with all step
 * capacities 0 is a sizing pass). */
FPM_API fpm_status fpm_replay_run(const fpm_replay_config *cfg, const fpm_replay_request *reqs, int64_t nreqs,
                          int32_t arrival_mode, fpm_replay_output *out);

/* One evaluation of vLLM's Mamba align split (04 G-2 ... G-6).
 * checkpoint_alignment 0 means "no checkpoint rule" (ckpt_all false). */
typedef struct {
    int64_t start, num_new_tokens, prompt_len, num_tokens, block_size, hash_block_size;
    int64_t max_num_batched_tokens, checkpoint_alignment, junction;
    int32_t junction_checkpoint;
    int32_t last_stop_at_tokens; /* G-6: the last cacheable stop at or below num_tokens (a release rule) */
} fpm_align_query;
FPM_API fpm_status fpm_align_stop(const fpm_align_query *q, int64_t *out);

/* The latency model (R-28 ... R-31) on its own: the step time of a step with
 * the given prefill and decode entries; *missing_phase is -1, or 0/1 when the
 * table has no prefill/decode points that the step needs. */
FPM_API fpm_status fpm_step_time(const fpm_replay_config *cfg, int64_t nprefill, int64_t prefill_tokens,
                         int64_t prefill_kv, int64_t ndecode, int64_t decode_kv, double *seconds,
                         int32_t *extrapolated, int32_t *missing_phase);

/* 01 P-14: the logical block range [*first, *end) group g holds during a
 * forward computing tokens computed .. target (0 <= computed <= target <= FPM_MAX_TOKENS). */
FPM_API fpm_status fpm_block_range(const fpm_group *g, int64_t computed, int64_t target, int64_t *first, int64_t *end);

/* 01 P-16 in blocks: the most one request holds in group g at context tokens
 * with max_num_tokens per step (0 < context, max_num_tokens <= FPM_MAX_TOKENS). */
FPM_API fpm_status fpm_peak_request_blocks(const fpm_group *g, int64_t context, int64_t max_num_tokens, int64_t *out);

#endif /* FPM_REPLAY_H */
