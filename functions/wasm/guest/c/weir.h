/*
 * weir.h: the C guest SDK of weir's WebAssembly function ABI, version 1
 * (docs/wasm-abi.md).
 *
 * A function is a struct of callbacks, defined once with WEIR_FUNCTION:
 *
 *     static const weir_field out[] = {{"zone", WEIR_STRING}, {"n", WEIR_INT64}};
 *     static int open(const weir_open_info *info) { ... declare state ... }
 *     static int process(const weir_batch *in, int32_t row, weir_builder *out) { ... }
 *     WEIR_FUNCTION = {.describe = "{...}", .output = out, .noutput = 2,
 *                      .open = open, .process = process};
 *
 * and the SDK (weir.c) provides the module's exports: it decodes the Arrow
 * IPC batches the host passes in, calls process once per row (row i is key
 * handle i), and after each export call encodes the rows the callbacks
 * appended to the builder and hands them to the host's emit.
 *
 * Everything here is C11 over wasi-libc. A callback returns 0 for success;
 * anything else fails the export, with the message given to weir_fail (or
 * one the SDK makes up). Pointers returned by the SDK (strings of a batch,
 * keys, state values) stay valid until the call that made them returns or,
 * where said, until the next call of the same kind.
 *
 * Compiled with -DWEIR_NATIVE the host functions are plain extern functions
 * named weir_host_* (see below), so the SDK can be tested natively.
 */
#ifndef WEIR_H
#define WEIR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WEIR_ABI_VERSION 1

/* Column types, as weir names them. */
typedef enum {
	WEIR_INT64 = 1,
	WEIR_FLOAT64 = 2,
	WEIR_STRING = 3,
	WEIR_BOOL = 4,
	WEIR_TIMESTAMP_MS = 5
} weir_type;

/* weir_type_name returns "int64", "float64", ..., or "?" for no type. */
const char *weir_type_name(int type);

/* A named, typed column of an output schema. */
typedef struct {
	const char *name;
	weir_type type;
} weir_field;

/* A byte string that is not NUL-terminated. */
typedef struct {
	const char *ptr;
	size_t len;
} weir_str;

/* A growable byte buffer owned by whoever holds it. */
typedef struct {
	uint8_t *ptr;
	size_t len, cap;
} weir_buf;

/* weir_buf_reserve makes room for n more bytes; 0, or -1 out of memory. */
int weir_buf_reserve(weir_buf *b, size_t n);
void weir_buf_free(weir_buf *b);

/* ---- Input batches ---------------------------------------------------- */

/* One column of a decoded record batch. Buffers point into the payload. */
typedef struct {
	const char *name; /* owned by the decoder's schema, NUL-terminated */
	weir_type type;
	int64_t null_count;
	const uint8_t *validity; /* NULL when the column has no nulls */
	const uint8_t *values;   /* 8 bytes a value, or a bitmap for bool */
	const uint8_t *offsets;  /* string: rows+1 int32 offsets into data */
	const uint8_t *data;
	size_t data_len;
} weir_column;

/* A decoded record batch: valid while its payload is. */
typedef struct {
	int32_t rows;
	int32_t ncols;
	const weir_column *cols;
	/* schema_id changes whenever a payload brings a new schema, so a
	 * function can look its columns up once per schema. */
	uint32_t schema_id;
} weir_batch;

/* weir_col returns the index of column name, or -1 when the batch has no
 * such column or it has another type than type (0: any type). */
int weir_col(const weir_batch *b, const char *name, int type);

/* Typed access to row of column col. A null value, a column of another
 * type, or a row or column out of range gives 0 (or an empty string);
 * only weir_is_null tells a null from a zero. */
int weir_is_null(const weir_batch *b, int col, int32_t row);
int64_t weir_int64(const weir_batch *b, int col, int32_t row);
double weir_float64(const weir_batch *b, int col, int32_t row);
weir_str weir_string(const weir_batch *b, int col, int32_t row);
int weir_bool(const weir_batch *b, int col, int32_t row);
int64_t weir_timestamp(const weir_batch *b, int col, int32_t row);

