/*
 * weir.c: the C guest SDK of weir's WebAssembly function ABI (weir.h,
 * docs/wasm-abi.md). C11 over wasi-libc and nothing else.
 *
 * Sections: byte helpers; the flatbuffer reader (every read bounds-checked
 * against the metadata); the IPC decoder and the row accessors; the output
 * builder; the flatbuffer writer and the IPC encoder; the key decoder; the
 * JSON reader for the open document; the host functions; the exports.
 *
 * Arrow's layout follows format/Message.fbs and format/Schema.fbs of the
 * Arrow columnar format; only what weir's five column types need is read
 * or written.
 */
#include "weir.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- Byte helpers ------------------------------------------------------ */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (uint16_t)p[1] << 8); }

static uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

static void put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)v);
	put32(p + 4, (uint32_t)(v >> 32));
}

static double bits_double(uint64_t b)
{
	double f;
	memcpy(&f, &b, sizeof f);
	return f;
}

static uint64_t double_bits(double f)
{
	uint64_t b;
	memcpy(&b, &f, sizeof b);
	return b;
}

static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static int bit(const uint8_t *bitmap, int64_t i) { return bitmap[i >> 3] >> (i & 7) & 1; }

int weir_buf_reserve(weir_buf *b, size_t n)
{
	if (n <= b->cap - b->len)
		return 0;
	if (n > SIZE_MAX / 2 - b->len)
		return -1;
	size_t cap = b->cap ? b->cap : 64;
	while (cap - b->len < n)
		cap *= 2;
	uint8_t *p = realloc(b->ptr, cap);
	if (!p)
		return -1;
	b->ptr = p;
	b->cap = cap;
	return 0;
}

void weir_buf_free(weir_buf *b)
{
	free(b->ptr);
	b->ptr = NULL;
	b->len = b->cap = 0;
}

/* buf_zero appends n zero bytes. */
static int buf_zero(weir_buf *b, size_t n)
{
	if (weir_buf_reserve(b, n))
		return -1;
	memset(b->ptr + b->len, 0, n);
	b->len += n;
	return 0;
}

static int buf_append(weir_buf *b, const void *p, size_t n)
{
	if (weir_buf_reserve(b, n))
		return -1;
	if (n)
		memcpy(b->ptr + b->len, p, n);
	b->len += n;
	return 0;
}

const char *weir_type_name(int type)
{
	switch (type) {
	case WEIR_INT64:
		return "int64";
	case WEIR_FLOAT64:
		return "float64";
	case WEIR_STRING:
		return "string";
	case WEIR_BOOL:
		return "bool";
	case WEIR_TIMESTAMP_MS:
		return "timestamp_ms";
	}
	return "?";
}

/* ---- Flatbuffer reader --------------------------------------------------
 *
 * A table at pos starts with an i32 soffset to its vtable (at pos -
 * soffset): u16 vtable size, u16 table size, then a u16 offset per field
 * (0: absent, the default). Offsets to tables, vectors and strings are u32
 * and point forward from where they are stored. Every position is checked
 * against the buffer before it is read.
 */

typedef struct {
	const uint8_t *buf;
	size_t n, pos, vt, vtsize;
} fbt;

static int fb_table_at(const uint8_t *buf, size_t n, size_t pos, fbt *t)
{
	if (n < 4 || pos > n - 4)
		return -1;
	int64_t vt = (int64_t)pos - (int32_t)rd32(buf + pos);
	if (vt < 0 || (uint64_t)vt > n - 4)
		return -1;
	size_t vtsize = rd16(buf + vt);
	if (vtsize < 4 || vtsize % 2 || vtsize > n - (size_t)vt)
		return -1;
	*t = (fbt){buf, n, pos, (size_t)vt, vtsize};
	return 0;
}

/* fb_field finds field id of size bytes: 1 and *pos, 0 absent, -1 outside. */
static int fb_field(const fbt *t, int id, size_t size, size_t *pos)
{
	size_t s = 4 + 2 * (size_t)id;
	if (s + 2 > t->vtsize)
		return 0;
	size_t off = rd16(t->buf + t->vt + s);
	if (off == 0)
		return 0;
	if (size > t->n || t->pos + off > t->n - size)
		return -1;
	*pos = t->pos + off;
	return 1;
}

static int fb_present(const fbt *t, int id)
{
	size_t s = 4 + 2 * (size_t)id;
	return s + 2 <= t->vtsize && rd16(t->buf + t->vt + s) != 0;
}

/* fb_scalar reads field id, a little-endian scalar of size bytes (1:
 * ubyte or bool, else a signed integer), or def when it is absent. */
static int fb_scalar(const fbt *t, int id, size_t size, int64_t def, int64_t *v)
{
	size_t p;
	int r = fb_field(t, id, size, &p);
	*v = def;
	if (r != 1)
		return r;
	const uint8_t *q = t->buf + p;
	switch (size) {
	case 1:
		*v = q[0];
		break;
	case 2:
		*v = (int16_t)rd16(q);
		break;
	case 4:
		*v = (int32_t)rd32(q);
		break;
	default:
		*v = (int64_t)rd64(q);
	}
	return 0;
}

/* fb_ref follows the u32 offset of field id: 1 and *target, 0 absent. */
static int fb_ref(const fbt *t, int id, size_t *target)
{
	size_t p;
	int r = fb_field(t, id, 4, &p);
	if (r != 1)
		return r;
	uint32_t off = rd32(t->buf + p);
	if (off > t->n - p)
		return -1;
	*target = p + off;
	return 1;
}

static int fb_table(const fbt *t, int id, fbt *sub)
{
	size_t p;
	int r = fb_ref(t, id, &p);
	if (r != 1)
		return r;
	return fb_table_at(t->buf, t->n, p, sub) ? -1 : 1;
}

/* fb_vector finds vector field id of n elements of size bytes each, all
 * inside the buffer; an absent vector has none. */
static int fb_vector(const fbt *t, int id, size_t size, size_t *start, size_t *n)
{
	size_t p;
	int r = fb_ref(t, id, &p);
	*n = 0;
	*start = 0;
	if (r != 1)
		return r;
	if (p > t->n - 4)
		return -1;
	size_t len = rd32(t->buf + p);
	if (len > (t->n - p - 4) / size)
		return -1;
	*start = p + 4;
	*n = len;
	return 1;
}

static int fb_vector_table(const fbt *t, size_t start, size_t i, fbt *sub)
{
	size_t p = start + 4 * i; /* inside the buffer: checked by fb_vector */
	uint32_t off = rd32(t->buf + p);
	if (off > t->n - p)
		return -1;
	return fb_table_at(t->buf, t->n, p + off, sub);
}

/* fb_string is a vector of bytes (flatbuffers' NUL after it is not needed). */
static int fb_string(const fbt *t, int id, const char **s, size_t *len)
{
	size_t start;
	int r = fb_vector(t, id, 1, &start, len);
	*s = r == 1 ? (const char *)t->buf + start : "";
	return r;
}

/* Field ids and enum values of Message.fbs and Schema.fbs. */
enum {
	MESSAGE_VERSION = 0,
	MESSAGE_HEADER_TYPE = 1,
	MESSAGE_HEADER = 2,
	MESSAGE_BODY_LENGTH = 3,

	HEADER_SCHEMA = 1,
	HEADER_RECORD_BATCH = 3,

	METADATA_V4 = 3,
	METADATA_V5 = 4,

	SCHEMA_ENDIANNESS = 0,
	SCHEMA_FIELDS = 1,

	FIELD_NAME = 0,
	FIELD_NULLABLE = 1,
	FIELD_TYPE_TYPE = 2,
	FIELD_TYPE = 3,
	FIELD_DICTIONARY = 4,
	FIELD_CHILDREN = 5,

	TYPE_INT = 2,
	TYPE_FLOATING_POINT = 3,
	TYPE_UTF8 = 5,
	TYPE_BOOL = 6,
	TYPE_TIMESTAMP = 10,

	INT_BIT_WIDTH = 0,
	INT_IS_SIGNED = 1,
	FLOAT_PRECISION = 0,
	PRECISION_DOUBLE = 2,
	TIMESTAMP_UNIT = 0,
	TIMESTAMP_TIMEZONE = 1,
	UNIT_MILLISECOND = 1,

	BATCH_LENGTH = 0,
	BATCH_NODES = 1,
	BATCH_BUFFERS = 2,
	BATCH_COMPRESSION = 3,
};

#define CONTINUATION 0xFFFFFFFFu

/* ---- IPC decoder ------------------------------------------------------- */

/* derr records why decoding failed and returns -1. */
__attribute__((format(printf, 2, 3))) static int derr(weir_decoder *d, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(d->err, sizeof d->err, fmt, ap);
	va_end(ap);
	return -1;
}

static void free_fields(weir_schema_field *f, int32_t n)
{
	for (int32_t i = 0; i < n; i++)
		free(f[i].name);
	free(f);
}

void weir_decoder_free(weir_decoder *d)
{
	free_fields(d->fields, d->nfields);
	free(d->cols);
	d->fields = NULL;
	d->cols = NULL;
	d->nfields = 0;
}

