/* _fastencode: magic-2 record batches encoded from Arrow buffers, the compiled twin of
 * v2_encode.encode_batches_python (compiled_encode.py wraps it).
 *
 * encode() measures every record, cuts batches as a producer fills them (or where the
 * caller says), and writes the records (and, uncompressed, the batch headers and CRC32C)
 * in one pass over the keys, values, timestamps and pre-encoded headers, without the GIL.
 * frame() puts headers and CRCs around records sections compressed in Python.
 *
 * The layout values come from layout.py as macros (buildinfo.py, setup.py), the one home
 * of those facts. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if !defined(LOG_OVERHEAD) || !defined(V2_HEADER_SIZE) || !defined(V2_BASE_OFFSET) || \
    !defined(V2_LENGTH) || !defined(V2_LEADER_EPOCH) || !defined(V2_MAGIC) || \
    !defined(V2_CRC) || !defined(V2_ATTRIBUTES) || !defined(V2_LAST_OFFSET_DELTA) || \
    !defined(V2_BASE_TIMESTAMP) || !defined(V2_MAX_TIMESTAMP) || !defined(V2_PRODUCER_ID) || \
    !defined(V2_PRODUCER_EPOCH) || !defined(V2_BASE_SEQUENCE) || !defined(V2_RECORD_COUNT) || \
    !defined(V2_CRC_START) || !defined(NO_PRODUCER_ID) || !defined(NO_PRODUCER_EPOCH) || \
    !defined(NO_SEQUENCE) || !defined(NO_PARTITION_LEADER_EPOCH) || !defined(V2_MAGIC_VALUE) || \
    !defined(SEGMENTLOG_SOURCE_SHA256)
#error "build through setup.py: the layout values come from format/layout.py (fastpath/buildinfo.py)"
#endif

/* ------------------------------------------------------------------ CRC32C */

#include "crc32c.h"

static int use_crc_instruction;  /* set_crc_instruction(False) tests the tables */

static uint32_t
crc32c(const uint8_t *p, size_t n)
{
#ifdef HAVE_CRC32C_INSTRUCTION
    if (use_crc_instruction)
        return crc32c_continue(0, p, n);
#endif
    return ~crc32c_tables(0xFFFFFFFFu, p, n);
}

/* ------------------------------------------------------------------ varints */

static inline uint64_t
zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t
varint_size(int64_t v)
{
    uint64_t z = zigzag(v) | 1;
    int bits = 64 - __builtin_clzll(z);
    return (bits * 9 + 64) >> 6;  /* = ceil(bits / 7) for bits 1..64, without a divide */
}

static inline uint8_t *
put_varint(uint8_t *p, int64_t v)
{
    uint64_t z = zigzag(v);
    while (z >= 0x80) {
        *p++ = (uint8_t)(z | 0x80);
        z >>= 7;
    }
    *p++ = (uint8_t)z;
    return p;
}

static inline void
put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static inline void
put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

static inline void
put_be16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* ------------------------------------------------------------- binary columns */

/* An Arrow binary column: its n+1 offsets (int32 or int64), data and validity bitmap. */
typedef struct {
    Py_buffer offsets, data, validity;
    int have_data, have_validity, wide;
    int64_t bit_offset;
    const char *name;
} Column;

static void
column_release(Column *c)
{
    if (c->offsets.obj)
        PyBuffer_Release(&c->offsets);
    if (c->have_data)
        PyBuffer_Release(&c->data);
    if (c->have_validity)
        PyBuffer_Release(&c->validity);
    memset(c, 0, sizeof(*c));
}

static inline int64_t
column_offset(const Column *c, int64_t i)
{
    return c->wide ? ((const int64_t *)c->offsets.buf)[i] : ((const int32_t *)c->offsets.buf)[i];
}

/* -1 for a null row, else its byte length. */
static inline int64_t
column_length(const Column *c, int64_t i)
{
    if (c->have_validity) {
        int64_t bit = c->bit_offset + i;
        if (!((((const uint8_t *)c->validity.buf)[bit >> 3] >> (bit & 7)) & 1))
            return -1;
    }
    return column_offset(c, i + 1) - column_offset(c, i);
}

static inline const uint8_t *
column_bytes(const Column *c, int64_t i)
{
    return (const uint8_t *)c->data.buf + column_offset(c, i);
}

