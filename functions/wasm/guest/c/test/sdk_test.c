/*
 * sdk_test: native tests of the C SDK (weir.c with -DWEIR_NATIVE) over
 * the fake host. Its function echoes rows of {i int64, f float64, s
 * string, b bool, t timestamp_ms}.
 *
 *   sdk_test self          the SDK's own tests; prints "N passed, N failed"
 *   sdk_test echo DIR N    feeds DIR/in-000.bin ... to weir_process; writes
 *                          what it decoded to DIR/in-000.txt ... and every
 *                          payload emitted to DIR/out-000.bin ...
 *   sdk_test keys FILE     decodes lines "TYPES HEXKEY" (TYPES of i f s b t)
 *   sdk_test decode FILE   decodes the payload in FILE: "ok ROWS" or "error: ..."
 *
 * The last three are what the Go test (functions/wasm/guest/c/ctest)
 * cross-checks against arrowfmt. Values are printed as: null, an int64 in
 * decimal, f:<float64 bits in hex>, s:<string bytes in hex>, true/false,
 * t:<timestamp ms>.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fakehost.h"
#include "weir.h"

enum { C_I, C_F, C_S, C_B, C_T };

static const weir_field fields[] = {
	[C_I] = {"i", WEIR_INT64},   [C_F] = {"f", WEIR_FLOAT64},	   [C_S] = {"s", WEIR_STRING},
	[C_B] = {"b", WEIR_BOOL}, [C_T] = {"t", WEIR_TIMESTAMP_MS},
};

static const char describe[] =
	"{\"input\": [], \"output\": [{\"name\": \"i\", \"type\": \"int64\"}, {\"name\": \"f\", \"type\": "
	"\"float64\"}, {\"name\": \"s\", \"type\": \"string\"}, {\"name\": \"b\", \"type\": \"bool\"}, {\"name\": "
	"\"t\", \"type\": \"timestamp_ms\"}]}";

/* ---- Checks ---------------------------------------------------------------- */

/* ---- Printing values -------------------------------------------------------- */

static void print_str(FILE *f, const char *s, size_t n)
{
	fputs("s:", f);
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%02x", (unsigned char)s[i]);
}

static uint64_t dbits(double d)
{
	uint64_t b;
	memcpy(&b, &d, 8);
	return b;
}

static void print_cell(FILE *f, const weir_batch *b, int c, int32_t row)
{
	if (weir_is_null(b, c, row)) {
		fputs("null", f);
		return;
	}
	switch (b->cols[c].type) {
	case WEIR_INT64:
		fprintf(f, "%" PRId64, weir_int64(b, c, row));
		break;
	case WEIR_FLOAT64:
		fprintf(f, "f:%016" PRIx64, dbits(weir_float64(b, c, row)));
		break;
	case WEIR_STRING: {
		weir_str s = weir_string(b, c, row);
		print_str(f, s.ptr, s.len);
		break;
	}
	case WEIR_BOOL:
		fputs(weir_bool(b, c, row) ? "true" : "false", f);
		break;
	case WEIR_TIMESTAMP_MS:
		fprintf(f, "t:%" PRId64, weir_timestamp(b, c, row));
		break;
	}
}

static void print_value(FILE *f, const weir_value *v)
{
	if (v->is_null) {
		fputs("null", f);
		return;
	}
	switch (v->type) {
	case WEIR_INT64:
		fprintf(f, "%" PRId64, v->i);
		break;
	case WEIR_FLOAT64:
		fprintf(f, "f:%016" PRIx64, dbits(v->f));
		break;
	case WEIR_STRING:
		print_str(f, v->s.ptr, v->s.len);
		break;
	case WEIR_BOOL:
		fputs(v->b ? "true" : "false", f);
		break;
	case WEIR_TIMESTAMP_MS:
		fprintf(f, "t:%" PRId64, v->i);
		break;
	}
}

/* ---- The function -------------------------------------------------------------- */

enum { ECHO, FAIL_CODE, FAIL_MSG, MISUSE, STATE, KEYS };
static int mode = ECHO;
static FILE *dump; /* where echo prints the rows it reads */
static int32_t st_value, st_list, st_map;
static int timer_calls;

static int fn_open(const weir_open_info *info)
{
	(void)info;
	st_value = weir_state(WEIR_VALUE_STATE, "v");
	st_list = weir_state(WEIR_LIST_STATE, "l");
	st_map = weir_state(WEIR_MAP_STATE, "m");
	return weir_state(WEIR_VALUE_STATE, "v") == st_value ? 0 : 1;
}

static int echo(const weir_batch *in, int32_t row, weir_builder *out)
{
	for (int c = 0; c < 5; c++) {
		int ic = weir_col(in, fields[c].name, (int)fields[c].type);
		if (ic < 0 || weir_is_null(in, ic, row))
			continue;
		switch (fields[c].type) {
		case WEIR_INT64:
			weir_set_int64(out, c, weir_int64(in, ic, row));
			break;
		case WEIR_FLOAT64:
			weir_set_float64(out, c, weir_float64(in, ic, row));
			break;
		case WEIR_STRING: {
			weir_str s = weir_string(in, ic, row);
			weir_set_string(out, c, s.ptr, s.len);
			break;
		}
		case WEIR_BOOL:
			weir_set_bool(out, c, weir_bool(in, ic, row));
			break;
		case WEIR_TIMESTAMP_MS:
			weir_set_timestamp(out, c, weir_timestamp(in, ic, row));
			break;
		}
	}
	if (dump) {
		for (int c = 0; c < in->ncols; c++) {
			if (c)
				fputc(' ', dump);
			print_cell(dump, in, c, row);
		}
		fputc('\n', dump);
	}
	return weir_builder_row(out);
}

