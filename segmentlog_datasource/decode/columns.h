/* columns.h: what the compiled value decoders of decode/ (_avrocolumns.c, _jsoncolumns.c,
 * _protobufcolumns.c) share: the growable buffers of the Arrow-layout columns they decode
 * into (validity bytes, packed to a bitmap at the end of a run; int32 offsets; values;
 * data), a run's begin, roll-back and end (the ColumnBuffer type hands each buffer to
 * Arrow without a copy), strict UTF-8, and the plumbing of compile, run_spans and the
 * module's creation. The functions are static: each module compiles its own copy.
 *
 * A source defines, before it includes this: its column kinds COL_BOOL (a byte per value,
 * packed to bits at the end), COL_BINARY, COL_LIST and COL_STRUCT (every other kind holds
 * `width` bytes per value: none for a null column), and COL_F32 (append_real's float32;
 * its other reals are float64); COLUMNS_MODULE, its module's name; and, as it needs
 * them, COLUMN_FIELDS (members its columns hold beside these) and COLUMNS_SHORT_COPIES
 * (buf_put copies short values by overlapping loads and stores, without a call to
 * memcpy). Its own status codes go beside OK, NOMEM and ERROR.
 *
 * Part of each decoder's source: setup.py's `depends` and buildinfo.plain_source_sha256
 * count it, so that a change here rebuilds the three and a checkout does not load a
 * build made from another text of it.
 */
#ifndef SEGMENTLOG_COLUMNS_H
#define SEGMENTLOG_COLUMNS_H
#include <Python.h>
#include <stdint.h>
#include <string.h>

#if !defined(COLUMNS_MODULE)
#error "define COLUMNS_MODULE (and the COL_* kinds) before including columns.h"
#endif

/* the appends and reads of every value: inlined into the code that runs them */
#define HOT inline __attribute__((always_inline))
/* a function of this header that one of the decoders does not call */
#define SHARED static __attribute__((unused))

/* OK; NOMEM: out of memory, or a column past Arrow's int32 offsets (MemoryError);
 * ERROR: a Python exception is set. */
enum { OK = 0, NOMEM = -2, ERROR = -3 };

typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

typedef struct {
    int kind;
    int width;           /* bytes per value of fixed-width kinds */
    int nchildren;
    int *children;
    Py_ssize_t length;
    /* Validity is kept (one byte per slot, packed to bits at the end) only from a
     * column's first null in a run: most columns have none, and pay nothing. */
    int has_validity;
    Buf validity;
    Buf values;          /* fixed-width values, or bool bytes */
    Buf offsets;         /* int32 offsets of binary and list columns (length + 1) */
    Buf data;            /* binary column bytes */
    /* bytes per row of the last run's buffers: the next run reserves them at once */
    double values_per_row, offsets_per_row, data_per_row;
#ifdef COLUMN_FIELDS
    COLUMN_FIELDS
#endif
} Column;

/* ------------------------------------------------------------------ buffers */

SHARED int buf_reserve(Buf *b, Py_ssize_t more) {
    if (more < 0 || b->len > PY_SSIZE_T_MAX - more) return NOMEM;
    if (b->len + more <= b->cap) return OK;
    Py_ssize_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + more) {
        if (cap > PY_SSIZE_T_MAX / 2) return NOMEM;
        cap *= 2;
    }
    char *grown = PyMem_RawRealloc(b->data, (size_t)cap);
    if (!grown) return NOMEM;
    b->data = grown;
    b->cap = cap;
    return OK;
}

#ifdef COLUMNS_SHORT_COPIES
/* n bytes copied, short ones (most strings) by overlapping loads and stores within
 * [src, src + n), without a call. */
static HOT void copy_bytes_to(char *dst, const uint8_t *src, Py_ssize_t n) {
    if (n >= 8 && n <= 16) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4 && n < 8) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else if (n > 16) {
        memcpy(dst, src, (size_t)n);
    } else {
        for (Py_ssize_t i = 0; i < n; i++) dst[i] = (char)src[i];
    }
}
#endif

