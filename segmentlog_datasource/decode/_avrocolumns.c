/* The compiled twin of decode/avro.py's decode_payloads for the schemas
 * decode/avro_program.py compiles: Avro binary payloads of one writer schema read as the
 * reader schema straight into Arrow-layout column buffers.
 *
 * compile(columns, step) -> a program (a capsule); run(program, payloads) -> (columns'
 * buffers, one error reason or None per payload). Every read is bounds-checked: a
 * payload that is truncated or malformed gives an error for its row, whose partial
 * values are rolled back, and a null in the top column.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Column kinds: the Arrow layouts the reader's types take (avro_program.py's COL_*). */
enum { COL_NULL = 0, COL_BOOL, COL_I32, COL_I64, COL_F32, COL_F64, COL_BINARY, COL_LIST, COL_STRUCT };
/* Step operations (avro_program.py's OP_*). */
enum { OP_READ = 1, OP_RECORD, OP_ARRAY, OP_UNION };
/* Writer primitive kinds (avro_program.py's W_*). */
enum { W_NULL = 0, W_BOOL, W_INT, W_LONG, W_FLOAT, W_DOUBLE, W_BYTES, W_STRING, W_FIXED, W_ENUM };
/* Value conversions (avro_program.py's CONV_*). */
enum { CONV_NONE = 0, CONV_MILLIS_TO_MICROS };

#define MAX_DEPTH 64

/* The columns, their buffers and a run's plumbing (columns.h), with a flag of their own. */
#define COLUMNS_MODULE "_avrocolumns"
#define COLUMN_FIELDS int utf8;  /* a string column: bytes are checked as UTF-8 */
#include "columns.h"

typedef struct {
    int col;
    int is_null;
    int64_t i;
    double d;
    char *s;
    Py_ssize_t slen;
} Default;

typedef struct Step {
    int op, col, wkind, conv;
    Py_ssize_t size;       /* fixed: its size */
    int nchildren;
    struct Step **children; /* record: fields in writer order; array: [item]; union: branches (NULL: null) */
    int nsymbols;          /* enum: the reader's symbol for each writer index */
    char **symbols;
    Py_ssize_t *symbol_lengths;
    int ndefaults;         /* record: reader fields the writer lacks */
    Default *defaults;
} Step;

typedef struct {
    int ncols;
    Column *cols;
    Step *root;
} Program;

typedef struct {
    const uint8_t *p, *end;
    const char *reason;     /* malformed: why; NULL with failed: truncated */
    char detail[160];
    const uint8_t *bad_utf8; /* with reason BAD_UTF8: the string, told as Python tells it */
    Py_ssize_t bad_utf8_len;
} Cursor;

enum { FAIL = -1 };  /* the row is bad (beside columns.h's OK, NOMEM and ERROR) */
static const char BAD_UTF8[] = "bytes that are not UTF-8 for a string";

/* ------------------------------------------------------------------ reads */

static int truncated(Cursor *c) {
    c->reason = NULL;
    return FAIL;
}

static int malformed(Cursor *c, const char *why) {
    c->reason = why;
    return FAIL;
}

static HOT int read_long(Cursor *c, int64_t *out) {
    if (c->p < c->end && !(*c->p & 0x80)) {  /* most varints are one byte */
        uint64_t b = *c->p++;
        *out = (int64_t)((b >> 1) ^ (~(b & 1) + 1));
        return OK;
    }
    uint64_t value = 0;
    int shift = 0;
    for (int i = 0; i < 10; i++) {
        if (c->p >= c->end) return truncated(c);
        uint8_t b = *c->p++;
        value |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = (int64_t)((value >> 1) ^ (~(value & 1) + 1));
            return OK;
        }
        shift += 7;
    }
    return malformed(c, "a varint longer than 10 bytes");
}

static inline int read_length(Cursor *c, Py_ssize_t *out) {
    int64_t n;
    if (read_long(c, &n) != OK) return FAIL;
    if (n < 0) {
        snprintf(c->detail, sizeof c->detail, "a negative length (%lld)", (long long)n);
        return malformed(c, c->detail);
    }
    if (n > c->end - c->p) return truncated(c);
    *out = (Py_ssize_t)n;
    return OK;
}

/* ------------------------------------------------------------------ appends */

