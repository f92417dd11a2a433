/*
 * zone_stats_test: examples/wasm/zone-stats/c/zone_stats.c on the C SDK
 * over the fake host. Rides arrive out of order in batches while the
 * watermark trails them; the windows emitted must equal a recomputation
 * from the rides that were not late when they came. Each scenario runs in
 * a child process, since a module instance is opened once.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "fakehost.h"
#include "weir.h"

enum { R_ID, R_ZONE, R_FARE, R_TS };
static const weir_field rides[] = {
	[R_ID] = {"ride_id", WEIR_INT64},
	[R_ZONE] = {"zone", WEIR_STRING},
	[R_FARE] = {"fare", WEIR_FLOAT64},
	[R_TS] = {"ts", WEIR_TIMESTAMP_MS},
};

static int32_t open_doc(const char *doc)
{
	size_t n = strlen(doc);
	uint8_t *in = weir_alloc((int32_t)n);
	memcpy(in, doc, n);
	return weir_open(in, (int32_t)n);
}

/* A window as the test expects it. */
typedef struct {
	int zone; /* -1 for null */
	int64_t start, n;
	double total;
	int has_total;
	int seen;
} window;

static window *want;
static size_t nwant;

static window *window_of(int zone, int64_t start)
{
	for (size_t i = 0; i < nwant; i++)
		if (want[i].zone == zone && want[i].start == start)
			return &want[i];
	want = realloc(want, (nwant + 1) * sizeof *want);
	want[nwant] = (window){zone, start, 0, 0, 0, 0};
	return &want[nwant++];
}

static const char *zones[] = {"downtown", "airport", "harbor", "", "north \xc3\xa9"};

static int64_t floor_div(int64_t a, int64_t b) { return a / b - (a % b != 0 && a < 0); }

/* simulate feeds rides through the function and checks its output. */
static void simulate(int64_t size, const char *size_json, int use_time_column, int64_t t0)
{
	char doc[256], num[32];
	snprintf(num, sizeof num, "%" PRId64, size);
	snprintf(doc, sizeof doc,
		 "{\"function\": \"zone-stats\", \"version\": 1, \"operator\": \"stats\", \"subtask\": 0, "
		 "\"parallelism\": 1, \"keyColumns\": [\"zone\"], \"timeColumn\": %d, \"timeOffset\": 0, "
		 "\"config\": {%s%s}}",
		 use_time_column ? R_TS : -1, size_json ? "" : "\"size\": ", size_json ? size_json : num);
	CHECK(open_doc(doc) == 0, "open: %s", fh_fail_msg);

	weir_builder b;
	weir_encoder enc = {0};
	weir_buf payload = {0};
	weir_builder_init(&b, rides, 4);
	int64_t max_ts = t0, late = 0, rows = 0;
	int64_t jitter = 3 * size / 2 + 1;
	for (int batch = 0; batch < 200; batch++) {
		int32_t n = 1 + (int32_t)(next() % 60);
		fh_bytes *keys = calloc((size_t)n, sizeof *keys);
		weir_builder_reset(&b);
		for (int32_t r = 0; r < n; r++) {
			int zone = next() % 17 == 0 ? -1 : (int)(next() % 5);
			int64_t ts = max_ts - jitter + (int64_t)(next() % (uint64_t)(jitter + size / 4 + 2));
			int null_ts = next() % 29 == 0, null_fare = next() % 7 == 0;
			double fare = (double)(next() % 10000) / 100.0;
			if (ts > max_ts)
				max_ts = ts;
			weir_set_int64(&b, R_ID, rows++);
			if (zone >= 0)
				weir_set_string(&b, R_ZONE, zones[zone], strlen(zones[zone]));
			if (!null_fare)
				weir_set_float64(&b, R_FARE, fare);
			if (!null_ts)
				weir_set_timestamp(&b, R_TS, ts);
			weir_builder_row(&b);
			keys[r] = fh_string_key(zone >= 0 ? zones[zone] : NULL, zone >= 0 ? strlen(zones[zone]) : 0);
			if (null_ts || !use_time_column)
				continue; /* no event time: in no window */
			int64_t start = floor_div(ts, size) * size;
			if (start + size - 1 <= fh_watermark) {
				late++;
				continue;
			}
			window *w = window_of(zone, start);
			w->n++;
			if (!null_fare) {
				w->total += fare;
				w->has_total = 1;
			}
		}
		payload.len = 0;
		weir_encode(&enc, &b, &payload);
		fh_set_keys(keys, (size_t)n);
		for (int32_t r = 0; r < n; r++)
			free(keys[r].p);
		free(keys);
		uint8_t *in = weir_alloc((int32_t)payload.len);
		memcpy(in, payload.ptr, payload.len);
		CHECK(weir_process(in, (int32_t)payload.len) == 0, "process batch %d: %s", batch, fh_fail_msg);
		if (batch % 3 == 2) {
			fh_watermark = max_ts - size; /* bounded out-of-orderness */
			CHECK(fh_fire_timers() == 0, "timers: %s", fh_fail_msg);
		}
	}
	fh_watermark = INT64_MAX; /* the end of a bounded input */
	CHECK(fh_fire_timers() == 0, "timers: %s", fh_fail_msg);
	CHECK(late > 0 || !use_time_column, "some rides were late");

	weir_decoder dec = {0};
	size_t got = 0;
	for (size_t i = 0; i < fh_nemitted; i++) {
		weir_batch d;
		if (weir_decode(&dec, fh_emitted[i].p, fh_emitted[i].n, &d)) {
			CHECK(0, "decode output %zu: %s", i, dec.err);
			continue;
		}
		CHECK(d.ncols == 5 && strcmp(d.cols[0].name, "window_start") == 0 && strcmp(d.cols[4].name, "total") == 0,
		      "output schema");
		for (int32_t r = 0; r < d.rows; r++, got++) {
			int zone = -1;
			if (!weir_is_null(&d, 2, r)) {
				weir_str z = weir_string(&d, 2, r);
				for (int k = 0; k < 5; k++)
					if (z.len == strlen(zones[k]) && memcmp(z.ptr, zones[k], z.len) == 0)
						zone = k;
				CHECK(zone >= 0, "zone %.*s", (int)z.len, z.ptr);
			}
			int64_t start = weir_timestamp(&d, 0, r), end = weir_timestamp(&d, 1, r);
			window *w = window_of(zone, start);
			CHECK(end == start + size, "window [%" PRId64 ", %" PRId64 ")", start, end);
			CHECK(!w->seen, "window %d/%" PRId64 " emitted twice", zone, start);
			w->seen = 1;
			CHECK(weir_int64(&d, 3, r) == w->n, "window %d/%" PRId64 ": n %" PRId64 ", want %" PRId64, zone,
			      start, weir_int64(&d, 3, r), w->n);
			CHECK(weir_is_null(&d, 4, r) == !w->has_total &&
				      (!w->has_total || weir_float64(&d, 4, r) == w->total),
			      "window %d/%" PRId64 ": total %g, want %g (%d)", zone, start, weir_float64(&d, 4, r), w->total,
			      w->has_total);
		}
	}
	for (size_t i = 0; i < nwant; i++)
		CHECK(want[i].seen, "window %d/%" PRId64 " not emitted", want[i].zone, want[i].start);
	CHECK(got == nwant && (nwant > 50 || !use_time_column), "%zu windows, want %zu", got, nwant);
	CHECK(fh_state_entries() == 0, "%zu state entries left", fh_state_entries());
	CHECK(fh_timers_pending() == 0, "%zu timers left", fh_timers_pending());
	printf("size %" PRId64 ": %" PRId64 " rides (%" PRId64 " late), %zu windows, %zu payloads\n", size, rows, late,
	       nwant, fh_nemitted);
	weir_decoder_free(&dec);
	weir_builder_free(&b);
	weir_buf_free(&payload);
	free(want);
}

