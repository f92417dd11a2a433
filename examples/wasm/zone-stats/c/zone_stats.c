/*
 * zone-stats in C: count and sum of fare per zone and tumbling event-time
 * window, over rides {ride_id int64, zone string, fare float64, ts
 * timestamp_ms} keyed by zone. The same function as the Go one
 * (examples/wasm/zone-stats/go) and as the built-in
 *
 *     window: {type: tumbling, size: 10s}
 *     aggregate: {n: count(), total: sum(fare)}
 *
 * Per key and window [start, start+size) it keeps one keyed value ("acc"),
 * under the window start as namespace (8 bytes, little-endian): the row
 * count (int64), the sum of fares (float64), both 8 bytes little-endian,
 * and a byte saying whether a row with a fare came (sum(fare) is null
 * otherwise) — one value, so a row costs one read and one write of state.
 * A row is late, and
 * dropped, when its window's last millisecond is at or before the
 * watermark; a row without event time (the input's time column, plus its
 * offset) is dropped too. An event-time timer
 * at the window's last millisecond emits the window and deletes its state.
 *
 * Config: size, the window length: milliseconds as a number, or a duration
 * string like "10s" or "1m" (default 10000).
 */
#include <string.h>

#include "weir.h"

static const char describe[] =
	"{\"input\": [{\"name\": \"zone\", \"type\": \"string\"},"
	" {\"name\": \"fare\", \"type\": \"float64\"},"
	" {\"name\": \"ts\", \"type\": \"timestamp_ms\"}],"
	" \"output\": [{\"name\": \"window_start\", \"type\": \"timestamp_ms\"},"
	" {\"name\": \"window_end\", \"type\": \"timestamp_ms\"},"
	" {\"name\": \"zone\", \"type\": \"string\"},"
	" {\"name\": \"n\", \"type\": \"int64\"},"
	" {\"name\": \"total\", \"type\": \"float64\"}],"
	" \"timeColumn\": \"window_end\", \"timeOffset\": -1,"
	" \"doc\": \"count and sum of fare per zone and event-time window (config size: ms or a duration, default 10s)\"}";

enum { OUT_START, OUT_END, OUT_ZONE, OUT_N, OUT_TOTAL };

static const weir_field output[] = {
	[OUT_START] = {"window_start", WEIR_TIMESTAMP_MS},
	[OUT_END] = {"window_end", WEIR_TIMESTAMP_MS},
	[OUT_ZONE] = {"zone", WEIR_STRING},
	[OUT_N] = {"n", WEIR_INT64},
	[OUT_TOTAL] = {"total", WEIR_FLOAT64},
};

static int64_t size = 10000;
static int32_t acc_state;

/* acc is a window's accumulator as stored: n, total, has_total. */
typedef struct {
	int64_t n;
	double total;
	int has_total;
} acc;

enum { ACC_BYTES = 17 };

/* acc_read reads the window's accumulator: 1 found, 0 absent, -1 bad. */
static int acc_read(int32_t h, const uint8_t ns[8], acc *a)
{
	const uint8_t *v;
	int32_t n = weir_value_read(acc_state, h, ns, 8, &v);
	if (n == -1) {
		*a = (acc){0};
		return 0;
	}
	if (n != ACC_BYTES)
		return -1;
	memcpy(&a->n, v, 8); /* wasm32 is little-endian */
	memcpy(&a->total, v + 8, 8);
	a->has_total = v[16] != 0;
	return 1;
}

static void acc_write(int32_t h, const uint8_t ns[8], const acc *a)
{
	uint8_t v[ACC_BYTES];
	memcpy(v, &a->n, 8);
	memcpy(v + 8, &a->total, 8);
	v[16] = (uint8_t)(a->has_total != 0);
	weir_value_put(acc_state, h, ns, 8, v, sizeof v);
}

/* The fare column of the current input schema. */
static uint32_t schema_id;
static int fare_col = -1;

