/* Trace input: the line readers of the Mooncake format and of fpmcore's own
 * JSONL, the origins of content-block ids and the engine-form requests, all
 * on columns (no object per request).
 *
 * FPM_TRACE_MOONCAKE takes the lines of the Mooncake release's own shape,
 *     {"timestamp": T, "input_length": P, "output_length": O, "hash_ids": [I, ...]}
 * (the four fields in this order, integers below 10**18, one optional space
 * after each ':' and ','), and blank lines.  Any other line, and any line that
 * breaks a rule of the format (a length outside 1 ... 2**40, a count of ids
 * other than ceil(P / hash_block_tokens), a timestamp before the previous
 * one), ends the reading with FPM_TRACE_REFUSED: the host then reads the whole
 * file with its reference reader (fpmcore.traces.mooncake), which accepts
 * every valid line and names the fault of an invalid one.
 *
 * FPM_TRACE_FPMCORE takes the timed lines of fpmcore's JSONL (06 R-32),
 *     {"request_id": "ID", "arrival_time": T, "prompt_len": P, "output_len": O}
 * (exactly these four fields, in any order, JSON whitespace between the
 * tokens; ID printable ASCII without escapes; T a JSON number >= 0 that is a
 * finite double, read as Python's float() reads it; P and O integers in
 * 1 ... 2**40), and blank lines after the last request.  Any other line (the
 * optional fields, escapes, a blank line between two requests) and any line
 * that breaks a rule (a request_id given before) ends the reading with
 * FPM_TRACE_REFUSED: the host's reader (fpmcore.replay.trace) then reads the
 * file.  Arrival times are kept as they are (no shift, any order).
 *
 * What either reader keeps equals what the reference reader and the window
 * and over-long transforms (fpmcore.traces.transforms) keep.
 */
#ifndef FPM_TRACE_H
#define FPM_TRACE_H

#include <stdint.h>

#include "fpm_replay.h"
#include "fpm_status.h"

/* The reading's state after fpm_trace_reader_feed. */
#define FPM_TRACE_MORE 0    /* every line so far was read: feed the next bytes */
#define FPM_TRACE_DONE 1    /* the window is complete (and the request after it checked): read no further */
#define FPM_TRACE_REFUSED 2 /* a line the reader does not take: read the file with the reference reader */

/* The largest length of a line (the Mooncake release's bound, 2**40). */
#define FPM_TRACE_MAX_TOKENS 1099511627776LL

/* The formats of fpm_trace_window.format. */
#define FPM_TRACE_MOONCAKE 0
#define FPM_TRACE_FPMCORE 1

typedef struct {
    int64_t hash_block_tokens; /* tokens per content-block id (>= 1) */
    int64_t start;             /* requests before it are read and checked, not kept (>= 0) */
    int64_t end;               /* < 0: no end; else requests [start, end) are kept and request end is checked */
    int64_t max_prompt_len;    /* < 0: none; else a longer prompt is dropped, or clipped (clip) */
    int32_t clip;
    int32_t format;            /* FPM_TRACE_MOONCAKE or FPM_TRACE_FPMCORE */
} fpm_trace_window;

/* The kept requests, in file order; pointers valid until the next feed or the close. */
typedef struct {
    int64_t n;
    const int64_t *line;         /* Mooncake: each request's line number (its request_id) */
    const int64_t *prompt_len;
    const int64_t *output_len;
    double *arrival_time;        /* Mooncake: seconds after the first request's timestamp; fpm_trace_scale_times
                                    scales them */
    const int64_t *hash_off;     /* Mooncake: n + 1 offsets into hash_ids */
    const int64_t *hash_ids;
    int64_t nids;
    int64_t over_long_dropped;
    int64_t over_long_clipped;
    int64_t lines;               /* lines read so far */
    int64_t refused_line;        /* the line that ended the reading with FPM_TRACE_REFUSED, else 0 */
    /* FPM_TRACE_FPMCORE: request i's request_id is id_text[id_off[i] .. id_off[i + 1]) (n + 1 offsets; the
       text needs no JSON escape), id_longest the longest (line, hash_off and hash_ids are NULL, nids 0);
       NULL and 0 for a Mooncake trace */
    const char *id_text;
    const int64_t *id_off;
    int64_t id_longest;
} fpm_trace_columns;

typedef struct fpm_trace_reader fpm_trace_reader;

/* A reader of the window w.  FPM_EINVAL for w out of range, FPM_ENOMEM. */
FPM_API fpm_status fpm_trace_reader_open(const fpm_trace_window *w, fpm_trace_reader **out);

/* Read the whole lines of buf[0 .. len) (and, with at_end, a last line
 * without its line end); *consumed is the bytes read (the rest begins an
 * unfinished line: feed it again with the bytes that follow), *state one of
 * FPM_TRACE_*.  A reader that is done or refused reads nothing more. */
FPM_API fpm_status fpm_trace_reader_feed(fpm_trace_reader *r, const char *buf, int64_t len, int32_t at_end,
                                         int64_t *consumed, int32_t *state);

FPM_API fpm_status fpm_trace_reader_columns(fpm_trace_reader *r, fpm_trace_columns *out);

FPM_API void fpm_trace_reader_close(fpm_trace_reader *r);

/* t[i] = (t[i] - shift) * factor: the time transforms (--start's shift, --time-scale, --rate). */
FPM_API fpm_status fpm_trace_scale_times(double *t, int64_t n, double shift, double factor);

/* R-36 origin breakpoints of requests given as content-block ids: for the id
 * at position j = hash_off[i] + k of request i, upto[j] = min((k + 1) * H,
 * prompt_len[i]) and key[j] the key of the chain of ids hash_ids[hash_off[i]
 * ... j]; chains get keys first_key, first_key + 1, ... in order of
 * appearance.  *nkeys is the number of distinct chains. */
FPM_API fpm_status fpm_hash_origins(int64_t n, const int64_t *prompt_len, const int64_t *hash_off,
                                    const int64_t *hash_ids, int64_t hash_block_tokens, int64_t first_key,
                                    int64_t *upto, int64_t *key, int64_t *nkeys);

/* The engine-form fields of n requests into reqs (an array of
 * fpm_replay_request): own key i, origins hash_off[i] ... hash_off[i + 1]
 * (none when hash_off is NULL), priority 0; with step_seconds > 0 the arrival
 * step is the first step k with k * step_seconds >= arrival_time[i],
 * else 0.  *bad is the first request whose lengths exceed FPM_MAX_TOKENS or
 * whose arrival step exceeds max_arrival_step (nothing is filled from it on),
 * else -1. */
FPM_API fpm_status fpm_trace_requests(int64_t n, const int64_t *prompt_len, const int64_t *output_len,
                                      const double *arrival_time, const int64_t *hash_off, double step_seconds,
                                      int64_t max_arrival_step, fpm_replay_request *reqs, int64_t *bad);

#endif /* FPM_TRACE_H */