/* (offsets, data or None, validity bitmap or None, bit offset) for `rows` rows. */
static int
column_from(PyObject *spec, Column *c, Py_ssize_t rows, const char *name)
{
    PyObject *offsets, *data, *validity;
    long long bit_offset;
    memset(c, 0, sizeof(*c));
    c->name = name;
    if (!PyArg_ParseTuple(spec, "OOOL", &offsets, &data, &validity, &bit_offset))
        return -1;
    if (PyObject_GetBuffer(offsets, &c->offsets, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (c->offsets.itemsize != 4 && c->offsets.itemsize != 8) {
        PyErr_Format(PyExc_TypeError, "%s: offsets must be int32 or int64", name);
        return -1;
    }
    c->wide = c->offsets.itemsize == 8;
    if (c->offsets.len / c->offsets.itemsize != rows + 1) {
        PyErr_Format(PyExc_ValueError, "%s: %zd offsets for %zd rows", name,
                     c->offsets.len / c->offsets.itemsize, rows);
        return -1;
    }
    if (data != Py_None) {
        if (PyObject_GetBuffer(data, &c->data, PyBUF_SIMPLE) < 0)
            return -1;
        c->have_data = 1;
    }
    if (validity != Py_None) {
        if (PyObject_GetBuffer(validity, &c->validity, PyBUF_SIMPLE) < 0)
            return -1;
        c->have_validity = 1;
        c->bit_offset = bit_offset;
        if (bit_offset < 0 || (bit_offset + rows + 7) / 8 > c->validity.len) {
            PyErr_Format(PyExc_ValueError, "%s: validity bitmap too short", name);
            return -1;
        }
    }
    /* Offsets that stay within the data: every row then reads inside it. */
    Py_ssize_t size = c->have_data ? c->data.len : 0;
    int64_t previous = column_offset(c, 0);
    if (previous < 0) {
        PyErr_Format(PyExc_ValueError, "%s: negative offset", name);
        return -1;
    }
    for (Py_ssize_t i = 1; i <= rows; i++) {
        int64_t next = column_offset(c, i);
        if (next < previous) {
            PyErr_Format(PyExc_ValueError, "%s: offsets go backwards at row %zd", name, i - 1);
            return -1;
        }
        previous = next;
    }
    if (previous > size) {
        PyErr_Format(PyExc_ValueError, "%s: offsets point past the data (%lld > %zd bytes)",
                     name, (long long)previous, size);
        return -1;
    }
    if (!c->have_data) {
        /* No data buffer: every row is empty or null; point at something valid. */
        c->data.buf = (void *)"";
    }
    return 0;
}

/* ------------------------------------------------------------------ encoding */

typedef struct {
    Column keys, values, header_blob;
    Py_buffer timestamps, header_counts, given_starts, order;
    int have_headers, have_starts;
    const int64_t *row_of;  /* record j is row row_of[j] of the columns; NULL: row j */
    Py_ssize_t rows;  /* records to encode */
    Py_ssize_t column_rows;
} Inputs;

static inline int64_t
source_row(const Inputs *in, int64_t j)
{
    return in->row_of ? in->row_of[j] : j;
}

static void
inputs_release(Inputs *in)
{
    column_release(&in->keys);
    column_release(&in->values);
    column_release(&in->header_blob);
    if (in->timestamps.obj)
        PyBuffer_Release(&in->timestamps);
    if (in->header_counts.obj)
        PyBuffer_Release(&in->header_counts);
    if (in->given_starts.obj)
        PyBuffer_Release(&in->given_starts);
    if (in->order.obj)
        PyBuffer_Release(&in->order);
}

static int
int64_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t length, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    if (view->itemsize != 8 || (length >= 0 && view->len != length * 8)) {
        PyErr_Format(PyExc_ValueError, "%s must be %zd int64 values", name, length);
        return -1;
    }
    return 0;
}

/* The (counts, blob) pair of encoded headers for `rows` rows, checked row by row. On
 * error the views taken so far are left for the caller's release. */
static int
headers_from(PyObject *headers, Py_buffer *counts_view, Column *blob_column, Py_ssize_t rows)
{
    PyObject *counts, *blob;
    if (!PyArg_ParseTuple(headers, "OO", &counts, &blob) ||
        int64_buffer(counts, counts_view, rows, "header counts") < 0 ||
        column_from(blob, blob_column, rows, "header bytes") < 0)
        return -1;
    const int64_t *hc = (const int64_t *)counts_view->buf;
    for (Py_ssize_t i = 0; i < rows; i++) {
        if (hc[i] < 0 || column_length(blob_column, i) < 0) {
            PyErr_Format(PyExc_ValueError, "headers of row %zd are malformed", i);
            return -1;
        }
    }
    return 0;
}

/* The LogAppendTime every batch gets as its max timestamp, when `log_append_time` is not
 * None: *have set, *value read. -1 with a Python error. */
static int
append_time_from(PyObject *log_append_time, int *have, int64_t *value)
{
    *have = log_append_time != Py_None;
    *value = 0;
    if (!*have)
        return 0;
    *value = PyLong_AsLongLong(log_append_time);
    return *value == -1 && PyErr_Occurred() ? -1 : 0;
}

/* A planning problem as the Python error it stands for. */
static void
raise_plan_problem(const char *problem)
{
    if (strcmp(problem, "out of memory") == 0)
        PyErr_NoMemory();
    else
        PyErr_SetString(PyExc_ValueError, problem);
}


/* The bytes of record j apart from its timestamp and offset deltas. */
static inline int64_t
fixed_size(const Inputs *in, int64_t j, const int64_t *hcounts)
{
    int64_t i = source_row(in, j);
    int64_t k = column_length(&in->keys, i), v = column_length(&in->values, i);
    int64_t size = 1 + varint_size(k) + (k > 0 ? k : 0) + varint_size(v) + (v > 0 ? v : 0);
    if (in->have_headers)
        size += varint_size(hcounts[i]) + column_length(&in->header_blob, i);
    else
        size += 1;
    return size;
}

typedef struct {
    int64_t *starts, *counts, *record_bytes, *max_ts;
    int64_t *bodies;  /* per record: its length varint's value */
    int64_t batches;
} Plan;

static void
plan_free(Plan *plan)
{
    PyMem_RawFree(plan->starts);
    PyMem_RawFree(plan->counts);
    PyMem_RawFree(plan->record_bytes);
    PyMem_RawFree(plan->max_ts);
    PyMem_RawFree(plan->bodies);
    memset(plan, 0, sizeof(*plan));
}

/* Cut batches (a record joins the open one while the batch stays within batch_size bytes,
 * header included; an empty batch takes any record) or take the given starts; measure
 * each record. Runs without the GIL: returns an error message or NULL. */
static const char *
plan_batches(const Inputs *in, int64_t batch_size, Plan *plan)
{
    int64_t n = in->rows;
    const int64_t *ts = (const int64_t *)in->timestamps.buf;
    const int64_t *hcounts = in->have_headers ? (const int64_t *)in->header_counts.buf : NULL;
    int64_t most = in->have_starts ? in->given_starts.len / 8 : n;
    plan->starts = PyMem_RawMalloc(sizeof(int64_t) * (most ? most : 1));
    plan->counts = PyMem_RawMalloc(sizeof(int64_t) * (most ? most : 1));
    plan->record_bytes = PyMem_RawMalloc(sizeof(int64_t) * (most ? most : 1));
    plan->max_ts = PyMem_RawMalloc(sizeof(int64_t) * (most ? most : 1));
    plan->bodies = PyMem_RawMalloc(sizeof(int64_t) * (n ? n : 1));
    if (!plan->starts || !plan->counts || !plan->record_bytes || !plan->max_ts || !plan->bodies)
        return "out of memory";
    const int64_t *given = in->have_starts ? (const int64_t *)in->given_starts.buf : NULL;
    int64_t limit = batch_size - V2_HEADER_SIZE;
    int64_t b = 0, i = 0;
    while (i < n) {
        int64_t start = i, end;
        if (given) {
            if (b >= most)
                return "batch starts do not cover every record";
            if (given[b] != i)
                return "batch starts must begin at 0 and increase";
            end = b + 1 < most ? given[b + 1] : n;
            if (end <= start || end > n)
                return "batch starts must begin at 0 and increase";
        } else {
            end = n;
        }
        int64_t base_ts = ts[start], max_ts = ts[start], bytes = 0;
        int64_t j = start;
        for (; j < end; j++) {
            int64_t body = fixed_size(in, j, hcounts) + varint_size(ts[j] - base_ts) +
                           varint_size(j - start);
            int64_t size = body + varint_size(body);
            if (!given && j > start && (batch_size <= 0 || bytes + size > limit))
                break;
            bytes += size;
            plan->bodies[j] = body;
            if (ts[j] > max_ts)
                max_ts = ts[j];
        }
        if (bytes > (int64_t)INT32_MAX - V2_HEADER_SIZE)
            return "a record batch would be larger than 2 GiB";
        plan->starts[b] = start;
        plan->counts[b] = j - start;
        plan->record_bytes[b] = bytes;
        plan->max_ts[b] = max_ts;
        b++;
        i = j;
    }
    if (given && b != most)
        return "batch starts must begin at 0 and increase";
    plan->batches = b;
    return NULL;
}

static void
write_header(uint8_t *p, int64_t size, int attributes, int64_t count, int64_t base_ts,
             int64_t max_ts)
{
    put_be64(p + V2_BASE_OFFSET, 0);
    put_be32(p + V2_LENGTH, (uint32_t)(size - LOG_OVERHEAD));
    put_be32(p + V2_LEADER_EPOCH, (uint32_t)(int32_t)NO_PARTITION_LEADER_EPOCH);
    p[V2_MAGIC] = V2_MAGIC_VALUE;
    put_be16(p + V2_ATTRIBUTES, (uint16_t)attributes);
    put_be32(p + V2_LAST_OFFSET_DELTA, (uint32_t)(count - 1));
    put_be64(p + V2_BASE_TIMESTAMP, (uint64_t)base_ts);
    put_be64(p + V2_MAX_TIMESTAMP, (uint64_t)max_ts);
    put_be64(p + V2_PRODUCER_ID, (uint64_t)(int64_t)NO_PRODUCER_ID);
    put_be16(p + V2_PRODUCER_EPOCH, (uint16_t)(int16_t)NO_PRODUCER_EPOCH);
    put_be32(p + V2_BASE_SEQUENCE, (uint32_t)(int32_t)NO_SEQUENCE);
    put_be32(p + V2_RECORD_COUNT, (uint32_t)count);
}

static inline uint8_t *
put_bytes(uint8_t *p, const Column *c, int64_t i, int64_t length)
{
    p = put_varint(p, length);
    if (length > 0) {
        memcpy(p, column_bytes(c, i), (size_t)length);
        p += length;
    }
    return p;
}

/* The records of batch b at p; returns the end. */
static uint8_t *
write_records(const Inputs *in, const Plan *plan, int64_t b, uint8_t *p)
{
    const int64_t *ts = (const int64_t *)in->timestamps.buf;
    const int64_t *hcounts = in->have_headers ? (const int64_t *)in->header_counts.buf : NULL;
    int64_t start = plan->starts[b], end = start + plan->counts[b], base_ts = ts[start];
    for (int64_t j = start; j < end; j++) {
        int64_t i = source_row(in, j);
        p = put_varint(p, plan->bodies[j]);
        *p++ = 0;  /* record attributes */
        p = put_varint(p, ts[j] - base_ts);
        p = put_varint(p, j - start);
        p = put_bytes(p, &in->keys, i, column_length(&in->keys, i));
        p = put_bytes(p, &in->values, i, column_length(&in->values, i));
        if (hcounts) {
            p = put_varint(p, hcounts[i]);
            int64_t blob = column_length(&in->header_blob, i);
            memcpy(p, column_bytes(&in->header_blob, i), (size_t)blob);
            p += blob;
        } else {
            *p++ = 0;  /* no headers */
        }
    }
    return p;
}

/* `total` bytes to write into: allocate(total) (the caller's memory pool, whose reused
 * pages cost nothing, where fresh ones fault in at about the cost of the encoding), or a
 * bytearray. Its writable buffer goes into `view`. */
static PyObject *
allocate_output(PyObject *allocate, int64_t total, Py_buffer *view)
{
    PyObject *out = allocate == Py_None ?
        PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)total) :
        PyObject_CallFunction(allocate, "L", (long long)total);
    if (!out)
        return NULL;
    if (PyObject_GetBuffer(out, view, PyBUF_WRITABLE) < 0) {
        Py_DECREF(out);
        return NULL;
    }
    if (view->len < total) {
        PyBuffer_Release(view);
        Py_DECREF(out);
        PyErr_SetString(PyExc_ValueError, "allocate returned a smaller buffer than asked");
        return NULL;
    }
    return out;
}