static HOT int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (b->cap - b->len < n && buf_reserve(b, n) != OK) return NOMEM;
#ifdef COLUMNS_SHORT_COPIES
    copy_bytes_to(b->data + b->len, src, n);
#else
    if (n) memcpy(b->data + b->len, src, (size_t)n);
#endif
    b->len += n;
    return OK;
}

static HOT int buf_zeros(Buf *b, Py_ssize_t n) {
    if (b->cap - b->len < n && buf_reserve(b, n) != OK) return NOMEM;
    if (n) memset(b->data + b->len, 0, (size_t)n);
    b->len += n;
    return OK;
}

static HOT int buf_byte(Buf *b, uint8_t v) {
    if (b->len >= b->cap && buf_reserve(b, 1) != OK) return NOMEM;
    b->data[b->len++] = (char)v;
    return OK;
}

/* ------------------------------------------------------------------ appends */

static HOT int append_validity(Column *col, int valid) {
    if (!valid && !col->has_validity) {  /* the first null: the slots before it were valid */
        if (buf_reserve(&col->validity, col->length + 1) != OK) return NOMEM;
        if (col->length > 0) memset(col->validity.data, 1, (size_t)col->length);
        col->validity.len = col->length;
        col->has_validity = 1;
    }
    if (col->has_validity && buf_byte(&col->validity, (uint8_t)valid) != OK) return NOMEM;
    col->length++;
    return OK;
}

static HOT int end_offset(Column *col, Py_ssize_t end) {
    if (end > INT32_MAX) return NOMEM;  /* past Arrow's int32 offsets: the run fails */
    int32_t offset = (int32_t)end;
    return buf_put(&col->offsets, &offset, 4);
}

/* A slot of column `index` with no value: zero, "", [] or a struct of such, its validity
 * `valid`; a struct's children take slots of validity `children_valid`. */
SHARED int append_empty(Column *cols, int index, int valid, int children_valid) {
    Column *col = &cols[index];
    switch (col->kind) {
    case COL_BOOL:
        if (buf_byte(&col->values, 0) != OK) return NOMEM;
        break;
    case COL_BINARY:
        if (end_offset(col, col->data.len) != OK) return NOMEM;
        break;
    case COL_LIST:
        if (end_offset(col, cols[col->children[0]].length) != OK) return NOMEM;
        break;
    case COL_STRUCT:
        for (int k = 0; k < col->nchildren; k++)
            if (append_empty(cols, col->children[k], children_valid, children_valid) != OK)
                return NOMEM;
        break;
    default:  /* fixed-width: `width` zero bytes (none for a null column) */
        if (buf_zeros(&col->values, col->width) != OK) return NOMEM;
        break;
    }
    return append_validity(col, valid);
}

static HOT int append_real(Column *col, double v) {
    if (col->kind == COL_F32) {  /* as pa.array casts a Python float to float32 */
        float x = (float)v;
        if (buf_put(&col->values, &x, 4) != OK) return NOMEM;
    } else if (buf_put(&col->values, &v, 8) != OK) {
        return NOMEM;
    }
    return append_validity(col, 1);
}

static HOT int append_bytes(Column *col, const void *s, Py_ssize_t n) {
    if (buf_put(&col->data, s, n) != OK) return NOMEM;
    if (end_offset(col, col->data.len) != OK) return NOMEM;
    return append_validity(col, 1);
}

/* Column `index` cut back to its first `length` slots, and its children to what those
 * slots hold: a struct's children have its length, a list's child and a binary column's
 * bytes end where its last kept offset says. */