/* A null in column `index`: a null struct's children are null too. */
static int append_null(Program *prog, int index) {
    return append_empty(prog->cols, index, 0, 0);
}

static HOT int append_integer(Column *col, int64_t v, int conv, Cursor *c, int *status) {
    if (conv == CONV_MILLIS_TO_MICROS) {
        if (__builtin_mul_overflow(v, (int64_t)1000, &v)) {
            *status = malformed(c, "a timestamp-millis value past the range of microseconds");
            return FAIL;
        }
    }
    switch (col->kind) {
    case COL_I32: {
        if (v < INT32_MIN || v > INT32_MAX) {
            snprintf(c->detail, sizeof c->detail, "an int value out of the 32-bit range (%lld)",
                     (long long)v);
            *status = malformed(c, c->detail);
            return FAIL;
        }
        int32_t x = (int32_t)v;
        if (buf_put(&col->values, &x, 4) != OK) return NOMEM;
        break;
    }
    case COL_I64:
        if (buf_put(&col->values, &v, 8) != OK) return NOMEM;
        break;
    case COL_F32: {  /* as Python: the int to a double, then Arrow's cast to float */
        float x = (float)(double)v;
        if (buf_put(&col->values, &x, 4) != OK) return NOMEM;
        break;
    }
    case COL_F64: {
        double x = (double)v;
        if (buf_put(&col->values, &x, 8) != OK) return NOMEM;
        break;
    }
    default:
        *status = malformed(c, "an integer for a column of another type");
        return FAIL;
    }
    return append_validity(col, 1);
}

/* ------------------------------------------------------------------ steps */

static int run_step(Program *prog, Step *step, Cursor *c, int depth);

/* Reads one primitive writer value (an OP_READ step) into its column, if it has one.
 * Inlined where steps hold primitive values: most steps are, and they take no call. */
static HOT int read_value(Program *prog, Step *step, Cursor *c) {
    Column *col = step->col >= 0 ? &prog->cols[step->col] : NULL;
    int status = OK;
    switch (step->wkind) {
    case W_NULL:
        return col ? append_null(prog, step->col) : OK;
    case W_BOOL: {
        if (c->p >= c->end) return truncated(c);
        uint8_t b = *c->p++;
        if (!col) return OK;
        if (buf_byte(&col->values, b != 0) != OK) return NOMEM;
        return append_validity(col, 1);
    }
    case W_INT: case W_LONG: {
        int64_t v;
        if (read_long(c, &v) != OK) return FAIL;
        if (!col) return OK;
        int r = append_integer(col, v, step->conv, c, &status);
        return r == FAIL ? status : r;
    }
    case W_FLOAT: {
        float v;
        if (c->end - c->p < 4) return truncated(c);
        memcpy(&v, c->p, 4);
        c->p += 4;
        return col ? append_real(col, (double)v) : OK;
    }
    case W_DOUBLE: {
        double v;
        if (c->end - c->p < 8) return truncated(c);
        memcpy(&v, c->p, 8);
        c->p += 8;
        return col ? append_real(col, v) : OK;
    }
    case W_BYTES: case W_STRING: case W_FIXED: {
        Py_ssize_t n;
        if (step->wkind == W_FIXED) {
            n = step->size;
            if (c->end - c->p < n) return truncated(c);
        } else if (read_length(c, &n) != OK) {
            return FAIL;
        }
        const uint8_t *s = c->p;
        c->p += n;
        if (!col) return OK;  /* skipped: not decoded, as fastavro skips it */
        /* fastavro decodes a writer's string even when the reader wants bytes */
        if ((step->wkind == W_STRING || col->utf8) && !strict_utf8(s, n)) {
            c->bad_utf8 = s;
            c->bad_utf8_len = n;
            return malformed(c, BAD_UTF8);
        }
        return append_bytes(col, (const char *)s, n);
    }
    case W_ENUM: {
        int64_t index;
        if (read_long(c, &index) != OK) return FAIL;
        if (!col) return OK;  /* skipped: fastavro does not check the index */
        if (index < 0 || index >= step->nsymbols) {
            snprintf(c->detail, sizeof c->detail, "enum index %lld out of range (%d symbols)",
                     (long long)index, step->nsymbols);
            return malformed(c, c->detail);
        }
        return append_bytes(col, step->symbols[index], step->symbol_lengths[index]);
    }
    }
    return malformed(c, "an unknown writer kind");
}