static PyObject *
int64_bytes(const int64_t *values, int64_t n)
{
    return PyBytes_FromStringAndSize((const char *)values, (Py_ssize_t)(n * 8));
}

static PyObject *
encode(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"keys", "values", "timestamps", "headers", "batch_starts",
                            "batch_size", "attributes", "log_append_time", "framed", "rows",
                            "allocate", NULL};
    PyObject *keys, *values, *timestamps, *headers, *starts, *log_append_time;
    PyObject *order = Py_None, *allocate = Py_None;
    Py_buffer out_view = {0};
    long long batch_size;
    int attributes, framed;
    Inputs in;
    Plan plan;
    PyObject *out = NULL, *result = NULL;
    memset(&in, 0, sizeof(in));
    memset(&plan, 0, sizeof(plan));
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOOOOLiOp|OO", names, &keys, &values,
                                     &timestamps, &headers, &starts, &batch_size, &attributes,
                                     &log_append_time, &framed, &order, &allocate))
        return NULL;
    if (int64_buffer(timestamps, &in.timestamps, -1, "timestamps") < 0)
        goto done;
    in.rows = in.timestamps.len / 8;  /* the timestamps come in record order */
    in.column_rows = in.rows;
    if (order != Py_None) {
        if (int64_buffer(order, &in.order, in.rows, "rows") < 0)
            goto done;
        in.row_of = (const int64_t *)in.order.buf;
        /* The columns' row count: their offsets, less one. */
        PyObject *first = PyTuple_Check(keys) && PyTuple_GET_SIZE(keys) > 0 ?
                          PyTuple_GET_ITEM(keys, 0) : NULL;
        Py_ssize_t length = first ? PyObject_Length(first) : -1;
        if (length < 1) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "keys: offsets needed");
            goto done;
        }
        in.column_rows = length - 1;
    }
    if (column_from(keys, &in.keys, in.column_rows, "keys") < 0 ||
        column_from(values, &in.values, in.column_rows, "values") < 0)
        goto done;
    for (Py_ssize_t j = 0; in.row_of && j < in.rows; j++) {
        if (in.row_of[j] < 0 || in.row_of[j] >= in.column_rows) {
            PyErr_Format(PyExc_IndexError, "rows: %lld is not a row of the %zd columns",
                         (long long)in.row_of[j], in.column_rows);
            goto done;
        }
    }
    if (headers != Py_None) {
        if (headers_from(headers, &in.header_counts, &in.header_blob, in.column_rows) < 0)
            goto done;
        in.have_headers = 1;
    }
    if (starts != Py_None) {
        if (int64_buffer(starts, &in.given_starts, -1, "batch_starts") < 0)
            goto done;
        in.have_starts = 1;
    }
    int have_append_time;
    int64_t append_time;
    if (append_time_from(log_append_time, &have_append_time, &append_time) < 0)
        goto done;

    const char *problem;
    Py_BEGIN_ALLOW_THREADS
    problem = plan_batches(&in, batch_size, &plan);
    Py_END_ALLOW_THREADS
    if (problem) {
        raise_plan_problem(problem);
        goto done;
    }
    if (have_append_time)
        for (int64_t b = 0; b < plan.batches; b++)
            plan.max_ts[b] = append_time;
    int64_t total = 0;
    for (int64_t b = 0; b < plan.batches; b++)
        total += plan.record_bytes[b] + (framed ? V2_HEADER_SIZE : 0);
    out = allocate_output(allocate, total, &out_view);
    if (!out)
        goto done;
    uint8_t *base = (uint8_t *)out_view.buf;
    Py_BEGIN_ALLOW_THREADS
    uint8_t *p = base;
    const int64_t *ts = (const int64_t *)in.timestamps.buf;
    for (int64_t b = 0; b < plan.batches; b++) {
        if (framed) {
            uint8_t *batch = p;
            int64_t size = V2_HEADER_SIZE + plan.record_bytes[b];
            write_header(batch, size, attributes, plan.counts[b], ts[plan.starts[b]],
                         plan.max_ts[b]);
            p = write_records(&in, &plan, b, batch + V2_HEADER_SIZE);
            put_be32(batch + V2_CRC, crc32c(batch + V2_CRC_START, (size_t)(size - V2_CRC_START)));
            plan.record_bytes[b] = size;  /* handed back as the batch's size */
        } else {
            p = write_records(&in, &plan, b, p);
        }
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(ONNNN)", out, int64_bytes(plan.starts, plan.batches),
                           int64_bytes(plan.counts, plan.batches),
                           int64_bytes(plan.record_bytes, plan.batches),
                           int64_bytes(plan.max_ts, plan.batches));
