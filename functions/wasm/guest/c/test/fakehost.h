/*
 * fakehost: the host functions of the ABI in memory, for native tests of
 * the C SDK (weir.c built with -DWEIR_NATIVE). Keyed state and timers
 * behave as the ABI says; a call the real host would trap on aborts.
 *
 * The test sets the key of each handle (fh_set_keys) before it calls an
 * export, and the watermark; fh_fire_timers then calls weir_timers with
 * every due event-time timer, as the host does when the watermark moves.
 */
#ifndef FAKEHOST_H
#define FAKEHOST_H

#include <stddef.h>
#include <stdint.h>

#include "weir.h"

typedef struct {
	uint8_t *p;
	size_t n;
} fh_bytes;

/* What the guest did. */
extern char fh_fail_msg[2048];
extern int32_t fh_fail_handle;
extern int fh_fail_calls;
extern int64_t fh_watermark;
extern int64_t fh_processing_time;
extern int32_t fh_emit_result; /* what emit returns */
/* Every payload emitted, in order. */
extern fh_bytes *fh_emitted;
extern size_t fh_nemitted;

/* fh_set_keys sets the key of handles 0..n-1. */
void fh_set_keys(const fh_bytes *keys, size_t n);
/* fh_string_key returns the key encoding of one string column (NULL s for null). */
fh_bytes fh_string_key(const char *s, size_t len);
/* fh_fire_timers calls weir_timers with every event-time timer at or
 * before the watermark, in timestamp order, until none is due; the first
 * non-zero result, or 0. */
int32_t fh_fire_timers(void);
/* fh_timers_pending counts the timers set. */
size_t fh_timers_pending(void);
/* fh_state_entries counts the state entries held. */
size_t fh_state_entries(void);
/* fh_reset_fail forgets the last failure. */
void fh_reset_fail(void);
void fh_free(void);

#endif