/* Runs `step` at the cursor. Returns OK, FAIL (the row is bad: c->reason) or NOMEM. */
static int run_step(Program *prog, Step *step, Cursor *c, int depth) {
    Column *col = step->col >= 0 ? &prog->cols[step->col] : NULL;
    int status = OK;
    if (depth > MAX_DEPTH) return malformed(c, "nesting deeper than the compiled program allows");
    switch (step->op) {
    case OP_READ:
        return read_value(prog, step, c);
    case OP_RECORD:
        for (int k = 0; k < step->nchildren; k++) {
            Step *child = step->children[k];
            int r = child->op == OP_READ ? read_value(prog, child, c)
                                         : run_step(prog, child, c, depth + 1);
            if (r != OK) return r;
        }
        if (!col) return OK;
        for (int k = 0; k < step->ndefaults; k++) {
            Default *d = &step->defaults[k];
            Column *target = &prog->cols[d->col];
            int r;
            if (d->is_null) {
                r = append_null(prog, d->col);
            } else if (target->kind == COL_BOOL) {
                r = buf_byte(&target->values, d->i != 0);
                if (r == OK) r = append_validity(target, 1);
            } else if (target->kind == COL_F32 || target->kind == COL_F64) {
                r = append_real(target, d->d);
            } else if (target->kind == COL_BINARY) {
                r = append_bytes(target, d->s, d->slen);
            } else {
                r = append_integer(target, d->i, CONV_NONE, c, &status);
                if (r == FAIL) return status;
            }
            if (r != OK) return r;
        }
        return append_validity(col, 1);
    case OP_ARRAY: {
        Step *item = step->children[0];
        for (;;) {
            int64_t count;
            if (read_long(c, &count) != OK) return FAIL;
            if (count == 0) break;
            if (count < 0) {  /* a block with its size in bytes */
                int64_t size;
                if (count == INT64_MIN) return malformed(c, "an array block count out of range");
                count = -count;
                if (read_long(c, &size) != OK) return FAIL;
            }
            /* Every item takes a byte at least (the program has no arrays of nulls). */
            if (count > c->end - c->p) return truncated(c);
            for (int64_t k = 0; k < count; k++) {
                int r = item->op == OP_READ ? read_value(prog, item, c)
                                            : run_step(prog, item, c, depth + 1);
                if (r != OK) return r;
            }
        }
        if (!col) return OK;
        if (end_offset(col, prog->cols[col->children[0]].length) != OK) return NOMEM;
        return append_validity(col, 1);
    }
    case OP_UNION: {
        int64_t index;
        if (read_long(c, &index) != OK) return FAIL;
        if (index < 0 || index >= step->nchildren) {
            snprintf(c->detail, sizeof c->detail, "union index %lld out of range (%d branches)",
                     (long long)index, step->nchildren);
            return malformed(c, c->detail);
        }
        Step *branch = step->children[index];
        if (branch == NULL) return col ? append_null(prog, step->col) : OK;
        return branch->op == OP_READ ? read_value(prog, branch, c)
                                     : run_step(prog, branch, c, depth + 1);
    }
    }
    return malformed(c, "an unknown step");
}

/* ------------------------------------------------------------------ compiling */

static void free_step(Step *step) {
    if (!step) return;
    for (int k = 0; k < step->nchildren; k++) free_step(step->children[k]);
    PyMem_Free(step->children);
    for (int k = 0; k < step->nsymbols; k++) PyMem_Free(step->symbols[k]);
    PyMem_Free(step->symbols);
    PyMem_Free(step->symbol_lengths);
    for (int k = 0; k < step->ndefaults; k++) PyMem_Free(step->defaults[k].s);
    PyMem_Free(step->defaults);
    PyMem_Free(step);
}

static void free_program(PyObject *capsule) {
    Program *prog = PyCapsule_GetPointer(capsule, "avrocolumns.program");
    if (!prog) return;
    free_columns(prog->cols, prog->ncols);
    for (int k = 0; k < prog->ncols; k++) PyMem_Free(prog->cols[k].children);
    PyMem_Free(prog->cols);
    free_step(prog->root);
    PyMem_Free(prog);
}