/* exercise_state runs every state wrapper once on row's key. */
static int exercise_state(int32_t row)
{
	const char ns[] = "w1";
	uint8_t big[1000];
	for (size_t i = 0; i < sizeof big; i++)
		big[i] = (uint8_t)(i * 7 + (size_t)row);
	const uint8_t *v;
	int64_t i64;
	double f64;
	CHECK(weir_value_read(st_value, row, ns, 2, &v) == -1, "value absent at first");
	CHECK(weir_value_get_i64(st_value, row, ns, 2, &i64) == 0, "i64 absent at first");
	weir_value_put(st_value, row, ns, 2, big, sizeof big);
	CHECK(weir_value_read(st_value, row, ns, 2, &v) == (int32_t)sizeof big && memcmp(v, big, sizeof big) == 0,
	      "a value larger than the SDK's buffer is read whole");
	CHECK(weir_value_get_i64(st_value, row, ns, 2, &i64) == -1, "a 1000-byte value is no i64");
	weir_value_put_i64(st_value, row, ns, 2, -42);
	CHECK(weir_value_get_i64(st_value, row, ns, 2, &i64) == 1 && i64 == -42, "i64 round trip");
	CHECK(weir_value_read(st_value, row, NULL, 0, &v) == -1, "the namespace scopes values");
	weir_value_put_f64(st_value, row, NULL, 0, 2.5);
	CHECK(weir_value_get_f64(st_value, row, NULL, 0, &f64) == 1 && f64 == 2.5, "f64 round trip");
	CHECK(weir_value_read(st_value, row, NULL, 0, &v) == 8 && v[7] == 0x40 && v[6] == 0x04,
	      "f64 is stored as 8 bytes little-endian");
	weir_value_delete(st_value, row, ns, 2);
	weir_value_delete(st_value, row, NULL, 0);
	CHECK(weir_value_read(st_value, row, ns, 2, &v) == -1, "deleted");

	CHECK(weir_list_read(st_list, row, ns, 2, &v) == -1, "list empty at first");
	weir_list_add(st_list, row, ns, 2, "a", 1);
	weir_list_add(st_list, row, ns, 2, big, sizeof big);
	weir_list_add(st_list, row, ns, 2, "", 0);
	int32_t n = weir_list_read(st_list, row, ns, 2, &v);
	CHECK(n == 4 + 1 + 4 + 1000 + 4, "list of 3 elements: %d bytes", (int)n);
	size_t pos = 0;
	weir_str e;
	int k = 0;
	while (n > 0 && weir_next_element(v, (size_t)n, &pos, &e) == 1) {
		CHECK(k != 0 || (e.len == 1 && e.ptr[0] == 'a'), "element 0");
		CHECK(k != 1 || (e.len == 1000 && memcmp(e.ptr, big, 1000) == 0), "element 1");
		CHECK(k != 2 || e.len == 0, "element 2");
		k++;
	}
	CHECK(k == 3, "3 elements, got %d", k);
	weir_list_clear(st_list, row, ns, 2);
	CHECK(weir_list_read(st_list, row, ns, 2, &v) == -1, "list cleared");

	CHECK(weir_map_read(st_map, row, ns, 2, "k1", 2, &v) == -1, "map key absent");
	weir_map_put(st_map, row, ns, 2, "k1", 2, "v1", 2);
	weir_map_put(st_map, row, ns, 2, "k2", 2, "value2", 6);
	weir_map_put(st_map, row, ns, 2, "k1", 2, "V1", 2);
	CHECK(weir_map_read(st_map, row, ns, 2, "k1", 2, &v) == 2 && memcmp(v, "V1", 2) == 0, "map put replaces");
	n = weir_map_read_entries(st_map, row, ns, 2, &v);
	pos = 0;
	int entries = 0, seen1 = 0, seen2 = 0;
	weir_str mk, mv;
	while (n > 0 && weir_next_element(v, (size_t)n, &pos, &mk) == 1 && weir_next_element(v, (size_t)n, &pos, &mv) == 1) {
		entries++;
		seen1 |= mk.len == 2 && memcmp(mk.ptr, "k1", 2) == 0 && mv.len == 2 && memcmp(mv.ptr, "V1", 2) == 0;
		seen2 |= mk.len == 2 && memcmp(mk.ptr, "k2", 2) == 0 && mv.len == 6 && memcmp(mv.ptr, "value2", 6) == 0;
	}
	CHECK(entries == 2 && seen1 && seen2, "map entries: %d", entries);
	weir_map_delete(st_map, row, ns, 2, "k1", 2);
	CHECK(weir_map_read(st_map, row, ns, 2, "k1", 2, &v) == -1, "map key deleted");
	weir_map_clear(st_map, row, ns, 2);
	CHECK(weir_map_read_entries(st_map, row, ns, 2, &v) == -1, "map cleared");

	uint8_t bad[] = {0, 0, 0};
	CHECK(weir_next_element(bad, 3, &(size_t){0}, &e) == -1, "truncated element length");
	uint8_t bad2[] = {9, 0, 0, 0, 1};
	CHECK(weir_next_element(bad2, 5, &(size_t){0}, &e) == -1, "element longer than the buffer");
	return 0;
}