done:
    if (out_view.obj)
        PyBuffer_Release(&out_view);
    Py_XDECREF(out);
    plan_free(&plan);
    inputs_release(&in);
    return result;
}

/* ------------------------------------------------------- grouped encoding */

/* The batches of one group (a topic-partition) as encode_groups() plans and writes them. */
typedef struct {
    int64_t *starts, *counts, *bytes, *max_ts, *base_ts;
    int64_t batches, capacity;
    int64_t records;  /* the group's records so far */
    int64_t open_start;  /* the open batch's first record (group numbering); -1: none */
    int64_t open_base_ts, open_max_ts, open_bytes;
    /* writing */
    PyObject *out;
    Py_buffer view;
    uint8_t *p, *batch_begin;
    int64_t b, k;
} Group;

static void
groups_free(Group *groups, int64_t count)
{
    for (int64_t g = 0; groups && g < count; g++) {
        Group *G = &groups[g];
        PyMem_RawFree(G->starts);
        PyMem_RawFree(G->counts);
        PyMem_RawFree(G->bytes);
        PyMem_RawFree(G->max_ts);
        PyMem_RawFree(G->base_ts);
        if (G->view.obj)
            PyBuffer_Release(&G->view);
        Py_XDECREF(G->out);
    }
    PyMem_RawFree(groups);
}