/* Whether a step of `op` reading writer kind `wkind` may fill a column of `kind`. */
static int fits(int op, int wkind, int kind) {
    if (op == OP_RECORD) return kind == COL_STRUCT;
    if (op == OP_ARRAY) return kind == COL_LIST;
    if (op == OP_UNION) return 1;  /* its branches are checked */
    switch (wkind) {
    case W_NULL: return 1;
    case W_BOOL: return kind == COL_BOOL;
    case W_INT: case W_LONG:
        return kind == COL_I32 || kind == COL_I64 || kind == COL_F32 || kind == COL_F64;
    case W_FLOAT: case W_DOUBLE: return kind == COL_F32 || kind == COL_F64;
    case W_BYTES: case W_STRING: case W_FIXED: case W_ENUM: return kind == COL_BINARY;
    }
    return 0;
}

static int check_col(Program *prog, int col) {
    if (col < -1 || col >= prog->ncols) {
        PyErr_Format(PyExc_ValueError, "step names column %d of %d", col, prog->ncols);
        return -1;
    }
    return 0;
}

/* step: (op, col, wkind, conv, size, extra, children) */
static Step *build_step(Program *prog, PyObject *obj, int depth) {
    if (depth > MAX_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "program nested too deeply");
        return NULL;
    }
    PyObject *extra, *children;
    Step *step = PyMem_Calloc(1, sizeof(Step));
    if (!step) { PyErr_NoMemory(); return NULL; }
    if (!PyArg_ParseTuple(obj, "iiiinOO", &step->op, &step->col, &step->wkind, &step->conv,
                          &step->size, &extra, &children))
        goto fail;
    if (check_col(prog, step->col) < 0) goto fail;
    if (step->op < OP_READ || step->op > OP_UNION || step->wkind < W_NULL || step->wkind > W_ENUM)
        REFUSE("malformed step");
    if (step->col >= 0 && !fits(step->op, step->wkind, prog->cols[step->col].kind))
        REFUSE("a step fills a column of another kind");
    if (step->size < 0) { PyErr_SetString(PyExc_ValueError, "negative fixed size"); goto fail; }
    if (!PyTuple_Check(children)) REFUSE("children: a tuple");
    Py_ssize_t n = PyTuple_GET_SIZE(children);
    if (n > INT32_MAX) goto fail;
    step->children = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Step *));
    if (!step->children) { PyErr_NoMemory(); goto fail; }
    step->nchildren = (int)n;
    for (Py_ssize_t k = 0; k < n; k++) {
        PyObject *child = PyTuple_GET_ITEM(children, k);
        if (child == Py_None) {
            if (step->op != OP_UNION) REFUSE("None outside a union");
            continue;
        }
        if (!(step->children[k] = build_step(prog, child, depth + 1))) goto fail;
    }
    if ((step->op == OP_ARRAY && n != 1) || step->op < OP_READ || step->op > OP_UNION) {
        PyErr_SetString(PyExc_ValueError, "malformed step");
        goto fail;
    }
    if (step->op == OP_ARRAY && step->children[0] == NULL) goto fail;
    if (step->op == OP_READ && step->wkind == W_ENUM && extra != Py_None) {
        if (!PyTuple_Check(extra)) REFUSE("symbols: a tuple");
        Py_ssize_t m = PyTuple_GET_SIZE(extra);
        step->symbols = PyMem_Calloc((size_t)(m ? m : 1), sizeof(char *));
        step->symbol_lengths = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Py_ssize_t));
        if (!step->symbols || !step->symbol_lengths) { PyErr_NoMemory(); goto fail; }
        for (Py_ssize_t k = 0; k < m; k++) {
            if (!(step->symbols[k] = copy_bytes(PyTuple_GET_ITEM(extra, k), &step->symbol_lengths[k])))
                goto fail;
            step->nsymbols = (int)k + 1;
        }
    }
    if (step->op == OP_RECORD && extra != Py_None) {
        if (!PyTuple_Check(extra)) REFUSE("defaults: a tuple");
        Py_ssize_t m = PyTuple_GET_SIZE(extra);
        step->defaults = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Default));
        if (!step->defaults) { PyErr_NoMemory(); goto fail; }
        for (Py_ssize_t k = 0; k < m; k++) {
            Default *d = &step->defaults[k];
            PyObject *value;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(extra, k), "iO", &d->col, &value)) goto fail;
            step->ndefaults = (int)k + 1;
            if (d->col < 0 || d->col >= prog->ncols) REFUSE("default column");
            int kind = prog->cols[d->col].kind;
            if (value == Py_None) d->is_null = 1;
            else if (PyBytes_Check(value)) {
                if (kind != COL_BINARY) REFUSE("a bytes default for a column of another kind");
                if (!(d->s = copy_bytes(value, &d->slen))) goto fail;
            } else if (PyFloat_Check(value)) {
                if (kind != COL_F32 && kind != COL_F64)
                    REFUSE("a float default for a column of another kind");
                d->d = PyFloat_AS_DOUBLE(value);
            } else {
                if (!fits(OP_READ, W_LONG, kind) && kind != COL_BOOL)
                    REFUSE("an integer default for a column of another kind");
                d->i = PyLong_AsLongLong(value);
                if (d->i == -1 && PyErr_Occurred()) goto fail;
                d->d = (double)d->i;
            }
        }
    }
    return step;