SHARED void roll_back(Column *cols, int index, Py_ssize_t length) {
    Column *col = &cols[index];
    col->length = length;
    if (col->has_validity) col->validity.len = length;
    switch (col->kind) {
    case COL_BOOL:
        col->values.len = length;
        break;
    case COL_BINARY:
        col->offsets.len = (length + 1) * 4;
        col->data.len = ((const int32_t *)col->offsets.data)[length];
        break;
    case COL_LIST:
        col->offsets.len = (length + 1) * 4;
        roll_back(cols, col->children[0], ((const int32_t *)col->offsets.data)[length]);
        break;
    case COL_STRUCT:
        for (int k = 0; k < col->nchildren; k++) roll_back(cols, col->children[k], length);
        break;
    default:  /* fixed-width (a null column: width 0, no values) */
        col->values.len = length * col->width;
        break;
    }
}

/* ------------------------------------------------------------------ UTF-8 */

/* The length of the UTF-8 sequence at s (not ASCII), as Python's strict decoder takes it
 * (no overlongs, surrogates or values past U+10FFFF), or 0 when it is not one. */
static HOT int utf8_sequence(const uint8_t *s, const uint8_t *end) {
    uint8_t b = s[0];
    Py_ssize_t left = end - s;
    if (b >= 0xc2 && b <= 0xdf) {
        return left >= 2 && (s[1] & 0xc0) == 0x80 ? 2 : 0;
    }
    if (b >= 0xe0 && b <= 0xef) {
        if (left < 3) return 0;
        uint8_t b1 = s[1];
        if ((b1 & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80) return 0;
        if (b == 0xe0 && b1 < 0xa0) return 0;
        if (b == 0xed && b1 > 0x9f) return 0;
        return 3;
    }
    if (b >= 0xf0 && b <= 0xf4) {
        if (left < 4) return 0;
        uint8_t b1 = s[1];
        if ((b1 & 0xc0) != 0x80 || (s[2] & 0xc0) != 0x80 || (s[3] & 0xc0) != 0x80) return 0;
        if (b == 0xf0 && b1 < 0x90) return 0;
        if (b == 0xf4 && b1 > 0x8f) return 0;
        return 4;
    }
    return 0;
}

/* Whether n bytes at s are strict UTF-8, as Python's decoder (and the protobuf
 * runtime's check) reads them. */
SHARED int strict_utf8(const uint8_t *s, Py_ssize_t n) {
    Py_ssize_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {
            uint64_t chunk;
            memcpy(&chunk, s + i, 8);
            if (!(chunk & 0x8080808080808080ULL)) { i += 8; continue; }
        }
        if (s[i] < 0x80) { i++; continue; }
        int k = utf8_sequence(s + i, s + n);
        if (!k) return 0;
        i += k;
    }
    return 1;
}

/* ------------------------------------------------------------------ compiling */

#define REFUSE(...) do { PyErr_Format(PyExc_ValueError, __VA_ARGS__); goto fail; } while (0)

/* A copy of bytes object `obj` (PyMem_Malloc'ed), its size in *len; NULL with an
 * exception set. */
SHARED char *copy_bytes(PyObject *obj, Py_ssize_t *len) {
    char *src;
    if (PyBytes_AsStringAndSize(obj, &src, len) < 0) return NULL;
    char *out = PyMem_Malloc((size_t)(*len ? *len : 1));
    if (!out) { PyErr_NoMemory(); return NULL; }
    memcpy(out, src, (size_t)*len);
    return out;
}

/* Column k's children (of n columns), from `children`, a tuple of column indexes: a list
 * has one, a struct any, the others none, and children come after their parent (no
 * cycles). 0, or -1 with an exception set. */
SHARED int column_children(Column *col, PyObject *children, Py_ssize_t k, Py_ssize_t n) {
    Py_ssize_t m = PyTuple_GET_SIZE(children);
    if (col->kind == COL_LIST ? m != 1 : col->kind != COL_STRUCT && m != 0) {
        PyErr_SetString(PyExc_ValueError, "a list column has one child, a struct any, others none");
        return -1;
    }
    col->children = PyMem_Calloc((size_t)(m ? m : 1), sizeof(int));
    if (!col->children) { PyErr_NoMemory(); return -1; }
    col->nchildren = (int)m;
    for (Py_ssize_t j = 0; j < m; j++) {
        long child = PyLong_AsLong(PyTuple_GET_ITEM(children, j));
        if (child == -1 && PyErr_Occurred()) return -1;
        if (child <= k || child >= n) {
            PyErr_SetString(PyExc_ValueError, "child column");
            return -1;
        }
        col->children[j] = (int)child;
    }
    return 0;
}