static int decode_type(weir_decoder *d, const fbt *f, int32_t i, weir_type *out)
{
	int64_t tag;
	fbt typ;
	if (fb_scalar(f, FIELD_TYPE_TYPE, 1, 0, &tag) || fb_table(f, FIELD_TYPE, &typ) < 0)
		return derr(d, "schema field %d: corrupt type", (int)i);
	if (!fb_present(f, FIELD_TYPE))
		return derr(d, "schema field %d: no type", (int)i);
	switch (tag) {
	case TYPE_INT: {
		int64_t width, sign;
		if (fb_scalar(&typ, INT_BIT_WIDTH, 4, 0, &width) || fb_scalar(&typ, INT_IS_SIGNED, 1, 0, &sign))
			return derr(d, "schema field %d: corrupt int type", (int)i);
		if (width != 64 || !sign)
			return derr(d, "schema field %d: int of %d bits (signed %d): want signed 64", (int)i, (int)width,
				    (int)sign);
		*out = WEIR_INT64;
		return 0;
	}
	case TYPE_FLOATING_POINT: {
		int64_t prec;
		if (fb_scalar(&typ, FLOAT_PRECISION, 2, 0, &prec))
			return derr(d, "schema field %d: corrupt float type", (int)i);
		if (prec != PRECISION_DOUBLE)
			return derr(d, "schema field %d: float precision %d: want double", (int)i, (int)prec);
		*out = WEIR_FLOAT64;
		return 0;
	}
	case TYPE_UTF8:
		*out = WEIR_STRING;
		return 0;
	case TYPE_BOOL:
		*out = WEIR_BOOL;
		return 0;
	case TYPE_TIMESTAMP: {
		int64_t unit;
		const char *tz;
		size_t tzlen;
		if (fb_scalar(&typ, TIMESTAMP_UNIT, 2, 0, &unit) || fb_string(&typ, TIMESTAMP_TIMEZONE, &tz, &tzlen) < 0)
			return derr(d, "schema field %d: corrupt timestamp type", (int)i);
		if (unit != UNIT_MILLISECOND || tzlen != 3 || memcmp(tz, "UTC", 3) != 0)
			return derr(d, "schema field %d: timestamp of unit %d and zone %.*s: want ms, UTC", (int)i, (int)unit,
				    (int)(tzlen > 32 ? 32 : tzlen), tz);
		*out = WEIR_TIMESTAMP_MS;
		return 0;
	}
	}
	return derr(d, "schema field %d: type tag %d: want int64, float64, string, bool or timestamp_ms", (int)i, (int)tag);
}