static int zs_open(const weir_open_info *info)
{
	const weir_config_value *v = weir_config(info, "size");
	if (v && (weir_config_duration_ms(v, &size) || size <= 0)) {
		weir_fail(WEIR_NO_HANDLE, "zone-stats: config size: want the window length, milliseconds > 0 as a "
					  "number (10000) or a duration (\"10s\")");
		return 1;
	}
	for (int32_t i = 0; i < info->nconfig; i++) {
		if (strcmp(info->config[i].name, "size") != 0) {
			weir_failf(WEIR_NO_HANDLE, "zone-stats: unknown config %s: the only one is size", info->config[i].name);
			return 1;
		}
	}
	if (info->nkey_columns != 1 || strcmp(info->key_columns[0], "zone") != 0) {
		weir_failf(WEIR_NO_HANDLE, "zone-stats: want keyBy: [zone], got %d key columns%s%s",
			   (int)info->nkey_columns, info->nkey_columns ? ", the first " : "",
			   info->nkey_columns ? info->key_columns[0] : "");
		return 1;
	}
	acc_state = weir_state(WEIR_VALUE_STATE, "acc");
	return 0;
}

/* window_start returns the start of ts's window, 0 when the window is not
 * representable in int64 (ts within size of either end). */
static int window_start(int64_t ts, int64_t *start)
{
	if (ts < INT64_MIN + size || ts > INT64_MAX - size)
		return 0;
	int64_t q = ts / size;
	if (ts % size != 0 && ts < 0)
		q--; /* floor, not truncation */
	*start = q * size;
	return 1;
}

static void ns_of(int64_t start, uint8_t ns[8])
{
	for (int i = 0; i < 8; i++)
		ns[i] = (uint8_t)((uint64_t)start >> (8 * i));
}

static int zs_process(const weir_batch *in, int32_t row, weir_builder *out)
{
	(void)out;
	if (in->schema_id != schema_id) {
		schema_id = in->schema_id;
		fare_col = weir_col(in, "fare", WEIR_FLOAT64);
		if (fare_col < 0) {
			weir_fail(WEIR_NO_HANDLE, "zone-stats: the input has no fare float64 column");
			return 1;
		}
	}
	/* The row's event time (the input's time column, ts for rides), as
	 * for a built-in window: a row without one is in no window. */
	int64_t ts, start;
	if (!weir_row_time(in, row, &ts) || !window_start(ts, &start))
		return 0;
	int64_t last = start + size - 1;
	if (last <= weir_watermark())
		return 0; /* late */

	uint8_t ns[8];
	ns_of(start, ns);
	acc a;
	if (acc_read(row, ns, &a) < 0) {
		weir_fail(row, "zone-stats: state acc is not 17 bytes");
		return 1;
	}
	a.n++;
	if (!weir_is_null(in, fare_col, row)) {
		a.total += weir_float64(in, fare_col, row);
		a.has_total = 1;
	}
	acc_write(row, ns, &a);
	weir_timer_register(row, WEIR_EVENT_TIME, last);
	return 0;
}

static int zs_timer(int32_t h, int64_t ts, int domain, weir_builder *out)
{
	if (domain != WEIR_EVENT_TIME || ts > INT64_MAX - 1)
		return 0;
	int64_t end = ts + 1, start = end - size;
	uint8_t ns[8];
	ns_of(start, ns);
	acc a;
	int found = acc_read(h, ns, &a);
	if (found < 0) {
		weir_fail(h, "zone-stats: state acc is not 17 bytes");
		return 1;
	}
	if (!found)
		return 0; /* nothing counted in this window */
	static const weir_type key_types[] = {WEIR_STRING};
	weir_value zone;
	if (weir_key_values(h, key_types, 1, &zone))
		return 1;
	weir_set_timestamp(out, OUT_START, start);
	weir_set_timestamp(out, OUT_END, end);
	if (!zone.is_null)
		weir_set_string(out, OUT_ZONE, zone.s.ptr, zone.s.len);
	weir_set_int64(out, OUT_N, a.n);
	if (a.has_total) /* like sum(fare): null when no row had a fare */
		weir_set_float64(out, OUT_TOTAL, a.total);
	if (weir_builder_row(out))
		return 1;
	weir_value_delete(acc_state, h, ns, 8);
	return 0;
}

WEIR_FUNCTION = {
	.describe = describe,
	.output = output,
	.noutput = sizeof output / sizeof output[0],
	.open = zs_open,
	.process = zs_process,
	.on_timer = zs_timer,
};