/* weir_row_time gives the row's event time: the open document's time
 * column plus its offset. 1 and *ts, or 0 when the row has none (the
 * input has no time column or the value is null). */
int weir_row_time(const weir_batch *b, int32_t row, int64_t *ts);

/* ---- Arrow IPC codec (used by the exports; public for tests) ---------- */

typedef struct {
	char *name;
	weir_type type;
} weir_schema_field;

/* A decoder keeps the schema of the channel across payloads. */
typedef struct {
	weir_schema_field *fields;
	int32_t nfields;
	uint32_t schema_id;
	weir_column *cols;
	char err[256];
} weir_decoder;

/* weir_decode decodes a payload: an optional Schema message (which
 * replaces the decoder's schema) and one RecordBatch message. 0 and *out,
 * or -1 with the reason in d->err. Nothing in p is trusted: a malformed
 * payload is an error, never a read outside [p, p+n). */
int weir_decode(weir_decoder *d, const uint8_t *p, size_t n, weir_batch *out);
void weir_decoder_free(weir_decoder *d);

/* A builder collects output rows of a fixed schema, column by column. */
typedef struct {
	weir_type type;
	weir_buf validity, values, offsets, data;
	int set; /* the pending row has a value */
	int64_t nulls;
} weir_builder_column;

typedef struct {
	const weir_field *fields;
	int32_t ncols;
	weir_builder_column *cols;
	int32_t rows;
	char err[256]; /* first misuse since the last reset, "" for none */
} weir_builder;

/* weir_builder_init prepares b for rows of fields (which must outlive b):
 * 0, or -1 out of memory or on an empty schema. */
int weir_builder_init(weir_builder *b, const weir_field *fields, int32_t n);
void weir_builder_free(weir_builder *b);
/* weir_builder_reset drops the rows, keeping the memory. */
void weir_builder_reset(weir_builder *b);

/* Setters fill column col of the pending row; weir_builder_row appends
 * it, every column not set being null. A setter of the wrong type or
 * column, or out of memory, returns -1 and records the problem in b->err,
 * which fails the export that flushes b. */
int weir_set_int64(weir_builder *b, int col, int64_t v);
int weir_set_float64(weir_builder *b, int col, double v);
int weir_set_string(weir_builder *b, int col, const char *s, size_t len);
int weir_set_bool(weir_builder *b, int col, int v);
int weir_set_timestamp(weir_builder *b, int col, int64_t ms);
int weir_set_null(weir_builder *b, int col);
int weir_builder_row(weir_builder *b);

/* An encoder sends the schema with its first payload only. */
typedef struct {
	int schema_sent;
} weir_encoder;

/* weir_encode appends b's rows to out as a payload (the Schema message
 * first if e has not sent it yet, then one RecordBatch): 0, or -1 out of
 * memory or when b->err is set. */
int weir_encode(weir_encoder *e, const weir_builder *b, weir_buf *out);

/* ---- Keys ------------------------------------------------------------- */

/* One value of a key or of the configuration. */
typedef struct {
	weir_type type;
	int is_null;
	int64_t i; /* int64, timestamp_ms */
	double f;
	int b;
	weir_str s;
} weir_value;

/* weir_key_decode decodes key (the key encoding of the ABI) whose columns
 * have types into vals: 0, or -1 when key is not such an encoding. String
 * values point into key. */
int weir_key_decode(const uint8_t *key, size_t n, const weir_type *types, size_t ncols, weir_value *vals);

/* ---- The open document ------------------------------------------------ */

enum { WEIR_JSON_NULL = 1, WEIR_JSON_NUMBER, WEIR_JSON_STRING, WEIR_JSON_BOOL, WEIR_JSON_OTHER };

/* A config value: kind says which of num (and i), str, b holds it;
 * arrays and objects are WEIR_JSON_OTHER. */
typedef struct {
	char *name;
	int kind;
	double num;
	int is_int; /* a number written without fraction or exponent that fits i */
	int64_t i;
	weir_str str;
	int b;
} weir_config_value;

typedef struct {
	char *function;
	int64_t version;
	char *operator_name;
	int32_t subtask, parallelism;
	char **key_columns;
	int32_t nkey_columns;
	int32_t time_column; /* -1 for none */
	int64_t time_offset;
	weir_config_value *config;
	int32_t nconfig;
} weir_open_info;