fail:
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "malformed step");
    free_step(step);
    return NULL;
}

static const int WIDTHS[] = {0, 0, 4, 8, 4, 8, 0, 0, 0};

/* compile(columns, step): columns a list of (kind, utf8, children tuple). */
static PyObject *compile_program(PyObject *self, PyObject *args) {
    PyObject *columns, *root;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &columns, &PyTuple_Type, &root)) return NULL;
    Program *prog = PyMem_Calloc(1, sizeof(Program));
    if (!prog) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(prog, "avrocolumns.program", free_program);
    if (!capsule) { PyMem_Free(prog); return NULL; }
    Py_ssize_t n = PyList_GET_SIZE(columns);
    if (n < 1 || n > 100000) { PyErr_SetString(PyExc_ValueError, "column count"); goto fail; }
    prog->cols = PyMem_Calloc((size_t)n, sizeof(Column));
    if (!prog->cols) { PyErr_NoMemory(); goto fail; }
    prog->ncols = (int)n;
    for (Py_ssize_t k = 0; k < n; k++) {
        Column *col = &prog->cols[k];
        PyObject *children;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(columns, k), "iiO!", &col->kind, &col->utf8,
                              &PyTuple_Type, &children))
            goto fail;
        if (col->kind < COL_NULL || col->kind > COL_STRUCT) REFUSE("column kind");
        col->width = WIDTHS[col->kind];
        if (column_children(col, children, k, n) < 0) goto fail;
    }
    if (!(prog->root = build_step(prog, root, 0))) goto fail;
    if (prog->root->col != 0) REFUSE("the root step fills column 0");
    return capsule;
fail:
    Py_DECREF(capsule);
    return NULL;
}

/* ------------------------------------------------------------------ running */

static const char TRUNCATED_FORMAT[] =
    "truncated payload: the Avro value needs more than the %zd bytes after the frame";

/* The pure path's reason for a string that is not UTF-8: Python's own decoder's words. */
static PyObject *utf8_error(const uint8_t *s, Py_ssize_t n) {
    PyObject *decoded = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (decoded) {  /* not expected: strict_utf8 and Python disagree */
        Py_DECREF(decoded);
        return PyUnicode_FromString("malformed payload: " "bytes that are not UTF-8 for a string");
    }
    if (!PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) return NULL;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    PyObject *error =
        value ? PyUnicode_FromFormat("malformed payload: UnicodeDecodeError: %S", value) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return error;
}

/* One payload decoded into the program's columns as row `row`: OK, or FAIL with its error
 * set in `errors` at `row` and the row's partial values rolled back to a null; NOMEM or
 * ERROR (a Python exception is set) stop the run. */
static int decode_row(Program *prog, const char *start, Py_ssize_t size,
                      PyObject *errors, Py_ssize_t row) {
    Cursor cursor = {(const uint8_t *)start, (const uint8_t *)start + size, NULL, {0}};
    int r = run_step(prog, prog->root, &cursor, 0);
    if (r == OK && cursor.p == cursor.end) {
        Py_INCREF(Py_None);
        PyList_SET_ITEM(errors, row, Py_None);
        return OK;
    }
    PyObject *error = NULL;
    if (r == OK) {
        error = PyUnicode_FromFormat(
            "malformed payload: %zd bytes left over after the Avro value (of %zd)",
            (Py_ssize_t)(cursor.end - cursor.p), size);
    } else if (r == FAIL && cursor.reason == BAD_UTF8) {
        error = utf8_error(cursor.bad_utf8, cursor.bad_utf8_len);
    } else if (r == FAIL) {
        error = cursor.reason
            ? PyUnicode_FromFormat("malformed payload: %s", cursor.reason)
            : PyUnicode_FromFormat(TRUNCATED_FORMAT, size);
    }
    if (r == NOMEM) {
        past_size_limit();
        return NOMEM;
    }
    if (!error) return ERROR;
    PyList_SET_ITEM(errors, row, error);
    /* Rows before a failed one are whole: every column's size follows from the root's
     * row count. */
    roll_back(prog->cols, 0, row);
    if (append_null(prog, 0) != OK) {
        PyErr_NoMemory();
        return NOMEM;
    }
    return OK;
}