static int decode_schema(weir_decoder *d, const fbt *s)
{
	int64_t endian;
	size_t start, n;
	if (fb_scalar(s, SCHEMA_ENDIANNESS, 2, 0, &endian) || fb_vector(s, SCHEMA_FIELDS, 4, &start, &n) < 0)
		return derr(d, "corrupt schema");
	if (endian != 0)
		return derr(d, "schema is big-endian");
	if (n == 0)
		return derr(d, "schema has no fields");
	if (n > INT32_MAX / 2)
		return derr(d, "schema has %zu fields", n);
	weir_schema_field *fields = calloc(n, sizeof *fields);
	weir_column *cols = calloc(n, sizeof *cols);
	if (!fields || !cols) {
		free(fields);
		free(cols);
		return derr(d, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		fbt f;
		const char *name;
		size_t nlen, cstart, nchildren;
		if (fb_vector_table(s, start, i, &f) || fb_string(&f, FIELD_NAME, &name, &nlen) < 0 ||
		    fb_vector(&f, FIELD_CHILDREN, 4, &cstart, &nchildren) < 0) {
			derr(d, "schema field %zu: corrupt", i);
			goto fail;
		}
		if (fb_present(&f, FIELD_DICTIONARY)) {
			derr(d, "schema field %zu: dictionary-encoded fields are not supported", i);
			goto fail;
		}
		if (nchildren) {
			derr(d, "schema field %zu: nested fields are not supported", i);
			goto fail;
		}
		if (decode_type(d, &f, (int32_t)i, &fields[i].type))
			goto fail;
		fields[i].name = malloc(nlen + 1);
		if (!fields[i].name) {
			derr(d, "out of memory");
			goto fail;
		}
		memcpy(fields[i].name, name, nlen);
		fields[i].name[nlen] = 0;
	}
	weir_decoder_free(d);
	d->fields = fields;
	d->cols = cols;
	d->nfields = (int32_t)n;
	d->schema_id++;
	return 0;
fail:
	free_fields(fields, (int32_t)n);
	free(cols);
	return -1;
}

/* body_buffer returns buffer i of the batch, checked against the body. */
static int body_buffer(weir_decoder *d, const fbt *rb, size_t start, size_t i, const uint8_t *body, size_t body_len,
		       const uint8_t **p, size_t *len)
{
	const uint8_t *e = rb->buf + start + 16 * i;
	int64_t off = (int64_t)rd64(e), n = (int64_t)rd64(e + 8);
	if (off < 0 || n < 0 || (uint64_t)off > body_len || (uint64_t)n > body_len - (uint64_t)off)
		return derr(d, "buffer %zu at %lld of %lld bytes is outside the body of %zu", i, (long long)off,
			    (long long)n, body_len);
	*p = body + off;
	*len = (size_t)n;
	return 0;
}

static int decode_batch(weir_decoder *d, const fbt *rb, const uint8_t *body, size_t body_len, weir_batch *out)
{
	int64_t rows;
	size_t nstart, nnodes, bstart, nbufs;
	if (fb_scalar(rb, BATCH_LENGTH, 8, 0, &rows) || fb_vector(rb, BATCH_NODES, 16, &nstart, &nnodes) < 0 ||
	    fb_vector(rb, BATCH_BUFFERS, 16, &bstart, &nbufs) < 0)
		return derr(d, "corrupt record batch");
	if (fb_present(rb, BATCH_COMPRESSION))
		return derr(d, "compressed record batches are not supported");
	if (rows < 0 || rows > INT32_MAX)
		return derr(d, "record batch of %lld rows", (long long)rows);
	if (nnodes != (size_t)d->nfields)
		return derr(d, "record batch of %zu columns, schema has %d", nnodes, (int)d->nfields);
	size_t want = 0;
	for (int32_t c = 0; c < d->nfields; c++)
		want += d->fields[c].type == WEIR_STRING ? 3 : 2;
	if (nbufs != want)
		return derr(d, "record batch of %zu buffers, schema needs %zu", nbufs, want);

	size_t bi = 0;
	size_t bitmap_len = ((size_t)rows + 7) / 8;
	for (int32_t c = 0; c < d->nfields; c++) {
		weir_column *col = &d->cols[c];
		const char *name = d->fields[c].name;
		const uint8_t *node = rb->buf + nstart + 16 * (size_t)c;
		int64_t len = (int64_t)rd64(node), nulls = (int64_t)rd64(node + 8);
		*col = (weir_column){.name = name, .type = d->fields[c].type};
		if (len != rows)
			return derr(d, "column %s: %lld rows, record batch has %lld", name, (long long)len,
				    (long long)rows);
		if (nulls < 0 || nulls > rows)
			return derr(d, "column %s: null count %lld of %lld rows", name, (long long)nulls,
				    (long long)rows);
		const uint8_t *vp, *p;
		size_t vlen, n;
		if (body_buffer(d, rb, bstart, bi++, body, body_len, &vp, &vlen))
			return -1;
		if (nulls > 0) {
			if (vlen < bitmap_len)
				return derr(d, "column %s: validity bitmap of %zu bytes for %lld rows", name, vlen,
					    (long long)rows);
			int64_t unset = 0;
			for (int64_t r = 0; r < rows; r++)
				unset += !bit(vp, r);
			if (unset != nulls)
				return derr(d, "column %s: null count %lld, bitmap has %lld", name, (long long)nulls,
					    (long long)unset);
			col->validity = vp;
		}
		col->null_count = nulls;
		if (body_buffer(d, rb, bstart, bi++, body, body_len, &p, &n))
			return -1;
		col->values = p;
		switch (col->type) {
		case WEIR_INT64:
		case WEIR_FLOAT64:
		case WEIR_TIMESTAMP_MS:
			if (n / 8 < (size_t)rows)
				return derr(d, "column %s: values of %zu bytes for %lld rows", name, n, (long long)rows);
			break;
		case WEIR_BOOL:
			if (n < bitmap_len)
				return derr(d, "column %s: values of %zu bytes for %lld rows", name, n, (long long)rows);
			break;
		case WEIR_STRING: {
			col->values = NULL;
			col->offsets = p;
			if (body_buffer(d, rb, bstart, bi++, body, body_len, &col->data, &col->data_len))
				return -1;
			if (rows == 0)
				break;
			if (n / 4 < (size_t)rows + 1)
				return derr(d, "column %s: offsets of %zu bytes for %lld rows", name, n,
					    (long long)rows);
			int32_t prev = (int32_t)rd32(p);
			if (prev < 0)
				return derr(d, "column %s: negative string offset %d", name, (int)prev);
			for (int64_t r = 1; r <= rows; r++) {
				int32_t o = (int32_t)rd32(p + 4 * r);
				if (o < prev)
					return derr(d, "column %s: decreasing string offsets %d, %d", name, (int)prev,
						    (int)o);
				prev = o;
			}
			if ((size_t)prev > col->data_len)
				return derr(d, "column %s: string offset %d beyond data of %zu bytes", name, (int)prev,
					    col->data_len);
			break;
		}
		}
	}
	*out = (weir_batch){(int32_t)rows, d->nfields, d->cols, d->schema_id};
	return 0;
}

int weir_decode(weir_decoder *d, const uint8_t *p, size_t n, weir_batch *out)
{
	fbt batch;
	const uint8_t *body = NULL;
	size_t body_len = 0;
	int have_batch = 0;
	d->err[0] = 0;
	if (n == 0)
		return derr(d, "empty payload");
	for (size_t pos = 0; pos < n;) {
		if (n - pos < 8)
			return derr(d, "truncated message prefix at byte %zu", pos);
		if (rd32(p + pos) != CONTINUATION)
			return derr(d, "no continuation marker at byte %zu", pos);
		int32_t mlen = (int32_t)rd32(p + pos + 4);
		if (mlen <= 0 || (size_t)mlen > n - pos - 8)
			return derr(d, "metadata length %d at byte %zu", (int)mlen, pos);
		const uint8_t *meta = p + pos + 8;
		size_t body_start = pos + 8 + (size_t)mlen;
		fbt msg, hdr;
		int64_t htype, version, blen;
		if (fb_table_at(meta, (size_t)mlen, rd32(meta), &msg) || fb_scalar(&msg, MESSAGE_VERSION, 2, 0, &version) ||
		    fb_scalar(&msg, MESSAGE_HEADER_TYPE, 1, 0, &htype) || fb_table(&msg, MESSAGE_HEADER, &hdr) < 0 ||
		    fb_scalar(&msg, MESSAGE_BODY_LENGTH, 8, 0, &blen))
			return derr(d, "corrupt message at byte %zu", pos);
		if (!fb_present(&msg, MESSAGE_HEADER))
			return derr(d, "message without header at byte %zu", pos);
		if (version < METADATA_V4)
			return derr(d, "message at byte %zu: metadata version %d: want V4 or V5", pos, (int)version);
		if (blen < 0 || (uint64_t)blen > n - body_start)
			return derr(d, "message at byte %zu: body length %lld exceeds the payload", pos,
				    (long long)blen);
		if (have_batch)
			return derr(d, "message at byte %zu after the record batch", pos);
		switch (htype) {
		case HEADER_SCHEMA:
			if (decode_schema(d, &hdr))
				return -1;
			break;
		case HEADER_RECORD_BATCH:
			batch = hdr;
			body = p + body_start;
			body_len = (size_t)blen;
			have_batch = 1;
			break;
		default:
			return derr(d, "message at byte %zu: type %d: want a schema or a record batch", pos, (int)htype);
		}
		pos = body_start + (size_t)blen;
	}
	if (!have_batch)
		return derr(d, "payload carries no record batch");
	if (!d->fields)
		return derr(d, "first payload carries no schema");
	return decode_batch(d, &batch, body, body_len, out);
}

/* ---- Row accessors ------------------------------------------------------ */

int weir_col(const weir_batch *b, const char *name, int type)
{
	for (int32_t i = 0; i < b->ncols; i++)
		if (strcmp(b->cols[i].name, name) == 0)
			return type == 0 || (int)b->cols[i].type == type ? (int)i : -1;
	return -1;
}

static const weir_column *cell(const weir_batch *b, int col, int32_t row, int type)
{
	if (col < 0 || col >= b->ncols || row < 0 || row >= b->rows)
		return NULL;
	const weir_column *c = &b->cols[col];
	if ((int)c->type != type || (c->validity && !bit(c->validity, row)))
		return NULL;
	return c;
}

int weir_is_null(const weir_batch *b, int col, int32_t row)
{
	if (col < 0 || col >= b->ncols || row < 0 || row >= b->rows)
		return 1;
	const weir_column *c = &b->cols[col];
	return c->validity && !bit(c->validity, row);
}

int64_t weir_int64(const weir_batch *b, int col, int32_t row)
{
	const weir_column *c = cell(b, col, row, WEIR_INT64);
	return c ? (int64_t)rd64(c->values + 8 * (size_t)row) : 0;
}

int64_t weir_timestamp(const weir_batch *b, int col, int32_t row)
{
	const weir_column *c = cell(b, col, row, WEIR_TIMESTAMP_MS);
	return c ? (int64_t)rd64(c->values + 8 * (size_t)row) : 0;
}

double weir_float64(const weir_batch *b, int col, int32_t row)
{
	const weir_column *c = cell(b, col, row, WEIR_FLOAT64);
	return c ? bits_double(rd64(c->values + 8 * (size_t)row)) : 0;
}

int weir_bool(const weir_batch *b, int col, int32_t row)
{
	const weir_column *c = cell(b, col, row, WEIR_BOOL);
	return c ? bit(c->values, row) : 0;
}

weir_str weir_string(const weir_batch *b, int col, int32_t row)
{
	const weir_column *c = cell(b, col, row, WEIR_STRING);
	if (!c)
		return (weir_str){"", 0};
	uint32_t lo = rd32(c->offsets + 4 * (size_t)row), hi = rd32(c->offsets + 4 * (size_t)row + 4);
	return (weir_str){(const char *)c->data + lo, hi - lo};
}

/* ---- Output builder ----------------------------------------------------- */

/* berr records the first misuse of b and returns -1. */
__attribute__((format(printf, 2, 3))) static int berr(weir_builder *b, const char *fmt, ...)
{
	if (b->err[0])
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(b->err, sizeof b->err, fmt, ap);
	va_end(ap);
	return -1;
}

int weir_builder_init(weir_builder *b, const weir_field *fields, int32_t n)
{
	*b = (weir_builder){.fields = fields, .ncols = n};
	if (n <= 0)
		return -1;
	b->cols = calloc((size_t)n, sizeof *b->cols);
	if (!b->cols)
		return -1;
	for (int32_t i = 0; i < n; i++)
		b->cols[i].type = fields[i].type;
	weir_builder_reset(b);
	return 0;
}

void weir_builder_free(weir_builder *b)
{
	for (int32_t i = 0; b->cols && i < b->ncols; i++) {
		weir_buf_free(&b->cols[i].validity);
		weir_buf_free(&b->cols[i].values);
		weir_buf_free(&b->cols[i].offsets);
		weir_buf_free(&b->cols[i].data);
	}
	free(b->cols);
	b->cols = NULL;
	b->ncols = 0;
}

void weir_builder_reset(weir_builder *b)
{
	for (int32_t i = 0; i < b->ncols; i++) {
		weir_builder_column *c = &b->cols[i];
		c->validity.len = c->values.len = c->offsets.len = c->data.len = 0;
		c->set = 0;
		c->nulls = 0;
	}
	b->rows = 0;
	b->err[0] = 0;
}

/* slot checks col and type and makes room for the pending row. */
static weir_builder_column *slot(weir_builder *b, int col, weir_type type)
{
	if (col < 0 || col >= b->ncols) {
		berr(b, "output column %d: the output has %d columns", col, (int)b->ncols);
		return NULL;
	}
	weir_builder_column *c = &b->cols[col];
	if (type && c->type != type) {
		berr(b, "output column %s is %s, not %s", b->fields[col].name, weir_type_name((int)c->type),
		     weir_type_name((int)type));
		return NULL;
	}
	if (b->rows == INT32_MAX) {
		berr(b, "output batch is full");
		return NULL;
	}
	size_t r = (size_t)b->rows, need;
	switch (c->type) {
	case WEIR_BOOL:
		need = r / 8 + 1;
		break;
	case WEIR_STRING:
		need = 4 * (r + 2);
		break;
	default:
		need = 8 * (r + 1);
	}
	weir_buf *v = c->type == WEIR_STRING ? &c->offsets : &c->values;
	if ((need > v->len && buf_zero(v, need - v->len)) ||
	    (r / 8 + 1 > c->validity.len && buf_zero(&c->validity, r / 8 + 1 - c->validity.len))) {
		berr(b, "out of memory");
		return NULL;
	}
	return c;
}

/* unset drops what an earlier setter of the pending row appended. */
static void unset(weir_builder *b, weir_builder_column *c)
{
	if (c->type == WEIR_STRING)
		c->data.len = rd32(c->offsets.ptr + 4 * (size_t)b->rows);
	c->set = 0;
}

static int set8(weir_builder *b, int col, weir_type type, uint64_t v)
{
	weir_builder_column *c = slot(b, col, type);
	if (!c)
		return -1;
	put64(c->values.ptr + 8 * (size_t)b->rows, v);
	c->set = 1;
	return 0;
}

int weir_set_int64(weir_builder *b, int col, int64_t v) { return set8(b, col, WEIR_INT64, (uint64_t)v); }
int weir_set_timestamp(weir_builder *b, int col, int64_t ms) { return set8(b, col, WEIR_TIMESTAMP_MS, (uint64_t)ms); }
int weir_set_float64(weir_builder *b, int col, double v) { return set8(b, col, WEIR_FLOAT64, double_bits(v)); }

int weir_set_bool(weir_builder *b, int col, int v)
{
	weir_builder_column *c = slot(b, col, WEIR_BOOL);
	if (!c)
		return -1;
	uint8_t m = (uint8_t)(1u << (b->rows & 7));
	uint8_t *byte = c->values.ptr + b->rows / 8;
	*byte = v ? *byte | m : *byte & (uint8_t)~m;
	c->set = 1;
	return 0;
}

int weir_set_string(weir_builder *b, int col, const char *s, size_t len)
{
	weir_builder_column *c = slot(b, col, WEIR_STRING);
	if (!c)
		return -1;
	unset(b, c);
	if (len > (size_t)INT32_MAX - c->data.len)
		return berr(b, "output column %s: more than 2 GiB of strings in one batch", b->fields[col].name);
	if (buf_append(&c->data, s, len))
		return berr(b, "out of memory");
	c->set = 1;
	return 0;
}

int weir_set_null(weir_builder *b, int col)
{
	weir_builder_column *c = slot(b, col, 0);
	if (!c)
		return -1;
	unset(b, c);
	return 0;
}

int weir_builder_row(weir_builder *b)
{
	if (b->err[0])
		return -1;
	for (int32_t i = 0; i < b->ncols; i++) {
		weir_builder_column *c = slot(b, (int)i, 0);
		if (!c)
			return -1;
		size_t r = (size_t)b->rows;
		uint8_t m = (uint8_t)(1u << (r & 7));
		if (c->set) {
			c->validity.ptr[r / 8] |= m;
		} else {
			c->validity.ptr[r / 8] &= (uint8_t)~m;
			c->nulls++;
			switch (c->type) {
			case WEIR_BOOL:
				c->values.ptr[r / 8] &= (uint8_t)~m;
				break;
			case WEIR_STRING:
				break; /* weir_set_null dropped its data */
			default:
				put64(c->values.ptr + 8 * r, 0);
			}
		}
		if (c->type == WEIR_STRING)
			put32(c->offsets.ptr + 4 * (r + 1), (uint32_t)c->data.len);
		c->set = 0;
	}
	b->rows++;
	return 0;
}

/* ---- Flatbuffer writer ---------------------------------------------------
 *
 * Writes front to back: a table's vtable, then the table, then what its
 * offsets point to (which therefore lie after the offsets, as u32 offsets
 * must). Alignment is relative to base, the start of the flatbuffer, which
 * sits 8 bytes into an 8-aligned message.
 */

typedef struct {
	weir_buf *b;
	size_t base;
	int err;
} fbw;

typedef struct {
	size_t vt, tbl;
	int nslots;
	uint16_t off[8];
} fbtab;

static size_t w_pos(fbw *w) { return w->b->len - w->base; }

static void w_bytes(fbw *w, const void *p, size_t n)
{
	if (!w->err && buf_append(w->b, p, n))
		w->err = 1;
}

static void w_pad(fbw *w, size_t align)
{
	static const uint8_t zeros[8];
	w_bytes(w, zeros, (align - w_pos(w) % align) % align);
}

static void w_u8(fbw *w, uint8_t v) { w_bytes(w, &v, 1); }

static void w_u16(fbw *w, uint16_t v)
{
	uint8_t p[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	w_bytes(w, p, 2);
}

static void w_u32(fbw *w, uint32_t v)
{
	uint8_t p[4];
	put32(p, v);
	w_bytes(w, p, 4);
}

static void w_u64(fbw *w, uint64_t v)
{
	uint8_t p[8];
	put64(p, v);
	w_bytes(w, p, 8);
}

static void w_patch32(fbw *w, size_t at, uint32_t v)
{
	if (!w->err)
		put32(w->b->ptr + w->base + at, v);
}

#define NO_REF ((size_t)-1)

/* w_target makes the offset at ref point here. */
static void w_target(fbw *w, size_t ref)
{
	if (ref != NO_REF)
		w_patch32(w, ref, (uint32_t)(w_pos(w) - ref));
}

static void t_begin(fbw *w, fbtab *t, int nslots, size_t ref)
{
	w_pad(w, 4);
	t->vt = w_pos(w);
	t->nslots = nslots;
	memset(t->off, 0, sizeof t->off);
	for (int i = 0; i < 2 + nslots; i++)
		w_u16(w, 0);
	w_pad(w, 4);
	t->tbl = w_pos(w);
	w_target(w, ref);
	w_u32(w, (uint32_t)(t->tbl - t->vt));
}

static void t_field(fbw *w, fbtab *t, int id, size_t size)
{
	w_pad(w, size);
	t->off[id] = (uint16_t)(w_pos(w) - t->tbl);
}

static void t_u8(fbw *w, fbtab *t, int id, uint8_t v)
{
	t_field(w, t, id, 1);
	w_u8(w, v);
}

static void t_i16(fbw *w, fbtab *t, int id, int16_t v)
{
	t_field(w, t, id, 2);
	w_u16(w, (uint16_t)v);
}

static void t_i32(fbw *w, fbtab *t, int id, int32_t v)
{
	t_field(w, t, id, 4);
	w_u32(w, (uint32_t)v);
}

static void t_i64(fbw *w, fbtab *t, int id, int64_t v)
{
	t_field(w, t, id, 8);
	w_u64(w, (uint64_t)v);
}

/* t_ref writes an offset field to be pointed by w_target; returns it. */
static size_t t_ref(fbw *w, fbtab *t, int id)
{
	t_field(w, t, id, 4);
	size_t at = w_pos(w);
	w_u32(w, 0);
	return at;
}

static void t_end(fbw *w, fbtab *t)
{
	if (w->err)
		return;
	uint8_t *vt = w->b->ptr + w->base + t->vt;
	size_t vtsize = 4 + 2 * (size_t)t->nslots, tsize = w_pos(w) - t->tbl;
	vt[0] = (uint8_t)vtsize;
	vt[1] = (uint8_t)(vtsize >> 8);
	vt[2] = (uint8_t)tsize;
	vt[3] = (uint8_t)(tsize >> 8);
	for (int i = 0; i < t->nslots; i++) {
		vt[4 + 2 * i] = (uint8_t)t->off[i];
		vt[5 + 2 * i] = (uint8_t)(t->off[i] >> 8);
	}
}

static void w_string(fbw *w, size_t ref, const char *s, size_t n)
{
	w_pad(w, 4);
	w_target(w, ref);
	w_u32(w, (uint32_t)n);
	w_bytes(w, s, n);
	w_u8(w, 0);
}

/* w_vector starts a vector of n elements aligned to align at ref. */
static void w_vector(fbw *w, size_t ref, size_t n, size_t align)
{
	w_pad(w, 4);
	while ((w_pos(w) + 4) % align)
		w_u32(w, 0);
	w_target(w, ref);
	w_u32(w, (uint32_t)n);
}

/* ---- IPC encoder --------------------------------------------------------- */

/* msg_begin writes the message prefix and the Message table up to its
 * header, and returns the offset field of the header. */
static size_t msg_begin(fbw *w, weir_buf *out, uint8_t htype, int64_t body_len, fbtab *m)
{
	w_u32(w, CONTINUATION);
	w_u32(w, 0); /* metadata length, patched by msg_end */
	w->base = out->len;
	size_t root = w_pos(w);
	w_u32(w, 0);
	t_begin(w, m, 4, root);
	t_i64(w, m, MESSAGE_BODY_LENGTH, body_len);
	t_i16(w, m, MESSAGE_VERSION, METADATA_V5);
	t_u8(w, m, MESSAGE_HEADER_TYPE, htype);
	size_t hdr = t_ref(w, m, MESSAGE_HEADER);
	t_end(w, m);
	return hdr;
}

/* msg_end pads the metadata to 8 bytes and records its length. */
static void msg_end(fbw *w)
{
	w_pad(w, 8);
	if (!w->err)
		put32(w->b->ptr + w->base - 4, (uint32_t)w_pos(w));
}

static void encode_type(fbw *w, fbtab *f, weir_type type)
{
	static const uint8_t tags[] = {
		[WEIR_INT64] = TYPE_INT,   [WEIR_FLOAT64] = TYPE_FLOATING_POINT, [WEIR_STRING] = TYPE_UTF8,
		[WEIR_BOOL] = TYPE_BOOL, [WEIR_TIMESTAMP_MS] = TYPE_TIMESTAMP,
	};
	t_u8(w, f, FIELD_TYPE_TYPE, tags[type]);
}

static void encode_schema(fbw *w, weir_buf *out, const weir_builder *b)
{
	fbtab m, s, f, t;
	size_t hdr = msg_begin(w, out, HEADER_SCHEMA, 0, &m);
	t_begin(w, &s, 2, hdr);
	size_t fields = t_ref(w, &s, SCHEMA_FIELDS);
	t_end(w, &s);
	w_vector(w, fields, (size_t)b->ncols, 4);
	size_t slots = w_pos(w);
	for (int32_t i = 0; i < b->ncols; i++)
		w_u32(w, 0);
	for (int32_t i = 0; i < b->ncols; i++) {
		weir_type type = b->fields[i].type;
		const char *name = b->fields[i].name;
		t_begin(w, &f, 6, slots + 4 * (size_t)i);
		size_t nref = t_ref(w, &f, FIELD_NAME);
		size_t tref = t_ref(w, &f, FIELD_TYPE);
		size_t cref = t_ref(w, &f, FIELD_CHILDREN);
		t_u8(w, &f, FIELD_NULLABLE, 1);
		encode_type(w, &f, type);
		t_end(w, &f);
		w_string(w, nref, name, strlen(name));
		switch (type) {
		case WEIR_INT64:
			t_begin(w, &t, 2, tref);
			t_i32(w, &t, INT_BIT_WIDTH, 64);
			t_u8(w, &t, INT_IS_SIGNED, 1);
			t_end(w, &t);
			break;
		case WEIR_FLOAT64:
			t_begin(w, &t, 1, tref);
			t_i16(w, &t, FLOAT_PRECISION, PRECISION_DOUBLE);
			t_end(w, &t);
			break;
		case WEIR_TIMESTAMP_MS: {
			t_begin(w, &t, 2, tref);
			size_t tz = t_ref(w, &t, TIMESTAMP_TIMEZONE);
			t_i16(w, &t, TIMESTAMP_UNIT, UNIT_MILLISECOND);
			t_end(w, &t);
			w_string(w, tz, "UTC", 3);
			break;
		}
		default: /* Utf8 and Bool are empty tables */
			t_begin(w, &t, 0, tref);
			t_end(w, &t);
		}
		w_vector(w, cref, 0, 4);
	}
	msg_end(w);
}

/* The buffers of column c in body order, with their lengths. */
static int column_buffers(const weir_builder_column *c, int32_t rows, const uint8_t *p[3], size_t n[3])
{
	size_t bitmap = ((size_t)rows + 7) / 8;
	p[0] = c->validity.ptr;
	n[0] = c->nulls ? bitmap : 0;
	switch (c->type) {
	case WEIR_BOOL:
		p[1] = c->values.ptr, n[1] = bitmap;
		return 2;
	case WEIR_STRING:
		p[1] = c->offsets.ptr, n[1] = 4 * ((size_t)rows + 1);
		p[2] = c->data.ptr, n[2] = c->data.len;
		return 3;
	default:
		p[1] = c->values.ptr, n[1] = 8 * (size_t)rows;
		return 2;
	}
}

static void encode_batch(fbw *w, weir_buf *out, const weir_builder *b)
{
	size_t body_len = 0, nbufs = 0;
	for (int32_t i = 0; i < b->ncols; i++) {
		const uint8_t *p[3];
		size_t n[3];
		int k = column_buffers(&b->cols[i], b->rows, p, n);
		for (int j = 0; j < k; j++)
			body_len += pad8(n[j]);
		nbufs += (size_t)k;
	}
	fbtab m, rb;
	size_t hdr = msg_begin(w, out, HEADER_RECORD_BATCH, (int64_t)body_len, &m);
	t_begin(w, &rb, 3, hdr);
	t_i64(w, &rb, BATCH_LENGTH, b->rows);
	size_t nodes = t_ref(w, &rb, BATCH_NODES);
	size_t bufs = t_ref(w, &rb, BATCH_BUFFERS);
	t_end(w, &rb);
	w_vector(w, nodes, (size_t)b->ncols, 8);
	for (int32_t i = 0; i < b->ncols; i++) {
		w_u64(w, (uint64_t)b->rows);
		w_u64(w, (uint64_t)b->cols[i].nulls);
	}
	w_vector(w, bufs, nbufs, 8);
	size_t off = 0;
	for (int32_t i = 0; i < b->ncols; i++) {
		const uint8_t *p[3];
		size_t n[3];
		int k = column_buffers(&b->cols[i], b->rows, p, n);
		for (int j = 0; j < k; j++) {
			w_u64(w, off);
			w_u64(w, n[j]);
			off += pad8(n[j]);
		}
	}
	msg_end(w);
	for (int32_t i = 0; i < b->ncols; i++) {
		const uint8_t *p[3];
		size_t n[3];
		int k = column_buffers(&b->cols[i], b->rows, p, n);
		for (int j = 0; j < k; j++) {
			w_bytes(w, p[j], n[j]);
			w_pad(w, 8);
		}
	}
}

int weir_encode(weir_encoder *e, const weir_builder *b, weir_buf *out)
{
	if (b->err[0] || b->ncols <= 0)
		return -1;
	size_t start = out->len;
	/* Messages are 8-aligned relative to the payload's start. */
	fbw w = {out, start, 0};
	if (!e->schema_sent)
		encode_schema(&w, out, b);
	w.base = out->len;
	encode_batch(&w, out, b);
	if (w.err) {
		out->len = start;
		return -1;
	}
	e->schema_sent = 1;
	return 0;
}

/* ---- Keys ---------------------------------------------------------------- */

int weir_key_decode(const uint8_t *key, size_t n, const weir_type *types, size_t ncols, weir_value *vals)
{
	size_t pos = 0;
	for (size_t i = 0; i < ncols; i++) {
		weir_value *v = &vals[i];
		*v = (weir_value){.type = types[i], .s = {"", 0}};
		if (pos >= n)
			return -1;
		uint8_t tag = key[pos++];
		if (tag == 0) {
			v->is_null = 1;
			continue;
		}
		if (tag != 1)
			return -1;
		switch (types[i]) {
		case WEIR_INT64:
		case WEIR_TIMESTAMP_MS:
		case WEIR_FLOAT64: {
			if (n - pos < 8)
				return -1;
			uint64_t b = 0;
			for (size_t j = 0; j < 8; j++)
				b = b << 8 | key[pos + j];
			pos += 8;
			if (types[i] == WEIR_FLOAT64)
				v->f = bits_double(b >> 63 ? b & ~(UINT64_C(1) << 63) : ~b);
			else
				v->i = (int64_t)(b ^ UINT64_C(1) << 63);
			break;
		}
		case WEIR_BOOL:
			if (pos >= n || key[pos] > 1)
				return -1;
			v->b = key[pos++];
			break;
		case WEIR_STRING: {
			uint64_t len = 0;
			for (int shift = 0;; shift += 7) {
				if (pos >= n || shift > 63)
					return -1;
				uint8_t c = key[pos++];
				if (shift == 63 && c > 1)
					return -1;
				len |= (uint64_t)(c & 0x7f) << shift;
				if (!(c & 0x80))
					break;
			}
			if (len > n - pos)
				return -1;
			v->s = (weir_str){(const char *)key + pos, (size_t)len};
			pos += (size_t)len;
			break;
		}
		default:
			return -1;
		}
	}
	return pos == n ? 0 : -1;
}

/* ---- JSON reader for the open document -----------------------------------
 *
 * A recursive-descent reader of RFC 8259 JSON that keeps what the open
 * document has: strings, numbers, bools, the keyColumns array and the
 * config object's values; anything else is checked and skipped.
 */

typedef struct {
	const char *p, *start, *end;
	char *err;
	size_t errcap;
	int depth;
} jcur;

static int jerr(jcur *j, const char *what)
{
	if (j->errcap)
		snprintf(j->err, j->errcap, "at byte %zu: %s", (size_t)(j->p - j->start), what);
	return -1;
}

static void jws(jcur *j)
{
	while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
		j->p++;
}

static int jpeek(jcur *j) { return j->p < j->end ? (unsigned char)*j->p : -1; }

static int jexpect(jcur *j, char c)
{
	jws(j);
	if (jpeek(j) != (unsigned char)c) {
		char what[32];
		snprintf(what, sizeof what, "want '%c'", c);
		return jerr(j, what);
	}
	j->p++;
	return 0;
}

static int jhex4(jcur *j, uint32_t *v)
{
	*v = 0;
	if (j->end - j->p < 4)
		return jerr(j, "truncated \\u escape");
	for (int i = 0; i < 4; i++) {
		char c = *j->p++;
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return jerr(j, "bad \\u escape");
		*v = *v << 4 | (uint32_t)d;
	}
	return 0;
}

static int utf8_put(weir_buf *b, uint32_t cp)
{
	uint8_t u[4];
	size_t n;
	if (cp < 0x80)
		u[0] = (uint8_t)cp, n = 1;
	else if (cp < 0x800)
		u[0] = (uint8_t)(0xc0 | cp >> 6), u[1] = (uint8_t)(0x80 | (cp & 0x3f)), n = 2;
	else if (cp < 0x10000)
		u[0] = (uint8_t)(0xe0 | cp >> 12), u[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)),
		u[2] = (uint8_t)(0x80 | (cp & 0x3f)), n = 3;
	else
		u[0] = (uint8_t)(0xf0 | cp >> 18), u[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3f)),
		u[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3f)), u[3] = (uint8_t)(0x80 | (cp & 0x3f)), n = 4;
	return buf_append(b, u, n);
}