/* ------------------------------------------------------------------ running */

/* The columns' buffers freed, and the columns emptied. */
SHARED void free_columns(Column *cols, int ncols) {
    for (int k = 0; k < ncols; k++) {
        Column *col = &cols[k];
        PyMem_RawFree(col->validity.data);
        PyMem_RawFree(col->values.data);
        PyMem_RawFree(col->offsets.data);
        PyMem_RawFree(col->data.data);
        col->validity = col->values = col->offsets = col->data = (Buf){0};
        col->length = 0;
        col->has_validity = 0;
    }
}

/* A run's reservation per buffer at most: a batch of large values before a batch of
 * small ones must not reserve memory it will not use (past it, buffers grow as needed). */
#define RESERVE_CAP ((Py_ssize_t)64 << 20)

/* Reserves `b` for `rows` rows at `per_row` bytes each (the last run's rate); a
 * reservation that fails is left to the growth of the run itself. */
SHARED void reserve_rows(Buf *b, double per_row, Py_ssize_t rows) {
    double wanted = per_row * (double)rows * 1.0625 + 64;
    buf_reserve(b, wanted < (double)RESERVE_CAP ? (Py_ssize_t)wanted : RESERVE_CAP);
}

/* The columns emptied for a run of `rows` payloads (offsets start at 0), their buffers
 * reserved as the last run's sizes per row say; -1 (MemoryError set) when out of
 * memory. */
SHARED int begin_run(Column *cols, int ncols, Py_ssize_t rows) {
    free_columns(cols, ncols);
    for (int k = 0; k < ncols; k++) {
        Column *col = &cols[k];
        reserve_rows(&col->values, col->values_per_row, rows);
        reserve_rows(&col->offsets, col->offsets_per_row, rows);
        reserve_rows(&col->data, col->data_per_row, rows);
        if ((col->kind == COL_BINARY || col->kind == COL_LIST) && end_offset(col, 0) != OK) {
            PyErr_NoMemory();
            return -1;
        }
    }
    return 0;
}

/* A run that went past what its columns hold (NOMEM): MemoryError; NULL. */
SHARED PyObject *past_size_limit(void) {
    PyErr_SetString(PyExc_MemoryError, "decoded columns past their size limit");
    return NULL;
}

/* run_spans(program, data, starts, ends): the payloads data[starts[i]:ends[i]] (starts
 * and ends: int64 buffers), read in place. */
#define RUN_SPANS_DOC \
    "run_spans(program, data, starts, ends) -> run's result for data[starts[i]:ends[i]]"
/* The same, for a decoder that can give its columns as column_capsule's capsule. */
#define RUN_SPANS_ARROW_DOC \
    "run_spans(program, data, starts, ends, arrow=False) -> run's result for " \
    "data[starts[i]:ends[i]] (with arrow: an ArrowArray capsule of the columns)"

/* run_spans's buffers, held from PyArg_ParseTuple's "y*" until spans_release. */
typedef struct {
    Py_buffer data, starts, ends;
} Spans;

/* The rows of `spans`, each payload data[starts[i]:ends[i]] checked to lie within
 * `data`; -1 with ValueError set when not. */
SHARED Py_ssize_t span_rows(const Spans *spans) {
    const Py_buffer *starts = &spans->starts, *ends = &spans->ends;
    if (starts->len != ends->len || starts->len % (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "starts and ends: int64 buffers of one length");
        return -1;
    }
    Py_ssize_t rows = starts->len / (Py_ssize_t)sizeof(int64_t);
    const int64_t *first = starts->buf, *last = ends->buf;
    for (Py_ssize_t row = 0; row < rows; row++) {
        if (first[row] < 0 || first[row] > last[row] || last[row] > spans->data.len) {
            PyErr_Format(PyExc_ValueError, "payload %zd spans [%lld, %lld), outside the "
                         "%zd bytes given", row, (long long)first[row],
                         (long long)last[row], spans->data.len);
            return -1;
        }
    }
    return rows;
}