/* open_fails checks that the open document doc fails with a message
 * containing msg. */
static void open_fails(const char *doc, const char *msg)
{
	CHECK(open_doc(doc) != 0 && strstr(fh_fail_msg, msg), "open %s: %s", doc, fh_fail_msg);
}

/* run runs fn(arg) in a child process: 1 if it passed. */
static int run(const char *name, void (*fn)(const void *), const void *arg)
{
	fflush(stdout);
	pid_t pid = fork();
	if (pid == 0) {
		fn(arg);
		fh_free();
		fflush(stdout);
		_exit(failed != 0);
	}
	int status = 1;
	waitpid(pid, &status, 0);
	int ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	if (!ok)
		fprintf(stderr, "FAIL: %s\n", name);
	return ok;
}

typedef struct {
	int64_t size;
	const char *size_json; /* the config's members, NULL for "size": size */
	int use_time_column;
	int64_t t0;
} scenario;

static void run_scenario(const void *arg)
{
	const scenario *s = arg;
	simulate(s->size, s->size_json, s->use_time_column, s->t0);
}

static void run_open_fails(const void *arg)
{
	const char *const *c = arg;
	open_fails(c[0], c[1]);
}

int main(void)
{
	static const scenario scenarios[] = {
		{10000, NULL, 1, 1700000000000},
		{10000, NULL, 1, -200000}, /* negative event times, and windows that straddle 0 */
		{10000, NULL, 0, 0},	   /* an input without event time: no windows */
		{7, NULL, 1, -500},
		{1, NULL, 1, 0},
		{10000, "", 1, 1700000000000},		  /* the default */
		{60000, "\"size\": \"1m\"", 1, -1700000000000}, /* a duration */
	};
	static const char *const bad[][2] = {
		{"{\"keyColumns\": [\"zone\"], \"config\": {\"size\": 0}}", "config size"},
		{"{\"keyColumns\": [\"zone\"], \"config\": {\"size\": 1.5}}", "config size"},
		{"{\"keyColumns\": [\"zone\"], \"config\": {\"size\": \"10\"}}", "config size"},
		{"{\"keyColumns\": [\"zone\"], \"config\": {\"size\": \"1500us\"}}", "config size"},
		{"{\"keyColumns\": [\"zone\"], \"config\": {\"size\": \"-10s\"}}", "config size"},
		{"{\"keyColumns\": [\"zone\"], \"config\": {\"size\": true}}", "config size"},
		{"{\"keyColumns\": [\"zone\"], \"config\": {\"sise\": 10}}", "unknown config sise"},
		{"{\"keyColumns\": [\"ride_id\"]}", "want keyBy: [zone]"},
		{"{\"keyColumns\": [\"zone\", \"ride_id\"]}", "want keyBy: [zone]"},
	};
	int scenarios_ok = 0, scenarios_failed = 0;
	for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) {
		char name[64];
		snprintf(name, sizeof name, "scenario %zu", i);
		run(name, run_scenario, &scenarios[i]) ? scenarios_ok++ : scenarios_failed++;
	}
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		run(bad[i][0], run_open_fails, bad[i]) ? scenarios_ok++ : scenarios_failed++;
	printf("%d passed, %d failed\n", scenarios_ok, scenarios_failed);
	return scenarios_failed != 0;
}