/* jstring reads a string; with out it returns it decoded, NUL-terminated,
 * in memory the caller frees. */
static int jstring(jcur *j, char **out, size_t *len)
{
	weir_buf b = {0};
	if (jexpect(j, '"'))
		return -1;
	for (;;) {
		if (j->p >= j->end) {
			weir_buf_free(&b);
			return jerr(j, "unterminated string");
		}
		unsigned char c = (unsigned char)*j->p++;
		if (c == '"')
			break;
		if (c < 0x20) {
			j->p--;
			weir_buf_free(&b);
			return jerr(j, "control character in string");
		}
		int r = 0;
		if (c != '\\') {
			r = out ? buf_append(&b, &c, 1) : 0;
		} else {
			if (j->p >= j->end) {
				weir_buf_free(&b);
				return jerr(j, "unterminated string");
			}
			char e = *j->p++;
			const char *simple = strchr("\"\\/bfnrt", e);
			if (e && simple) {
				static const char repl[] = "\"\\/\b\f\n\r\t";
				r = out ? buf_append(&b, &repl[simple - "\"\\/bfnrt"], 1) : 0;
			} else if (e == 'u') {
				uint32_t cp, lo;
				if (jhex4(j, &cp)) {
					weir_buf_free(&b);
					return -1;
				}
				if (cp >= 0xd800 && cp < 0xdc00) {
					if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u') {
						weir_buf_free(&b);
						return jerr(j, "unpaired surrogate in \\u escape");
					}
					j->p += 2;
					if (jhex4(j, &lo)) {
						weir_buf_free(&b);
						return -1;
					}
					if (lo < 0xdc00 || lo >= 0xe000) {
						weir_buf_free(&b);
						return jerr(j, "unpaired surrogate in \\u escape");
					}
					cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				} else if (cp >= 0xdc00 && cp < 0xe000) {
					weir_buf_free(&b);
					return jerr(j, "unpaired surrogate in \\u escape");
				}
				r = out ? utf8_put(&b, cp) : 0;
			} else {
				j->p--;
				weir_buf_free(&b);
				return jerr(j, "bad escape in string");
			}
		}
		if (r) {
			weir_buf_free(&b);
			return jerr(j, "out of memory");
		}
	}
	if (out) {
		if (buf_append(&b, "", 1)) {
			weir_buf_free(&b);
			return jerr(j, "out of memory");
		}
		*out = (char *)b.ptr;
		*len = b.len - 1;
	}
	return 0;
}