SHARED void spans_release(Spans *spans) {
    PyBuffer_Release(&spans->data);
    PyBuffer_Release(&spans->starts);
    PyBuffer_Release(&spans->ends);
}

/* ------------------------------------------------------------------ a run's buffers */

/* A buffer of a run's column, handed to Arrow as it is (pa.py_buffer takes its buffer
 * protocol): the decoded bytes are not copied again. */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t len;
} ColumnBuffer;

static int column_buffer_get(PyObject *self, Py_buffer *view, int flags) {
    ColumnBuffer *buffer = (ColumnBuffer *)self;
    return PyBuffer_FillInfo(view, self, buffer->data ? buffer->data : "", buffer->len, 1, flags);
}

static void column_buffer_dealloc(PyObject *self) {
    PyMem_RawFree(((ColumnBuffer *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs column_buffer_procs = {column_buffer_get, NULL};

static PyTypeObject ColumnBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = COLUMNS_MODULE ".ColumnBuffer",
    .tp_basicsize = sizeof(ColumnBuffer),
    .tp_dealloc = column_buffer_dealloc,
    .tp_as_buffer = &column_buffer_procs,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A decoded column's buffer, owned until Arrow releases it.",
};

/* `b`'s bytes as a ColumnBuffer, which takes them over (`b` is emptied); NULL with an
 * exception set. */
static PyObject *hand_over(Buf *b) {
    ColumnBuffer *buffer = PyObject_New(ColumnBuffer, &ColumnBufferType);
    if (!buffer) return NULL;
    buffer->data = b->data;
    buffer->len = b->len;
    *b = (Buf){0};
    return (PyObject *)buffer;
}

/* Slot bytes (one per slot, non-zero: set) packed into an Arrow bitmap (PyMem_RawMalloc'ed),
 * with the number of zero slots in `unset`; NULL when out of memory. Eight slots a step:
 * a byte's high bit set where it is not zero, then the eight bits gathered by a multiply. */
static char *pack_bits(const Buf *b, Py_ssize_t length, Py_ssize_t *unset) {
    uint8_t *out = PyMem_RawCalloc((size_t)(length + 7) / 8 + 1, 1);
    if (!out) return NULL;
    const uint8_t *bytes = (const uint8_t *)b->data;
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    Py_ssize_t set = 0, i = 0;
    for (; i + 8 <= length; i += 8) {
        uint64_t x;
        memcpy(&x, bytes + i, 8);
        uint64_t on = (((x & low7) + low7) | x) & ~low7;  /* 0x80 in each byte not zero */
        /* byte k's bit (at 8k + 7) to bit k of the top byte; little-endian slot order */
        out[i >> 3] = (uint8_t)(((on >> 7) * 0x0102040810204080ULL) >> 56);
        set += (Py_ssize_t)(((on >> 7) * 0x0101010101010101ULL) >> 56);  /* their sum */
    }
    for (; i < length; i++) {
        uint8_t on = bytes[i] != 0;
        out[i >> 3] |= (uint8_t)(on << (i & 7));
        set += on;
    }
    *unset = length - set;
    return (char *)out;
}

/* Slot bytes packed into an Arrow bitmap (a ColumnBuffer). */
static PyObject *packed_bits(Buf *b, Py_ssize_t length, Py_ssize_t *unset) {
    char *bits = pack_bits(b, length, unset);
    if (!bits) return PyErr_NoMemory();
    Buf packed = {bits, (length + 7) / 8, (length + 7) / 8};
    return hand_over(&packed);
}

/* Each column's sizes per row, for the next run's reservations. */
static void keep_rates(Column *cols, int ncols, Py_ssize_t rows) {
    if (!rows) return;
    for (int k = 0; k < ncols; k++) {
        Column *col = &cols[k];
        col->values_per_row = (double)col->values.len / (double)rows;
        col->offsets_per_row = (double)col->offsets.len / (double)rows;
        col->data_per_row = (double)col->data.len / (double)rows;
    }
}

/* The columns' buffers once every row is in: [(length, null_count, validity, values,
 * offsets, data)] per column, the buffers handed over; each column's sizes per row kept
 * for the next run's reservations. */
SHARED PyObject *column_buffers(Column *cols, int ncols, Py_ssize_t rows) {
    PyObject *columns = PyList_New(ncols);
    if (!columns) return NULL;
    keep_rates(cols, ncols, rows);
    for (int k = 0; k < ncols; k++) {
        Column *col = &cols[k];
        Py_ssize_t nulls = 0, unused;
        PyObject *validity = NULL;
        if (col->has_validity) {
            if (!(validity = packed_bits(&col->validity, col->length, &nulls))) goto fail;
            if (!nulls) Py_CLEAR(validity);  /* its nulls were rolled back */
        }
        if (!validity) validity = Py_NewRef(Py_None);
        PyObject *values = col->kind == COL_BOOL ? packed_bits(&col->values, col->length, &unused)
                                                 : hand_over(&col->values);
        PyObject *offsets = values ? hand_over(&col->offsets) : NULL;
        PyObject *data = offsets ? hand_over(&col->data) : NULL;
        PyObject *entry = data
            ? Py_BuildValue("nnNNNN", col->length, nulls, validity, values, offsets, data)
            : NULL;
        if (!entry) {
            if (!data) {
                Py_DECREF(validity);
                Py_XDECREF(values);
                Py_XDECREF(offsets);
            }
            goto fail;
        }
        PyList_SET_ITEM(columns, k, entry);
    }
    return columns;
fail:
    Py_DECREF(columns);
    return NULL;
}

/* ------------------------------------------------------------------ Arrow's C data interface */

/* The columns handed to Arrow in one step, as Arrow's C data interface lays an array out
 * (a struct of the spec's, defined as the spec asks): column 0 and its children, whose
 * layout follows their kinds, imported by pyarrow without a Python object per buffer. */
#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE
struct ArrowSchema;
struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};
#endif

/* What the exported arrays own: one allocation for the arrays and their pointers, and
 * the column buffers (freed with PyMem_RawFree: a release may run without the GIL). */
typedef struct {
    int nowned;
    void **owned;
    struct ArrowArray *arrays;
    struct ArrowArray **children;
    const void **buffers;
} Exported;

static void exported_free(Exported *x) {
    for (int k = 0; k < x->nowned; k++) PyMem_RawFree(x->owned[k]);
    PyMem_RawFree(x->owned);
    PyMem_RawFree(x->arrays);
    PyMem_RawFree(x->children);
    PyMem_RawFree(x->buffers);
    PyMem_RawFree(x);
}

/* Children are owned by the root: their release only marks them released. */
static void release_child(struct ArrowArray *array) { array->release = NULL; }

static void release_root(struct ArrowArray *array) {
    exported_free(array->private_data);
    array->release = NULL;
}

/* The capsule's end: an array never imported is released here. */
static void arrow_capsule_free(PyObject *capsule) {
    struct ArrowArray *array = PyCapsule_GetPointer(capsule, "arrow_array");
    if (!array) return;
    if (array->release) array->release(array);
    PyMem_RawFree(array);
}

static const uint64_t EMPTY_BUFFER[2] = {0, 0};  /* a buffer of no bytes, not NULL */

/* Takes buffer `b` for the exported arrays (an empty one reads as EMPTY_BUFFER). */
static const void *export_buffer(Exported *x, Buf *b) {
    const void *data = b->data ? (const void *)b->data : (const void *)EMPTY_BUFFER;
    if (b->data) x->owned[x->nowned++] = b->data;
    *b = (Buf){0};
    return data;
}

/* The columns (every row in) as a capsule "arrow_array" of column 0's ArrowArray, the
 * buffers moved into it (the columns are left empty); each column's sizes per row kept
 * for the next run's reservations. NULL with an exception set. */
SHARED PyObject *column_capsule(Column *cols, int ncols, Py_ssize_t rows) {
    keep_rates(cols, ncols, rows);
    Exported *x = PyMem_RawCalloc(1, sizeof(Exported));
    struct ArrowArray *root = PyMem_RawCalloc(1, sizeof(struct ArrowArray));
    if (!x || !root) goto nomem;
    x->owned = PyMem_RawCalloc((size_t)ncols * 4, sizeof(void *));
    x->arrays = PyMem_RawCalloc((size_t)ncols, sizeof(struct ArrowArray));
    Py_ssize_t links = 1;
    for (int k = 0; k < ncols; k++) links += cols[k].nchildren;
    x->children = PyMem_RawCalloc((size_t)links, sizeof(struct ArrowArray *));
    x->buffers = PyMem_RawCalloc((size_t)ncols * 3, sizeof(void *));
    if (!x->owned || !x->arrays || !x->children || !x->buffers) goto nomem;
    int nchildren = 0;
    for (int k = 0; k < ncols; k++) {
        Column *col = &cols[k];
        struct ArrowArray *a = &x->arrays[k];
        const void **buffers = &x->buffers[3 * k];
        Py_ssize_t nulls = 0, unused;
        buffers[0] = NULL;
        if (col->has_validity) {
            char *bits = pack_bits(&col->validity, col->length, &nulls);
            if (!bits) goto nomem;
            x->owned[x->nowned++] = bits;
            if (nulls) buffers[0] = bits;  /* else its nulls were rolled back */
        }
        int n = 1;
        switch (col->kind) {
        case COL_BOOL: {
            char *bits = pack_bits(&col->values, col->length, &unused);
            if (!bits) goto nomem;
            x->owned[x->nowned++] = bits;
            buffers[n++] = bits;
            break;
        }
        case COL_BINARY:
            buffers[n++] = export_buffer(x, &col->offsets);
            buffers[n++] = export_buffer(x, &col->data);
            break;
        case COL_LIST:
            buffers[n++] = export_buffer(x, &col->offsets);
            break;
        case COL_STRUCT:
            break;
        default:
            if (col->width) {
                buffers[n++] = export_buffer(x, &col->values);
            } else {  /* a null column: no buffer at all */
                n = 0;
                nulls = col->length;
            }
            break;
        }
        a->length = col->length;
        a->null_count = nulls;
        a->n_buffers = n;
        a->buffers = buffers;
        a->n_children = col->nchildren;
        a->children = &x->children[nchildren];
        for (int j = 0; j < col->nchildren; j++)
            x->children[nchildren++] = &x->arrays[col->children[j]];
        a->release = release_child;
    }
    free_columns(cols, ncols);
    *root = x->arrays[0];
    root->release = release_root;
    root->private_data = x;
    PyObject *capsule = PyCapsule_New(root, "arrow_array", arrow_capsule_free);
    if (!capsule) {
        release_root(root);
        PyMem_RawFree(root);
    }
    return capsule;
nomem:
    if (x) exported_free(x);
    PyMem_RawFree(root);
    free_columns(cols, ncols);
    return PyErr_NoMemory();
}

/* ------------------------------------------------------------------ the module */

/* The module of `definition`, its ColumnBuffer type ready, with SOURCE_SHA256: what a
 * run from a checkout compares with its own source before loading this build. */
static PyObject *create_module(struct PyModuleDef *definition) {
    if (PyType_Ready(&ColumnBufferType) < 0) return NULL;
    PyObject *created = PyModule_Create(definition);
    if (created == NULL) return NULL;
#ifdef SEGMENTLOG_SOURCE_SHA256
    if (PyModule_AddStringConstant(created, "SOURCE_SHA256", SEGMENTLOG_SOURCE_SHA256) < 0) {
        Py_DECREF(created);
        return NULL;
    }
#endif
    return created;
}

#endif