static const char *
group_close_batch(Group *G)
{
    if (G->open_bytes > (int64_t)INT32_MAX - V2_HEADER_SIZE)
        return "a record batch would be larger than 2 GiB";
    if (G->batches == G->capacity) {
        int64_t capacity = G->capacity ? 2 * G->capacity : 16;
        int64_t **arrays[] = {&G->starts, &G->counts, &G->bytes, &G->max_ts, &G->base_ts};
        for (int a = 0; a < 5; a++) {
            int64_t *grown = PyMem_RawRealloc(*arrays[a], sizeof(int64_t) * capacity);
            if (!grown)
                return "out of memory";
            *arrays[a] = grown;
        }
        G->capacity = capacity;
    }
    int64_t b = G->batches++;
    G->starts[b] = G->open_start;
    G->counts[b] = G->records - G->open_start;
    G->bytes[b] = G->open_bytes;
    G->max_ts[b] = G->open_max_ts;
    G->base_ts[b] = G->open_base_ts;
    G->open_start = -1;
    return NULL;
}

/* Several groups' records encoded in one pass over the rows, in their order: the rows
 * arrive in chunks (keys[c], values[c] of chunk_rows[c] rows each); timestamps, group
 * numbers and headers are indexed by the row's place in the whole input. */
typedef struct {
    Column *keys, *values, header_blob;
    Py_ssize_t chunks;
    int64_t *chunk_rows;
    Py_buffer timestamps, groups, header_counts;
    int have_headers;
    int64_t rows, group_count;
} GroupedInputs;

static void
grouped_release(GroupedInputs *in)
{
    for (Py_ssize_t c = 0; c < in->chunks; c++) {
        if (in->keys)
            column_release(&in->keys[c]);
        if (in->values)
            column_release(&in->values[c]);
    }
    PyMem_Free(in->keys);
    PyMem_Free(in->values);
    PyMem_Free(in->chunk_rows);
    column_release(&in->header_blob);
    if (in->timestamps.obj)
        PyBuffer_Release(&in->timestamps);
    if (in->groups.obj)
        PyBuffer_Release(&in->groups);
    if (in->header_counts.obj)
        PyBuffer_Release(&in->header_counts);
}

static inline int64_t
row_fixed_size(const GroupedInputs *in, const Column *K, const Column *V, int64_t r, int64_t i)
{
    int64_t k = column_length(K, r), v = column_length(V, r);
    int64_t size = 1 + varint_size(k) + (k > 0 ? k : 0) + varint_size(v) + (v > 0 ? v : 0);
    if (in->have_headers)
        size += varint_size(((const int64_t *)in->header_counts.buf)[i]) +
                column_length(&in->header_blob, i);
    else
        size += 1;
    return size;
}

/* Cut every group's batches as plan_batches does for one, measuring each row. */
static const char *
plan_groups(const GroupedInputs *in, int64_t batch_size, Group *groups, int64_t *bodies)
{
    const int64_t *ts = (const int64_t *)in->timestamps.buf;
    const int64_t *group_of = (const int64_t *)in->groups.buf;
    int64_t limit = batch_size - V2_HEADER_SIZE, i = 0;
    const char *problem;
    for (Py_ssize_t c = 0; c < in->chunks; c++) {
        const Column *K = &in->keys[c], *V = &in->values[c];
        for (int64_t r = 0; r < in->chunk_rows[c]; r++, i++) {
            int64_t g = group_of[i];
            if (g < 0 || g >= in->group_count)
                return "a group number is out of range";
            Group *G = &groups[g];
            int64_t fixed = row_fixed_size(in, K, V, r, i);
            if (G->open_start < 0) {
                G->open_start = G->records;
                G->open_base_ts = G->open_max_ts = ts[i];
                G->open_bytes = 0;
            }
            int64_t delta = G->records - G->open_start;
            int64_t body = fixed + varint_size(ts[i] - G->open_base_ts) + varint_size(delta);
            int64_t size = body + varint_size(body);
            if (delta > 0 && (batch_size <= 0 || G->open_bytes + size > limit)) {
                if ((problem = group_close_batch(G)) != NULL)
                    return problem;
                G->open_start = G->records;
                G->open_base_ts = G->open_max_ts = ts[i];
                G->open_bytes = 0;
                body = fixed + varint_size(0) + varint_size(0);
                size = body + varint_size(body);
            }
            G->open_bytes += size;
            bodies[i] = body;
            if (ts[i] > G->open_max_ts)
                G->open_max_ts = ts[i];
            G->records++;
        }
    }
    for (int64_t g = 0; g < in->group_count; g++)
        if (groups[g].open_start >= 0 && (problem = group_close_batch(&groups[g])) != NULL)
            return problem;
    return NULL;
}