typedef struct {
	double num;
	int is_int;
	int64_t i;
} jnum;

static int jdigits(jcur *j)
{
	const char *s = j->p;
	while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
		j->p++;
	return j->p > s;
}

static int jnumber(jcur *j, jnum *n)
{
	jws(j);
	const char *s = j->p;
	int is_int = 1;
	if (jpeek(j) == '-')
		j->p++;
	if (jpeek(j) == '0')
		j->p++;
	else if (!jdigits(j))
		return jerr(j, "want a number");
	if (jpeek(j) == '.') {
		j->p++;
		is_int = 0;
		if (!jdigits(j))
			return jerr(j, "want digits after '.'");
	}
	if (jpeek(j) == 'e' || jpeek(j) == 'E') {
		j->p++;
		is_int = 0;
		if (jpeek(j) == '+' || jpeek(j) == '-')
			j->p++;
		if (!jdigits(j))
			return jerr(j, "want digits in the exponent");
	}
	char tmp[64];
	size_t len = (size_t)(j->p - s);
	if (len >= sizeof tmp) {
		j->p = s;
		return jerr(j, "number of more than 63 characters");
	}
	memcpy(tmp, s, len);
	tmp[len] = 0;
	n->num = strtod(tmp, NULL);
	n->is_int = 0;
	n->i = 0;
	if (is_int) {
		errno = 0;
		long long v = strtoll(tmp, NULL, 10);
		if (errno == 0) {
			n->is_int = 1;
			n->i = v;
		}
	}
	return 0;
}

