/* fakehost.c: see fakehost.h. Linear scans: tests hold little state. */
#include "fakehost.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char fh_fail_msg[2048];
int32_t fh_fail_handle = -2;
int fh_fail_calls;
int64_t fh_watermark = -INT64_MAX;
int64_t fh_processing_time;
int32_t fh_emit_result;
fh_bytes *fh_emitted;
size_t fh_nemitted;

static fh_bytes *keys;
static size_t nkeys;

typedef struct {
	char *name;
	int kind;
} state_decl;
static state_decl *states;
static int32_t nstates;

/* One value, list element or map entry. */
typedef struct {
	int32_t st;
	fh_bytes key, ns, mk, val;
} entry;
static entry *entries;
static size_t nentries;

typedef struct {
	fh_bytes key;
	int32_t domain;
	int64_t ts;
} timer;
static timer *timers;
static size_t ntimers;

static void trap(const char *why)
{
	fprintf(stderr, "fakehost: trap: %s\n", why);
	abort();
}

static void *xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (!p)
		trap("out of memory");
	return p;
}

static fh_bytes dup(const void *p, size_t n)
{
	fh_bytes b = {xrealloc(NULL, n), n};
	if (n)
		memcpy(b.p, p, n);
	return b;
}

static int eq(fh_bytes a, const void *p, size_t n) { return a.n == n && (n == 0 || memcmp(a.p, p, n) == 0); }

static fh_bytes key_of(int32_t h)
{
	if (h < 0 || (size_t)h >= nkeys)
		trap("bad key handle");
	return keys[h];
}

static void check_state(int32_t st, int kind)
{
	if (st < 0 || st >= nstates)
		trap("bad state id");
	if (states[st].kind != kind)
		trap("state of another kind");
}

void fh_set_keys(const fh_bytes *k, size_t n)
{
	for (size_t i = 0; i < nkeys; i++)
		free(keys[i].p);
	keys = xrealloc(keys, n * sizeof *keys);
	for (size_t i = 0; i < n; i++)
		keys[i] = dup(k[i].p, k[i].n);
	nkeys = n;
}