/* Every row into its group's output, batch headers and CRCs as each batch fills. */
static void
write_groups(const GroupedInputs *in, Group *groups, const int64_t *bodies, int attributes,
             int framed)
{
    const int64_t *ts = (const int64_t *)in->timestamps.buf;
    const int64_t *group_of = (const int64_t *)in->groups.buf;
    const int64_t *hcounts = in->have_headers ? (const int64_t *)in->header_counts.buf : NULL;
    int64_t i = 0;
    for (Py_ssize_t c = 0; c < in->chunks; c++) {
        const Column *K = &in->keys[c], *V = &in->values[c];
        for (int64_t r = 0; r < in->chunk_rows[c]; r++, i++) {
            Group *G = &groups[group_of[i]];
            if (G->k == 0) {
                G->batch_begin = G->p;
                if (framed)
                    G->p += V2_HEADER_SIZE;
            }
            uint8_t *p = G->p;
            p = put_varint(p, bodies[i]);
            *p++ = 0;  /* record attributes */
            p = put_varint(p, ts[i] - G->base_ts[G->b]);
            p = put_varint(p, G->k);
            p = put_bytes(p, K, r, column_length(K, r));
            p = put_bytes(p, V, r, column_length(V, r));
            if (hcounts) {
                p = put_varint(p, hcounts[i]);
                int64_t blob = column_length(&in->header_blob, i);
                memcpy(p, column_bytes(&in->header_blob, i), (size_t)blob);
                p += blob;
            } else {
                *p++ = 0;  /* no headers */
            }
            G->p = p;
            if (++G->k == G->counts[G->b]) {
                if (framed) {
                    uint8_t *batch = G->batch_begin;
                    int64_t size = p - batch;
                    write_header(batch, size, attributes, G->k, G->base_ts[G->b],
                                 G->max_ts[G->b]);
                    put_be32(batch + V2_CRC,
                             crc32c(batch + V2_CRC_START, (size_t)(size - V2_CRC_START)));
                    G->bytes[G->b] = size;  /* handed back as the batch's size */
                }
                G->b++;
                G->k = 0;
            }
        }
    }
}

static int
chunk_columns(PyObject *list, Column **out, Py_ssize_t chunks, const int64_t *chunk_rows,
              const char *name)
{
    *out = PyMem_Calloc(chunks ? chunks : 1, sizeof(Column));
    if (!*out) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t c = 0; c < chunks; c++)
        if (column_from(PyList_GET_ITEM(list, c), &(*out)[c], chunk_rows[c], name) < 0)
            return -1;
    return 0;
}

static PyObject *
encode_groups(PyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *names[] = {"keys", "values", "timestamps", "headers", "groups", "group_count",
                            "batch_size", "attributes", "log_append_time", "framed",
                            "allocate", NULL};
    PyObject *keys, *values, *timestamps, *headers, *group_obj, *log_append_time;
    PyObject *allocate = Py_None, *result = NULL;
    long long group_count, batch_size;
    int attributes, framed;
    GroupedInputs in;
    Group *groups = NULL;
    int64_t *bodies = NULL;
    memset(&in, 0, sizeof(in));
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!OOOLLiOp|O", names, &PyList_Type,
                                     &keys, &PyList_Type, &values, &timestamps, &headers,
                                     &group_obj, &group_count, &batch_size, &attributes,
                                     &log_append_time, &framed, &allocate))
        return NULL;
    if (PyList_GET_SIZE(keys) != PyList_GET_SIZE(values)) {
        PyErr_SetString(PyExc_ValueError, "keys and values must come in as many chunks");
        return NULL;
    }
    if (group_count < 0) {
        PyErr_SetString(PyExc_ValueError, "group_count must not be negative");
        return NULL;
    }
    if (int64_buffer(timestamps, &in.timestamps, -1, "timestamps") < 0)
        goto done;
    in.rows = in.timestamps.len / 8;
    in.group_count = group_count;
    if (int64_buffer(group_obj, &in.groups, in.rows, "groups") < 0)
        goto done;
    /* Each chunk's rows: its keys' offsets, less one. */
    in.chunks = PyList_GET_SIZE(keys);
    in.chunk_rows = PyMem_Calloc(in.chunks ? in.chunks : 1, sizeof(int64_t));
    if (!in.chunk_rows) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t total_rows = 0;
    for (Py_ssize_t c = 0; c < in.chunks; c++) {
        PyObject *spec = PyList_GET_ITEM(keys, c);
        PyObject *first = PyTuple_Check(spec) && PyTuple_GET_SIZE(spec) > 0 ?
                          PyTuple_GET_ITEM(spec, 0) : NULL;
        Py_ssize_t length = first ? PyObject_Length(first) : -1;
        if (length < 1) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "keys: offsets needed");
            goto done;
        }
        in.chunk_rows[c] = length - 1;
        total_rows += length - 1;
    }
    if (total_rows != in.rows) {
        PyErr_Format(PyExc_ValueError, "the chunks hold %lld rows, the timestamps %lld",
                     (long long)total_rows, (long long)in.rows);
        goto done;
    }
    if (chunk_columns(keys, &in.keys, in.chunks, in.chunk_rows, "keys") < 0 ||
        chunk_columns(values, &in.values, in.chunks, in.chunk_rows, "values") < 0)
        goto done;
    if (headers != Py_None) {
        if (headers_from(headers, &in.header_counts, &in.header_blob, in.rows) < 0)
            goto done;
        in.have_headers = 1;
    }
    int have_append_time;
    int64_t append_time;
    if (append_time_from(log_append_time, &have_append_time, &append_time) < 0)
        goto done;
    groups = PyMem_RawCalloc(group_count ? group_count : 1, sizeof(Group));
    bodies = PyMem_RawMalloc(sizeof(int64_t) * (in.rows ? in.rows : 1));
    if (!groups || !bodies) {
        PyErr_NoMemory();
        goto done;
    }
    for (int64_t g = 0; g < group_count; g++)
        groups[g].open_start = -1;
    const char *problem;
    Py_BEGIN_ALLOW_THREADS
    problem = plan_groups(&in, batch_size, groups, bodies);
    Py_END_ALLOW_THREADS
    if (problem) {
        raise_plan_problem(problem);
        goto done;
    }
    for (int64_t g = 0; g < group_count; g++) {
        Group *G = &groups[g];
        if (!G->batches)
            continue;
        int64_t total = 0;
        for (int64_t b = 0; b < G->batches; b++) {
            total += G->bytes[b] + (framed ? V2_HEADER_SIZE : 0);
            if (have_append_time)
                G->max_ts[b] = append_time;
        }
        G->out = allocate_output(allocate, total, &G->view);
        if (!G->out)
            goto done;
        G->p = (uint8_t *)G->view.buf;
    }
    Py_BEGIN_ALLOW_THREADS
    write_groups(&in, groups, bodies, attributes, framed);
    Py_END_ALLOW_THREADS
    result = PyList_New((Py_ssize_t)group_count);
    if (!result)
        goto done;
    for (int64_t g = 0; g < group_count; g++) {
        Group *G = &groups[g];
        PyObject *item;
        if (!G->batches) {
            Py_INCREF(Py_None);
            item = Py_None;
        } else {
            item = Py_BuildValue("(ONNNNN)", G->out, int64_bytes(G->starts, G->batches),
                                 int64_bytes(G->counts, G->batches),
                                 int64_bytes(G->bytes, G->batches),
                                 int64_bytes(G->max_ts, G->batches),
                                 int64_bytes(G->base_ts, G->batches));
            if (!item) {
                Py_CLEAR(result);
                goto done;
            }
        }
        PyList_SET_ITEM(result, (Py_ssize_t)g, item);
    }