static int fn_process(const weir_batch *in, int32_t row, weir_builder *out)
{
	switch (mode) {
	case FAIL_CODE:
		return row == 1 ? 3 : 0;
	case FAIL_MSG:
		if (row == 2) {
			weir_failf(row, "boom at %d", (int)row);
			return 1;
		}
		return 0;
	case MISUSE:
		weir_set_int64(out, C_S, 1);
		return weir_builder_row(out) ? 0 : 0; /* the SDK notices anyway */
	case STATE:
		weir_timer_register(row, WEIR_EVENT_TIME, 100 + row);
		weir_timer_register(row, WEIR_PROCESSING_TIME, 5);
		return exercise_state(row);
	}
	return echo(in, row, out);
}

static int fn_timer(int32_t h, int64_t ts, int domain, weir_builder *out)
{
	timer_calls++;
	static const weir_type types[] = {WEIR_STRING};
	weir_value v;
	if (weir_key_values(h, types, 1, &v))
		return 1;
	weir_set_int64(out, C_I, ts);
	weir_set_bool(out, C_B, domain);
	if (!v.is_null)
		weir_set_string(out, C_S, v.s.ptr, v.s.len);
	if (ts == 103) /* registered during the call, due already: fires in the next call */
		weir_timer_register(h, WEIR_EVENT_TIME, 50);
	return weir_builder_row(out);
}

WEIR_FUNCTION = {
	.describe = describe,
	.output = fields,
	.noutput = 5,
	.open = fn_open,
	.process = fn_process,
	.on_timer = fn_timer,
};

/* ---- Test data ------------------------------------------------------------------ */

/* fill appends rows of test values to b, and when want is not NULL
 * records them there (5 a row). Column c has no nulls, some, or only
 * nulls, by (c + seed) % 3. */
static void fill(weir_builder *b, int32_t rows, int seed, weir_value *want)
{
	static const char *strs[] = {"", "a", "zone-7", "héllo wörld", "\xf0\x9f\x9a\x95 taxi", "with \"quotes\"\n"};
	static const double floats[] = {0.0, -0.0, 1.5, -2.25, 1e300, 5e-324, INFINITY, -INFINITY};
	static const int64_t ints[] = {0, 1, -1, INT64_MIN, INT64_MAX, 1700000000000, -1700000000000};
	static char big[300];
	memset(big, 'x', sizeof big);
	for (int32_t r = 0; r < rows; r++) {
		uint64_t x = next();
		for (int c = 0; c < 5; c++) {
			weir_value v = {.type = fields[c].type, .is_null = 1, .s = {"", 0}};
			int nulls = (c + seed) % 3;
			if (!(nulls == 2 || (nulls == 1 && (x >> (8 * c)) % 3 == 0))) {
				uint64_t y = next();
				v.is_null = 0;
				switch (c) {
				case C_I:
					v.i = y % 2 ? ints[y / 2 % 7] : (int64_t)y;
					weir_set_int64(b, c, v.i);
					break;
				case C_F:
					v.f = y % 2 ? floats[y / 2 % 8] : (double)(int64_t)y / 1000.0;
					weir_set_float64(b, c, v.f);
					break;
				case C_S:
					v.s = y % 5 == 0 ? (weir_str){big, y % 300} : (weir_str){strs[y % 6], strlen(strs[y % 6])};
					weir_set_string(b, c, v.s.ptr, v.s.len);
					break;
				case C_B:
					v.b = (int)(y & 1);
					weir_set_bool(b, c, v.b);
					break;
				case C_T:
					v.i = (int64_t)(y % 4000000000000u) - 1000000000000;
					weir_set_timestamp(b, c, v.i);
					break;
				}
			}
			if (want)
				want[5 * r + c] = v;
		}
		weir_builder_row(b);
	}
}

/* same_cell compares row r of column c of d with want. */
static int same_cell(const weir_value *want, const weir_batch *d, int c, int32_t r)
{
	if (want->is_null || weir_is_null(d, c, r))
		return want->is_null && weir_is_null(d, c, r);
	switch (want->type) {
	case WEIR_INT64:
		return weir_int64(d, c, r) == want->i;
	case WEIR_TIMESTAMP_MS:
		return weir_timestamp(d, c, r) == want->i;
	case WEIR_FLOAT64:
		return dbits(weir_float64(d, c, r)) == dbits(want->f);
	case WEIR_BOOL:
		return weir_bool(d, c, r) == want->b;
	case WEIR_STRING: {
		weir_str s = weir_string(d, c, r);
		return s.len == want->s.len && (s.len == 0 || memcmp(s.ptr, want->s.ptr, s.len) == 0);
	}
	}
	return 0;
}

/* touch reads every value of a decoded batch, so a decoder that let a bad
 * offset through makes the sanitizers speak. */
static uint64_t touch(const weir_batch *d)
{
	uint64_t h = 0;
	for (int c = 0; c < d->ncols; c++)
		for (int32_t r = 0; r < d->rows; r++) {
			h += (uint64_t)weir_is_null(d, c, r) + (uint64_t)weir_int64(d, c, r) +
			     dbits(weir_float64(d, c, r)) + (uint64_t)weir_bool(d, c, r) +
			     (uint64_t)weir_timestamp(d, c, r);
			weir_str s = weir_string(d, c, r);
			for (size_t i = 0; i < s.len; i++)
				h += (unsigned char)s.ptr[i];
		}
	return h;
}

/* ---- Tests ------------------------------------------------------------------------ */

