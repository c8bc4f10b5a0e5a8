/* The records of a replay as JSON lines (R-34 step records, R-35 request
 * records), byte for byte as fpmcore.jsonio.dumps_output (orjson) writes the
 * record objects of fpmcore.replay.records: compact, keys in the records'
 * order, one object and a newline per record, integers in decimal, floats in
 * their shortest round-trip form (1.0, 0.00001, 1e-7, 1e+16), NaN and the
 * infinities as null.
 *
 * The caller owns every buffer.  A formatting call writes whole records only:
 * it stops before a record that might not fit (FPM_ENOSPC), says where it
 * stopped, and the caller continues from there into more room.
 */
#ifndef FPM_RECORDS_H
#define FPM_RECORDS_H

#include <stdint.h>

#include "fpm_replay.h"
#include "fpm_status.h"

/* Strings that are written between quotes, already JSON-escaped (without the
 * quotes): string i is text[off[i] .. off[i + 1]), n + 1 offsets; longest is
 * the length of the longest one. */
typedef struct {
    const char *text;
    const int64_t *off;
    int64_t n;
    int64_t longest;
} fpm_text_list;

/* The shape of a replay's step records. */
typedef struct {
    int32_t ngroups;       /* the config's groups: each held_blocks_end entry lists one count per group */
    int32_t block_mode;    /* 0: the block fields are null */
    int64_t usable_blocks; /* free_blocks = usable_blocks - used_blocks_end */
} fpm_step_shape;

/* The step records of out's steps [first, out->nsteps) (the buffers an
 * fpm_replay_advance call filled), request i named ids->text[i].  Writes
 * whole records into buf[0 .. cap): *len bytes, *next the first step not
 * written.  FPM_OK when every step is written, FPM_ENOSPC when the room ran
 * out first (*need: the room the next step may take), FPM_EINVAL for a
 * record that points outside its buffers or a request outside ids. */
FPM_API fpm_status fpm_format_steps(const fpm_replay_output *out, int64_t first, const fpm_step_shape *shape,
                                    const fpm_text_list *ids, char *buf, int64_t cap, int64_t *len, int64_t *next,
                                    int64_t *need);

/* The trace's side of a request record, one entry per request of the input. */
typedef struct {
    const fpm_text_list *ids;
    const int64_t *prompt_len;
    const int64_t *output_len;
    const double *arrival_time; /* NaN: the trace line has no arrival_time (the engine's is written) */
} fpm_trace_fields;

/* What the summary needs of the request records written: counts and
 * sums added to, and the latencies written to the caller's arrays in record
 * order (ttft and e2e one per finished request, tpot one per finished
 * request with more than one output token). */
typedef struct {
    int64_t finished, rejected, output_tokens, prefix_hit_tokens;
    int64_t nttft, ntpot, ne2e;
} fpm_request_sums;

/* The request records of done[0 .. ndone) (completed requests), in order.
 * reasons: the reject_reason of each record as a JSON string with its
 * quotes, or empty for null (NULL: every reason is null).  ttft, tpot and e2e
 * have room for ndone values each.  Writes everything or nothing: FPM_ENOSPC
 * (*need: the room it takes) when cap may be too small. */
FPM_API fpm_status fpm_format_requests(const fpm_request_rec *done, int64_t ndone, const fpm_trace_fields *trace,
                                       const fpm_text_list *reasons, char *buf, int64_t cap, int64_t *len,
                                       int64_t *need, double *ttft, double *tpot, double *e2e,
                                       fpm_request_sums *sums);

/* One double as the records write it (at most 24 bytes and no terminator). */
FPM_API fpm_status fpm_format_double(double value, char *buf, int64_t *len);

/* v[0 .. n) in ascending order (the latencies of the summary's quantiles, none NaN): the order Python's sorted()
 * gives, but for the order of 0.0 and -0.0 among themselves, which a latency (a later time less an earlier
 * one) never is. */
FPM_API fpm_status fpm_sort_doubles(double *v, int64_t n);

#endif /* FPM_RECORDS_H */