done:
    groups_free(groups, group_count);
    PyMem_RawFree(bodies);
    grouped_release(&in);
    return result;
}

/* Headers and CRCs around records sections compressed elsewhere. */
static PyObject *
frame(PyObject *self, PyObject *args)
{
    PyObject *payloads, *counts_obj, *base_obj, *max_obj, *seq = NULL, *out = NULL;
    PyObject *result = NULL, *allocate = Py_None;
    int attributes;
    Py_buffer counts = {0}, base_ts = {0}, max_ts = {0}, out_view = {0};
    Py_buffer *views = NULL;
    Py_ssize_t n = 0, got = 0;
    if (!PyArg_ParseTuple(args, "OOOOi|O", &payloads, &counts_obj, &base_obj, &max_obj,
                          &attributes, &allocate))
        return NULL;
    seq = PySequence_Fast(payloads, "payloads must be a sequence");
    if (!seq)
        return NULL;
    n = PySequence_Fast_GET_SIZE(seq);
    if (int64_buffer(counts_obj, &counts, n, "counts") < 0 ||
        int64_buffer(base_obj, &base_ts, n, "base timestamps") < 0 ||
        int64_buffer(max_obj, &max_ts, n, "max timestamps") < 0)
        goto done;
    views = PyMem_Calloc(n ? n : 1, sizeof(Py_buffer));
    if (!views) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t total = 0;
    for (; got < n; got++) {
        if (PyObject_GetBuffer(PySequence_Fast_GET_ITEM(seq, got), &views[got], PyBUF_SIMPLE) < 0)
            goto done;
        if (views[got].len > (Py_ssize_t)INT32_MAX - V2_HEADER_SIZE) {
            got++;  /* released below with the others */
            PyErr_SetString(PyExc_ValueError, "a record batch would be larger than 2 GiB");
            goto done;
        }
        total += V2_HEADER_SIZE + views[got].len;
    }
    PyObject *sizes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (!sizes)
        goto done;
    out = allocate_output(allocate, total, &out_view);
    if (!out) {
        Py_DECREF(sizes);
        goto done;
    }
    int64_t *size_of = (int64_t *)PyBytes_AS_STRING(sizes);
    uint8_t *p = (uint8_t *)out_view.buf;
    const int64_t *c = counts.buf, *bt = base_ts.buf, *mt = max_ts.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t b = 0; b < n; b++) {
        int64_t size = V2_HEADER_SIZE + views[b].len;
        write_header(p, size, attributes, c[b], bt[b], mt[b]);
        memcpy(p + V2_HEADER_SIZE, views[b].buf, (size_t)views[b].len);
        put_be32(p + V2_CRC, crc32c(p + V2_CRC_START, (size_t)(size - V2_CRC_START)));
        size_of[b] = size;
        p += size;
    }
    Py_END_ALLOW_THREADS
    result = Py_BuildValue("(ON)", out, sizes);
done:
    for (Py_ssize_t i = 0; i < got; i++)
        PyBuffer_Release(&views[i]);
    PyMem_Free(views);
    if (counts.obj)
        PyBuffer_Release(&counts);
    if (base_ts.obj)
        PyBuffer_Release(&base_ts);
    if (max_ts.obj)
        PyBuffer_Release(&max_ts);
    if (out_view.obj)
        PyBuffer_Release(&out_view);
    Py_XDECREF(out);
    Py_DECREF(seq);
    return result;
}

/* ------------------------------------------------------------------ murmur2 */