static void test_roundtrip(void)
{
	weir_builder b;
	weir_encoder enc = {0};
	weir_decoder dec = {0};
	weir_buf out = {0};
	CHECK(weir_builder_init(&b, fields, 5) == 0, "builder init");
	static const int32_t sizes[] = {3, 0, 1, 7, 8, 9, 64, 1000};
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		weir_builder_reset(&b);
		weir_value *want = calloc(5 * (size_t)sizes[k] + 1, sizeof *want);
		fill(&b, sizes[k], (int)k, want);
		CHECK(b.err[0] == 0, "builder error %s", b.err);
		out.len = 0;
		CHECK(weir_encode(&enc, &b, &out) == 0, "encode");
		CHECK(out.len % 8 == 0, "payload of %zu bytes is padded to 8", out.len);
		uint32_t meta;
		memcpy(&meta, out.ptr + 4, 4);
		CHECK(meta % 8 == 0, "metadata of %u bytes is padded to 8", meta);
		weir_batch d;
		int rc = weir_decode(&dec, out.ptr, out.len, &d);
		CHECK(rc == 0, "decode batch %zu: %s", k, dec.err);
		if (rc) {
			free(want);
			continue;
		}
		CHECK(d.rows == sizes[k] && d.ncols == 5, "batch %zu: %d rows, %d columns", k, (int)d.rows, (int)d.ncols);
		CHECK(d.schema_id == 1, "one schema: id %u", d.schema_id);
		for (int c = 0; c < 5 && d.rows == sizes[k]; c++) {
			CHECK(strcmp(d.cols[c].name, fields[c].name) == 0 && d.cols[c].type == fields[c].type,
			      "column %d is %s", c, d.cols[c].name);
			for (int32_t r = 0; r < d.rows; r++)
				CHECK(same_cell(&want[5 * r + c], &d, c, r), "batch %zu column %d row %d", k, c, (int)r);
		}
		free(want);
	}
	/* A payload without a schema needs a decoder that has one. */
	weir_decoder fresh = {0};
	weir_batch d;
	CHECK(weir_decode(&fresh, out.ptr, out.len, &d) == -1 && strstr(fresh.err, "no schema"), "%s", fresh.err);
	/* A new encoder sends the schema again, and the decoder takes it. */
	weir_encoder enc2 = {0};
	out.len = 0;
	weir_encode(&enc2, &b, &out);
	CHECK(weir_decode(&dec, out.ptr, out.len, &d) == 0 && d.schema_id == 2, "a second schema replaces the first");

	/* Accessors on the wrong type, column or row give zero values. */
	CHECK(weir_int64(&d, C_S, 0) == 0 && weir_string(&d, C_I, 0).len == 0 && weir_is_null(&d, 9, 0) &&
		      weir_is_null(&d, C_I, d.rows) && weir_col(&d, "s", WEIR_INT64) == -1 && weir_col(&d, "s", 0) == C_S &&
		      weir_col(&d, "nope", 0) == -1,
	      "accessors are defensive");

	/* Builder misuse is recorded, and encoding refuses. */
	weir_builder_reset(&b);
	CHECK(weir_set_string(&b, C_I, "x", 1) == -1 && strstr(b.err, "output column i is int64, not string"), "%s",
	      b.err);
	CHECK(weir_set_int64(&b, 7, 1) == -1, "column out of range");
	CHECK(weir_builder_row(&b) == -1 && weir_encode(&enc, &b, &out) == -1, "a misused builder does not encode");

	/* Setting a column twice keeps the last value; set_null undoes a set. */
	weir_builder_reset(&b);
	weir_set_string(&b, C_S, "first", 5);
	weir_set_string(&b, C_S, "2nd", 3);
	weir_set_int64(&b, C_I, 5);
	weir_set_null(&b, C_I);
	weir_builder_row(&b);
	weir_set_string(&b, C_S, "gone", 4);
	weir_set_null(&b, C_S);
	weir_builder_row(&b);
	out.len = 0;
	CHECK(weir_encode(&enc, &b, &out) == 0 && weir_decode(&dec, out.ptr, out.len, &d) == 0, "encode");
	weir_str s = weir_string(&d, C_S, 0);
	CHECK(s.len == 3 && memcmp(s.ptr, "2nd", 3) == 0 && weir_is_null(&d, C_I, 0) && weir_is_null(&d, C_S, 1) &&
		      d.cols[C_S].data_len == 3,
	      "overwritten values");

	weir_builder_free(&b);
	weir_decoder_free(&dec);
	weir_decoder_free(&fresh);
	weir_buf_free(&out);
}

/* test_malformed: every truncation of a valid payload is an error, and
 * random corruption is an error or a batch whose every value can be read. */