/* weir_parse_open parses the open document: 0, or -1 with the reason in
 * err. weir_open_info_free frees what it allocated. */
int weir_parse_open(const char *json, size_t n, weir_open_info *info, char *err, size_t errcap);
void weir_open_info_free(weir_open_info *info);

/* weir_config returns config value name, NULL when absent. */
const weir_config_value *weir_config(const weir_open_info *info, const char *name);

/* weir_config_int gives a number with a whole value (10000, 1e4, 10000.0)
 * that fits int64: 0, or -1 for anything else. */
int weir_config_int(const weir_config_value *v, int64_t *out);

/* weir_config_duration_ms gives a duration in milliseconds: a whole number
 * of them, or a string in Go's time.ParseDuration syntax ("10s", "1m30s",
 * "1.5h", "250ms") that is a whole number of them: 0, or -1. */
int weir_config_duration_ms(const weir_config_value *v, int64_t *ms);

/* ---- Host functions ----------------------------------------------------- */

enum { WEIR_DEBUG = 0, WEIR_INFO = 1, WEIR_WARN = 2, WEIR_ERROR = 3 };
enum { WEIR_VALUE_STATE = 0, WEIR_LIST_STATE = 1, WEIR_MAP_STATE = 2 };
enum { WEIR_EVENT_TIME = 0, WEIR_PROCESSING_TIME = 1 };
#define WEIR_NO_HANDLE (-1)

/* weir_fail records msg as the error of the failing export, about key
 * handle h (WEIR_NO_HANDLE for none). weir_failf formats it (at most 1 KiB). */