static int jliteral(jcur *j, const char *lit)
{
	size_t n = strlen(lit);
	if ((size_t)(j->end - j->p) < n || memcmp(j->p, lit, n) != 0)
		return jerr(j, "want a value");
	j->p += n;
	return 0;
}

static int jskip(jcur *j);

/* jlist reads an object (open '{') or an array ('['), calling item for
 * every member (key is its name; NULL in an array), or skipping them when
 * item is NULL. */
static int jlist(jcur *j, char open, int (*item)(jcur *, const char *, void *), void *arg)
{
	char close = open == '{' ? '}' : ']';
	if (jexpect(j, open))
		return -1;
	if (++j->depth > 64)
		return jerr(j, "nested too deep");
	jws(j);
	if (jpeek(j) == close) {
		j->p++;
		j->depth--;
		return 0;
	}
	for (;;) {
		char *key = NULL;
		size_t klen;
		int r = 0;
		if (open == '{') {
			jws(j);
			r = jstring(j, &key, &klen) || jexpect(j, ':');
		}
		if (!r)
			r = item ? item(j, key, arg) : jskip(j);
		free(key);
		if (r)
			return -1;
		jws(j);
		if (jpeek(j) == ',') {
			j->p++;
			continue;
		}
		if (jexpect(j, close))
			return -1;
		j->depth--;
		return 0;
	}
}

static int jskip(jcur *j)
{
	jws(j);
	jnum n;
	switch (jpeek(j)) {
	case '{':
	case '[':
		return jlist(j, (char)jpeek(j), NULL, NULL);
	case '"':
		return jstring(j, NULL, NULL);
	case 't':
		return jliteral(j, "true");
	case 'f':
		return jliteral(j, "false");
	case 'n':
		return jliteral(j, "null");
	default:
		return jnumber(j, &n);
	}
}

static int jint(jcur *j, const char *name, int64_t lo, int64_t hi, int64_t *v)
{
	jnum n;
	const char *at = j->p;
	if (jnumber(j, &n))
		return -1;
	if (!n.is_int || n.i < lo || n.i > hi) {
		char what[96];
		snprintf(what, sizeof what, "%s: want a whole number in [%lld, %lld]", name, (long long)lo,
			 (long long)hi);
		j->p = at;
		return jerr(j, what);
	}
	*v = n.i;
	return 0;
}

static int key_column(jcur *j, const char *key, void *arg)
{
	(void)key;
	weir_open_info *info = arg;
	char *s;
	size_t len;
	jws(j);
	if (jstring(j, &s, &len))
		return -1;
	char **k = realloc(info->key_columns, (size_t)(info->nkey_columns + 1) * sizeof *k);
	if (!k) {
		free(s);
		return jerr(j, "out of memory");
	}
	info->key_columns = k;
	k[info->nkey_columns++] = s;
	return 0;
}

static int config_member(jcur *j, const char *key, void *arg)
{
	weir_open_info *info = arg;
	weir_config_value v = {0};
	jws(j);
	int c = jpeek(j);
	if (c == '"') {
		char *s;
		size_t len;
		if (jstring(j, &s, &len))
			return -1;
		v.kind = WEIR_JSON_STRING;
		v.str = (weir_str){s, len};
	} else if (c == 't' || c == 'f') {
		if (jliteral(j, c == 't' ? "true" : "false"))
			return -1;
		v.kind = WEIR_JSON_BOOL;
		v.b = c == 't';
	} else if (c == 'n') {
		if (jliteral(j, "null"))
			return -1;
		v.kind = WEIR_JSON_NULL;
	} else if (c == '{' || c == '[') {
		if (jskip(j))
			return -1;
		v.kind = WEIR_JSON_OTHER;
	} else {
		jnum n;
		if (jnumber(j, &n))
			return -1;
		v.kind = WEIR_JSON_NUMBER;
		v.num = n.num;
		v.is_int = n.is_int;
		v.i = n.i;
	}
	size_t klen = strlen(key);
	v.name = malloc(klen + 1);
	if (v.name)
		memcpy(v.name, key, klen + 1);
	weir_config_value *cfg = realloc(info->config, (size_t)(info->nconfig + 1) * sizeof *cfg);
	if (!v.name || !cfg) {
		free(v.name);
		free((char *)v.str.ptr);
		if (cfg)
			info->config = cfg;
		return jerr(j, "out of memory");
	}
	info->config = cfg;
	cfg[info->nconfig++] = v;
	return 0;
}

static int jstring_field(jcur *j, char **dst)
{
	size_t len;
	free(*dst);
	*dst = NULL;
	jws(j);
	return jstring(j, dst, &len);
}

static int open_member(jcur *j, const char *key, void *arg)
{
	weir_open_info *info = arg;
	int64_t v;
	if (strcmp(key, "function") == 0)
		return jstring_field(j, &info->function);
	if (strcmp(key, "operator") == 0)
		return jstring_field(j, &info->operator_name);
	if (strcmp(key, "version") == 0)
		return jint(j, key, 0, INT64_MAX, &info->version);
	if (strcmp(key, "subtask") == 0 || strcmp(key, "parallelism") == 0 || strcmp(key, "timeColumn") == 0) {
		if (jint(j, key, key[0] == 't' ? -1 : 0, INT32_MAX, &v))
			return -1;
		*(key[0] == 's' ? &info->subtask : key[0] == 'p' ? &info->parallelism : &info->time_column) =
			(int32_t)v;
		return 0;
	}
	if (strcmp(key, "timeOffset") == 0)
		return jint(j, key, INT64_MIN, INT64_MAX, &info->time_offset);
	if (strcmp(key, "keyColumns") == 0) {
		jws(j);
		if (jpeek(j) == 'n')
			return jliteral(j, "null");
		return jlist(j, '[', key_column, info);
	}
	if (strcmp(key, "config") == 0) {
		jws(j);
		if (jpeek(j) == 'n')
			return jliteral(j, "null");
		return jlist(j, '{', config_member, info);
	}
	return jskip(j); /* newer hosts may say more */
}

void weir_open_info_free(weir_open_info *info)
{
	free(info->function);
	free(info->operator_name);
	for (int32_t i = 0; i < info->nkey_columns; i++)
		free(info->key_columns[i]);
	free(info->key_columns);
	for (int32_t i = 0; i < info->nconfig; i++) {
		free(info->config[i].name);
		free((char *)info->config[i].str.ptr);
	}
	free(info->config);
	*info = (weir_open_info){.time_column = -1};
}

int weir_parse_open(const char *json, size_t n, weir_open_info *info, char *err, size_t errcap)
{
	*info = (weir_open_info){.time_column = -1};
	jcur j = {json, json, json + n, err, errcap, 0};
	if (errcap)
		err[0] = 0;
	if (jlist(&j, '{', open_member, info))
		goto fail;
	jws(&j);
	if (j.p != j.end) {
		jerr(&j, "want the end of the document");
		goto fail;
	}
	return 0;
fail:
	weir_open_info_free(info);
	return -1;
}

const weir_config_value *weir_config(const weir_open_info *info, const char *name)
{
	/* The last of duplicate names wins, as in most JSON readers. */
	for (int32_t i = info->nconfig - 1; i >= 0; i--)
		if (strcmp(info->config[i].name, name) == 0)
			return &info->config[i];
	return NULL;
}

int weir_config_int(const weir_config_value *v, int64_t *out)
{
	if (!v || v->kind != WEIR_JSON_NUMBER)
		return -1;
	if (v->is_int) {
		*out = v->i;
		return 0;
	}
	/* 2^63 is the first double beyond int64; a whole double below it fits. */
	if (!(v->num > -9223372036854775808.0 && v->num < 9223372036854775808.0) || (double)(int64_t)v->num != v->num)
		return -1;
	*out = (int64_t)v->num;
	return 0;
}

/* parse_duration reads Go's duration syntax into nanoseconds, as
 * time.ParseDuration does (fractions through float64, like Go). */