static void test_malformed(void)
{
	weir_builder b;
	weir_encoder enc = {0};
	weir_buf full = {0}, batch = {0};
	weir_builder_init(&b, fields, 5);
	fill(&b, 20, 1, NULL);
	weir_encode(&enc, &b, &full);
	weir_encode(&enc, &b, &batch);
	weir_batch d;
	int truncations = 1;
	for (size_t n = 0; n < full.len; n++) {
		weir_decoder dec = {0};
		uint8_t *p = malloc(n ? n : 1);
		memcpy(p, full.ptr, n);
		if (weir_decode(&dec, p, n, &d) != -1) {
			truncations = 0;
			fprintf(stderr, "truncated to %zu bytes decodes\n", n);
		}
		free(p);
		weir_decoder_free(&dec);
	}
	CHECK(truncations, "every truncation is an error");

	int ok = 0, errors = 0;
	uint8_t *p = malloc(full.len);
	for (int iter = 0; iter < 30000; iter++) {
		weir_decoder dec = {0};
		const weir_buf *src = &full;
		if (iter % 2) { /* corrupt a schema-less payload for a decoder with a schema */
			weir_decode(&dec, full.ptr, full.len, &d);
			src = &batch;
		}
		memcpy(p, src->ptr, src->len);
		int flips = 1 + (int)(next() % 4);
		for (int f = 0; f < flips; f++) {
			size_t at = next() % src->len;
			p[at] = next() % 4 ? (uint8_t)(p[at] ^ (1u << (next() % 8))) : (uint8_t)next();
		}
		if (weir_decode(&dec, p, src->len, &d) == 0) {
			touch(&d);
			ok++;
		} else {
			errors++;
		}
		weir_decoder_free(&dec);
	}
	free(p);
	CHECK(errors > 1000 && ok > 100, "corruption: %d decoded, %d errors", ok, errors);

	/* Messages the SDK does not take. */
	weir_decoder dec = {0};
	uint8_t eos[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
	CHECK(weir_decode(&dec, eos, 8, &d) == -1, "end-of-stream marker");
	CHECK(weir_decode(&dec, full.ptr, full.len - batch.len, &d) == -1 && strstr(dec.err, "no record batch"), "%s",
	      dec.err);
	weir_buf two = {0};
	weir_buf_reserve(&two, full.len + batch.len);
	memcpy(two.ptr, full.ptr, full.len);
	memcpy(two.ptr + full.len, batch.ptr, batch.len);
	CHECK(weir_decode(&dec, two.ptr, full.len + batch.len, &d) == -1 && strstr(dec.err, "after the record batch"),
	      "%s", dec.err);
	weir_buf_free(&two);
	weir_decoder_free(&dec);
	weir_builder_free(&b);
	weir_buf_free(&full);
	weir_buf_free(&batch);
}

static int key_is(const char *hex, const weir_type *types, size_t n, const weir_value *want)
{
	uint8_t k[64];
	size_t len = strlen(hex) / 2;
	for (size_t i = 0; i < len; i++)
		sscanf(hex + 2 * i, "%2hhx", &k[i]);
	weir_value got[8];
	if (weir_key_decode(k, len, types, n, got))
		return want == NULL;
	if (!want)
		return 0;
	for (size_t i = 0; i < n; i++) {
		const weir_value *g = &got[i], *w = &want[i];
		if (g->is_null != w->is_null || g->i != w->i || dbits(g->f) != dbits(w->f) || g->b != w->b ||
		    g->s.len != w->s.len || (g->s.len && memcmp(g->s.ptr, w->s.ptr, g->s.len) != 0))
			return 0;
	}
	return 1;
}

static void test_keys(void)
{
	weir_type I = WEIR_INT64, F = WEIR_FLOAT64, S = WEIR_STRING, B = WEIR_BOOL, T = WEIR_TIMESTAMP_MS;
	CHECK(key_is("018000000000000000", &I, 1, &(weir_value){.i = 0}), "int64 0");
	CHECK(key_is("017fffffffffffffff", &I, 1, &(weir_value){.i = -1}), "int64 -1");
	CHECK(key_is("010000000000000000", &T, 1, &(weir_value){.i = INT64_MIN}), "timestamp min");
	CHECK(key_is("01bff0000000000000", &F, 1, &(weir_value){.f = 1.0}), "float64 1");
	CHECK(key_is("01400fffffffffffff", &F, 1, &(weir_value){.f = -1.0}), "float64 -1");
	CHECK(key_is("0101", &B, 1, &(weir_value){.b = 1}), "bool true");
	CHECK(key_is("00", &B, 1, &(weir_value){.is_null = 1}), "null");
	CHECK(key_is("01026162", &S, 1, &(weir_value){.s = {"ab", 2}}), "string ab");
	CHECK(key_is("0100", &S, 1, &(weir_value){.s = {"", 0}}), "empty string");
	weir_type three[] = {I, S, B};
	weir_value want3[] = {{.i = 5}, {.s = {"x", 1}}, {.is_null = 1}};
	CHECK(key_is("018000000000000005010178" "00", three, 3, want3), "three columns");
	/* malformed */
	CHECK(key_is("", &I, 1, NULL), "empty key");
	CHECK(key_is("0180", &I, 1, NULL), "truncated int64");
	CHECK(key_is("02", &I, 1, NULL), "bad tag");
	CHECK(key_is("0102", &B, 1, NULL), "bool 2");
	CHECK(key_is("010361", &S, 1, NULL), "string longer than the key");
	CHECK(key_is("0180", &S, 1, NULL), "truncated uvarint");
	CHECK(key_is("01ffffffffffffffffff7f", &S, 1, NULL), "uvarint overflow");
	CHECK(key_is("000000", &I, 1, NULL), "trailing bytes");
	uint8_t big[3 + 300] = {1, 0xac, 0x02};
	memset(big + 3, 'z', 300);
	weir_value v;
	CHECK(weir_key_decode(big, sizeof big, &S, 1, &v) == 0 && v.s.len == 300, "300-byte string");
}

static void test_json(void)
{
	const char doc[] = "{\n  \"function\": \"zone-stats\", \"version\": 3, \"operator\": \"stats\",\n"
			   "  \"subtask\": 1, \"parallelism\": 2, \"keyColumns\": [\"zone\", \"k\\u00e9\"],\n"
			   "  \"timeColumn\": 3, \"timeOffset\": -1, \"future\": {\"x\": [1, {\"y\": null}]},\n"
			   "  \"config\": {\"window\": \"10s\", \"size\": 5000, \"ratio\": -1.5e2, \"on\": true,"
			   " \"off\": false, \"nothing\": null, \"list\": [1,2], \"esc\": \"a\\\"b\\\\c\\n\\ud83d\\ude95\"}\n}";
	weir_open_info info;
	char err[256];
	int rc = weir_parse_open(doc, strlen(doc), &info, err, sizeof err);
	CHECK(rc == 0, "parse: %s", err);
	if (rc == 0) {
		CHECK(strcmp(info.function, "zone-stats") == 0 && info.version == 3 &&
			      strcmp(info.operator_name, "stats") == 0 && info.subtask == 1 && info.parallelism == 2 &&
			      info.time_column == 3 && info.time_offset == -1,
		      "scalars");
		CHECK(info.nkey_columns == 2 && strcmp(info.key_columns[0], "zone") == 0 &&
			      strcmp(info.key_columns[1], "k\xc3\xa9") == 0,
		      "keyColumns");
		const weir_config_value *v = weir_config(&info, "size");
		CHECK(v && v->kind == WEIR_JSON_NUMBER && v->is_int && v->i == 5000 && v->num == 5000, "size");
		v = weir_config(&info, "ratio");
		CHECK(v && v->kind == WEIR_JSON_NUMBER && !v->is_int && v->num == -150, "ratio");
		v = weir_config(&info, "window");
		CHECK(v && v->kind == WEIR_JSON_STRING && v->str.len == 3 && memcmp(v->str.ptr, "10s", 3) == 0, "window");
		CHECK(weir_config(&info, "on")->b == 1 && weir_config(&info, "off")->kind == WEIR_JSON_BOOL &&
			      weir_config(&info, "off")->b == 0,
		      "bools");
		CHECK(weir_config(&info, "nothing")->kind == WEIR_JSON_NULL &&
			      weir_config(&info, "list")->kind == WEIR_JSON_OTHER && !weir_config(&info, "absent"),
		      "null, array, absent");
		v = weir_config(&info, "esc");
		CHECK(v && v->str.len == 10 && memcmp(v->str.ptr, "a\"b\\c\n\xf0\x9f\x9a\x95", 10) == 0, "escapes");
		weir_open_info_free(&info);
	}
	CHECK(weir_parse_open("{}", 2, &info, err, sizeof err) == 0 && info.time_column == -1 && info.nconfig == 0,
	      "empty document");
	weir_open_info_free(&info);
	static const char *bad[] = {
		"",
		"[]",
		"{",
		"{\"a\": 1,}",
		"{\"a\" 1}",
		"{\"a\": 01}",
		"{\"a\": 1} x",
		"{\"a\": \"unterminated}",
		"{\"a\": \"\\x\"}",
		"{\"a\": \"\\ud83d\"}",
		"{\"a\": tru}",
		"{\"a\": 1.}",
		"{\"a\": -}",
		"{\"a\": \"tab\there\"}",
		"{\"timeColumn\": -2}",
		"{\"subtask\": 1.5}",
		"{\"version\": 1e3}",
		"{\"keyColumns\": [1]}",
		"{\"config\": []}",
		"{\"function\": 7}",
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		int r = weir_parse_open(bad[i], strlen(bad[i]), &info, err, sizeof err);
		CHECK(r == -1 && err[0], "bad document %s parsed", bad[i]);
	}
	/* Durations, as Go's time.ParseDuration reads them, in whole ms. */
	static const struct {
		const char *s;
		int64_t ms; /* -1: refused */
	} durs[] = {
		{"10s", 10000}, {"1m30s", 90000}, {"1.5h", 5400000}, {"250ms", 250}, {"0", 0}, {"+2s", 2000},
		{"-1s", -1000}, {"1500us", -1}, {"3000000ns", 3}, {"1\xc2\xb5s", -1}, {"10", -1}, {"", -1},
		{"s", -1}, {"1x", -1}, {".5s", 500}, {"1.s", 1000}, {"9999999999h", -1}, {"2562047h", 9223369200000},
	};
	for (size_t i = 0; i < sizeof durs / sizeof durs[0]; i++) {
		weir_config_value v = {.kind = WEIR_JSON_STRING, .str = {durs[i].s, strlen(durs[i].s)}};
		int64_t ms = 7;
		int r = weir_config_duration_ms(&v, &ms);
		CHECK(durs[i].ms == -1 ? r == -1 : r == 0 && ms == durs[i].ms, "duration %s: %d, %" PRId64, durs[i].s, r, ms);
	}
	int64_t iv;
	CHECK(weir_config_int(&(weir_config_value){.kind = WEIR_JSON_NUMBER, .num = 1e4}, &iv) == 0 && iv == 10000,
	      "1e4 is a whole number");
	CHECK(weir_config_int(&(weir_config_value){.kind = WEIR_JSON_NUMBER, .num = 1.5}, &iv) == -1, "1.5 is not");
	CHECK(weir_config_int(&(weir_config_value){.kind = WEIR_JSON_NUMBER, .num = 1e19}, &iv) == -1, "1e19 is too big");
	CHECK(weir_config_duration_ms(&(weir_config_value){.kind = WEIR_JSON_NUMBER, .is_int = 1, .i = 42}, &iv) == 0 &&
		      iv == 42,
	      "a number is milliseconds");
	CHECK(weir_config_duration_ms(NULL, &iv) == -1, "absent");

	/* Deep nesting is an error, not a stack overflow. */
	size_t depth = 100000;
	char *deep = malloc(2 * depth + 32);
	size_t n = (size_t)sprintf(deep, "{\"config\": {\"x\": ");
	memset(deep + n, '[', depth);
	memset(deep + n + depth, ']', depth);
	strcpy(deep + n + 2 * depth, "}}");
	CHECK(weir_parse_open(deep, strlen(deep), &info, err, sizeof err) == -1 && strstr(err, "deep"), "%s", err);
	free(deep);
}

/* payload_of encodes rows of the echo schema from fill. */
static void payload_of(weir_encoder *e, int32_t rows, int seed, weir_buf *out)
{
	weir_builder b;
	weir_builder_init(&b, fields, 5);
	fill(&b, rows, seed, NULL);
	out->len = 0;
	weir_encode(e, &b, out);
	weir_builder_free(&b);
}

static int32_t process(const weir_buf *payload)
{
	uint8_t *in = weir_alloc((int32_t)payload->len);
	memcpy(in, payload->ptr, payload->len);
	return weir_process(in, (int32_t)payload->len);
}

static int32_t open_doc(const char *doc)
{
	uint8_t *in = weir_alloc((int32_t)strlen(doc));
	memcpy(in, doc, strlen(doc));
	return weir_open(in, (int32_t)strlen(doc));
}

static void set_keys(int32_t rows)
{
	fh_bytes *k = calloc((size_t)rows + 1, sizeof *k);
	for (int32_t r = 0; r < rows; r++) {
		char s[16];
		k[r] = fh_string_key(s, (size_t)snprintf(s, sizeof s, "k%d", (int)(r % 3)));
	}
	fh_set_keys(k, (size_t)rows);
	for (int32_t r = 0; r < rows; r++)
		free(k[r].p);
	free(k);
}

static void test_exports(void)
{
	weir_encoder enc = {0};
	weir_buf p = {0};
	weir_batch d;
	CHECK(weir_abi_version() == 1, "abi version");
	CHECK(strcmp(weir_describe_json(), describe) == 0 && (weir_describe() & 0xffffffff) == strlen(describe),
	      "describe");
	payload_of(&enc, 4, 0, &p);
	CHECK(process(&p) == 1 && strstr(fh_fail_msg, "before weir_open"), "%s", fh_fail_msg);
	fh_reset_fail();
	CHECK(open_doc("{\"keyColumns\": [\"s\"], \"config\": {}") != 0 && strstr(fh_fail_msg, "open document"), "%s",
	      fh_fail_msg);
	CHECK(open_doc("{\"keyColumns\": [\"s\"], \"timeColumn\": 4, \"timeOffset\": 10}") == 0, "open: %s", fh_fail_msg);
	CHECK(open_doc("{}") == 1 && strstr(fh_fail_msg, "twice"), "%s", fh_fail_msg);
	CHECK(weir_info() && weir_info()->time_column == 4, "weir_info");

	/* Echo: what comes out is what went in. */
	set_keys(4);
	size_t before = fh_nemitted;
	CHECK(process(&p) == 0, "process: %s", fh_fail_msg);
	CHECK(fh_nemitted == before + 1, "one payload emitted per call");
	weir_decoder dec = {0}, in = {0};
	weir_batch want;
	weir_decode(&in, p.ptr, p.len, &want);
	CHECK(weir_decode(&dec, fh_emitted[before].p, fh_emitted[before].n, &d) == 0 && d.rows == 4, "decode output: %s",
	      dec.err);
	for (int c = 0; c < 5; c++)
		for (int32_t r = 0; r < 4; r++) {
			char a[512], b[512];
			FILE *fa = fmemopen(a, sizeof a, "w"), *fb = fmemopen(b, sizeof b, "w");
			print_cell(fa, &want, c, r);
			print_cell(fb, &d, c, r);
			fclose(fa);
			fclose(fb);
			CHECK(strcmp(a, b) == 0, "column %d row %d: %s != %s", c, (int)r, a, b);
		}
	int64_t ts;
	CHECK(weir_row_time(&want, 0, &ts) == !weir_is_null(&want, C_T, 0) &&
		      (weir_is_null(&want, C_T, 0) || ts == weir_timestamp(&want, C_T, 0) + 10),
	      "row time is the time column plus the offset");

	/* Large batches go out in several payloads. */
	payload_of(&enc, 20000, 3, &p);
	set_keys(20000);
	before = fh_nemitted;
	CHECK(process(&p) == 0, "process 20000 rows: %s", fh_fail_msg);
	int32_t total = 0;
	for (size_t i = before; i < fh_nemitted; i++)
		if (weir_decode(&dec, fh_emitted[i].p, fh_emitted[i].n, &d) == 0)
			total += d.rows;
	CHECK(fh_nemitted - before == 3 && total == 20000, "%zu payloads of %d rows", fh_nemitted - before, (int)total);

	/* Failures name the row. */
	payload_of(&enc, 4, 0, &p);
	set_keys(4);
	fh_reset_fail();
	mode = FAIL_CODE;
	CHECK(process(&p) == 3 && fh_fail_handle == 1 && strcmp(fh_fail_msg, "process returned 3") == 0, "%d: %s",
	      (int)fh_fail_handle, fh_fail_msg);
	mode = FAIL_MSG;
	CHECK(process(&p) == 1 && fh_fail_handle == 2 && strcmp(fh_fail_msg, "boom at 2") == 0, "%s", fh_fail_msg);
	mode = MISUSE;
	before = fh_nemitted;
	CHECK(process(&p) == 1 && fh_fail_handle == 0 && strstr(fh_fail_msg, "process: output column s is string, not int64"),
	      "%s", fh_fail_msg);
	CHECK(fh_nemitted == before, "a failed call emits nothing");
	mode = ECHO;
	fh_emit_result = 1;
	fh_reset_fail();
	CHECK(process(&p) == 1 && fh_fail_calls == 0, "a refused emit fails the call");
	fh_emit_result = 0;
	uint8_t junk[] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
	CHECK(weir_process(junk, 9) == 1 && strstr(fh_fail_msg, "decode the input batch: no continuation marker"),
	      "%s", fh_fail_msg);

	/* State and timers. */
	mode = STATE;
	CHECK(process(&p) == 0, "state: %s", fh_fail_msg);
	/* Keys k0 k1 k2 k0: event time 100..103, processing time 5 per key. */
	CHECK(fh_timers_pending() == 4 + 3, "timers are per key: %zu", fh_timers_pending());
	fh_watermark = 101;
	before = fh_nemitted;
	timer_calls = 0;
	CHECK(fh_fire_timers() == 0 && timer_calls == 2, "timers at 100, 101: %d calls: %s", timer_calls, fh_fail_msg);
	fh_watermark = 200;
	CHECK(fh_fire_timers() == 0 && timer_calls == 5, "timers at 102, 103, then 50: %d calls", timer_calls);
	CHECK(weir_decode(&dec, fh_emitted[before].p, fh_emitted[before].n, &d) == 0 && d.rows == 2 &&
		      weir_int64(&d, C_I, 0) == 100 && weir_string(&d, C_S, 0).len == 2 &&
		      memcmp(weir_string(&d, C_S, 0).ptr, "k0", 2) == 0 && weir_bool(&d, C_B, 0) == 0,
	      "timer output");
	CHECK(fh_timers_pending() == 3, "processing-time timers stay");
	CHECK(fh_state_entries() == 0, "state is empty again: %zu", fh_state_entries());
	CHECK(weir_timers(junk, 3) == 1 && strstr(fh_fail_msg, "16 a timer"), "%s", fh_fail_msg);
	mode = ECHO;
	weir_decoder_free(&dec);
	weir_decoder_free(&in);
	weir_buf_free(&p);
}

/* ---- Modes for the Go test --------------------------------------------------------- */

static uint8_t *read_file(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	weir_buf b = {0};
	char chunk[65536];
	size_t k;
	while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
		if (weir_buf_reserve(&b, k))
			abort();
		memcpy(b.ptr + b.len, chunk, k);
		b.len += k;
	}
	fclose(f);
	*n = b.len;
	return b.ptr ? b.ptr : calloc(1, 1);
}