fh_bytes fh_string_key(const char *s, size_t len)
{
	uint8_t buf[16];
	size_t n = 0;
	if (!s) {
		buf[n++] = 0;
		return dup(buf, n);
	}
	buf[n++] = 1;
	size_t v = len;
	do {
		buf[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
		v >>= 7;
	} while (v);
	fh_bytes b = {xrealloc(NULL, n + len), n + len};
	memcpy(b.p, buf, n);
	memcpy(b.p + n, s, len);
	return b;
}

void fh_reset_fail(void)
{
	fh_fail_msg[0] = 0;
	fh_fail_handle = -2;
	fh_fail_calls = 0;
}

void weir_host_fail(int32_t h, const void *p, int32_t len)
{
	snprintf(fh_fail_msg, sizeof fh_fail_msg, "%.*s", (int)len, (const char *)p);
	fh_fail_handle = h;
	fh_fail_calls++;
}

void weir_host_log(int32_t level, const void *p, int32_t len)
{
	if (getenv("FAKEHOST_LOG"))
		fprintf(stderr, "guest log %d: %.*s\n", (int)level, (int)len, (const char *)p);
}

int32_t weir_host_emit(const void *p, int32_t len)
{
	fh_emitted = xrealloc(fh_emitted, (fh_nemitted + 1) * sizeof *fh_emitted);
	fh_emitted[fh_nemitted++] = dup(p, (size_t)len);
	return fh_emit_result;
}

int32_t weir_host_state(int32_t kind, const void *name, int32_t len)
{
	for (int32_t i = 0; i < nstates; i++) {
		if (strlen(states[i].name) == (size_t)len && memcmp(states[i].name, name, (size_t)len) == 0) {
			if (states[i].kind != kind)
				trap("state declared again with another kind");
			return i;
		}
	}
	states = xrealloc(states, (size_t)(nstates + 1) * sizeof *states);
	fh_bytes n = dup(name, (size_t)len + 1);
	n.p[len] = 0;
	states[nstates] = (state_decl){(char *)n.p, kind};
	return nstates++;
}

/* copy_out follows the ABI's convention for results of variable size. */
static int32_t copy_out(const void *p, size_t n, void *out, int32_t cap)
{
	if (n <= (size_t)cap && n)
		memcpy(out, p, n);
	return (int32_t)n;
}

int32_t weir_host_key(int32_t h, void *out, int32_t cap)
{
	fh_bytes k = key_of(h);
	return copy_out(k.p, k.n, out, cap);
}

int64_t weir_host_watermark(void) { return fh_watermark; }
int64_t weir_host_processing_time(void) { return fh_processing_time; }

static entry *find(int32_t st, fh_bytes key, const void *ns, int32_t nslen, const void *mk, int32_t mklen, size_t from)
{
	for (size_t i = from; i < nentries; i++) {
		entry *e = &entries[i];
		if (e->st == st && eq(e->key, key.p, key.n) && eq(e->ns, ns, (size_t)nslen) &&
		    (mklen < 0 || eq(e->mk, mk, (size_t)mklen)))
			return e;
	}
	return NULL;
}

static void remove_entry(entry *e)
{
	free(e->key.p);
	free(e->ns.p);
	free(e->mk.p);
	free(e->val.p);
	/* Keep the order: a list's elements are its entries in order. */
	memmove(e, e + 1, (size_t)(entries + nentries - (e + 1)) * sizeof *e);
	nentries--;
}

static void add(int32_t st, fh_bytes key, const void *ns, int32_t nslen, const void *mk, int32_t mklen,
		const void *v, int32_t vlen)
{
	entries = xrealloc(entries, (nentries + 1) * sizeof *entries);
	entries[nentries++] = (entry){st, dup(key.p, key.n), dup(ns, (size_t)nslen), dup(mk, (size_t)mklen),
				      dup(v, (size_t)vlen)};
}

static void clear(int32_t st, fh_bytes key, const void *ns, int32_t nslen)
{
	entry *e;
	while ((e = find(st, key, ns, nslen, NULL, -1, 0)))
		remove_entry(e);
}

int32_t weir_host_value_get(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap)
{
	check_state(st, WEIR_VALUE_STATE);
	entry *e = find(st, key_of(h), ns, nslen, NULL, 0, 0);
	return e ? copy_out(e->val.p, e->val.n, out, cap) : -1;
}

void weir_host_value_put(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *v, int32_t vlen)
{
	check_state(st, WEIR_VALUE_STATE);
	clear(st, key_of(h), ns, nslen);
	add(st, key_of(h), ns, nslen, NULL, 0, v, vlen);
}

void weir_host_value_delete(int32_t st, int32_t h, const void *ns, int32_t nslen)
{
	check_state(st, WEIR_VALUE_STATE);
	clear(st, key_of(h), ns, nslen);
}

/* append_elem appends b as the ABI encodes an element: i32 length, bytes. */
static void append_elem(uint8_t **buf, size_t *n, fh_bytes b)
{
	uint32_t l = (uint32_t)b.n;
	*buf = xrealloc(*buf, *n + 4 + b.n);
	memcpy(*buf + *n, &l, 4);
	if (b.n)
		memcpy(*buf + *n + 4, b.p, b.n);
	*n += 4 + b.n;
}

/* A list's elements are its entries, in insertion order. */
int32_t weir_host_list_get(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap)
{
	check_state(st, WEIR_LIST_STATE);
	size_t n = 0;
	uint8_t *buf = NULL;
	for (size_t i = 0; i < nentries; i++) {
		entry *e = &entries[i];
		if (e->st != st || !eq(e->key, key_of(h).p, key_of(h).n) || !eq(e->ns, ns, (size_t)nslen))
			continue;
		append_elem(&buf, &n, e->val);
	}
	int32_t r = n ? copy_out(buf, n, out, cap) : -1;
	free(buf);
	return r;
}

void weir_host_list_add(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *v, int32_t vlen)
{
	check_state(st, WEIR_LIST_STATE);
	add(st, key_of(h), ns, nslen, NULL, 0, v, vlen);
}

void weir_host_list_clear(int32_t st, int32_t h, const void *ns, int32_t nslen)
{
	check_state(st, WEIR_LIST_STATE);
	clear(st, key_of(h), ns, nslen);
}

int32_t weir_host_map_get(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen,
			  void *out, int32_t cap)
{
	check_state(st, WEIR_MAP_STATE);
	entry *e = find(st, key_of(h), ns, nslen, k, klen, 0);
	return e ? copy_out(e->val.p, e->val.n, out, cap) : -1;
}

void weir_host_map_put(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen,
		       const void *v, int32_t vlen)
{
	check_state(st, WEIR_MAP_STATE);
	weir_host_map_delete(st, h, ns, nslen, k, klen);
	add(st, key_of(h), ns, nslen, k, klen, v, vlen);
}

void weir_host_map_delete(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen)
{
	check_state(st, WEIR_MAP_STATE);
	entry *e = find(st, key_of(h), ns, nslen, k, klen, 0);
	if (e)
		remove_entry(e);
}

int32_t weir_host_map_entries(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap)
{
	check_state(st, WEIR_MAP_STATE);
	size_t n = 0;
	uint8_t *buf = NULL;
	for (entry *e = find(st, key_of(h), ns, nslen, NULL, -1, 0); e;
	     e = find(st, key_of(h), ns, nslen, NULL, -1, (size_t)(e - entries) + 1)) {
		append_elem(&buf, &n, e->mk);
		append_elem(&buf, &n, e->val);
	}
	int32_t r = n ? copy_out(buf, n, out, cap) : -1;
	free(buf);
	return r;
}

void weir_host_map_clear(int32_t st, int32_t h, const void *ns, int32_t nslen)
{
	check_state(st, WEIR_MAP_STATE);
	clear(st, key_of(h), ns, nslen);
}

static timer *find_timer(fh_bytes key, int32_t domain, int64_t ts)
{
	for (size_t i = 0; i < ntimers; i++)
		if (timers[i].domain == domain && timers[i].ts == ts && eq(timers[i].key, key.p, key.n))
			return &timers[i];
	return NULL;
}

void weir_host_timer_register(int32_t h, int32_t domain, int64_t ts)
{
	if (domain != WEIR_EVENT_TIME && domain != WEIR_PROCESSING_TIME)
		trap("bad timer domain");
	fh_bytes k = key_of(h);
	if (find_timer(k, domain, ts))
		return;
	timers = xrealloc(timers, (ntimers + 1) * sizeof *timers);
	timers[ntimers++] = (timer){dup(k.p, k.n), domain, ts};
}

void weir_host_timer_delete(int32_t h, int32_t domain, int64_t ts)
{
	timer *t = find_timer(key_of(h), domain, ts);
	if (t) {
		free(t->key.p);
		*t = timers[--ntimers];
	}
}

static int by_ts(const void *a, const void *b)
{
	const timer *x = a, *y = b;
	return (x->ts > y->ts) - (x->ts < y->ts);
}

int32_t fh_fire_timers(void)
{
	for (;;) {
		timer *due = NULL;
		size_t n = 0;
		for (size_t i = 0; i < ntimers;) {
			if (timers[i].domain == WEIR_EVENT_TIME && timers[i].ts <= fh_watermark) {
				due = xrealloc(due, (n + 1) * sizeof *due);
				due[n++] = timers[i];
				timers[i] = timers[--ntimers];
			} else {
				i++;
			}
		}
		if (n == 0) {
			free(due);
			return 0;
		}
		qsort(due, n, sizeof *due, by_ts);
		uint8_t *recs = xrealloc(NULL, 16 * n);
		fh_bytes *k = xrealloc(NULL, n * sizeof *k);
		for (size_t i = 0; i < n; i++) {
			uint64_t ts = (uint64_t)due[i].ts;
			uint32_t d = (uint32_t)due[i].domain, z = 0;
			memcpy(recs + 16 * i, &ts, 8);
			memcpy(recs + 16 * i + 8, &d, 4);
			memcpy(recs + 16 * i + 12, &z, 4);
			k[i] = due[i].key;
		}
		fh_set_keys(k, n);
		for (size_t i = 0; i < n; i++)
			free(due[i].key.p);
		free(due);
		free(k);
		uint8_t *in = weir_alloc((int32_t)(16 * n));
		memcpy(in, recs, 16 * n);
		free(recs);
		int32_t rc = weir_timers(in, (int32_t)(16 * n));
		if (rc)
			return rc;
	}
}

size_t fh_timers_pending(void) { return ntimers; }
size_t fh_state_entries(void) { return nentries; }

void fh_free(void)
{
	fh_set_keys(NULL, 0);
	free(keys);
	keys = NULL;
	for (int32_t i = 0; i < nstates; i++)
		free(states[i].name);
	free(states);
	states = NULL;
	nstates = 0;
	while (nentries)
		remove_entry(&entries[0]);
	free(entries);
	entries = NULL;
	for (size_t i = 0; i < ntimers; i++)
		free(timers[i].key.p);
	free(timers);
	timers = NULL;
	ntimers = 0;
	for (size_t i = 0; i < fh_nemitted; i++)
		free(fh_emitted[i].p);
	free(fh_emitted);
	fh_emitted = NULL;
	fh_nemitted = 0;
}