static int parse_duration(const char *s, size_t n, int64_t *ns)
{
	static const struct {
		const char *name;
		uint64_t ns;
	} units[] = {
		{"ns", 1},	    {"us", 1000}, {"\xc2\xb5s", 1000}, {"\xce\xbcs", 1000}, {"ms", 1000000},
		{"s", 1000000000}, {"m", 60000000000}, {"h", 3600000000000},
	};
	const char *end = s + n;
	int neg = 0;
	if (s < end && (*s == '-' || *s == '+'))
		neg = *s++ == '-';
	if (end - s == 1 && *s == '0') {
		*ns = 0;
		return 0;
	}
	if (s == end)
		return -1;
	uint64_t total = 0;
	while (s < end) {
		uint64_t v = 0, f = 0;
		double scale = 1;
		int digits = 0;
		for (; s < end && *s >= '0' && *s <= '9'; s++, digits++) {
			if (v > (UINT64_C(1) << 63) / 10)
				return -1;
			v = v * 10 + (uint64_t)(*s - '0');
			if (v > UINT64_C(1) << 63)
				return -1;
		}
		if (s < end && *s == '.') {
			for (s++; s < end && *s >= '0' && *s <= '9'; s++, digits++) {
				if (f > (UINT64_C(1) << 63) / 10)
					continue; /* like Go: later digits are dropped */
				f = f * 10 + (uint64_t)(*s - '0');
				scale *= 10;
			}
		}
		if (!digits)
			return -1;
		const char *u = s;
		while (s < end && *s != '.' && (*s < '0' || *s > '9'))
			s++;
		uint64_t unit = 0;
		for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
			if (strlen(units[i].name) == (size_t)(s - u) && memcmp(units[i].name, u, (size_t)(s - u)) == 0)
				unit = units[i].ns;
		if (!unit || v > (UINT64_C(1) << 63) / unit)
			return -1;
		v *= unit;
		if (f > 0) {
			v += (uint64_t)((double)f * ((double)unit / scale));
			if (v > UINT64_C(1) << 63)
				return -1;
		}
		total += v;
		if (total > UINT64_C(1) << 63)
			return -1;
	}
	if (total == UINT64_C(1) << 63 && !neg)
		return -1;
	*ns = neg ? (int64_t)(0 - total) : (int64_t)total;
	return 0;
}

int weir_config_duration_ms(const weir_config_value *v, int64_t *ms)
{
	if (v && v->kind == WEIR_JSON_STRING) {
		int64_t ns;
		if (parse_duration(v->str.ptr, v->str.len, &ns) || ns % 1000000 != 0)
			return -1;
		*ms = ns / 1000000;
		return 0;
	}
	return weir_config_int(v, ms);
}

/* ---- Host functions ------------------------------------------------------ */

#ifndef WEIR_NATIVE
#define WEIR_IMPORT(name) __attribute__((import_module("weir"), import_name(#name)))
WEIR_IMPORT(fail) void weir_host_fail(int32_t h, const void *p, int32_t len);
WEIR_IMPORT(log) void weir_host_log(int32_t level, const void *p, int32_t len);
WEIR_IMPORT(emit) int32_t weir_host_emit(const void *p, int32_t len);
WEIR_IMPORT(state) int32_t weir_host_state(int32_t kind, const void *name, int32_t len);
WEIR_IMPORT(key) int32_t weir_host_key(int32_t h, void *out, int32_t cap);
WEIR_IMPORT(watermark) int64_t weir_host_watermark(void);
WEIR_IMPORT(processing_time) int64_t weir_host_processing_time(void);
WEIR_IMPORT(value_get)
int32_t weir_host_value_get(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap);
WEIR_IMPORT(value_put)
void weir_host_value_put(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *v, int32_t vlen);
WEIR_IMPORT(value_delete) void weir_host_value_delete(int32_t st, int32_t h, const void *ns, int32_t nslen);
WEIR_IMPORT(list_get)
int32_t weir_host_list_get(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap);
WEIR_IMPORT(list_add)
void weir_host_list_add(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *v, int32_t vlen);
WEIR_IMPORT(list_clear) void weir_host_list_clear(int32_t st, int32_t h, const void *ns, int32_t nslen);
WEIR_IMPORT(map_get)
int32_t weir_host_map_get(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen,
			  void *out, int32_t cap);
WEIR_IMPORT(map_put)
void weir_host_map_put(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen,
		       const void *v, int32_t vlen);
WEIR_IMPORT(map_delete)
void weir_host_map_delete(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen);
WEIR_IMPORT(map_entries)
int32_t weir_host_map_entries(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap);
WEIR_IMPORT(map_clear) void weir_host_map_clear(int32_t st, int32_t h, const void *ns, int32_t nslen);
WEIR_IMPORT(timer_register) void weir_host_timer_register(int32_t h, int32_t domain, int64_t ts);
WEIR_IMPORT(timer_delete) void weir_host_timer_delete(int32_t h, int32_t domain, int64_t ts);
#define WEIR_EXPORT(name) __attribute__((export_name(#name)))
#else
#define WEIR_EXPORT(name)
#endif

/* What the SDK keeps for the instance's lifetime. */
static struct {
	weir_buf in;            /* weir_alloc's buffer */
	weir_buf key, val, out; /* host results, output payloads */
	weir_decoder dec;
	weir_encoder enc;
	weir_builder builder;
	weir_open_info info;
	int opened;
	int failed; /* weir_fail was called in this export call */
} sdk;

static int32_t len32(size_t n) { return n > INT32_MAX ? INT32_MAX : (int32_t)n; }

void weir_fail(int32_t h, const char *msg)
{
	sdk.failed = 1;
	weir_host_fail(h, msg, len32(strlen(msg)));
}

void weir_failf(int32_t h, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	weir_fail(h, msg);
}

void weir_log(int level, const char *msg) { weir_host_log(level, msg, len32(strlen(msg))); }

void weir_logf(int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	weir_log(level, msg);
}

/* The watermark does not move during an export call: it is read from the
 * host once per call (wm_valid is cleared when a call begins). */
static int wm_valid;
static int64_t wm;

int64_t weir_watermark(void)
{
	if (!wm_valid) {
		wm = weir_host_watermark();
		wm_valid = 1;
	}
	return wm;
}
int64_t weir_processing_time(void) { return weir_host_processing_time(); }

int32_t weir_state(int kind, const char *name) { return weir_host_state(kind, name, len32(strlen(name))); }

/* fetched handles a result of the copy-out convention: 0 done (n is -1 or
 * fitted), 1 call again (b has grown to n), -1 out of memory or a result
 * the ABI does not allow. */
static int fetched(weir_buf *b, int32_t n)
{
	if (n < -1)
		return -1;
	if (n == -1 || (size_t)n <= b->cap)
		return 0;
	b->len = 0;
	return weir_buf_reserve(b, (size_t)n) ? -1 : 1;
}

/* FETCH calls the host function call (with b.ptr, cap as its last two
 * arguments) until the result fits, and returns it, -2 on failure. */
#define FETCH(b, out, call)                                                          \
	do {                                                                          \
		if (!(b).ptr && weir_buf_reserve(&(b), 64))                            \
			return -2;                                                    \
		for (;;) {                                                            \
			int32_t n_ = call;                                            \
			int r_ = fetched(&(b), n_);                                   \
			if (r_ < 0)                                                   \
				return -2;                                            \
			if (r_ == 0) {                                                \
				*(out) = (b).ptr;                                     \
				return n_;                                            \
			}                                                             \
		}                                                                     \
	} while (0)

#define CAP(b) len32((b).cap)

static int32_t key_fetch(int32_t h, const uint8_t **out) { FETCH(sdk.key, out, weir_host_key(h, sdk.key.ptr, CAP(sdk.key))); }

int weir_key(int32_t h, const uint8_t **key, size_t *len)
{
	int32_t n = key_fetch(h, key);
	if (n < 0)
		return -1; /* a key is never absent: -1 is no result the ABI allows */
	*len = (size_t)n;
	return 0;
}

int weir_key_values(int32_t h, const weir_type *types, size_t ncols, weir_value *vals)
{
	const uint8_t *k;
	size_t n;
	if (weir_key(h, &k, &n)) {
		weir_failf(h, "read the key of handle %d: out of memory or no key", (int)h);
		return -1;
	}
	if (weir_key_decode(k, n, types, ncols, vals)) {
		weir_failf(h, "decode the key of handle %d: not %zu columns of the given types", (int)h, ncols);
		return -1;
	}
	return 0;
}

#define NS(ns, nslen) (ns), len32(nslen)

int32_t weir_value_read(int32_t st, int32_t h, const void *ns, size_t nslen, const uint8_t **v)
{
	FETCH(sdk.val, v, weir_host_value_get(st, h, NS(ns, nslen), sdk.val.ptr, CAP(sdk.val)));
}

void weir_value_put(int32_t st, int32_t h, const void *ns, size_t nslen, const void *v, size_t vlen)
{
	weir_host_value_put(st, h, NS(ns, nslen), v, len32(vlen));
}

void weir_value_delete(int32_t st, int32_t h, const void *ns, size_t nslen)
{
	weir_host_value_delete(st, h, NS(ns, nslen));
}

static int get8(int32_t st, int32_t h, const void *ns, size_t nslen, uint64_t *v)
{
	uint8_t b[8];
	int32_t n = weir_host_value_get(st, h, NS(ns, nslen), b, 8);
	if (n == -1)
		return 0;
	if (n != 8)
		return -1;
	*v = rd64(b);
	return 1;
}

int weir_value_get_i64(int32_t st, int32_t h, const void *ns, size_t nslen, int64_t *v)
{
	uint64_t b = 0;
	int r = get8(st, h, ns, nslen, &b);
	*v = (int64_t)b;
	return r;
}