static int run_echo(const char *dir, int n)
{
	char path[4096];
	if (open_doc("{\"keyColumns\": [], \"timeColumn\": -1}")) {
		fprintf(stderr, "open: %s\n", fh_fail_msg);
		return 1;
	}
	for (int i = 0; i < n; i++) {
		size_t len;
		snprintf(path, sizeof path, "%s/in-%03d.bin", dir, i);
		uint8_t *p = read_file(path, &len);
		if (!p) {
			perror(path);
			return 1;
		}
		snprintf(path, sizeof path, "%s/in-%03d.txt", dir, i);
		dump = fopen(path, "w");
		if (!dump) {
			perror(path);
			return 1;
		}
		uint8_t *in = weir_alloc((int32_t)len);
		memcpy(in, p, len);
		free(p);
		int32_t rc = weir_process(in, (int32_t)len);
		fclose(dump);
		dump = NULL;
		if (rc) {
			fprintf(stderr, "process %d: %s\n", i, fh_fail_msg);
			return 1;
		}
	}
	for (size_t i = 0; i < fh_nemitted; i++) {
		snprintf(path, sizeof path, "%s/out-%03zu.bin", dir, i);
		FILE *f = fopen(path, "wb");
		if (!f || fwrite(fh_emitted[i].p, 1, fh_emitted[i].n, f) != fh_emitted[i].n || fclose(f)) {
			perror(path);
			return 1;
		}
	}
	return 0;
}