void weir_fail(int32_t h, const char *msg);
void weir_failf(int32_t h, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void weir_log(int level, const char *msg);
void weir_logf(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int64_t weir_watermark(void);
int64_t weir_processing_time(void);

/* weir_state declares state name of kind (in open only) and returns its id. */
int32_t weir_state(int kind, const char *name);

/* weir_key fetches the encoded key of handle h; valid until the next
 * weir_key or weir_key_values. 0, or -1 out of memory. */
int weir_key(int32_t h, const uint8_t **key, size_t *len);
/* weir_key_values fetches and decodes it: 0, or -1 (then weir_fail has
 * been called). */
int weir_key_values(int32_t h, const weir_type *types, size_t ncols, weir_value *vals);

/* State reads copy the value into an SDK buffer, valid until the next
 * read of state: the length, -1 when there is none, -2 out of memory. ns
 * is the namespace (NULL with nslen 0 for none). */
int32_t weir_value_read(int32_t st, int32_t h, const void *ns, size_t nslen, const uint8_t **v);
void weir_value_put(int32_t st, int32_t h, const void *ns, size_t nslen, const void *v, size_t vlen);
void weir_value_delete(int32_t st, int32_t h, const void *ns, size_t nslen);
/* 8-byte little-endian values: 1 found, 0 absent, -1 a value of another size. */
int weir_value_get_i64(int32_t st, int32_t h, const void *ns, size_t nslen, int64_t *v);
int weir_value_get_f64(int32_t st, int32_t h, const void *ns, size_t nslen, double *v);
void weir_value_put_i64(int32_t st, int32_t h, const void *ns, size_t nslen, int64_t v);
void weir_value_put_f64(int32_t st, int32_t h, const void *ns, size_t nslen, double v);

/* weir_list_read reads a list as the host encodes it (i32 len, bytes per
 * element); iterate over it with weir_next_element. */
int32_t weir_list_read(int32_t st, int32_t h, const void *ns, size_t nslen, const uint8_t **list);
void weir_list_add(int32_t st, int32_t h, const void *ns, size_t nslen, const void *v, size_t vlen);
void weir_list_clear(int32_t st, int32_t h, const void *ns, size_t nslen);

int32_t weir_map_read(int32_t st, int32_t h, const void *ns, size_t nslen, const void *k, size_t klen,
		      const uint8_t **v);
void weir_map_put(int32_t st, int32_t h, const void *ns, size_t nslen, const void *k, size_t klen, const void *v,
		  size_t vlen);
void weir_map_delete(int32_t st, int32_t h, const void *ns, size_t nslen, const void *k, size_t klen);
/* weir_map_read_entries reads every entry (i32 klen, k, i32 vlen, v);
 * iterate with weir_next_element twice per entry. */
int32_t weir_map_read_entries(int32_t st, int32_t h, const void *ns, size_t nslen, const uint8_t **entries);
void weir_map_clear(int32_t st, int32_t h, const void *ns, size_t nslen);

/* weir_next_element reads one length-prefixed element at *pos of buf
 * (n bytes): 1 and the element, 0 at the end, -1 when malformed. */
int weir_next_element(const uint8_t *buf, size_t n, size_t *pos, weir_str *elem);

void weir_timer_register(int32_t h, int domain, int64_t ts);
void weir_timer_delete(int32_t h, int domain, int64_t ts);

/* ---- The function ------------------------------------------------------ */

typedef struct {
	/* describe is the JSON document weir_describe returns. */
	const char *describe;
	/* output is the output schema; it must equal describe's "output". */
	const weir_field *output;
	int32_t noutput;
	/* open is called once, before any batch: check the config and declare
	 * state. NULL for nothing to do. info is valid for the instance's
	 * lifetime (weir_info returns it too). */
	int (*open)(const weir_open_info *info);
	/* process is called for every row of every input batch; row is the
	 * row's key handle. */
	int (*process)(const weir_batch *in, int32_t row, weir_builder *out);
	/* on_timer is called for every timer that fires; h is its key handle.
	 * NULL if the function registers no timers. */
	int (*on_timer)(int32_t h, int64_t ts, int domain, weir_builder *out);
} weir_function;

/* WEIR_FUNCTION defines the module's function: WEIR_FUNCTION = {...}; */
#define WEIR_FUNCTION const weir_function weir_user_function
extern const weir_function weir_user_function;

/* weir_info returns the open document, NULL before weir_open. */
const weir_open_info *weir_info(void);

/* The exports (docs/wasm-abi.md), callable directly in a native build. */
int32_t weir_abi_version(void);
void *weir_alloc(int32_t size);
int64_t weir_describe(void);
int32_t weir_open(const uint8_t *p, int32_t len);
int32_t weir_process(const uint8_t *p, int32_t len);
int32_t weir_timers(const uint8_t *p, int32_t len);

#ifdef WEIR_NATIVE
/* The host functions a native test program provides (same as the imports
 * of module weir, with pointers for addresses). */
void weir_host_fail(int32_t h, const void *p, int32_t len);
void weir_host_log(int32_t level, const void *p, int32_t len);
int32_t weir_host_emit(const void *p, int32_t len);
int32_t weir_host_state(int32_t kind, const void *name, int32_t len);
int32_t weir_host_key(int32_t h, void *out, int32_t cap);
int64_t weir_host_watermark(void);
int64_t weir_host_processing_time(void);
int32_t weir_host_value_get(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap);
void weir_host_value_put(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *v, int32_t vlen);
void weir_host_value_delete(int32_t st, int32_t h, const void *ns, int32_t nslen);
int32_t weir_host_list_get(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap);
void weir_host_list_add(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *v, int32_t vlen);
void weir_host_list_clear(int32_t st, int32_t h, const void *ns, int32_t nslen);
int32_t weir_host_map_get(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen,
			  void *out, int32_t cap);
void weir_host_map_put(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen,
		       const void *v, int32_t vlen);
void weir_host_map_delete(int32_t st, int32_t h, const void *ns, int32_t nslen, const void *k, int32_t klen);
int32_t weir_host_map_entries(int32_t st, int32_t h, const void *ns, int32_t nslen, void *out, int32_t cap);
void weir_host_map_clear(int32_t st, int32_t h, const void *ns, int32_t nslen);
void weir_host_timer_register(int32_t h, int32_t domain, int64_t ts);
void weir_host_timer_delete(int32_t h, int32_t domain, int64_t ts);
/* The describe document (weir_describe's pointer does not fit 32 bits). */
const char *weir_describe_json(void);
#endif

#ifdef __cplusplus
}
#endif
#endif