int weir_value_get_f64(int32_t st, int32_t h, const void *ns, size_t nslen, double *v)
{
	uint64_t b = 0;
	int r = get8(st, h, ns, nslen, &b);
	*v = bits_double(b);
	return r;
}

void weir_value_put_i64(int32_t st, int32_t h, const void *ns, size_t nslen, int64_t v)
{
	uint8_t b[8];
	put64(b, (uint64_t)v);
	weir_host_value_put(st, h, NS(ns, nslen), b, 8);
}

void weir_value_put_f64(int32_t st, int32_t h, const void *ns, size_t nslen, double v)
{
	uint8_t b[8];
	put64(b, double_bits(v));
	weir_host_value_put(st, h, NS(ns, nslen), b, 8);
}

int32_t weir_list_read(int32_t st, int32_t h, const void *ns, size_t nslen, const uint8_t **list)
{
	FETCH(sdk.val, list, weir_host_list_get(st, h, NS(ns, nslen), sdk.val.ptr, CAP(sdk.val)));
}

void weir_list_add(int32_t st, int32_t h, const void *ns, size_t nslen, const void *v, size_t vlen)
{
	weir_host_list_add(st, h, NS(ns, nslen), v, len32(vlen));
}

void weir_list_clear(int32_t st, int32_t h, const void *ns, size_t nslen) { weir_host_list_clear(st, h, NS(ns, nslen)); }

int32_t weir_map_read(int32_t st, int32_t h, const void *ns, size_t nslen, const void *k, size_t klen,
		      const uint8_t **v)
{
	FETCH(sdk.val, v, weir_host_map_get(st, h, NS(ns, nslen), k, len32(klen), sdk.val.ptr, CAP(sdk.val)));
}

void weir_map_put(int32_t st, int32_t h, const void *ns, size_t nslen, const void *k, size_t klen, const void *v,
		  size_t vlen)
{
	weir_host_map_put(st, h, NS(ns, nslen), k, len32(klen), v, len32(vlen));
}

void weir_map_delete(int32_t st, int32_t h, const void *ns, size_t nslen, const void *k, size_t klen)
{
	weir_host_map_delete(st, h, NS(ns, nslen), k, len32(klen));
}

int32_t weir_map_read_entries(int32_t st, int32_t h, const void *ns, size_t nslen, const uint8_t **entries)
{
	FETCH(sdk.val, entries, weir_host_map_entries(st, h, NS(ns, nslen), sdk.val.ptr, CAP(sdk.val)));
}

void weir_map_clear(int32_t st, int32_t h, const void *ns, size_t nslen) { weir_host_map_clear(st, h, NS(ns, nslen)); }

int weir_next_element(const uint8_t *buf, size_t n, size_t *pos, weir_str *elem)
{
	if (*pos >= n)
		return 0;
	if (n - *pos < 4)
		return -1;
	uint32_t len = rd32(buf + *pos);
	if (len > n - *pos - 4)
		return -1;
	*elem = (weir_str){(const char *)buf + *pos + 4, len};
	*pos += 4 + (size_t)len;
	return 1;
}

void weir_timer_register(int32_t h, int domain, int64_t ts) { weir_host_timer_register(h, domain, ts); }
void weir_timer_delete(int32_t h, int domain, int64_t ts) { weir_host_timer_delete(h, domain, ts); }

const weir_open_info *weir_info(void) { return sdk.opened ? &sdk.info : NULL; }

int weir_row_time(const weir_batch *b, int32_t row, int64_t *ts)
{
	int c = sdk.opened ? sdk.info.time_column : -1;
	if (c < 0 || c >= b->ncols || row < 0 || row >= b->rows || weir_is_null(b, c, row))
		return 0;
	const weir_column *col = &b->cols[c];
	if (col->type != WEIR_TIMESTAMP_MS && col->type != WEIR_INT64)
		return 0;
	/* Wraps like the host's int64 arithmetic would. */
	*ts = (int64_t)(rd64(col->values + 8 * (size_t)row) + (uint64_t)sdk.info.time_offset);
	return 1;
}

/* ---- Exports --------------------------------------------------------------- */

/* Output is flushed once per export call, and earlier when a batch grows
 * this large, so one payload stays well below the memory limit. */
#define FLUSH_ROWS 8192

WEIR_EXPORT(weir_abi_version) int32_t weir_abi_version(void) { return WEIR_ABI_VERSION; }

WEIR_EXPORT(weir_alloc) void *weir_alloc(int32_t size)
{
	if (size < 0)
		return NULL;
	if ((size_t)size > sdk.in.cap || !sdk.in.ptr) {
		/* The old content is dead: free first, so memory need not hold both. */
		weir_buf_free(&sdk.in);
		if (weir_buf_reserve(&sdk.in, size ? (size_t)size : 1))
			return NULL;
	}
	return sdk.in.ptr;
}

#ifdef WEIR_NATIVE
const char *weir_describe_json(void) { return weir_user_function.describe; }
#endif

WEIR_EXPORT(weir_describe) int64_t weir_describe(void)
{
	const char *d = weir_user_function.describe;
	return (int64_t)((uint64_t)(uintptr_t)d << 32 | (uint32_t)strlen(d));
}

/* finish ends a callback of an export call: 0, or its non-zero result
 * (1 for a misused builder) once fail has said why. */
static int32_t finish(int32_t h, int rc, const char *what)
{
	if (rc == 0 && !sdk.builder.err[0])
		return 0;
	if (!sdk.failed) {
		if (sdk.builder.err[0])
			weir_failf(h, "%s: %s", what, sdk.builder.err);
		else
			weir_failf(h, "%s returned %d", what, rc);
	}
	weir_builder_reset(&sdk.builder);
	return rc ? rc : 1;
}

static int flush(void)
{
	if (sdk.builder.rows == 0)
		return 0;
	sdk.out.len = 0;
	if (weir_encode(&sdk.enc, &sdk.builder, &sdk.out)) {
		weir_fail(WEIR_NO_HANDLE, sdk.builder.err[0] ? sdk.builder.err : "encode output: out of memory");
		weir_builder_reset(&sdk.builder);
		return 1;
	}
	weir_builder_reset(&sdk.builder);
	if (sdk.out.len > INT32_MAX) {
		weir_fail(WEIR_NO_HANDLE, "encode output: payload over 2 GiB");
		return 1;
	}
	/* 1: the host refused it and says why; the export must fail. */
	return weir_host_emit(sdk.out.ptr, (int32_t)sdk.out.len) != 0;
}

WEIR_EXPORT(weir_open) int32_t weir_open(const uint8_t *p, int32_t len)
{
	char err[256];
	sdk.failed = 0;
	if (sdk.opened) {
		weir_fail(WEIR_NO_HANDLE, "weir_open called twice");
		return 1;
	}
	if (len < 0 || weir_parse_open((const char *)p, (size_t)len, &sdk.info, err, sizeof err)) {
		weir_failf(WEIR_NO_HANDLE, "parse the open document: %s", len < 0 ? "negative length" : err);
		return 1;
	}
	const weir_function *fn = &weir_user_function;
	if (!fn->process || weir_builder_init(&sdk.builder, fn->output, fn->noutput)) {
		weir_fail(WEIR_NO_HANDLE, fn->process ? "the function declares no output columns (or out of memory)"
						      : "the function has no process callback");
		return 1;
	}
	sdk.opened = 1;
	int rc = fn->open ? fn->open(&sdk.info) : 0;
	return finish(WEIR_NO_HANDLE, rc, "open");
}

WEIR_EXPORT(weir_process) int32_t weir_process(const uint8_t *p, int32_t len)
{
	weir_batch b;
	sdk.failed = 0;
	wm_valid = 0;
	if (!sdk.opened) {
		weir_fail(WEIR_NO_HANDLE, "weir_process before weir_open");
		return 1;
	}
	if (len < 0 || weir_decode(&sdk.dec, p, (size_t)len, &b)) {
		weir_failf(WEIR_NO_HANDLE, "decode the input batch: %s", len < 0 ? "negative length" : sdk.dec.err);
		return 1;
	}
	for (int32_t row = 0; row < b.rows; row++) {
		int32_t rc = finish(row, weir_user_function.process(&b, row, &sdk.builder), "process");
		if (rc)
			return rc;
		if (sdk.builder.rows >= FLUSH_ROWS && flush())
			return 1;
	}
	return flush();
}

WEIR_EXPORT(weir_timers) int32_t weir_timers(const uint8_t *p, int32_t len)
{
	sdk.failed = 0;
	wm_valid = 0;
	if (!sdk.opened) {
		weir_fail(WEIR_NO_HANDLE, "weir_timers before weir_open");
		return 1;
	}
	if (len < 0 || len % 16) {
		weir_failf(WEIR_NO_HANDLE, "timers of %d bytes: want 16 a timer", (int)len);
		return 1;
	}
	if (!weir_user_function.on_timer) {
		weir_fail(WEIR_NO_HANDLE, "a timer fired, but the function has no on_timer callback");
		return 1;
	}
	for (int32_t i = 0; i < len / 16; i++) {
		const uint8_t *t = p + 16 * (size_t)i;
		int32_t rc = finish(i, weir_user_function.on_timer(i, (int64_t)rd64(t), (int32_t)rd32(t + 8), &sdk.builder),
				    "on_timer");
		if (rc)
			return rc;
		if (sdk.builder.rows >= FLUSH_ROWS && flush())
			return 1;
	}
	return flush();
}