static int run_keys(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f) {
		perror(path);
		return 1;
	}
	char line[8192];
	while (fgets(line, sizeof line, f)) {
		char types_s[64], hex[8000];
		hex[0] = 0;
		if (sscanf(line, "%63s %7999s", types_s, hex) < 1)
			continue;
		weir_type types[64];
		size_t nt = strlen(types_s);
		for (size_t i = 0; i < nt; i++)
			types[i] = (weir_type)(strchr("ifsbt", types_s[i]) - "ifsbt" + 1);
		uint8_t key[4000];
		size_t len = strlen(hex) / 2;
		for (size_t i = 0; i < len; i++)
			sscanf(hex + 2 * i, "%2hhx", &key[i]);
		weir_value vals[64];
		if (weir_key_decode(key, len, types, nt, vals)) {
			puts("error");
			continue;
		}
		for (size_t i = 0; i < nt; i++) {
			if (i)
				putchar(' ');
			print_value(stdout, &vals[i]);
		}
		putchar('\n');
	}
	fclose(f);
	return 0;
}

static int run_decode(const char *path)
{
	size_t n;
	uint8_t *p = read_file(path, &n);
	if (!p) {
		perror(path);
		return 1;
	}
	weir_decoder d = {0};
	weir_batch b;
	if (weir_decode(&d, p, n, &b))
		printf("error: %s\n", d.err);
	else
		printf("ok %d\n", (int)b.rows);
	weir_decoder_free(&d);
	free(p);
	return 0;
}

int main(int argc, char **argv)
{
	int rc = 2;
	if (argc == 2 && strcmp(argv[1], "self") == 0) {
		test_roundtrip();
		test_malformed();
		test_keys();
		test_json();
		test_exports();
		printf("%d passed, %d failed\n", passed, failed);
		rc = failed != 0;
	} else if (argc == 4 && strcmp(argv[1], "echo") == 0) {
		rc = run_echo(argv[2], atoi(argv[3]));
	} else if (argc == 3 && strcmp(argv[1], "keys") == 0) {
		rc = run_keys(argv[2]);
	} else if (argc == 3 && strcmp(argv[1], "decode") == 0) {
		rc = run_decode(argv[2]);
	} else {
		fprintf(stderr, "usage: sdk_test self | echo DIR N | keys FILE | decode FILE\n");
	}
	fh_free();
	return rc;
}