/* run(program, payloads) -> ([(length, null_count, validity, values, offsets, data)] per
 * column, [error or None per payload]) */
static PyObject *run_program(PyObject *self, PyObject *args) {
    PyObject *capsule, *payloads;
    if (!PyArg_ParseTuple(args, "OO", &capsule, &payloads)) return NULL;
    Program *prog = PyCapsule_GetPointer(capsule, "avrocolumns.program");
    if (!prog) return NULL;
    PyObject *seq = PySequence_Fast(payloads, "payloads: a sequence of bytes");
    if (!seq) return NULL;
    Py_ssize_t rows = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *errors = PyList_New(rows), *result = NULL;
    if (!errors) goto done;
    if (begin_run(prog->cols, prog->ncols, rows) < 0) goto done;
    for (Py_ssize_t row = 0; row < rows; row++) {
        PyObject *item = items[row];
        int r;
        if (PyBytes_Check(item)) {
            r = decode_row(prog, PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item), errors, row);
        } else {
            Py_buffer view;
            if (PyObject_GetBuffer(item, &view, PyBUF_SIMPLE) < 0) goto done;
            r = decode_row(prog, view.buf, view.len, errors, row);
            PyBuffer_Release(&view);
        }
        if (r != OK) goto done;
    }
    PyObject *columns = column_buffers(prog->cols, prog->ncols, rows);
    if (columns) result = Py_BuildValue("NO", columns, errors);
done:
    free_columns(prog->cols, prog->ncols);
    Py_XDECREF(errors);
    Py_DECREF(seq);
    return result;
}

/* run_spans(program, data, starts, ends): run's result for the payloads
 * data[starts[i]:ends[i]] (starts and ends: int64 buffers), read in place: a column's
 * values are decoded without a bytes object per row. */
static PyObject *run_spans(PyObject *self, PyObject *args) {
    PyObject *capsule, *result = NULL, *errors = NULL;
    Spans in;
    if (!PyArg_ParseTuple(args, "Oy*y*y*", &capsule, &in.data, &in.starts, &in.ends))
        return NULL;
    Program *prog = PyCapsule_GetPointer(capsule, "avrocolumns.program");
    if (!prog) goto done;
    Py_ssize_t rows = span_rows(&in);
    if (rows < 0) goto done;
    const int64_t *first = in.starts.buf, *last = in.ends.buf;
    errors = PyList_New(rows);
    if (!errors) goto done;
    if (begin_run(prog->cols, prog->ncols, rows) < 0) goto done;
    for (Py_ssize_t row = 0; row < rows; row++) {
        if (decode_row(prog, (const char *)in.data.buf + first[row],
                       (Py_ssize_t)(last[row] - first[row]), errors, row) != OK) goto done;
    }
    PyObject *columns = column_buffers(prog->cols, prog->ncols, rows);
    if (columns) result = Py_BuildValue("NO", columns, errors);
done:
    if (prog) free_columns(prog->cols, prog->ncols);
    Py_XDECREF(errors);
    spans_release(&in);
    return result;
}

static PyMethodDef methods[] = {
    {"compile", compile_program, METH_VARARGS, "compile(columns, step) -> a program"},
    {"run", run_program, METH_VARARGS,
     "run(program, payloads) -> (the columns' buffers, an error or None per payload)"},
    {"run_spans", run_spans, METH_VARARGS, RUN_SPANS_DOC},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_avrocolumns",
                                    "Avro payloads decoded into Arrow column buffers.", -1, methods};

PyMODINIT_FUNC PyInit__avrocolumns(void) {
    return create_module(&module);
}