/* Kafka's Utils.murmur2 (seed 0x9747b28c), the key hash of its default partitioner. */
static uint32_t
murmur2(const uint8_t *data, int64_t length)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    int64_t words = length / 4;
    for (int64_t i = 0; i < words; i++) {
        uint32_t k = (uint32_t)data[4 * i] | ((uint32_t)data[4 * i + 1] << 8) |
                     ((uint32_t)data[4 * i + 2] << 16) | ((uint32_t)data[4 * i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const uint8_t *tail = data + 4 * words;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

static inline uint32_t
load_le32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap32(v);
#endif
    return v;
}

/* murmur2 of a key of at most 15 bytes with 16 readable bytes at data: the same value
 * without a branch on the length (keys of varied short lengths mispredict the loop's
 * and the tail's branches of murmur2(), about half of the hashing's time). */
static inline uint32_t
murmur2_short(const uint8_t *data, int64_t length)
{
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)length;
    int64_t words = length >> 2;
    for (int64_t w = 0; w < 3; w++) {
        uint32_t k = load_le32(data + 4 * w);
        k *= m;
        k ^= k >> 24;
        k *= m;
        uint32_t next = (h * m) ^ k;
        h = w < words ? next : h;
    }
    static const uint32_t tail_mask[4] = {0, 0xFFu, 0xFFFFu, 0xFFFFFFu};
    int64_t rest = length & 3;
    uint32_t tailed = (h ^ (load_le32(data + 4 * words) & tail_mask[rest])) * m;
    h = rest ? tailed : h;
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

/* x % d for 32-bit x and d > 0, exactly, by two multiplications (Lemire's fastmod):
 * m = 2^64 / d rounded up, and 0 for d = 1. */
static inline uint32_t
remainder_u32(uint32_t x, uint64_t m, uint32_t d)
{
    return (uint32_t)(((unsigned __int128)(m * x) * d) >> 64);
}

/* murmur2(keys, rows) -> each key's hash as uint32; murmur2(keys, rows, n) -> each key's
 * partition among n as int64, as Kafka's default partitioner gives it:
 * (murmur2 & 0x7fffffff) % n. */
static PyObject *
murmur2_py(PyObject *self, PyObject *args)
{
    PyObject *spec, *out;
    Py_ssize_t rows;
    long long partitions = 0;
    Column keys;
    if (!PyArg_ParseTuple(args, "On|L", &spec, &rows, &partitions))
        return NULL;
    if (partitions < 0 || partitions > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "the partition count must be in 1..2147483647");
        return NULL;
    }
    if (column_from(spec, &keys, rows, "keys") < 0) {
        column_release(&keys);
        return NULL;
    }
    out = PyByteArray_FromStringAndSize(NULL, rows * (partitions ? 8 : 4));
    if (out) {
        uint32_t *h = (uint32_t *)PyByteArray_AS_STRING(out);
        int64_t *p = (int64_t *)PyByteArray_AS_STRING(out);
        uint32_t d = (uint32_t)partitions;
        uint64_t m = d ? UINT64_MAX / d + 1 : 0;
        uint32_t empty = murmur2(NULL, 0);
        int64_t data_length = keys.have_data ? (int64_t)keys.data.len : 0;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < rows; i++) {
            int64_t length = column_length(&keys, i);
            /* nulls hash as empty keys, as the pure twin's */
            uint32_t hash;
            if (length < 0)
                hash = empty;
            else if (length < 16 && column_offset(&keys, i) + 16 <= data_length)
                hash = murmur2_short(column_bytes(&keys, i), length);
            else
                hash = murmur2(column_bytes(&keys, i), length);
            if (d)
                p[i] = remainder_u32(hash & 0x7FFFFFFFu, m, d);
            else
                h[i] = hash;
        }
        Py_END_ALLOW_THREADS
    }
    column_release(&keys);
    return out;
}

static PyObject *
crc32c_py(PyObject *self, PyObject *arg)
{
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t crc;
    Py_BEGIN_ALLOW_THREADS
    crc = crc32c(view.buf, (size_t)view.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    return PyLong_FromUnsignedLong(crc);
}

static PyObject *
set_crc_instruction(PyObject *self, PyObject *arg)
{
    int wanted = PyObject_IsTrue(arg);
    if (wanted < 0)
        return NULL;
    int before = use_crc_instruction;
    use_crc_instruction = wanted && have_crc32c_instruction;
    return PyBool_FromLong(before);
}

static PyMethodDef methods[] = {
    {"encode", (PyCFunction)(void (*)(void))encode, METH_VARARGS | METH_KEYWORDS,
     "encode(keys, values, timestamps, headers, batch_starts, batch_size, attributes, "
     "log_append_time, framed, rows=None, allocate=None) -> (data, starts, counts, sizes, "
     "max_timestamps)\n\n"
     "keys, values: (offsets, data, validity, bit offset); headers: None or (counts, blob "
     "column). framed: whole batches (sizes are batch sizes); else records sections back to "
     "back (sizes are theirs). rows: the columns' rows to encode, in order (timestamps "
     "given in that order). allocate(size): the output (default a bytearray). The int64 "
     "arrays come back as bytes."},
    {"encode_groups", (PyCFunction)(void (*)(void))encode_groups, METH_VARARGS | METH_KEYWORDS,
     "encode_groups(keys, values, timestamps, headers, groups, group_count, batch_size, "
     "attributes, log_append_time, framed, allocate=None) -> [None or (data, starts, counts, "
     "sizes, max_timestamps, base_timestamps)] per group\n\n"
     "Each group's rows (groups: int64 per row) encoded as encode() encodes rows=, all in one "
     "pass over the rows. keys, values: lists of chunks (offsets, data, validity, bit "
     "offset) with the same rows each; timestamps, groups, headers: for all rows."},
    {"frame", frame, METH_VARARGS,
     "frame(payloads, counts, base_timestamps, max_timestamps, attributes, allocate=None) "
     "-> (data, sizes)"},
    {"murmur2", murmur2_py, METH_VARARGS,
     "murmur2((offsets, data, validity, bit offset), rows[, partitions]) -> bytearray of "
     "uint32 hashes (Kafka's, nulls as empty keys), or with partitions, of int64 "
     "partition numbers ((hash & 0x7fffffff) % partitions)"},
    {"crc32c", crc32c_py, METH_O, "crc32c(data) -> int"},
    {"set_crc_instruction", set_crc_instruction, METH_O,
     "For tests: use the CPU's CRC32 instruction (when it has one) or the tables; returns "
     "whether it was in use."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastencode", "Magic-2 record batches encoded in C.", -1, methods,
};

PyMODINIT_FUNC
PyInit__fastencode(void)
{
    crc32c_init();
    use_crc_instruction = have_crc32c_instruction;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddStringConstant(m, "SOURCE_SHA256", SEGMENTLOG_SOURCE_SHA256) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
