/* The compiled twin of decode/protobuf.py's row-by-row decoding, for the (writer message,
 * reader message) pairs decode/protobuf_program.py compiles: Confluent-framed Protobuf
 * payloads (the message indexes, then the Protobuf binary) read straight into Arrow-layout
 * column buffers, with no Python object per record.
 *
 * The wire format is read as the protobuf runtime (upb, which the pure path parses with)
 * reads it: varints of at most 10 bytes, tags and lengths of at most 5; field number 0,
 * wire types 6 and 7, an END_GROUP outside its group and anything past the end are
 * corrupt; a known field with another wire type is an unknown field; repeated scalars
 * take packed and unpacked data; a closed (proto2) enum's unknown number is an unknown
 * field; a singular field written twice keeps its last value, a singular message merges;
 * a oneof keeps its last member; strings of proto3 files are checked as UTF-8; a map
 * entry holding an unknown field is dropped, and a key written twice keeps its last entry;
 * messages and groups nest at most 100 deep.
 *
 * A payload is read by a program: one per reader position, the writer message's fields by
 * number, each either skipped (checked as the runtime checks it), kept in a slot of the
 * message's frame (a singular field: the last value wins), parsed into an inline frame
 * (a singular message: occurrences merge), appended to a list's child column (a repeated
 * field), or kept as a map entry (sorted by key when the message ends). When a message
 * ends, its frame's values go to the reader's columns in the reader's field order. The
 * root message's singular scalars whose values go to their columns as they are skip the
 * frame: they are appended as they are read (a second occurrence replaces the value), and
 * those not seen take their null or default at the end (Prog's `direct`).
 *
 * compile(columns, programs, root, indexes) -> a program (a capsule);
 * run(program, payloads[, arrow]) / run_spans(program, data, starts, ends[, arrow]) ->
 * (the columns' buffers, or with `arrow` an ArrowArray capsule of them; one code per
 * payload: 0, or why the row failed: ROW_*). A failed row is rolled back to a null;
 * protobuf_program.py takes its error's words from the pure path. Every read is
 * bounds-checked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Column kinds: the Arrow layouts of the reader's types (protobuf_program.py's COL_*). */
enum { COL_BOOL = 1, COL_I32, COL_I64, COL_F32, COL_F64, COL_BINARY, COL_DEC128, COL_LIST,
       COL_STRUCT };
/* Field types: FieldDescriptorProto.Type. */
enum { T_DOUBLE = 1, T_FLOAT, T_INT64, T_UINT64, T_INT32, T_FIXED64, T_FIXED32, T_BOOL,
       T_STRING, T_GROUP, T_MESSAGE, T_BYTES, T_UINT32, T_ENUM, T_SFIXED32, T_SFIXED64,
       T_SINT32, T_SINT64 };
enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_I32 = 5 };
/* What a writer field's values do (A_*), programs' kinds (P_*), what a message's end
 * appends per reader field (E_*), conversions of a writer value to a column's (CV_*):
 * protobuf_program.py's names. */
enum { A_SKIP = 0, A_SLOT, A_INLINE, A_APPEND, A_APPEND_MSG, A_MAP };
enum { P_VALIDATE = 0, P_STRUCT, P_VALUE };
enum { E_SLOT = 1, E_SLOT_LIST, E_INLINE, E_INLINE_LIST, E_LIST, E_MAP, E_CONST_NULL, E_CONST,
       E_CONST_EMPTY, E_MICROS };
enum { CV_NONE = 0, CV_INT, CV_FLOAT, CV_ENUM, CV_BOOL, CV_TEXT, CV_BYTES };
/* A row's code: protobuf_program.py's ROW_* */
enum { ROW_OK = 0, ROW_INDEXES, ROW_CORRUPT, ROW_UTF8, ROW_DEPTH, ROW_MISFIT };

#define MAX_DEPTH 100     /* the runtime's nesting limit: messages and groups below the root */
#define MAX_PROGRAM_DEPTH 200

/* The columns, their buffers and a run's plumbing (columns.h); short strings copied
 * without a call. */
#define COLUMNS_MODULE "_protobufcolumns"
#define COLUMNS_SHORT_COPIES
#include "columns.h"

enum { FAIL = -1 };  /* the row is bad (beside columns.h's OK, NOMEM and ERROR) */

/* A value of a frame: a writer field's last value (integers, bools and enums in i, a
 * uint64's bits too; floats and doubles in d; strings and bytes as a span of the payload),
 * an inline frame's header, a map's entries or a oneof's member. */
typedef struct {
    union {
        int64_t i;
        double d;
        struct { const uint8_t *p; Py_ssize_t n; } s;
        struct { int32_t head, tail; } m;
    } v;
    int64_t set;
} Slot;

typedef struct {
    int32_t next;
    int32_t key_set;
    Slot key;
    const uint8_t *p;    /* the entry's bytes, parsed again when the map is appended */
    Py_ssize_t n;
} Entry;

typedef struct {
    int64_t number;
    char *name;
    Py_ssize_t len;
} EnumName;

typedef struct {
    char *enum_name;     /* the reader enum's short name, for UNKNOWN_ENUM_VALUE_<name>_<n> */
    Py_ssize_t enum_name_len;
    int n;
    EnumName *names;     /* sorted by number */
} EnumTable;

typedef struct {
    int code, src;       /* CV_*, and the writer's field type */
    int utf8;            /* CV_TEXT: the bytes are checked (not checked when parsed) */
    EnumTable *names;    /* CV_ENUM */
} Conv;

typedef struct {
    uint32_t number;
    int type, repeated, packable, utf8, action;
    int oneof;           /* the slot of its oneof's member, or -1 */
    int slot;            /* A_SLOT, A_MAP: its slot; A_INLINE: the inline frame's header */
    int sub;             /* the program of a message's values (A_MAP: the entries' first read) */
    int col;             /* A_APPEND: the list's child column */
    Conv conv;           /* A_APPEND */
    int nclosed;         /* a closed enum's numbers (sorted); -1: open, or not an enum */
    int32_t *closed;
    int fast;            /* F_*: a common shape, read without the general path */
} Field;

/* Fields' common shapes: a singular scalar kept in a slot (not in a oneof, not a closed
 * enum) read from its own wire type, or a repeated string appended as it is. */
enum { F_GENERAL = 0, F_VARINT_SLOT, F_I64_SLOT, F_I32_SLOT, F_SPAN_SLOT, F_SPAN_APPEND };

typedef struct {
    int op, col;
    int slot, slot2;     /* E_SLOT*: the value's slot; E_INLINE*: the header; E_MAP: the
                          * entries; E_MICROS: seconds and nanos */
    int sub;             /* E_INLINE*: the program; E_MAP: the entries' second read */
    int presence;        /* an unset value reads as null ([] in a list), else the default */
    int key_type;        /* E_MAP: the writer key's type */
    Conv conv;
    Slot dflt, dflt2;    /* the writer's default (E_MICROS: of seconds, of nanos); E_CONST */
    char *owned;         /* the bytes behind dflt's span */
    int fast;            /* X_*: an E_SLOT whose value goes to its column as it is */
    int direct;          /* its field is appended as it is read (D_*) */
    Column *column;      /* &cols[col] (the columns never move) */
    Column *child;       /* a list's: &cols[its child] */
} Emit;

/* E_SLOT's common shapes: no range to check, no text to check, no name to look up. */
enum { X_GENERAL = 0, X_I64, X_I32, X_F64, X_BOOL, X_BYTES };

/* What the parse loop does first with a tag (a field number and a wire type), looked up
 * by the tag itself, so that a tag of another wire type takes the general path: a field
 * of a common shape (F_*), or, in the root's program, a singular scalar appended straight
 * to its column as it is read (D_*: its X_* store from the value of its wire type). */
enum { D_VARINT_I64 = F_SPAN_APPEND + 1, D_VARINT_CONV_I64, D_VARINT_I32, D_VARINT_BOOL,
       D_FIXED64, D_FIXED32, D_FIXED32_CONV, D_SPAN };

typedef struct {
    uint8_t op;          /* F_* or D_*; F_GENERAL: see the field */
    uint8_t type;        /* the writer field's type */
    uint8_t utf8;        /* strings: checked as they are read */
    int32_t target;      /* F_*_SLOT: the slot; F_SPAN_APPEND, D_*: the column */
    Column *col;         /* F_SPAN_APPEND, D_*: &cols[target] */
    uint64_t mask;       /* D_*: the field's bit of the row's direct fields */
} Tag;

/* A step of the root's expected order: a field the parse takes without its tag's lookup
 * when its tag comes where every serializer writes it (fields by number). */
typedef struct {
    uint16_t tag;        /* its one-byte tag; the last step's 0x100 matches no byte */
    uint8_t op;          /* its Tag's D_*, or F_SPAN_APPEND (repeated: the step stays) */
    uint8_t type;
    uint8_t never_null;  /* its column never takes a null in a run (never_null) */
    uint16_t checked;    /* strings: UTF8_CHECKED when checked as they are read, else 0 */
    uint64_t mask;       /* its direct bit (none when repeated) */
    uint64_t before;     /* the direct bits of the steps before it */
    Column *col;
    const void *label;   /* parse_rows's label of its op (set by parse_rows itself) */
    const void *absent;  /* parse_rows's label of its null or default when it is absent */
    const Emit *emit;    /* its value's: a null or default when it is absent */
} Step;

/* A list of the root's repeated field, ended as a row ends (finish_root). */
typedef struct {
    Column *list;
    const Column *child;
} ListEnd;

typedef struct {
    int kind, col, nslots;
    int nfields;
    Field *fields;       /* by number */
    int dense_n;
    int32_t *dense;      /* field index by number below dense_n, -1 none */
    int ntags;
    Tag *tags;           /* by tag below ntags (dense_n * 8) */
    int nemits;
    Emit *emits;
    int skip_only;       /* every field A_SKIP: runs without a frame */
    Py_ssize_t need;     /* slots of the frames on the stack while it runs, its own included */
    int need_state;      /* 0 not computed, 1 computing, 2 done */
    /* The root's program only (when no other program reads its message): its singular
     * scalars of a common shape (at most 64) are appended to their columns as they are
     * read, a bit each in the row's `seen` mask; a second occurrence replaces the value,
     * and at the end those not seen take their null or default. Its other emits run as
     * the message ends. */
    int direct;
    uint64_t direct_mask;
    Emit **direct_emits; /* by bit */
    int nrest, nlists;
    Emit **rest;         /* the emits of the other fields but lists, in order (each fills
                          * its own column) */
    ListEnd *list_ends;  /* the other fields' lists (E_LIST), ended as a row ends */
    Column *column;      /* &cols[col] */
    Step *steps;         /* the expected order: its one-byte direct and repeated-string
                          * fields by number, then a step that ends it (NULL: none) */
    int clear_frame;     /* a slot of the frame is read: zeroed per row */
} Prog;

typedef struct {
    int ncols;
    Column *cols;
    int nprogs;
    Prog *progs;
    int root;
    int nindexes;
    int64_t *indexes;    /* the message indexes that name the program's message */
    int nenums;
    EnumTable *enums;
    /* a run's working memory */
    Slot *stack;
    Py_ssize_t stack_top, stack_cap;
    Entry *entries;
    Py_ssize_t nentries, entries_cap;
    int32_t *order;
    Py_ssize_t norder, order_cap;
    /* the values of the row that did not fit their columns: (column, position), each a
     * null meanwhile; a oneof member unset takes its own back with its values */
    struct { int32_t col; Py_ssize_t at; } *misfits;
    Py_ssize_t nmisfits, misfits_cap;
    int code;
    Buf copy;              /* parse_copied_row's copy of a payload */
    const uint8_t *limit;  /* the end of what the payloads' buffer lets a run read */
    const Prog *root_prog; /* &progs[root] */
    int first_message;     /* the message indexes are [0] */
} Program;

/* ------------------------------------------------------------------ appends */

/* A value of a constant width (4, 8 or 16 bytes): a plain store. */
#define PUT_FIXED(b, v, width) do {                                              \
        if ((b)->cap - (b)->len < (width) && buf_reserve((b), (width)) != OK)   \
            return NOMEM;                                                       \
        memcpy((b)->data + (b)->len, (v), (width));                             \
        (b)->len += (width);                                                    \
    } while (0)

/* A value of a constant width into room reserved for it (reserve_direct). */
#define PUT_RESERVED(b, v, width) do {                                           \
        memcpy((b)->data + (b)->len, (v), (width));                             \
        (b)->len += (width);                                                    \
    } while (0)

/* A null: an empty value (zero, "", [], a struct of empty values), as Arrow's builders
 * append for a null, and under a null struct. */
static int append_null(Program *pr, int index) { return append_empty(pr->cols, index, 0, 1); }

/* A value of a fixed-width column, of its width. */
static HOT int append4(Column *col, const void *v) {
    PUT_FIXED(&col->values, v, 4);
    return append_validity(col, 1);
}

static HOT int append8(Column *col, const void *v) {
    PUT_FIXED(&col->values, v, 8);
    return append_validity(col, 1);
}

static HOT int append16(Column *col, const void *v) {
    PUT_FIXED(&col->values, v, 16);
    return append_validity(col, 1);
}

static HOT int list_end(Program *pr, int index) {
    Column *col = &pr->cols[index];
    if (end_offset(col, pr->cols[col->children[0]].length) != OK) return NOMEM;
    return append_validity(col, 1);
}

/* A value that does not fit its column: the row fails (once it is read whole: a corrupt
 * payload is the runtime's error first), unless a later member of a oneof takes the value
 * back; a null keeps the columns in step meanwhile. */
static int misfit(Program *pr, int index) {
    if (pr->nmisfits >= pr->misfits_cap) {
        Py_ssize_t cap = pr->misfits_cap ? pr->misfits_cap * 2 : 16;
        void *grown = PyMem_RawRealloc(pr->misfits, sizeof(*pr->misfits) * (size_t)cap);
        if (!grown) return NOMEM;
        pr->misfits = grown;
        pr->misfits_cap = cap;
    }
    pr->misfits[pr->nmisfits].col = index;
    pr->misfits[pr->nmisfits].at = pr->cols[index].length;
    pr->nmisfits++;
    return append_null(pr, index);
}

/* The misfits whose values were rolled back forgotten: values before a column's length
 * are only ever taken back, so a misfit past it went with them. */
static void forget_misfits(Program *pr) {
    Py_ssize_t kept = 0;
    for (Py_ssize_t k = 0; k < pr->nmisfits; k++)
        if (pr->misfits[k].at < pr->cols[pr->misfits[k].col].length)
            pr->misfits[kept++] = pr->misfits[k];
    pr->nmisfits = kept;
}

/* Strict UTF-8, as the runtime's and Python's checks (columns.h's strict_utf8). */
static HOT int valid_utf8(const uint8_t *s, Py_ssize_t n) {
    if (n <= 16) {  /* most strings: ASCII, checked in two overlapping loads */
        uint64_t a = 0, b = 0;
        if (n >= 8) {
            memcpy(&a, s, 8);
            memcpy(&b, s + n - 8, 8);
        } else if (n >= 4) {
            uint32_t x, y;
            memcpy(&x, s, 4);
            memcpy(&y, s + n - 4, 4);
            a = x;
            b = y;
        } else {
            for (Py_ssize_t i = 0; i < n; i++) a |= s[i];
        }
        if (!((a | b) & 0x8080808080808080ULL)) return 1;
    }
    return strict_utf8(s, n);
}

static int is_unsigned64(int type) { return type == T_UINT64 || type == T_FIXED64; }

/* A float column's value of a double, as Arrow casts Python's float: a NaN quieted, as
 * the runtime's float -> Python float -> float32 does (the compiler may fold a float's
 * round trip through double, which would keep a signaling NaN). */
static HOT float to_float(double d) {
    float f = (float)d;
    if (f != f) {
        uint32_t bits;
        memcpy(&bits, &f, 4);
        bits |= 0x00400000u;
        memcpy(&f, &bits, 4);
    }
    return f;
}

static int append_enum(Column *col, const EnumTable *t, int64_t x, int unsigned64) {
    if (!(unsigned64 && x < 0)) {
        int lo = 0, hi = t->n - 1;
        while (lo <= hi) {
            int mid = (lo + hi) / 2;
            if (t->names[mid].number == x) return append_bytes(col, t->names[mid].name, t->names[mid].len);
            if (t->names[mid].number < x) lo = mid + 1; else hi = mid - 1;
        }
    }
    /* the pure path's UNKNOWN_ENUM_VALUE_<enum name>_<number> */
    char digits[32];
    int n = unsigned64 ? snprintf(digits, sizeof digits, "_%llu", (unsigned long long)x)
                       : snprintf(digits, sizeof digits, "_%lld", (long long)x);
    if (buf_put(&col->data, "UNKNOWN_ENUM_VALUE_", 19) != OK) return NOMEM;
    if (buf_put(&col->data, t->enum_name, t->enum_name_len) != OK) return NOMEM;
    if (buf_put(&col->data, digits, n) != OK) return NOMEM;
    if (end_offset(col, col->data.len) != OK) return NOMEM;
    return append_validity(col, 1);
}

/* A writer value (in a slot, of conversion's source type) appended to column `index`. */
static HOT int append_conv(Program *pr, const Conv *cv, int index, const Slot *v) {
    Column *col = &pr->cols[index];
    switch (cv->code) {
    case CV_INT: {
        int64_t x = v->v.i;
        int u64 = is_unsigned64(cv->src);
        if (col->kind == COL_I32) {
            if (u64 ? (uint64_t)x > (uint64_t)INT32_MAX : (x < INT32_MIN || x > INT32_MAX))
                return misfit(pr, index);
            int32_t y = (int32_t)x;
            return append4(col, &y);
        }
        if (col->kind == COL_I64) {
            if (u64 && x < 0) return misfit(pr, index);
            return append8(col, &x);
        }
        /* decimal(20, 0): a uint64 column, 16 bytes little-endian */
        if (!u64 && x < 0) return misfit(pr, index);
        uint64_t d[2] = {(uint64_t)x, 0};
        return append16(col, d);
    }
    case CV_FLOAT: {
        double d;
        if (cv->src == T_FLOAT || cv->src == T_DOUBLE) d = v->v.d;
        else if (is_unsigned64(cv->src)) d = (double)(uint64_t)v->v.i;
        else d = (double)v->v.i;
        if (col->kind == COL_F32) {
            float f = to_float(d);
            return append4(col, &f);
        }
        return append8(col, &d);
    }
    case CV_ENUM:
        return append_enum(col, cv->names, v->v.i, is_unsigned64(cv->src));
    case CV_BOOL:
        if (buf_byte(&col->values, v->v.i != 0) != OK) return NOMEM;
        return append_validity(col, 1);
    case CV_TEXT:
        if (cv->utf8 && !valid_utf8(v->v.s.p, v->v.s.n)) return misfit(pr, index);
        return append_bytes(col, v->v.s.p, v->v.s.n);
    case CV_BYTES:
        return append_bytes(col, v->v.s.p, v->v.s.n);
    }
    return misfit(pr, index);
}

/* A constant of the column's own type (a reader field the writer lacks). */
static int append_const(Program *pr, int index, const Slot *v) {
    Column *col = &pr->cols[index];
    switch (col->kind) {
    case COL_BOOL:
        if (buf_byte(&col->values, v->v.i != 0) != OK) return NOMEM;
        return append_validity(col, 1);
    case COL_I32: {
        int32_t y = (int32_t)v->v.i;
        return append4(col, &y);
    }
    case COL_I64:
        return append8(col, &v->v.i);
    case COL_DEC128: {
        uint64_t d[2] = {(uint64_t)v->v.i, 0};
        return append16(col, d);
    }
    case COL_F32: {
        float f = to_float(v->v.d);
        return append4(col, &f);
    }
    case COL_F64:
        return append8(col, &v->v.d);
    case COL_BINARY:
        return append_bytes(col, v->v.s.p, v->v.s.n);
    }
    return misfit(pr, index);
}

/* ------------------------------------------------------------------ reading the wire */

static int fail(Program *pr, int code) {
    pr->code = code;
    return FAIL;
}

static int corrupt(Program *pr) { return fail(pr, ROW_CORRUPT); }

static HOT int read_varint(const uint8_t **pp, const uint8_t *end, uint64_t *out) {
    const uint8_t *p = *pp;
    if (p < end && !(*p & 0x80)) {
        *out = *p;
        *pp = p + 1;
        return OK;
    }
    uint64_t value = 0;
    if (end - p >= 10) {  /* no end within reach: no check per byte */
        for (int shift = 0; shift < 70; shift += 7) {
            uint8_t b = *p++;
            value |= (uint64_t)(b & 0x7f) << shift;
            if (!(b & 0x80)) {
                *out = value;
                *pp = p;
                return OK;
            }
        }
        return FAIL;  /* longer than 10 bytes */
    }
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end) return FAIL;
        uint8_t b = *p++;
        value |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = value;
            *pp = p;
            return OK;
        }
    }
    return FAIL;  /* longer than 10 bytes */
}

/* A varint of at most 5 bytes (tags and lengths), at most `limit`. */
static HOT int read_varint5(const uint8_t **pp, const uint8_t *end, uint64_t limit, uint64_t *out) {
    const uint8_t *p = *pp;
    if (p < end && !(*p & 0x80)) {
        *out = *p;
        *pp = p + 1;
        return OK;
    }
    uint64_t value = 0;
    for (int i = 0; i < 5; i++) {
        if (p >= end) return FAIL;
        uint8_t b = *p++;
        value |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (value > limit) return FAIL;
            *out = value;
            *pp = p;
            return OK;
        }
    }
    return FAIL;
}

/* A length-delimited value's bytes: [*s, *s + *n), within the end. */
static HOT int read_span(const uint8_t **pp, const uint8_t *end, const uint8_t **s, Py_ssize_t *n) {
    uint64_t size;
    if (read_varint5(pp, end, (uint64_t)INT32_MAX - 1, &size) != OK) return FAIL;
    if ((uint64_t)(end - *pp) < size) return FAIL;
    *s = *pp;
    *n = (Py_ssize_t)size;
    *pp += size;
    return OK;
}

static HOT uint32_t load32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static HOT uint64_t load64(const uint8_t *p) {
    return (uint64_t)load32(p) | (uint64_t)load32(p + 4) << 32;
}

static int skip_group(Program *pr, uint32_t number, const uint8_t **pp, const uint8_t *end,
                      int depth);

/* Reads past an unknown field's value (a group to its end). */
static int skip_unknown(Program *pr, uint32_t number, int wt, const uint8_t **pp,
                        const uint8_t *end, int depth) {
    uint64_t ignored;
    const uint8_t *s;
    Py_ssize_t n;
    switch (wt) {
    case WT_VARINT:
        return read_varint(pp, end, &ignored) == OK ? OK : corrupt(pr);
    case WT_I64:
        if (end - *pp < 8) return corrupt(pr);
        *pp += 8;
        return OK;
    case WT_I32:
        if (end - *pp < 4) return corrupt(pr);
        *pp += 4;
        return OK;
    case WT_LEN:
        return read_span(pp, end, &s, &n) == OK ? OK : corrupt(pr);
    case WT_SGROUP:
        return skip_group(pr, number, pp, end, depth - 1);
    }
    return corrupt(pr);  /* an END_GROUP outside its group, wire types 6 and 7 */
}

static int skip_group(Program *pr, uint32_t number, const uint8_t **pp, const uint8_t *end,
                      int depth) {
    if (depth < 0) return corrupt(pr);  /* the runtime's limit, told as corrupt for groups */
    while (*pp < end) {
        uint64_t tag;
        if (read_varint5(pp, end, UINT32_MAX, &tag) != OK) return corrupt(pr);
        uint32_t field = (uint32_t)(tag >> 3);
        int wt = (int)(tag & 7);
        if (field == 0) return corrupt(pr);
        if (wt == WT_EGROUP) return field == number ? OK : corrupt(pr);
        if (skip_unknown(pr, field, wt, pp, end, depth) != OK) return FAIL;
    }
    return corrupt(pr);  /* never closed */
}

/* ------------------------------------------------------------------ frames */

static HOT Slot *push_frame(Program *pr, int n) {
    if (n > pr->stack_cap - pr->stack_top) return NULL;  /* not expected: `need` sizes it */
    Slot *frame = pr->stack + pr->stack_top;
    pr->stack_top += n;
    if (n) memset(frame, 0, sizeof(Slot) * (size_t)n);
    return frame;
}

static HOT const Field *find_field(const Prog *pg, uint32_t number) {
    if (number < (uint32_t)pg->dense_n) {
        int32_t k = pg->dense[number];
        return k < 0 ? NULL : &pg->fields[k];
    }
    int lo = 0, hi = pg->nfields - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (pg->fields[mid].number == number) return &pg->fields[mid];
        if (pg->fields[mid].number < number) lo = mid + 1; else hi = mid - 1;
    }
    return NULL;
}

/* Another member of a oneof set: the one before is unset, and what it began to append
 * (the list elements of an inline message not yet appended) is taken back. */
static void switch_oneof(Program *pr, const Prog *pg, Slot *frame, const Field *f) {
    Slot *member = &frame[f->oneof];
    if (member->v.i == (int64_t)f->number) return;
    if (member->v.i) {
        const Field *g = find_field(pg, (uint32_t)member->v.i);
        if (g && g->action == A_SLOT) {
            frame[g->slot].set = 0;
        } else if (g && g->action == A_INLINE) {
            const Prog *sub = &pr->progs[g->sub];
            memset(frame + g->slot, 0, sizeof(Slot) * (size_t)(1 + sub->nslots));
            if (sub->kind == P_STRUCT) {
                roll_back(pr->cols, sub->col, pr->cols[sub->col].length);
                if (pr->nmisfits) forget_misfits(pr);
            }
        }
    }
    member->v.i = f->number;
}

static int add_entry(Program *pr, Slot *map, const Slot *key, const uint8_t *s, Py_ssize_t n) {
    if (pr->nentries >= pr->entries_cap) {
        if (pr->entries_cap > INT32_MAX / 2) return NOMEM;
        Py_ssize_t cap = pr->entries_cap ? pr->entries_cap * 2 : 64;
        Entry *grown = PyMem_RawRealloc(pr->entries, sizeof(Entry) * (size_t)cap);
        if (!grown) return NOMEM;
        pr->entries = grown;
        pr->entries_cap = cap;
    }
    int32_t index = (int32_t)pr->nentries++;
    Entry *e = &pr->entries[index];
    e->next = -1;
    e->key_set = (int32_t)key->set;
    e->key = *key;
    e->p = s;
    e->n = n;
    if (!map->set) {
        map->v.m.head = index;
        map->set = 1;
    } else {
        pr->entries[map->v.m.tail].next = index;
    }
    map->v.m.tail = index;
    return OK;
}

/* ------------------------------------------------------------------ messages */

static int parse_fields(Program *pr, const Prog *pg, Slot *frame, const uint8_t *p,
                        const uint8_t *end, int depth, int *unknown);
static int finish(Program *pr, const Prog *pg, Slot *frame, int depth);

static HOT int closed_unknown(const Field *f, int64_t value) {
    if (f->nclosed < 0) return 0;
    int lo = 0, hi = f->nclosed - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (f->closed[mid] == value) return 0;
        if (f->closed[mid] < value) lo = mid + 1; else hi = mid - 1;
    }
    return 1;
}

/* A scalar's value as the runtime holds it, from its varint or fixed bytes. */
static HOT void scalar_value(int type, uint64_t raw, Slot *v) {
    switch (type) {
    case T_INT32: case T_ENUM: case T_SFIXED32:
        v->v.i = (int32_t)(uint32_t)raw;
        break;
    case T_UINT32: case T_FIXED32:
        v->v.i = (uint32_t)raw;
        break;
    case T_SINT32: {
        uint32_t u = (uint32_t)raw;
        v->v.i = (int32_t)((u >> 1) ^ (~(u & 1) + 1));
        break;
    }
    case T_SINT64:
        v->v.i = (int64_t)((raw >> 1) ^ (~(raw & 1) + 1));
        break;
    case T_BOOL:
        v->v.i = raw != 0;
        break;
    case T_FLOAT: {
        uint32_t bits = (uint32_t)raw;
        float f;
        memcpy(&f, &bits, 4);
        v->v.d = (double)f;
        break;
    }
    case T_DOUBLE:
        memcpy(&v->v.d, &raw, 8);
        break;
    default:  /* int64, uint64, fixed64, sfixed64 */
        v->v.i = (int64_t)raw;
    }
}

/* A scalar value read: kept, appended, or (skipped) checked only. */
static HOT int store(Program *pr, const Prog *pg, Slot *frame, const Field *f, const Slot *v,
                     int *unknown) {
    if (f->nclosed >= 0 && closed_unknown(f, v->v.i)) {  /* the runtime keeps it as unknown */
        if (unknown) *unknown = 1;
        return OK;
    }
    switch (f->action) {
    case A_SLOT:
        if (f->oneof >= 0) switch_oneof(pr, pg, frame, f);
        frame[f->slot].v = v->v;
        frame[f->slot].set = 1;
        return OK;
    case A_APPEND:
        return append_conv(pr, &f->conv, f->col, v);
    default:
        if (frame && f->oneof >= 0) switch_oneof(pr, pg, frame, f);
        return OK;
    }
}

static HOT int fixed_width(int type) {
    switch (type) {
    case T_FIXED32: case T_SFIXED32: case T_FLOAT: return 4;
    case T_FIXED64: case T_SFIXED64: case T_DOUBLE: return 8;
    }
    return 0;
}

static HOT int wire_type_of(int type) {
    switch (type) {
    case T_STRING: case T_BYTES: case T_MESSAGE: return WT_LEN;
    }
    int width = fixed_width(type);
    return width == 4 ? WT_I32 : width == 8 ? WT_I64 : WT_VARINT;
}

/* A known field's value at the cursor (its wire type checked). */
static int field_value(Program *pr, const Prog *pg, Slot *frame, const Field *f, int wt,
                       const uint8_t **pp, const uint8_t *end, int depth, int *unknown) {
    const uint8_t *s;
    Py_ssize_t n;
    Slot v;
    if (f->type == T_STRING || f->type == T_BYTES) {
        if (read_span(pp, end, &s, &n) != OK) return corrupt(pr);
        if (f->utf8 && !valid_utf8(s, n)) return fail(pr, ROW_UTF8);
        v.v.s.p = s;
        v.v.s.n = n;
        return store(pr, pg, frame, f, &v, unknown);
    }
    if (f->type == T_MESSAGE) {
        if (read_span(pp, end, &s, &n) != OK) return corrupt(pr);
        if (depth - 1 < 0) return fail(pr, ROW_DEPTH);
        const Prog *sub = &pr->progs[f->sub];
        switch (f->action) {
        case A_INLINE: {
            if (f->oneof >= 0) switch_oneof(pr, pg, frame, f);
            frame[f->slot].set = 1;
            return parse_fields(pr, sub, frame + f->slot + 1, s, s + n, depth - 1, NULL);
        }
        case A_APPEND_MSG: {
            Py_ssize_t top = pr->stack_top;
            Slot *element = push_frame(pr, sub->nslots);
            if (!element) return NOMEM;
            int r = parse_fields(pr, sub, element, s, s + n, depth - 1, NULL);
            if (r == OK) r = finish(pr, sub, element, depth - 1);
            pr->stack_top = top;
            return r;
        }
        case A_MAP: {  /* the entry's key, and whether it holds an unknown field */
            Py_ssize_t top = pr->stack_top;
            Slot *entry = push_frame(pr, sub->nslots);
            if (!entry) return NOMEM;
            int dropped = 0;
            int r = parse_fields(pr, sub, entry, s, s + n, depth - 1, &dropped);
            if (r == OK && !dropped) r = add_entry(pr, &frame[f->slot], &entry[0], s, n);
            pr->stack_top = top;
            return r;
        }
        default:
            if (frame && f->oneof >= 0) switch_oneof(pr, pg, frame, f);
            return parse_fields(pr, sub, NULL, s, s + n, depth - 1, NULL);
        }
    }
    int width = fixed_width(f->type);
    if (wt == WT_LEN) {  /* packed */
        if (read_span(pp, end, &s, &n) != OK) return corrupt(pr);
        const uint8_t *q = s, *qend = s + n;
        if (width) {
            if (n % width) return corrupt(pr);
            for (; q < qend; q += width) {
                scalar_value(f->type, width == 4 ? load32(q) : load64(q), &v);
                int r = store(pr, pg, frame, f, &v, unknown);
                if (r != OK) return r;
            }
            return OK;
        }
        while (q < qend) {
            uint64_t raw;
            if (read_varint(&q, qend, &raw) != OK) return corrupt(pr);
            scalar_value(f->type, raw, &v);
            int r = store(pr, pg, frame, f, &v, unknown);
            if (r != OK) return r;
        }
        return OK;
    }
    uint64_t raw;
    if (width) {
        if (end - *pp < width) return corrupt(pr);
        raw = width == 4 ? load32(*pp) : load64(*pp);
        *pp += width;
    } else if (read_varint(pp, end, &raw) != OK) {
        return corrupt(pr);
    }
    scalar_value(f->type, raw, &v);
    return store(pr, pg, frame, f, &v, unknown);
}

/* A direct field's value replaced: its column cut back by the value it holds. */
static __attribute__((noinline)) void drop_last(Program *pr, const Tag *t) {
    roll_back(pr->cols, t->target, t->col->length - 1);
}

/* A direct field's value: the slot of a row appended to its column, or its value
 * replaced when the field came before (the last value wins). */
#define DIRECT_SLOT(t) do {                                                    \
        if (seen & (t)->mask) drop_last(pr, (t));                             \
        seen |= (t)->mask;                                                    \
    } while (0)

static HOT int direct_end(Column *col) {
    if (col->has_validity && buf_byte(&col->validity, 1) != OK) return NOMEM;
    col->length++;
    return OK;
}

/* The first null of a column in a run (append_validity's slots before it made valid). */
static __attribute__((noinline)) int first_null(Column *col) { return append_validity(col, 0); }

/* A null slot of a direct column with presence, its validity byte in room reserve_direct
 * made (a byte a row). */
static HOT int null_end_reserved(Column *col) {
    if (!col->has_validity) return first_null(col);
    col->validity.data[col->validity.len++] = 0;
    col->length++;
    return OK;
}

/* A null string of a direct column with presence (a proto3 optional string absent): its
 * offset and validity byte in room reserve_direct made. */
static HOT int null_text_reserved(Column *col) {
    if (col->data.len > INT32_MAX) return NOMEM;  /* past Arrow's int32 offsets */
    int32_t offset = (int32_t)col->data.len;
    PUT_RESERVED(&col->offsets, &offset, 4);
    return null_end_reserved(col);
}

/* direct_end for a column that never has a validity buffer (Step's never_null). */
static HOT int never_null_end(Column *col) {
    col->length++;
    return OK;
}

static __attribute__((noinline)) const uint8_t *varint_slow(const uint8_t *p, const uint8_t *end,
                                                            uint64_t *out) {
    return read_varint(&p, end, out) == OK ? p : NULL;
}

/* A varint at p (before end): the byte after it, its value in *out; NULL when corrupt.
 * One of at most 8 bytes with 8 bytes to read is taken in one load, without a branch per
 * byte: the first byte without its high bit ends it, and the 7-bit groups are packed
 * together in three steps. */
static HOT const uint8_t *read_varint_at(const uint8_t *p, const uint8_t *end, uint64_t *out) {
    if (p < end && *p < 0x80) {
        *out = *p;
        return p + 1;
    }
    if (end - p >= 8) {
        uint64_t x = load64(p), stops = ~x & 0x8080808080808080ULL;
        if (stops) {
            x &= (stops ^ (stops - 1)) & 0x7f7f7f7f7f7f7f7fULL;  /* its bytes, their 7 bits */
            x = (x & 0x007f007f007f007fULL) | (x & 0x7f007f007f007f00ULL) >> 1;
            x = (x & 0x00003fff00003fffULL) | (x & 0x3fff00003fff0000ULL) >> 2;
            x = (x & 0x000000000fffffffULL) | (x & 0x0fffffff00000000ULL) >> 4;
            *out = x;
            return p + (__builtin_ctzll(stops) >> 3) + 1;
        }
    }
    return varint_slow(p, end, out);
}

/* Whether n bytes at s are strict UTF-8, loading whole words where `limit` (the end of
 * what may be read) leaves room: most strings are short and ASCII. */
static HOT int utf8_within(const uint8_t *s, Py_ssize_t n, const uint8_t *limit) {
    if (n <= 8 && limit - s >= 8) {
        uint64_t x = load64(s) & (n == 8 ? ~(uint64_t)0 : ((uint64_t)1 << (8 * n)) - 1);
        if (!(x & 0x8080808080808080ULL)) return 1;
    }
    return valid_utf8(s, n);
}

/* n bytes at s appended to binary column `col`: short ones in one 16-byte move where the
 * source (before `limit`) and the buffer have the room. */
static HOT int append_span(Column *col, const uint8_t *s, Py_ssize_t n, const uint8_t *limit) {
    Buf *b = &col->data;
    if (n <= 16 && limit - s >= 16 && b->cap - b->len >= 16) {
        memcpy(b->data + b->len, s, 16);
        b->len += n;
    } else if (buf_put(b, s, n) != OK) {
        return NOMEM;
    }
    if (end_offset(col, b->len) != OK) return NOMEM;
    return direct_end(col);
}

#ifndef __SSE2__
/* The high bits of a string's bytes (n <= 16) within its 16-byte load, by n: where any
 * is set, it is not ASCII. */
static const uint64_t HIGH_BITS[17][2] = {
    {0x0ULL, 0x0ULL}, {0x80ULL, 0x0ULL},
    {0x8080ULL, 0x0ULL}, {0x808080ULL, 0x0ULL},
    {0x80808080ULL, 0x0ULL}, {0x8080808080ULL, 0x0ULL},
    {0x808080808080ULL, 0x0ULL}, {0x80808080808080ULL, 0x0ULL},
    {0x8080808080808080ULL, 0x0ULL}, {0x8080808080808080ULL, 0x80ULL},
    {0x8080808080808080ULL, 0x8080ULL}, {0x8080808080808080ULL, 0x808080ULL},
    {0x8080808080808080ULL, 0x80808080ULL}, {0x8080808080808080ULL, 0x8080808080ULL},
    {0x8080808080808080ULL, 0x808080808080ULL}, {0x8080808080808080ULL, 0x80808080808080ULL},
    {0x8080808080808080ULL, 0x8080808080808080ULL}
};
#endif

/* append_text's `check`: the string is checked as UTF-8 (a mask of a short string's bytes
 * whose high bits count, as append_text shifts them), or 0. */
#define UTF8_CHECKED 0xffffu

/* A string's bytes and offset appended as append_span does (its slot's validity and
 * length left to the caller), checked as UTF-8 first when `check` (UTF8_CHECKED): a short
 * one is loaded once, its high bits tested (ASCII) as it is copied. With `reserved`, its
 * offset goes to room reserve_direct made. FAIL: not UTF-8 (nothing appended). */
static HOT int append_text(Column *col, const uint8_t *s, Py_ssize_t n, const uint8_t *limit,
                           unsigned check, int reserved) {
    Buf *b = &col->data;
    Py_ssize_t len = b->len;  /* held here: the byte stores would have it loaded again */
    if (n <= 16 && (uintptr_t)s + 16 <= (uintptr_t)limit && b->cap - len >= 16) {
#ifdef __SSE2__
        /* one register: its bytes' high bits as a mask, bit k of byte k, shifted so that
         * the string's own are the low 16 bits' top n (the rest shifted past them) */
        __m128i bytes = _mm_loadu_si128((const __m128i *)s);
        if (((unsigned)_mm_movemask_epi8(bytes) << (16 - n)) & check) {
            if (!strict_utf8(s, n)) return FAIL;  /* not ASCII */
        }
        _mm_storeu_si128((__m128i *)(b->data + len), bytes);
#else
        uint64_t lo = load64(s), hi = load64(s + 8);
        if (check && ((lo & HIGH_BITS[n][0]) | (hi & HIGH_BITS[n][1]))) {
            if (!strict_utf8(s, n)) return FAIL;  /* not ASCII */
        }
        char *to = b->data + len;
        memcpy(to, &lo, 8);
        memcpy(to + 8, &hi, 8);
#endif
        len += n;
        b->len = len;
    } else {
        if (check && !strict_utf8(s, n)) return FAIL;
        if (buf_put(b, s, n) != OK) return NOMEM;
        len = b->len;
    }
    if (reserved) {
        if (len > INT32_MAX) return NOMEM;  /* past Arrow's int32 offsets */
        int32_t offset = (int32_t)len;
        PUT_RESERVED(&col->offsets, &offset, 4);
    } else if (end_offset(col, len) != OK) {
        return NOMEM;
    }
    return OK;
}

/* The length-delimited value at p in a row whose byte at `end` may be read (parse_rows's):
 * [*s, *s + *n); the byte after it, NULL when corrupt (a length byte read at `end` fails
 * the test of the value's end). */
static HOT const uint8_t *span_in_row(const uint8_t *p, const uint8_t *end, const uint8_t **s,
                                      Py_ssize_t *n) {
    if (*p < 0x80) {
        Py_ssize_t size = *p++;
        /* as addresses: one sum, its end's test and the byte after it */
        if ((uintptr_t)p + (size_t)size > (uintptr_t)end) return NULL;
        *s = p;
        *n = size;
        return p + size;
    }
    return read_span(&p, end, s, n) == OK ? p : NULL;
}

/* span_in_row where the byte at `end` may not be read. */
static HOT const uint8_t *span_at(const uint8_t *p, const uint8_t *end, const uint8_t **s,
                                  Py_ssize_t *n) {
    return p < end ? span_in_row(p, end, s, n) : NULL;
}

/* A field's value at *pp, its tag read: a field of a common shape (F_*) by its tag, else
 * by its number, a known field of another wire type or an unknown one skipped. */
static HOT int field_at(Program *pr, const Prog *pg, Slot *frame, uint32_t tag,
                        const uint8_t **pp, const uint8_t *end, const uint8_t *limit, int depth,
                        int *unknown) {
    const uint8_t *p = *pp;
    if (tag < (uint32_t)pg->ntags && pg->tags[tag].op) {
        const Tag *t = &pg->tags[tag];
        const uint8_t *s;
        Py_ssize_t n;
        uint64_t raw;
        Slot *slot;
        switch (t->op) {
        case F_VARINT_SLOT:
            if (!(p = read_varint_at(p, end, &raw))) return corrupt(pr);
            slot = &frame[t->target];
            scalar_value(t->type, raw, slot);
            slot->set = 1;
            *pp = p;
            return OK;
        case F_I64_SLOT:
            if (end - p < 8) return corrupt(pr);
            slot = &frame[t->target];
            scalar_value(t->type, load64(p), slot);
            slot->set = 1;
            *pp = p + 8;
            return OK;
        case F_I32_SLOT:
            if (end - p < 4) return corrupt(pr);
            slot = &frame[t->target];
            scalar_value(t->type, load32(p), slot);
            slot->set = 1;
            *pp = p + 4;
            return OK;
        case F_SPAN_SLOT:
            if (!(p = span_at(p, end, &s, &n))) return corrupt(pr);
            if (t->utf8 && !utf8_within(s, n, limit)) return fail(pr, ROW_UTF8);
            slot = &frame[t->target];
            slot->v.s.p = s;
            slot->v.s.n = n;
            slot->set = 1;
            *pp = p;
            return OK;
        case F_SPAN_APPEND:
            if (!(p = span_at(p, end, &s, &n))) return corrupt(pr);
            if (t->utf8 && !utf8_within(s, n, limit)) return fail(pr, ROW_UTF8);
            *pp = p;
            return append_span(t->col, s, n, limit);
        }
        /* D_*: only the root's parse_root reads them */
    }
    uint32_t number = tag >> 3;
    int wt = (int)(tag & 7);
    if (number == 0) return corrupt(pr);
    const Field *f = find_field(pg, number);
    if (f && (wt == wire_type_of(f->type) || (wt == WT_LEN && f->packable)))
        return field_value(pr, pg, frame, f, wt, pp, end, depth, unknown);
    if (unknown) *unknown = 1;
    return skip_unknown(pr, number, wt, pp, end, depth);
}

/* A tag at *pp: most are one byte. */
static HOT int tag_at(Program *pr, const uint8_t **pp, const uint8_t *end, uint32_t *tag) {
    const uint8_t *p = *pp;
    if (*p < 0x80) {  /* the caller checked p < end */
        *tag = *p;
        *pp = p + 1;
        return OK;
    }
    uint64_t wide;
    if (read_varint5(pp, end, UINT32_MAX, &wide) != OK) return corrupt(pr);
    *tag = (uint32_t)wide;
    return OK;
}

/* The fields of one message (or of one occurrence of it: occurrences merge into the same
 * frame); `frame` is NULL for a program that checks only. `unknown` (a map entry's) is set
 * when a field is unknown to the program. */
static int parse_fields(Program *pr, const Prog *pg, Slot *frame, const uint8_t *p,
                        const uint8_t *end, int depth, int *unknown) {
    const uint8_t *limit = pr->limit;
    while (p < end) {
        uint32_t tag;
        if (tag_at(pr, &p, end, &tag) != OK) return FAIL;
        int r = field_at(pr, pg, frame, tag, &p, end, limit, depth, unknown);
        if (r != OK) return r;
    }
    return OK;
}

static HOT int finish_root(Program *pr, const Prog *pg, Slot *frame, uint64_t seen);
static int read_indexes(Program *pr, const uint8_t **pp, const uint8_t *end, Py_ssize_t size);
static int append_absent(const Emit *e);
static HOT int absent(const Emit *e);

/* A field of the root that is not direct (kept out of parse_root's loop). */
static __attribute__((noinline)) int root_field(Program *pr, const Prog *pg, Slot *frame,
                                                uint32_t tag, const uint8_t **pp,
                                                const uint8_t *end) {
    return field_at(pr, pg, frame, tag, pp, end, pr->limit, MAX_DEPTH, NULL);
}

static int parse_rows(Program *pr, const uint8_t *data, const int64_t *first,
                      const int64_t *last, Py_ssize_t row, Py_ssize_t count, uint8_t *codes);

/* parse_rows's values each end with a jump of their own to the next step's label, which
 * GCC would otherwise merge into one shared jump: one indirect jump a site is what lets
 * the branch predictor learn a message's order, and saves the jump to the shared one. */
#if defined(__GNUC__) && !defined(__clang__)
#define SEPARATE_JUMPS __attribute__((optimize("no-crossjumping")))
#else
#define SEPARATE_JUMPS
#endif

/* Row `row`, payload [p, end), read by parse_rows from a copy followed by zero bytes: the
 * expected order reads the byte at a row's end as the next tag (no one-byte tag is below
 * 8, field numbers starting at 1), which a payload at its buffer's end, or followed by
 * another byte, does not give. */
static __attribute__((noinline)) int parse_copied_row(Program *pr, const uint8_t *p,
                                                      const uint8_t *end, Py_ssize_t row,
                                                      uint8_t *codes) {
    Py_ssize_t size = end - p;
    pr->copy.len = 0;
    if (size > PY_SSIZE_T_MAX - 16 || buf_reserve(&pr->copy, size + 16) != OK) return NOMEM;
    uint8_t *copy = (uint8_t *)pr->copy.data;
    if (size) memcpy(copy, p, (size_t)size);
    memset(copy + size, 0, 16);  /* room for the 16-byte loads of short strings too */
    const uint8_t *limit = pr->limit;
    const int64_t first = 0, last = size;
    pr->limit = copy + size + 16;
    int r = parse_rows(pr, copy, &first, &last, row, 1, codes);
    pr->limit = limit;
    return r;
}

/* The rows of a direct root (Prog's `direct`), row `row` and the `count` - 1 after it,
 * payload k at data[first[k]:last[k]], one code each in `codes` (a failed row rolled
 * back to a null), in one loop: OK, or NOMEM, which stops the run. A row's message
 * indexes, then its fields: the direct ones appended as they come (their bits in the
 * row's `seen`), repeated strings appended, the others read by root_field; then the
 * row's other values (finish_root). Dispatched by a table of labels (GCC's computed
 * goto): one indirect jump per field, no range checks.
 *
 * A row is read first in the expected order (Prog's steps): while each tag is the next
 * step's (or a later one's: the fields between are absent), its value goes to its column
 * with no lookup, no `seen` bit and no room to check (reserve_direct). Any other tag
 * leaves the order for the lookup by tag, for the rest of the row, with `seen` the steps
 * passed that were there. */
static SEPARATE_JUMPS int parse_rows(Program *pr, const uint8_t *data, const int64_t *first,
                      const int64_t *last, Py_ssize_t row, Py_ssize_t count, uint8_t *codes) {
    static const void *const ops[16] = {
        [0] = &&other, [F_VARINT_SLOT] = &&other, [F_I64_SLOT] = &&other,
        [F_I32_SLOT] = &&other, [F_SPAN_SLOT] = &&other, [F_SPAN_APPEND] = &&span_append,
        [D_VARINT_I64] = &&varint_i64, [D_VARINT_CONV_I64] = &&varint_conv,
        [D_VARINT_I32] = &&varint_conv, [D_VARINT_BOOL] = &&varint_bool,
        [D_FIXED64] = &&fixed64, [D_FIXED32] = &&fixed32, [D_FIXED32_CONV] = &&fixed32_conv,
        [D_SPAN] = &&span, [D_SPAN + 1 ... 15] = &&other};
    static const void *const order_ops[2][16] = {{
        [0 ... 15] = &&order_left, [F_SPAN_APPEND] = &&order_span_append,
        [D_VARINT_I64] = &&order_varint_i64, [D_VARINT_CONV_I64] = &&order_varint_conv,
        [D_VARINT_I32] = &&order_varint_conv, [D_VARINT_BOOL] = &&order_varint_bool,
        [D_FIXED64] = &&order_fixed64, [D_FIXED32] = &&order_fixed32,
        [D_FIXED32_CONV] = &&order_fixed32_conv, [D_SPAN] = &&order_span}, {
        [0 ... 15] = &&order_left, [F_SPAN_APPEND] = &&order_span_append_valid,
        [D_VARINT_I64] = &&order_varint_i64_valid, [D_VARINT_CONV_I64] = &&order_varint_conv_valid,
        [D_VARINT_I32] = &&order_varint_conv_valid, [D_VARINT_BOOL] = &&order_varint_bool_valid,
        [D_FIXED64] = &&order_fixed64_valid, [D_FIXED32] = &&order_fixed32_valid,
        [D_FIXED32_CONV] = &&order_fixed32_conv_valid, [D_SPAN] = &&order_span_valid}};
    const Prog *pg = pr->root_prog;
    Slot *frame = pr->stack;
    const uint8_t *p, *end;
    Py_ssize_t k = 0;
    int r;
    uint64_t seen = 0;  /* set as the order is left: the labels share the computed gotos */
    const Step *step;
    const uint8_t *limit = pr->limit;
    const Tag *tags = pg->tags, *t = tags;  /* set before use: the order's labels share */
    const uint32_t ntags = (uint32_t)pg->ntags;  /* the computed gotos' targets */
    uint32_t tag = 0;
    Column *col = NULL;  /* set before use (the labels share the computed gotos) */
    const uint8_t *s;
    Py_ssize_t n;
    uint64_t raw;

    /* a one-byte tag indexes the table (it has every one); a longer one is read apart */
#define NEXT() do {                                                             \
        if (p >= end) goto done;                                               \
        tag = *p;                                                              \
        if (tag >= 0x80) goto wide;                                            \
        p++;                                                                   \
        t = &tags[tag];                                                        \
        col = t->col;                                                          \
        goto *ops[t->op & 15];                                                 \
    } while (0)
    /* the next field in the expected order: the step's tag, its value's label */
#define ORDER_NEXT() do {                                                       \
        if (*p != step->tag) goto order_miss;  /* the row's end too */         \
        p++;                                                                   \
        col = step->col;                                                       \
        goto *step->label;                                                     \
    } while (0)
    /* a row fails: its code kept, the columns cut back, and a null in its place */
#define ROW_FAILS(why) do { pr->code = (why); goto row_failed; } while (0)

    if (!data) {  /* the program's compile: each step's label, jumped to with no table */
        for (Step *each = pg->steps; each->tag != 0x100; each++) {
            int int32 = each->op == D_VARINT_I32 && (each->type == T_INT32 || each->type == T_ENUM);
            each->label = int32 ? (each->never_null ? &&order_varint_i32_valid : &&order_varint_i32)
                                : order_ops[each->never_null != 0][each->op & 15];
            const Emit *e = each->emit;
            each->absent = !e ? &&order_absent_none
                : e->presence && e->fast == X_BYTES ? &&order_absent_null_text : &&order_absent;
        }
        return OK;
    }
    /* A row leaves the run's working memory as it found it, but for the map entries: a
     * failed row's is reset (row_failed), a row's misfits fail it, and frames pushed are
     * popped. */
    pr->nmisfits = 0;
    pr->stack_top = 0;
    pr->norder = 0;
    memset(codes + row, ROW_OK, (size_t)count);  /* a failed row's code replaces its own */
    /* most payloads: [0], the first message, and no frame to clear */
    const int plain = pr->first_message && !pg->clear_frame;
next_row:
    if (k == count) return OK;
    p = data + first[k];
    end = data + last[k];
    if (end >= limit || *end >= 8) {  /* the order's tag tests read the byte at the end */
        if ((r = parse_copied_row(pr, p, end, row + k, codes)) != OK) return r;
        k++;
        goto next_row;
    }
    pr->nentries = 0;
    step = pg->steps;
    if (plain && p < end && *p == 0) {
        p++;
        ORDER_NEXT();
    }
    if (p < end && *p == 0 && pr->first_message) {
        p++;  /* [0], the first message */
    } else if (read_indexes(pr, &p, end, end - p) != OK) {
        goto row_failed;
    }
    if (pg->clear_frame) {
        memset(frame, 0, sizeof(Slot) * (size_t)pg->nslots);
        pr->stack_top = pg->nslots;  /* `need` sizes the stack */
    }
    ORDER_NEXT();

order_miss:
    if (p >= end) goto order_done;
    /* a step before the byte's: a field the row does not hold, its null or default now
     * (one given later, out of the order, replaces it as a value given again) */
    if (step->tag < *p) goto *step->absent;
    if (step->tag == *p) {
        p++;
        col = step->col;
        goto *step->label;
    }
order_left:  /* a tag out of the order: the rest of the row by the lookup */
    seen = step->before;
    NEXT();
order_done:
    seen = step->before;
    goto done;
order_absent_none:  /* a repeated field's: its list ends with the row */
    step++;
    goto order_miss;
order_absent_null_text:  /* a proto3 optional string's null */
    if (null_text_reserved(step->col) != OK) return NOMEM;
    step++;
    goto order_miss;
order_absent:
    if ((r = absent(step->emit)) != OK) return r;
    step++;
    goto order_miss;
    /* The expected order's values, twice: their slots ended by direct_end, and (labels
     * ending in _valid) by never_null_end, for the columns that never take a null; each
     * then jumps to the next step's label itself (SEPARATE_JUMPS). */
#define ORDER_APPENDED(END) do {                                                \
        if (END(col) != OK) return NOMEM;                                      \
        step++;                                                                \
        ORDER_NEXT();                                                          \
    } while (0)
#define ORDER_STEPS(V, END)                                                                  \
order_varint_i64##V:                                                                         \
    if (!(p = read_varint_at(p, end, &raw))) ROW_FAILS(ROW_CORRUPT);                         \
    PUT_RESERVED(&col->values, &raw, 8);                                                     \
    ORDER_APPENDED(END);                                                                     \
order_varint_conv##V: {                                                                      \
        if (!(p = read_varint_at(p, end, &raw))) ROW_FAILS(ROW_CORRUPT);                     \
        Slot v;                                                                              \
        scalar_value(step->type, raw, &v);                                                   \
        if (step->op == D_VARINT_I32) {                                                      \
            int32_t x = (int32_t)v.v.i;                                                      \
            PUT_RESERVED(&col->values, &x, 4);                                               \
        } else {                                                                             \
            PUT_RESERVED(&col->values, &v.v.i, 8);                                           \
        }                                                                                    \
        ORDER_APPENDED(END);                                                                 \
    }                                                                                        \
order_varint_i32##V: {  /* an int32 or enum: its low 32 bits, as scalar_value takes them */  \
        if (!(p = read_varint_at(p, end, &raw))) ROW_FAILS(ROW_CORRUPT);                     \
        int32_t x = (int32_t)(uint32_t)raw;                                                  \
        PUT_RESERVED(&col->values, &x, 4);                                                   \
        ORDER_APPENDED(END);                                                                 \
    }                                                                                        \
order_varint_bool##V:                                                                        \
    if (!(p = read_varint_at(p, end, &raw))) ROW_FAILS(ROW_CORRUPT);                         \
    col->values.data[col->values.len++] = raw != 0;                                          \
    ORDER_APPENDED(END);                                                                     \
order_fixed64##V:  /* the value's end as an address: its test, and the byte after it */      \
    if ((uintptr_t)p + 8 > (uintptr_t)end) ROW_FAILS(ROW_CORRUPT);                           \
    PUT_RESERVED(&col->values, p, 8);                                                        \
    p += 8;                                                                                  \
    ORDER_APPENDED(END);                                                                     \
order_fixed32##V:                                                                            \
    if ((uintptr_t)p + 4 > (uintptr_t)end) ROW_FAILS(ROW_CORRUPT);                           \
    PUT_RESERVED(&col->values, p, 4);                                                        \
    p += 4;                                                                                  \
    ORDER_APPENDED(END);                                                                     \
order_fixed32_conv##V: {                                                                     \
        if ((uintptr_t)p + 4 > (uintptr_t)end) ROW_FAILS(ROW_CORRUPT);                       \
        Slot v;                                                                              \
        scalar_value(step->type, load32(p), &v);                                             \
        p += 4;                                                                              \
        PUT_RESERVED(&col->values, &v.v, 8);                                                 \
        ORDER_APPENDED(END);                                                                 \
    }                                                                                        \
order_span##V:                                                                               \
    if (!(p = span_in_row(p, end, &s, &n))) ROW_FAILS(ROW_CORRUPT);                          \
    r = append_text(col, s, n, limit, step->checked, 1);                                     \
    if (r == FAIL) ROW_FAILS(ROW_UTF8);                                                      \
    if (r != OK) return r;                                                                   \
    ORDER_APPENDED(END);                                                                     \
order_span_append##V:  /* a repeated string: the step stays for its next element */         \
    if (!(p = span_in_row(p, end, &s, &n))) ROW_FAILS(ROW_CORRUPT);                          \
    r = append_text(col, s, n, limit, step->checked, 0);                                     \
    if (r == FAIL) ROW_FAILS(ROW_UTF8);                                                      \
    if (r != OK) return r;                                                                   \
    if (END(col) != OK) return NOMEM;                                                        \
    ORDER_NEXT();

    ORDER_STEPS(, direct_end)
    ORDER_STEPS(_valid, never_null_end)
#undef ORDER_STEPS
#undef ORDER_APPENDED

wide:
    if (tag_at(pr, &p, end, &tag) != OK) goto row_failed;
    t = tag < ntags ? &tags[tag] : tags;
    col = t->col;
    goto *ops[t->op & 15];

other: {
        const uint8_t *at = p;  /* p itself stays in a register */
        r = root_field(pr, pg, frame, tag, &at, end);
        if (r == FAIL) goto row_failed;
        if (r != OK) return r;
        p = at;
        NEXT();
    }
span_append: {
        if (!(p = span_at(p, end, &s, &n))) ROW_FAILS(ROW_CORRUPT);
        r = append_text(col, s, n, limit, t->utf8 ? UTF8_CHECKED : 0, 0);
        if (r == FAIL) ROW_FAILS(ROW_UTF8);
        if (r != OK) return r;
        if (direct_end(col) != OK) return NOMEM;
        NEXT();
    }
varint_i64:
    if (!(p = read_varint_at(p, end, &raw))) ROW_FAILS(ROW_CORRUPT);
    DIRECT_SLOT(t);
    PUT_FIXED(&col->values, &raw, 8);
    goto appended;
varint_conv: {
        if (!(p = read_varint_at(p, end, &raw))) ROW_FAILS(ROW_CORRUPT);
        DIRECT_SLOT(t);
        Slot v;
        scalar_value(t->type, raw, &v);
        if (t->op == D_VARINT_I32) {
            int32_t x = (int32_t)v.v.i;
            PUT_FIXED(&col->values, &x, 4);
        } else {
            PUT_FIXED(&col->values, &v.v.i, 8);
        }
        goto appended;
    }
varint_bool:
    if (!(p = read_varint_at(p, end, &raw))) ROW_FAILS(ROW_CORRUPT);
    DIRECT_SLOT(t);
    if (buf_byte(&col->values, raw != 0) != OK) return NOMEM;
    goto appended;
fixed64:
    if (end - p < 8) ROW_FAILS(ROW_CORRUPT);
    DIRECT_SLOT(t);
    PUT_FIXED(&col->values, p, 8);
    p += 8;
    goto appended;
fixed32:
    if (end - p < 4) ROW_FAILS(ROW_CORRUPT);
    DIRECT_SLOT(t);
    PUT_FIXED(&col->values, p, 4);
    p += 4;
    goto appended;
fixed32_conv: {  /* to 8 bytes: float to double, 32-bit ints widened */
        if (end - p < 4) ROW_FAILS(ROW_CORRUPT);
        DIRECT_SLOT(t);
        Slot v;
        scalar_value(t->type, load32(p), &v);
        p += 4;
        PUT_FIXED(&col->values, &v.v, 8);
        goto appended;
    }
span: {
        if (!(p = span_at(p, end, &s, &n))) ROW_FAILS(ROW_CORRUPT);
        if (seen & t->mask) {  /* a value again: checked before the first is dropped */
            if (t->utf8 && !utf8_within(s, n, limit)) ROW_FAILS(ROW_UTF8);
            drop_last(pr, t);
        }
        seen |= t->mask;
        r = append_text(col, s, n, limit, t->utf8 ? UTF8_CHECKED : 0, 0);
        if (r == FAIL) ROW_FAILS(ROW_UTF8);
        if (r != OK) return r;
        if (direct_end(col) != OK) return NOMEM;
        NEXT();
    }
appended:
    if (direct_end(col) != OK) return NOMEM;
    NEXT();
done:
    r = finish_root(pr, pg, frame, seen);
    if (r == OK && pr->nmisfits) ROW_FAILS(ROW_MISFIT);
    if (r == FAIL) goto row_failed;
    if (r != OK) return r;
    k++;
    goto next_row;
row_failed:
    codes[row + k] = (uint8_t)pr->code;
    roll_back(pr->cols, 0, row + k);
    if (append_null(pr, 0) != OK) return NOMEM;
    pr->nmisfits = 0;
    pr->stack_top = 0;
    pr->norder = 0;
    k++;
    goto next_row;
#undef NEXT
#undef ORDER_NEXT
#undef ROW_FAILS
}

static int compare_keys(int type, const Entry *a, const Entry *b) {
    if (type == T_STRING || type == T_BYTES) {
        Py_ssize_t an = a->key_set ? a->key.v.s.n : 0, bn = b->key_set ? b->key.v.s.n : 0;
        Py_ssize_t n = an < bn ? an : bn;
        int c = n ? memcmp(a->key.v.s.p, b->key.v.s.p, (size_t)n) : 0;
        if (c) return c;
        return an < bn ? -1 : an > bn;
    }
    int64_t x = a->key_set ? a->key.v.i : 0, y = b->key_set ? b->key.v.i : 0;
    if (is_unsigned64(type)) return (uint64_t)x < (uint64_t)y ? -1 : (uint64_t)x > (uint64_t)y;
    return x < y ? -1 : x > y;
}

/* Entry indexes sorted by key, stably (a merge sort; `scratch` as long). */
static void sort_entries(const Entry *entries, int type, int32_t *order, int32_t *scratch,
                         Py_ssize_t n) {
    if (n < 2) return;
    if (n <= 8) {
        for (Py_ssize_t i = 1; i < n; i++) {
            int32_t x = order[i];
            Py_ssize_t j = i;
            while (j > 0 && compare_keys(type, &entries[order[j - 1]], &entries[x]) > 0) {
                order[j] = order[j - 1];
                j--;
            }
            order[j] = x;
        }
        return;
    }
    Py_ssize_t half = n / 2;
    sort_entries(entries, type, order, scratch, half);
    sort_entries(entries, type, order + half, scratch, n - half);
    Py_ssize_t i = 0, j = half, k = 0;
    while (i < half && j < n)
        scratch[k++] = compare_keys(type, &entries[order[j]], &entries[order[i]]) < 0
            ? order[j++] : order[i++];
    while (i < half) scratch[k++] = order[i++];
    while (j < n) scratch[k++] = order[j++];
    memcpy(order, scratch, sizeof(int32_t) * (size_t)n);
}

static int reserve_order(Program *pr, Py_ssize_t more) {
    if (pr->norder + more <= pr->order_cap) return OK;
    Py_ssize_t cap = pr->order_cap ? pr->order_cap : 64;
    while (cap < pr->norder + more) {
        if (cap > PY_SSIZE_T_MAX / 8) return NOMEM;
        cap *= 2;
    }
    int32_t *grown = PyMem_RawRealloc(pr->order, sizeof(int32_t) * (size_t)cap);
    if (!grown) return NOMEM;
    pr->order = grown;
    pr->order_cap = cap;
    return OK;
}

/* A map's entries appended: sorted by key, the last entry of a key kept, each read again
 * into the key and value columns. */
static int emit_map(Program *pr, const Emit *e, const Slot *map, int depth) {
    Py_ssize_t base = pr->norder, count = 0;
    if (map->set) {
        for (int32_t k = map->v.m.head; k >= 0; k = pr->entries[k].next) count++;
        if (reserve_order(pr, 2 * count) != OK) return NOMEM;
        Py_ssize_t at = base;
        for (int32_t k = map->v.m.head; k >= 0; k = pr->entries[k].next) pr->order[at++] = k;
        sort_entries(pr->entries, e->key_type, pr->order + base, pr->order + base + count, count);
        Py_ssize_t kept = 0;  /* of equal keys, the last */
        for (Py_ssize_t i = 0; i < count; i++) {
            if (i + 1 < count && compare_keys(e->key_type, &pr->entries[pr->order[base + i]],
                                              &pr->entries[pr->order[base + i + 1]]) == 0)
                continue;
            pr->order[base + kept++] = pr->order[base + i];
        }
        count = kept;
        pr->norder = base + count;
    }
    const Prog *sub = &pr->progs[e->sub];
    for (Py_ssize_t i = 0; i < count; i++) {
        const Entry *entry = &pr->entries[pr->order[base + i]];
        const uint8_t *s = entry->p;
        Py_ssize_t n = entry->n;
        Py_ssize_t top = pr->stack_top;
        Slot *frame = push_frame(pr, sub->nslots);
        if (!frame) return NOMEM;
        int r = parse_fields(pr, sub, frame, s, s + n, depth - 1, NULL);
        if (r == OK) r = finish(pr, sub, frame, depth - 1);
        pr->stack_top = top;
        if (r != OK) return r;
    }
    pr->norder = base;
    return list_end(pr, e->col);
}

static int append_micros(Program *pr, const Emit *e, const Slot *frame) {
    int64_t seconds = frame[e->slot].set ? frame[e->slot].v.i : e->dflt.v.i;
    int64_t nanos = frame[e->slot2].set ? frame[e->slot2].v.i : e->dflt2.v.i;
    int64_t micros = nanos / 1000, total;
    if (nanos % 1000 && nanos < 0) micros--;  /* Python's floor division */
    if (__builtin_mul_overflow(seconds, (int64_t)1000000, &total) ||
        __builtin_add_overflow(total, micros, &total))
        return misfit(pr, e->col);
    return append8(&pr->cols[e->col], &total);
}

/* An E_SLOT's value of a common shape (X_*) appended to its column as it is. */
static HOT int append_fast(Column *col, int fast, const Slot *v) {
    switch (fast) {
    case X_I64:
        PUT_FIXED(&col->values, &v->v.i, 8);
        break;
    case X_I32: {
        int32_t x = (int32_t)v->v.i;
        PUT_FIXED(&col->values, &x, 4);
        break;
    }
    case X_F64:
        PUT_FIXED(&col->values, &v->v.d, 8);
        break;
    case X_BOOL:
        if (buf_byte(&col->values, v->v.i != 0) != OK) return NOMEM;
        break;
    case X_BYTES:
        if (buf_put(&col->data, v->v.s.p, v->v.s.n) != OK) return NOMEM;
        if (end_offset(col, col->data.len) != OK) return NOMEM;
        break;
    }
    return append_validity(col, 1);
}

/* A direct field's value when the row does not hold it: its null (an empty value, not
 * valid) or its default, in room reserve_direct made (a default string's bytes aside). */
static __attribute__((noinline)) int append_absent(const Emit *e) {
    static const Slot empty;
    Column *col = e->column;
    const Slot *v = e->presence ? &empty : &e->dflt;
    switch (e->fast) {
    case X_I64:
        PUT_RESERVED(&col->values, &v->v.i, 8);
        break;
    case X_F64:
        PUT_RESERVED(&col->values, &v->v.d, 8);
        break;
    case X_I32: {
        int32_t x = (int32_t)v->v.i;
        PUT_RESERVED(&col->values, &x, 4);
        break;
    }
    case X_BOOL:
        col->values.data[col->values.len++] = v->v.i != 0;
        break;
    case X_BYTES: {
        if (v->v.s.n && buf_put(&col->data, v->v.s.p, v->v.s.n) != OK) return NOMEM;
        if (col->data.len > INT32_MAX) return NOMEM;  /* past Arrow's int32 offsets */
        int32_t offset = (int32_t)col->data.len;
        PUT_RESERVED(&col->offsets, &offset, 4);
        break;
    }
    }
    return e->presence ? append_validity(col, 0) : direct_end(col);
}

/* append_absent's commonest shapes without its call and switch: a missing optional
 * string's null, and a proto3 bool's false (which the writer leaves out). */
static HOT int absent(const Emit *e) {
    Column *col = e->column;
    if (e->presence) {
        if (e->fast != X_BYTES) return append_absent(e);
        return null_text_reserved(col);
    }
    if (e->fast != X_BOOL) return append_absent(e);
    col->values.data[col->values.len++] = e->dflt.v.i != 0;
    return direct_end(col);
}

static int finish_emit(Program *pr, const Emit *e, Slot *frame, int depth) {
    int r = OK;
    switch (e->op) {
    case E_SLOT: {
        const Slot *v = &frame[e->slot];
        if (!v->set) {
            if (e->presence) return append_null(pr, e->col);
            v = &e->dflt;
        }
        if (e->fast) return append_fast(e->column, e->fast, v);
        return append_conv(pr, &e->conv, e->col, v);
    }
    case E_SLOT_LIST: {
        const Slot *v = &frame[e->slot];
        if (v->set || !e->presence)
            r = append_conv(pr, &e->conv, pr->cols[e->col].children[0], v->set ? v : &e->dflt);
        return r == OK ? list_end(pr, e->col) : r;
    }
    case E_INLINE:
        if (frame[e->slot].set || !e->presence)
            return finish(pr, &pr->progs[e->sub], frame + e->slot + 1, depth - 1);
        return append_null(pr, e->col);
    case E_INLINE_LIST:
        if (frame[e->slot].set || !e->presence)
            r = finish(pr, &pr->progs[e->sub], frame + e->slot + 1, depth - 1);
        return r == OK ? list_end(pr, e->col) : r;
    case E_LIST: case E_CONST_EMPTY:
        return list_end(pr, e->col);
    case E_MAP:
        return emit_map(pr, e, &frame[e->slot], depth);
    case E_CONST_NULL:
        return append_null(pr, e->col);
    case E_CONST:
        return append_const(pr, e->col, &e->dflt);
    case E_MICROS:
        return append_micros(pr, e, frame);
    }
    return OK;
}

/* A message's values appended, in the reader's field order (then the struct itself). */
static int finish(Program *pr, const Prog *pg, Slot *frame, int depth) {
    const Emit *e = pg->emits, *last = pg->emits + pg->nemits;
    for (; e < last; e++) {
        int r = finish_emit(pr, e, frame, depth);
        if (r != OK) return r;
    }
    if (pg->kind == P_STRUCT) return append_validity(&pr->cols[pg->col], 1);
    return OK;
}

/* A list of the root's repeated field ended (E_LIST), its offset in room reserve_direct
 * made. */
static HOT int list_end_reserved(Column *col, const Column *child) {
    if (child->length > INT32_MAX) return NOMEM;  /* past Arrow's int32 offsets */
    int32_t offset = (int32_t)child->length;
    PUT_RESERVED(&col->offsets, &offset, 4);
    return append_validity(col, 1);
}

/* The root's direct fields of `missing` take their null or default (kept out of
 * parse_rows's loop, as most rows hold every field the order does not pass). */
static __attribute__((noinline)) int fill_missing(const Prog *pg, uint64_t missing) {
    for (; missing; missing &= missing - 1) {
        int r = absent(pg->direct_emits[__builtin_ctzll(missing)]);
        if (r != OK) return r;
    }
    return OK;
}

/* The root's emits that are neither direct nor lists (kept out of parse_rows's loop). */
static __attribute__((noinline)) int finish_rest(Program *pr, const Prog *pg, Slot *frame) {
    for (int k = 0; k < pg->nrest; k++) {
        int r = finish_emit(pr, pg->rest[k], frame, MAX_DEPTH);
        if (r != OK) return r;
    }
    return OK;
}

/* The root's values once its fields are read: its direct fields not `seen` take their
 * null or default, then its other emits run. */
static HOT int finish_root(Program *pr, const Prog *pg, Slot *frame, uint64_t seen) {
    uint64_t missing = pg->direct_mask & ~seen;
    int r;
    if (missing && (r = fill_missing(pg, missing)) != OK) return r;
    for (const ListEnd *e = pg->list_ends, *lists = e + pg->nlists; e < lists; e++)
        if (list_end_reserved(e->list, e->child) != OK) return NOMEM;
    if (pg->nrest && (r = finish_rest(pr, pg, frame)) != OK) return r;
    return append_validity(pg->column, 1);
}

/* Kafka's zig-zag varint of the message indexes (at most 5 bytes), as the pure path reads
 * it. */
static int read_index(const uint8_t **pp, const uint8_t *end, int64_t *out) {
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (*pp >= end) return FAIL;
        uint8_t b = *(*pp)++;
        result |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 28) return FAIL;
    }
    *out = (int64_t)(result >> 1) ^ -(int64_t)(result & 1);
    return OK;
}

/* The message indexes: OK when they name the program's message. */
static int read_indexes(Program *pr, const uint8_t **pp, const uint8_t *end, Py_ssize_t size) {
    int64_t count, index;
    if (read_index(pp, end, &count) != OK) return fail(pr, ROW_INDEXES);
    if (count == 0) {  /* [0] */
        return pr->nindexes == 1 && pr->indexes[0] == 0 ? OK : fail(pr, ROW_INDEXES);
    }
    if (count < 0 || count > size || count != pr->nindexes) return fail(pr, ROW_INDEXES);
    for (int64_t k = 0; k < count; k++) {
        if (read_index(pp, end, &index) != OK || index != pr->indexes[k])
            return fail(pr, ROW_INDEXES);
    }
    return OK;
}

/* ------------------------------------------------------------------ rolling back */

/* One payload decoded as row `row` of a root that is not direct (else parse_rows): OK
 * with its code in codes[row] (a failed row rolled back to a null); NOMEM stops the
 * run. */
static int decode_row(Program *pr, const uint8_t *start, Py_ssize_t size, uint8_t *codes,
                      Py_ssize_t row) {
    const uint8_t *p = start, *end = start + size;
    pr->code = ROW_OK;
    pr->nmisfits = 0;
    pr->stack_top = 0;
    pr->nentries = 0;
    pr->norder = 0;
    int r;
    if (p < end && *p == 0 && pr->first_message) {
        p++;  /* [0], the first message: most payloads */
        r = OK;
    } else {
        r = read_indexes(pr, &p, end, size);
    }
    if (r == OK) {
        const Prog *root = pr->root_prog;
        Slot *frame = pr->stack;
        if (root->clear_frame && !(frame = push_frame(pr, root->nslots))) return NOMEM;
        r = parse_fields(pr, root, frame, p, end, MAX_DEPTH, NULL);
        if (r == OK) r = finish(pr, root, frame, MAX_DEPTH);
        if (r == OK && pr->nmisfits) r = fail(pr, ROW_MISFIT);
    }
    if (r == OK) {
        codes[row] = ROW_OK;
        return OK;
    }
    if (r != FAIL) return r;
    codes[row] = (uint8_t)pr->code;
    roll_back(pr->cols, 0, row);
    return append_null(pr, 0);
}

/* ------------------------------------------------------------------ compiling */

static void free_program(PyObject *capsule) {
    Program *pr = PyCapsule_GetPointer(capsule, "protobufcolumns.program");
    if (!pr) return;
    if (pr->cols) {
        free_columns(pr->cols, pr->ncols);
        for (int k = 0; k < pr->ncols; k++) PyMem_Free(pr->cols[k].children);
        PyMem_Free(pr->cols);
    }
    if (pr->progs) {
        for (int k = 0; k < pr->nprogs; k++) {
            Prog *pg = &pr->progs[k];
            if (pg->fields)
                for (int j = 0; j < pg->nfields; j++) PyMem_Free(pg->fields[j].closed);
            PyMem_Free(pg->fields);
            PyMem_Free(pg->dense);
            PyMem_Free(pg->tags);
            PyMem_Free(pg->direct_emits);
            PyMem_Free(pg->rest);
            PyMem_Free(pg->list_ends);
            PyMem_Free(pg->steps);
            if (pg->emits)
                for (int j = 0; j < pg->nemits; j++) PyMem_Free(pg->emits[j].owned);
            PyMem_Free(pg->emits);
        }
        PyMem_Free(pr->progs);
    }
    if (pr->enums) {
        for (int k = 0; k < pr->nenums; k++) {
            EnumTable *t = &pr->enums[k];
            if (t->names)
                for (int j = 0; j < t->n; j++) PyMem_Free(t->names[j].name);
            PyMem_Free(t->names);
            PyMem_Free(t->enum_name);
        }
        PyMem_Free(pr->enums);
    }
    PyMem_Free(pr->indexes);
    PyMem_RawFree(pr->stack);
    PyMem_RawFree(pr->entries);
    PyMem_RawFree(pr->order);
    PyMem_RawFree(pr->misfits);
    PyMem_RawFree(pr->copy.data);
    PyMem_Free(pr);
}

static int is_int_type(int t) {
    switch (t) {
    case T_INT64: case T_UINT64: case T_INT32: case T_FIXED64: case T_FIXED32: case T_UINT32:
    case T_SFIXED32: case T_SFIXED64: case T_SINT32: case T_SINT64:
        return 1;
    }
    return 0;
}

/* Slot classes: what a slot holds. */
enum { S_FREE = 0, S_INT, S_REAL, S_SPAN, S_HEADER, S_MAP, S_ONEOF, S_INNER };

static int slot_class_of_type(int t) {
    if (t == T_FLOAT || t == T_DOUBLE) return S_REAL;
    if (t == T_STRING || t == T_BYTES) return S_SPAN;
    if (t == T_MESSAGE || t == T_GROUP) return S_FREE;
    return S_INT;
}

/* conv: None or (code, src, utf8, enum index or -1) */
static int parse_conv(Program *pr, PyObject *obj, Conv *cv) {
    int enum_index;
    if (obj == Py_None) { cv->code = CV_NONE; return 0; }
    if (!PyArg_ParseTuple(obj, "iiii", &cv->code, &cv->src, &cv->utf8, &enum_index)) return -1;
    if (cv->code < CV_INT || cv->code > CV_BYTES || cv->src < T_DOUBLE || cv->src > T_SINT64) {
        PyErr_SetString(PyExc_ValueError, "malformed conversion");
        return -1;
    }
    int ok = 0;
    switch (cv->code) {
    case CV_INT: ok = is_int_type(cv->src); break;
    case CV_FLOAT: ok = is_int_type(cv->src) || cv->src == T_FLOAT || cv->src == T_DOUBLE; break;
    case CV_ENUM: ok = is_int_type(cv->src) || cv->src == T_ENUM; break;
    case CV_BOOL: ok = cv->src == T_BOOL; break;
    case CV_TEXT: case CV_BYTES: ok = cv->src == T_STRING || cv->src == T_BYTES; break;
    }
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "a conversion from a type it does not take");
        return -1;
    }
    cv->names = NULL;
    if (cv->code == CV_ENUM) {
        if (enum_index < 0 || enum_index >= pr->nenums) {
            PyErr_SetString(PyExc_ValueError, "enum table");
            return -1;
        }
        cv->names = &pr->enums[enum_index];
    }
    return 0;
}

static int conv_fits(const Conv *cv, int kind) {
    switch (cv->code) {
    case CV_INT: return kind == COL_I32 || kind == COL_I64 || kind == COL_DEC128;
    case CV_FLOAT: return kind == COL_F32 || kind == COL_F64;
    case CV_BOOL: return kind == COL_BOOL;
    case CV_ENUM: case CV_TEXT: case CV_BYTES: return kind == COL_BINARY;
    }
    return 0;
}

/* A default or constant into a slot, as slot class `cls` holds it. */
static int parse_value(PyObject *obj, int cls, Slot *v, char **owned) {
    if (cls == S_SPAN) {
        if (!PyBytes_Check(obj)) {
            PyErr_SetString(PyExc_ValueError, "expected bytes");
            return -1;
        }
        if (!(*owned = copy_bytes(obj, &v->v.s.n))) return -1;
        v->v.s.p = (const uint8_t *)*owned;
    } else if (cls == S_REAL) {
        v->v.d = PyFloat_AsDouble(obj);
        if (v->v.d == -1.0 && PyErr_Occurred()) return -1;
    } else {
        if (!PyLong_Check(obj)) {
            PyErr_SetString(PyExc_ValueError, "an integer constant expected");
            return -1;
        }
        v->v.i = PyLong_AsLongLong(obj);
        if (v->v.i == -1 && PyErr_Occurred()) return -1;
    }
    v->set = 1;
    return 0;
}

static int col_ok(Program *pr, int col) {
    if (col < 0 || col >= pr->ncols) {
        PyErr_Format(PyExc_ValueError, "column %d of %d", col, pr->ncols);
        return 0;
    }
    return 1;
}

static int prog_ok(Program *pr, int index) {
    if (index < 0 || index >= pr->nprogs) {
        PyErr_Format(PyExc_ValueError, "program %d of %d", index, pr->nprogs);
        return 0;
    }
    return 1;
}

static int column_class(int kind) {
    switch (kind) {
    case COL_F32: case COL_F64: return S_REAL;
    case COL_BINARY: return S_SPAN;
    }
    return S_INT;
}

/* The slots of the frames on the stack while program `index` runs (its own included). */
static Py_ssize_t frame_need(Program *pr, int index, int depth);

static Py_ssize_t extra_need(Program *pr, Prog *pg, int depth) {
    Py_ssize_t extra = 0, n;
    for (int k = 0; k < pg->nfields; k++) {
        Field *f = &pg->fields[k];
        n = 0;
        if (f->action == A_APPEND_MSG || f->action == A_MAP) n = frame_need(pr, f->sub, depth + 1);
        else if (f->action == A_INLINE) {
            n = frame_need(pr, f->sub, depth + 1);
            if (n >= 0) n -= pr->progs[f->sub].nslots;  /* its frame is inside this one */
        }
        if (n < 0) return -1;
        if (n > extra) extra = n;
    }
    for (int k = 0; k < pg->nemits; k++) {
        if (pg->emits[k].op != E_MAP) continue;
        n = frame_need(pr, pg->emits[k].sub, depth + 1);
        if (n < 0) return -1;
        if (n > extra) extra = n;
    }
    return extra;
}

static Py_ssize_t frame_need(Program *pr, int index, int depth) {
    Prog *pg = &pr->progs[index];
    if (pg->skip_only) return 0;  /* runs without a frame, nor frames below it */
    if (pg->need_state == 2) return pg->need;
    if (pg->need_state == 1 || depth > MAX_PROGRAM_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "programs that hold frames nest in a cycle");
        return -1;
    }
    pg->need_state = 1;
    Py_ssize_t extra = extra_need(pr, pg, depth);
    if (extra < 0) return -1;
    pg->need = pg->nslots + extra;
    pg->need_state = 2;
    return pg->need;
}

/* field: (number, type, repeated, packable, utf8, action, oneof, slot, sub, col, conv,
 * closed numbers or None) */
static int parse_field(Program *pr, PyObject *obj, Field *f) {
    PyObject *conv, *closed;
    if (!PyArg_ParseTuple(obj, "IiiiiiiiiiOO", &f->number, &f->type, &f->repeated,
                          &f->packable, &f->utf8, &f->action, &f->oneof, &f->slot, &f->sub,
                          &f->col, &conv, &closed))
        return -1;
    f->nclosed = -1;
    if (f->number == 0 || f->number > 0x1fffffff || f->type < T_DOUBLE || f->type > T_SINT64
        || f->type == T_GROUP || f->action < A_SKIP || f->action > A_MAP) {
        PyErr_SetString(PyExc_ValueError, "malformed field");
        return -1;
    }
    if (f->packable && (!f->repeated || slot_class_of_type(f->type) == S_SPAN || f->type == T_MESSAGE)) {
        PyErr_SetString(PyExc_ValueError, "only repeated scalars are packed");
        return -1;
    }
    if (parse_conv(pr, conv, &f->conv) < 0) return -1;
    if (closed != Py_None) {
        if (f->type != T_ENUM || !PyTuple_Check(closed)) {
            PyErr_SetString(PyExc_ValueError, "closed numbers: of an enum, a tuple");
            return -1;
        }
        Py_ssize_t m = PyTuple_GET_SIZE(closed);
        if (m > INT32_MAX) return -1;
        f->closed = PyMem_Calloc((size_t)(m ? m : 1), sizeof(int32_t));
        if (!f->closed) { PyErr_NoMemory(); return -1; }
        for (Py_ssize_t k = 0; k < m; k++) {
            long x = PyLong_AsLong(PyTuple_GET_ITEM(closed, k));
            if (x == -1 && PyErr_Occurred()) return -1;
            if (x < INT32_MIN || x > INT32_MAX || (k && x <= f->closed[k - 1])) {
                PyErr_SetString(PyExc_ValueError, "closed numbers: sorted int32");
                return -1;
            }
            f->closed[k] = (int32_t)x;
        }
        f->nclosed = (int)m;
    }
    return 0;
}

/* emit: (op, col, slot, slot2, sub, presence, key_type, conv, dflt, dflt2) */
static int parse_emit(Program *pr, PyObject *obj, Emit *e) {
    PyObject *conv, *dflt, *dflt2;
    if (!PyArg_ParseTuple(obj, "iiiiiiiOOO", &e->op, &e->col, &e->slot, &e->slot2, &e->sub,
                          &e->presence, &e->key_type, &conv, &dflt, &dflt2))
        return -1;
    if (e->op < E_SLOT || e->op > E_MICROS) {
        PyErr_SetString(PyExc_ValueError, "malformed emit");
        return -1;
    }
    if (!col_ok(pr, e->col)) return -1;
    if (parse_conv(pr, conv, &e->conv) < 0) return -1;
    int kind = pr->cols[e->col].kind;
    switch (e->op) {
    case E_SLOT: case E_SLOT_LIST: {
        int target = e->op == E_SLOT ? kind
                                     : kind == COL_LIST ? pr->cols[pr->cols[e->col].children[0]].kind : -1;
        if (e->conv.code == CV_NONE || !conv_fits(&e->conv, target)) {
            PyErr_SetString(PyExc_ValueError, "an emit whose conversion does not fit its column");
            return -1;
        }
        if (!e->presence && dflt != Py_None &&
            parse_value(dflt, slot_class_of_type(e->conv.src), &e->dflt, &e->owned) < 0)
            return -1;
        if (!e->presence && dflt == Py_None) {
            PyErr_SetString(PyExc_ValueError, "a value without presence needs its default");
            return -1;
        }
        break;
    }
    case E_CONST:
        if (kind == COL_LIST || kind == COL_STRUCT) {
            PyErr_SetString(PyExc_ValueError, "a constant of a nested column");
            return -1;
        }
        if (parse_value(dflt, column_class(kind), &e->dflt, &e->owned) < 0) return -1;
        break;
    case E_MICROS:
        if (kind != COL_I64) {
            PyErr_SetString(PyExc_ValueError, "microseconds go to an int64 column");
            return -1;
        }
        if (parse_value(dflt, S_INT, &e->dflt, &e->owned) < 0
            || parse_value(dflt2, S_INT, &e->dflt2, &e->owned) < 0)
            return -1;
        break;
    case E_INLINE_LIST: case E_LIST: case E_MAP: case E_CONST_EMPTY:
        if (kind != COL_LIST) {
            PyErr_SetString(PyExc_ValueError, "a list emit of another column");
            return -1;
        }
        break;
    }
    if (e->op == E_MAP && !(is_int_type(e->key_type) || e->key_type == T_BOOL ||
                            e->key_type == T_STRING)) {
        PyErr_SetString(PyExc_ValueError, "map key type");
        return -1;
    }
    return 0;
}

/* Checks a program's slots (each of one class), sub-programs and columns once every
 * program is read: what the run relies on to stay within its memory. */
static int check_prog(Program *pr, int index) {
    Prog *pg = &pr->progs[index];
    int ok = 0;
    char *cls = PyMem_Calloc((size_t)(pg->nslots ? pg->nslots : 1), 1);
    if (!cls) { PyErr_NoMemory(); return -1; }
#define CLAIM(s, c) do {                                                               \
        if ((s) < 0 || (s) >= pg->nslots || (cls[s] && cls[s] != (c))) {                  \
            REFUSE("program %d: slot %d claimed twice or out of range", index, (int)(s)); \
        }                                                                                  \
        cls[s] = (c);                                                                      \
    } while (0)
    if (pg->kind == P_STRUCT && (!col_ok(pr, pg->col) || pr->cols[pg->col].kind != COL_STRUCT))
        REFUSE("program %d: a struct program fills a struct column", index);
    if (pg->kind == P_VALUE && (!col_ok(pr, pg->col) || pr->cols[pg->col].kind == COL_STRUCT ||
                                pr->cols[pg->col].kind == COL_LIST))
        REFUSE("program %d: a value program fills a scalar column", index);
    for (int k = 0; k < pg->nfields; k++) {
        Field *f = &pg->fields[k];
        if (k && f->number <= pg->fields[k - 1].number) REFUSE("program %d: fields by number", index);
        if (f->oneof >= 0) CLAIM(f->oneof, S_ONEOF);
        if (f->type == T_MESSAGE && !prog_ok(pr, f->sub)) goto fail;
        switch (f->action) {
        case A_SKIP:
            if (f->type == T_MESSAGE && !pr->progs[f->sub].skip_only)
                REFUSE("program %d: a skipped message is checked by a skip-only program", index);
            break;
        case A_SLOT:
            if (f->type == T_MESSAGE || f->repeated) REFUSE("program %d: slot of a scalar", index);
            CLAIM(f->slot, slot_class_of_type(f->type));
            break;
        case A_INLINE: {
            if (f->type != T_MESSAGE || f->repeated) REFUSE("program %d: inline message", index);
            Prog *sub = &pr->progs[f->sub];
            if (sub->kind == P_VALIDATE) REFUSE("program %d: inline of a checking program", index);
            if (f->slot < 0 || f->slot + 1 + (Py_ssize_t)sub->nslots > pg->nslots)
                REFUSE("program %d: inline frame out of range", index);
            CLAIM(f->slot, S_HEADER);
            for (int j = 0; j < sub->nslots; j++) CLAIM(f->slot + 1 + j, S_INNER);
            break;
        }
        case A_APPEND: {
            if (f->type == T_MESSAGE || !f->repeated || f->conv.code == CV_NONE
                || f->conv.src != f->type || !col_ok(pr, f->col)
                || !conv_fits(&f->conv, pr->cols[f->col].kind))
                REFUSE("program %d: malformed append", index);
            break;
        }
        case A_APPEND_MSG: {
            Prog *sub = &pr->progs[f->sub];
            if (f->type != T_MESSAGE || !f->repeated || sub->kind == P_VALIDATE)
                REFUSE("program %d: malformed message append", index);
            break;
        }
        case A_MAP: {
            Prog *sub = &pr->progs[f->sub];
            if (f->type != T_MESSAGE || !f->repeated || sub->kind != P_VALIDATE || sub->nslots < 1)
                REFUSE("program %d: malformed map", index);
            for (int j = 0; j < sub->nfields; j++) {
                Field *g = &sub->fields[j];
                if (g->action != A_SKIP && !(g->action == A_SLOT && g->number == 1 && g->slot == 0))
                    REFUSE("program %d: a map's entries are read for their key alone", index);
            }
            CLAIM(f->slot, S_MAP);
            break;
        }
        }
        if (f->conv.code != CV_NONE && f->conv.src != f->type)
            REFUSE("program %d: a conversion of another type", index);
    }
    for (int k = 0; k < pg->nemits; k++) {
        Emit *e = &pg->emits[k];
        switch (e->op) {
        case E_SLOT: case E_SLOT_LIST:
            if (e->slot < 0 || e->slot >= pg->nslots || (cls[e->slot] && cls[e->slot] != slot_class_of_type(e->conv.src)))
                REFUSE("program %d: emit of a slot of another kind", index);
            if (!cls[e->slot]) cls[e->slot] = (char)slot_class_of_type(e->conv.src);
            break;
        case E_INLINE: case E_INLINE_LIST: {
            if (!prog_ok(pr, e->sub)) goto fail;
            Prog *sub = &pr->progs[e->sub];
            int fed = 0;
            for (int j = 0; j < pg->nfields; j++)
                if (pg->fields[j].action == A_INLINE && pg->fields[j].slot == e->slot &&
                    pg->fields[j].sub == e->sub) fed = 1;
            if (!fed) REFUSE("program %d: an inline emit without its inline frame", index);
            int target = e->op == E_INLINE ? e->col : pr->cols[e->col].children[0];
            if (sub->kind == P_VALIDATE || sub->col != target)
                REFUSE("program %d: an inline emit fills its program's column", index);
            break;
        }
        case E_MAP: {
            if (e->slot < 0 || e->slot >= pg->nslots || cls[e->slot] != S_MAP || !prog_ok(pr, e->sub))
                REFUSE("program %d: a map emit of another slot", index);
            Prog *sub = &pr->progs[e->sub];
            if (sub->kind != P_STRUCT || sub->col != pr->cols[e->col].children[0])
                REFUSE("program %d: a map's entries fill its entries column", index);
            break;
        }
        case E_MICROS:
            if (e->slot < 0 || e->slot >= pg->nslots || e->slot2 < 0 || e->slot2 >= pg->nslots
                || cls[e->slot] != S_INT || cls[e->slot2] != S_INT)
                REFUSE("program %d: microseconds of two integer slots", index);
            break;
        }
    }
    ok = 1;
fail:
#undef CLAIM
    PyMem_Free(cls);
    return ok ? 0 : -1;
}

/* The common shapes of a checked program's fields and emits (F_*, X_*). */
static void set_fast(Program *pr, Prog *pg) {
    for (int k = 0; k < pg->nfields; k++) {
        Field *f = &pg->fields[k];
        f->fast = F_GENERAL;
        if (f->action == A_SLOT && f->oneof < 0 && f->nclosed < 0 && !f->repeated) {
            switch (wire_type_of(f->type)) {
            case WT_VARINT: f->fast = F_VARINT_SLOT; break;
            case WT_I64: f->fast = F_I64_SLOT; break;
            case WT_I32: f->fast = F_I32_SLOT; break;
            case WT_LEN: f->fast = f->type == T_MESSAGE ? F_GENERAL : F_SPAN_SLOT; break;
            }
        } else if (f->action == A_APPEND && (f->type == T_STRING || f->type == T_BYTES)
                   && (f->conv.code == CV_BYTES || (f->conv.code == CV_TEXT && !f->conv.utf8))) {
            f->fast = F_SPAN_APPEND;
        }
    }
    for (int k = 0; k < pg->nfields; k++) {
        Field *f = &pg->fields[k];
        if (f->number < (uint32_t)pg->dense_n && f->fast) {
            Tag *t = &pg->tags[f->number << 3 | (uint32_t)wire_type_of(f->type)];
            t->op = (uint8_t)f->fast;
            t->type = (uint8_t)f->type;
            t->utf8 = (uint8_t)(f->utf8 != 0);
            t->target = f->fast == F_SPAN_APPEND ? f->col : f->slot;
            t->col = f->fast == F_SPAN_APPEND ? &pr->cols[f->col] : NULL;
        }
    }
    pg->clear_frame = 1;
    for (int k = 0; k < pg->nemits; k++) {
        Emit *e = &pg->emits[k];
        int kind = pr->cols[e->col].kind, src = e->conv.src;
        e->column = &pr->cols[e->col];
        e->child = kind == COL_LIST ? &pr->cols[e->column->children[0]] : NULL;
        e->fast = X_GENERAL;
        if (e->op != E_SLOT) continue;
        switch (e->conv.code) {
        case CV_INT:
            if (kind == COL_I64 && !is_unsigned64(src)) e->fast = X_I64;
            else if (kind == COL_I32 && (src == T_INT32 || src == T_SINT32 || src == T_SFIXED32))
                e->fast = X_I32;
            break;
        case CV_FLOAT:
            if (kind == COL_F64 && (src == T_DOUBLE || src == T_FLOAT)) e->fast = X_F64;
            break;
        case CV_BOOL:
            e->fast = X_BOOL;
            break;
        case CV_TEXT:
            if (!e->conv.utf8) e->fast = X_BYTES;
            break;
        case CV_BYTES:
            e->fast = X_BYTES;
            break;
        }
    }
}

/* Whether program `index` is the sub-program of a field or an emit of any program. */
static int is_sub(Program *pr, int index) {
    for (int k = 0; k < pr->nprogs; k++) {
        Prog *pg = &pr->progs[k];
        for (int j = 0; j < pg->nfields; j++)
            if (pg->fields[j].type == T_MESSAGE && pg->fields[j].sub == index) return 1;
        for (int j = 0; j < pg->nemits; j++)
            if (pg->emits[j].sub == index) return 1;
    }
    return 0;
}

/* The emits of `pg` that read slot `slot`. */
static int slot_readers(Prog *pg, int slot, Emit **reader) {
    int count = 0;
    for (int j = 0; j < pg->nemits; j++) {
        Emit *e = &pg->emits[j];
        int reads = 0;
        switch (e->op) {
        case E_SLOT: case E_SLOT_LIST: case E_INLINE: case E_INLINE_LIST: case E_MAP:
            reads = e->slot == slot;
            break;
        case E_MICROS:
            reads = e->slot == slot || e->slot2 == slot;
            break;
        }
        if (reads) {
            *reader = e;
            count++;
        }
    }
    return count;
}

/* The D_* of a field of a common shape whose one emit stores it as it is (X_*). */
static int direct_op(const Field *f, const Emit *e) {
    int little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;  /* wire bytes are the column's */
    switch (e->fast) {
    case X_I64:
        if (f->type == T_INT64) return D_VARINT_I64;
        if (f->type == T_SFIXED64) return little ? D_FIXED64 : 0;
        if (f->type == T_SFIXED32 || f->type == T_FIXED32) return D_FIXED32_CONV;
        return wire_type_of(f->type) == WT_VARINT ? D_VARINT_CONV_I64 : 0;
    case X_I32:
        if (f->type == T_SFIXED32) return little ? D_FIXED32 : 0;
        return wire_type_of(f->type) == WT_VARINT ? D_VARINT_I32 : 0;
    case X_F64:
        if (f->type == T_DOUBLE) return little ? D_FIXED64 : 0;
        return f->type == T_FLOAT ? D_FIXED32_CONV : 0;
    case X_BOOL:
        return f->type == T_BOOL ? D_VARINT_BOOL : 0;
    case X_BYTES:
        return f->type == T_STRING || f->type == T_BYTES ? D_SPAN : 0;
    }
    return 0;
}

/* Whether the root's field of one-byte tag `tag` is a step of its expected order. */
static int is_step(const Prog *pg, const Field *f, uint32_t *tag) {
    if (f->number >= 16) return 0;
    *tag = f->number << 3 | (uint32_t)wire_type_of(f->type);
    int op = pg->tags[*tag].op;
    return op >= D_VARINT_I64 || op == F_SPAN_APPEND;
}

/* Whether column `index` never takes a null in a run, so that its appends need not test
 * for a validity buffer (Step's never_null). A column's nulls come only from an emit that
 * fills it (a null, a default's or a value's misfit), from an emit that fills the list
 * holding it (an element's misfit), or from a repeated field appended to it (a misfit):
 * here none but `only` (a direct emit without presence, or NULL) fills it, no list's emit
 * fills its elements, and its repeated fields' conversions cannot misfit. A null struct
 * holding it (the root's, a failed row's) gives it a valid empty slot. */
static int never_null(Program *pr, int index, const Emit *only) {
    if (index == 0 || (only && only->presence)) return 0;
    for (int k = 0; k < pr->nprogs; k++) {
        const Prog *pg = &pr->progs[k];
        if (pg->col == index && pg->kind != P_VALIDATE) return 0;
        for (int j = 0; j < pg->nemits; j++) {
            const Emit *e = &pg->emits[j];
            if (e == only) continue;
            if (e->col == index) return 0;
            const Column *col = &pr->cols[e->col];
            if (col->kind == COL_LIST && col->children[0] == index && e->op != E_LIST
                && e->op != E_CONST_EMPTY && e->op != E_CONST_NULL)
                return 0;
        }
        for (int j = 0; j < pg->nfields; j++) {
            const Field *f = &pg->fields[j];
            if (f->action == A_APPEND && f->col == index
                && !(f->conv.code == CV_BYTES || (f->conv.code == CV_TEXT && !f->conv.utf8)))
                return 0;
        }
    }
    return 1;
}

/* The root's expected order (Prog's steps), its direct fields' tags set. -1: no memory. */
static int set_steps(Program *pr, Prog *pg) {
    int nsteps = 0;
    uint32_t tag;
    for (int k = 0; k < pg->nfields; k++) nsteps += is_step(pg, &pg->fields[k], &tag);
    pg->steps = PyMem_Calloc((size_t)nsteps + 1, sizeof(Step));
    if (!pg->steps) { PyErr_NoMemory(); return -1; }
    Step *step = pg->steps;
    uint64_t before = 0;
    for (int k = 0; k < pg->nfields; k++) {
        if (!is_step(pg, &pg->fields[k], &tag)) continue;
        const Tag *t = &pg->tags[tag];
        step->tag = (uint16_t)tag;
        step->op = t->op;
        step->type = t->type;
        step->checked = t->utf8 ? UTF8_CHECKED : 0;
        step->mask = t->op == F_SPAN_APPEND ? 0 : t->mask;
        step->before = before;
        step->col = t->col;
        step->emit = step->mask ? pg->direct_emits[__builtin_ctzll(step->mask)] : NULL;
        step->never_null = (uint8_t)never_null(pr, t->target, step->emit);
        before |= step->mask;
        step++;
    }
    step->tag = 0x100;
    step->before = before;
    return 0;
}

/* The root's program made direct (see Prog), when it is no other's sub-program (its
 * direct fields are read only as a row's root) and has a field to take. -1: no memory. */
static int set_direct(Program *pr, Prog *pg, int index) {
    if (pg->kind != P_STRUCT || is_sub(pr, index)) return 0;
    pg->direct_emits = PyMem_Calloc(64, sizeof(Emit *));
    pg->rest = PyMem_Calloc((size_t)(pg->nemits ? pg->nemits : 1), sizeof(Emit *));
    if (!pg->direct_emits || !pg->rest) { PyErr_NoMemory(); return -1; }
    int bits = 0;
    for (int k = 0; k < pg->nfields && bits < 64; k++) {
        Field *f = &pg->fields[k];
        if (f->fast < F_VARINT_SLOT || f->fast > F_SPAN_SLOT || f->number >= (uint32_t)pg->dense_n)
            continue;
        int shared = 0;
        for (int j = 0; j < pg->nfields; j++) {
            Field *g = &pg->fields[j];
            if (j != k && (g->oneof == f->slot || (g->slot == f->slot && (g->action == A_SLOT
                           || g->action == A_INLINE || g->action == A_MAP))))
                shared = 1;
        }
        Emit *e = NULL;
        if (shared || slot_readers(pg, f->slot, &e) != 1 || e->op != E_SLOT || !e->fast
            || e->conv.src != f->type)
            continue;
        int op = direct_op(f, e);
        if (!op) continue;
        Tag *t = &pg->tags[f->number << 3 | (uint32_t)wire_type_of(f->type)];
        t->op = (uint8_t)op;
        t->mask = (uint64_t)1 << bits;
        t->target = e->col;
        t->col = e->column;
        e->direct = 1;
        pg->direct_emits[bits] = e;
        pg->direct_mask |= (uint64_t)1 << bits;
        bits++;
    }
    if (!bits) return 0;
    pg->direct = 1;
    if (set_steps(pr, pg) < 0) return -1;
    /* the frame is read only where a field or an emit that is not direct reads a slot */
    int reads = 0, lists = 0;
    for (int k = 0; k < pg->nfields; k++) {
        Field *f = &pg->fields[k];
        if (f->oneof >= 0 || f->action == A_INLINE || f->action == A_MAP) reads = 1;
        if (f->action == A_SLOT) {
            Tag *t = f->number < (uint32_t)pg->dense_n
                ? &pg->tags[f->number << 3 | (uint32_t)wire_type_of(f->type)] : NULL;
            if (!t || t->op < D_VARINT_I64) reads = 1;
        }
    }
    for (int k = 0; k < pg->nemits; k++) {
        Emit *e = &pg->emits[k];
        if (e->direct) continue;
        if (e->op == E_LIST) lists++;
        if (e->op != E_LIST && e->op != E_CONST_NULL && e->op != E_CONST && e->op != E_CONST_EMPTY)
            reads = 1;
    }
    pg->list_ends = PyMem_Calloc((size_t)(lists ? lists : 1), sizeof(ListEnd));
    if (!pg->list_ends) { PyErr_NoMemory(); return -1; }
    for (int k = 0; k < pg->nemits; k++) {
        Emit *e = &pg->emits[k];
        if (e->direct) continue;
        if (e->op == E_LIST) pg->list_ends[pg->nlists++] = (ListEnd){e->column, e->child};
        else pg->rest[pg->nrest++] = e;
    }
    pg->column = &pr->cols[pg->col];
    pg->clear_frame = reads;
    return 0;
}

/* prog: (kind, col, nslots, fields, emits) */
static int parse_prog(Program *pr, PyObject *obj, Prog *pg) {
    PyObject *fields, *emits;
    if (!PyArg_ParseTuple(obj, "iiiO!O!", &pg->kind, &pg->col, &pg->nslots, &PyTuple_Type,
                          &fields, &PyTuple_Type, &emits))
        return -1;
    if (pg->kind < P_VALIDATE || pg->kind > P_VALUE || pg->nslots < 0 || pg->nslots > 1000000) {
        PyErr_SetString(PyExc_ValueError, "malformed program");
        return -1;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    if (n > 1000000) return -1;
    pg->fields = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Field));
    if (!pg->fields) { PyErr_NoMemory(); return -1; }
    pg->skip_only = 1;
    uint32_t highest = 0;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (parse_field(pr, PyTuple_GET_ITEM(fields, k), &pg->fields[k]) < 0) return -1;
        pg->nfields = (int)k + 1;
        if (pg->fields[k].action != A_SKIP || pg->fields[k].oneof >= 0) pg->skip_only = 0;
        if (pg->fields[k].number > highest) highest = pg->fields[k].number;
    }
    pg->dense_n = highest < 256 ? (int)highest + 1 : 256;
    pg->dense = PyMem_Malloc(sizeof(int32_t) * (size_t)pg->dense_n);
    pg->ntags = pg->dense_n < 16 ? 128 : pg->dense_n * 8;  /* every one-byte tag */
    pg->tags = PyMem_Calloc((size_t)pg->ntags, sizeof(Tag));
    if (!pg->dense || !pg->tags) { PyErr_NoMemory(); return -1; }
    for (int k = 0; k < pg->dense_n; k++) pg->dense[k] = -1;
    for (int k = 0; k < pg->nfields; k++)
        if (pg->fields[k].number < (uint32_t)pg->dense_n) pg->dense[pg->fields[k].number] = k;
    Py_ssize_t m = PyTuple_GET_SIZE(emits);
    if (m > 1000000) return -1;
    pg->emits = PyMem_Calloc((size_t)(m ? m : 1), sizeof(Emit));
    if (!pg->emits) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t k = 0; k < m; k++) {
        if (parse_emit(pr, PyTuple_GET_ITEM(emits, k), &pg->emits[k]) < 0) return -1;
        pg->nemits = (int)k + 1;
    }
    if (pg->nemits) pg->skip_only = 0;
    if (pg->kind == P_VALIDATE && pg->nemits) {
        PyErr_SetString(PyExc_ValueError, "a checking program appends nothing");
        return -1;
    }
    return 0;
}

/* enum: (enum name bytes, ((number, name bytes), ...) sorted by number) */
static int parse_enum(PyObject *obj, EnumTable *t) {
    PyObject *name, *names;
    if (!PyArg_ParseTuple(obj, "SO!", &name, &PyTuple_Type, &names)) return -1;
    if (!(t->enum_name = copy_bytes(name, &t->enum_name_len))) return -1;
    Py_ssize_t n = PyTuple_GET_SIZE(names);
    if (n > INT32_MAX) return -1;
    t->names = PyMem_Calloc((size_t)(n ? n : 1), sizeof(EnumName));
    if (!t->names) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t k = 0; k < n; k++) {
        long long number;
        PyObject *text;
        if (!PyArg_ParseTuple(PyTuple_GET_ITEM(names, k), "LS", &number, &text)) return -1;
        if (k && number <= t->names[k - 1].number) {
            PyErr_SetString(PyExc_ValueError, "enum names: by number, one each");
            return -1;
        }
        t->names[k].number = number;
        if (!(t->names[k].name = copy_bytes(text, &t->names[k].len))) return -1;
        t->n = (int)k + 1;
    }
    return 0;
}

static const int WIDTHS[] = {0, 0, 4, 8, 4, 8, 0, 16, 0, 0};

/* compile(columns, enums, programs, root, indexes): columns a list of (kind, children). */
static PyObject *compile_program(PyObject *self, PyObject *args) {
    PyObject *columns, *enums, *programs, *indexes;
    int root;
    if (!PyArg_ParseTuple(args, "O!O!O!iO!", &PyList_Type, &columns, &PyTuple_Type, &enums,
                          &PyTuple_Type, &programs, &root, &PyTuple_Type, &indexes))
        return NULL;
    Program *pr = PyMem_Calloc(1, sizeof(Program));
    if (!pr) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(pr, "protobufcolumns.program", free_program);
    if (!capsule) { PyMem_Free(pr); return NULL; }
    Py_ssize_t n = PyList_GET_SIZE(columns);
    if (n < 1 || n > 100000) REFUSE("column count");
    pr->cols = PyMem_Calloc((size_t)n, sizeof(Column));
    if (!pr->cols) { PyErr_NoMemory(); goto fail; }
    pr->ncols = (int)n;
    for (Py_ssize_t k = 0; k < n; k++) {
        Column *col = &pr->cols[k];
        PyObject *children;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(columns, k), "iO!", &col->kind, &PyTuple_Type,
                              &children))
            goto fail;
        if (col->kind < COL_BOOL || col->kind > COL_STRUCT) REFUSE("column kind");
        col->width = WIDTHS[col->kind];
        if (column_children(col, children, k, n) < 0) goto fail;
    }
    if (pr->cols[0].kind != COL_STRUCT) REFUSE("the root column is a struct");
    Py_ssize_t ne = PyTuple_GET_SIZE(enums);
    if (ne > 100000) REFUSE("enum count");
    pr->enums = PyMem_Calloc((size_t)(ne ? ne : 1), sizeof(EnumTable));
    if (!pr->enums) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t k = 0; k < ne; k++) {
        pr->nenums = (int)k + 1;
        if (parse_enum(PyTuple_GET_ITEM(enums, k), &pr->enums[k]) < 0) goto fail;
    }
    Py_ssize_t np = PyTuple_GET_SIZE(programs);
    if (np < 1 || np > 100000) REFUSE("program count");
    pr->progs = PyMem_Calloc((size_t)np, sizeof(Prog));
    if (!pr->progs) { PyErr_NoMemory(); goto fail; }
    pr->nprogs = (int)np;
    for (Py_ssize_t k = 0; k < np; k++)
        if (parse_prog(pr, PyTuple_GET_ITEM(programs, k), &pr->progs[k]) < 0) goto fail;
    for (int k = 0; k < pr->nprogs; k++) {
        if (check_prog(pr, k) < 0) goto fail;
        set_fast(pr, &pr->progs[k]);
    }
    if (!prog_ok(pr, root)) goto fail;
    if (pr->progs[root].kind != P_STRUCT || pr->progs[root].col != 0)
        REFUSE("the root program fills column 0");
    pr->root = root;
    if (set_direct(pr, &pr->progs[root], root) < 0) goto fail;
    Py_ssize_t need = frame_need(pr, root, 0);
    if (need < 0) goto fail;
    Py_ssize_t ni = PyTuple_GET_SIZE(indexes);
    if (ni < 1 || ni > 1000) REFUSE("message indexes");
    pr->indexes = PyMem_Calloc((size_t)ni, sizeof(int64_t));
    if (!pr->indexes) { PyErr_NoMemory(); goto fail; }
    for (Py_ssize_t k = 0; k < ni; k++) {
        pr->indexes[k] = PyLong_AsLongLong(PyTuple_GET_ITEM(indexes, k));
        if (pr->indexes[k] == -1 && PyErr_Occurred()) goto fail;
    }
    pr->nindexes = (int)ni;
    pr->first_message = ni == 1 && pr->indexes[0] == 0;
    pr->root_prog = &pr->progs[root];
    if (pr->root_prog->direct) parse_rows(pr, NULL, NULL, NULL, 0, 0, NULL);  /* its labels */
    pr->stack_cap = need > 0 ? need : 1;
    pr->stack = PyMem_RawCalloc((size_t)pr->stack_cap, sizeof(Slot));
    if (!pr->stack) { PyErr_NoMemory(); goto fail; }
    return capsule;
fail:
    Py_DECREF(capsule);
    return NULL;
}

/* ------------------------------------------------------------------ running */

/* Whether every column's buffers hold what its length says (a program in step). */
static int columns_in_step(Program *pr) {
    for (int k = 0; k < pr->ncols; k++) {
        Column *col = &pr->cols[k];
        Py_ssize_t len = col->length;
        if (col->has_validity && col->validity.len != len) return 0;
        switch (col->kind) {
        case COL_BOOL:
            if (col->values.len != len) return 0;
            break;
        case COL_I32: case COL_I64: case COL_F32: case COL_F64: case COL_DEC128:
            if (col->values.len != len * col->width) return 0;
            break;
        case COL_BINARY: case COL_LIST: {
            if (col->offsets.len != (len + 1) * 4) return 0;
            const int32_t *offsets = (const int32_t *)col->offsets.data;
            Py_ssize_t last = offsets[len];
            if (col->kind == COL_BINARY ? last != col->data.len
                                        : last != pr->cols[col->children[0]].length)
                return 0;
            break;
        }
        case COL_STRUCT:
            for (int j = 0; j < col->nchildren; j++)
                if (pr->cols[col->children[j]].length != len) return 0;
            break;
        }
    }
    return 1;
}

/* The room of the root's direct columns, and of the offsets of its other lists, reserved
 * for a run of `rows`: each holds a value a row at any time (a value read again replaces
 * the one before, a failed row is cut back before its null), so that the expected order's
 * appends, and finish_root's lists, check no room. */
static int reserve_direct(Program *pr, Py_ssize_t rows) {
    const Prog *pg = pr->root_prog;
    if (!pg->direct) return OK;
    if (rows > PY_SSIZE_T_MAX / 16) return NOMEM;
    for (uint64_t bits = pg->direct_mask; bits; bits &= bits - 1) {
        const Emit *e = pg->direct_emits[__builtin_ctzll(bits)];
        Column *col = e->column;
        int binary = col->kind == COL_BINARY;
        Py_ssize_t width = binary ? 4 : col->kind == COL_BOOL ? 1 : col->width;
        if (buf_reserve(binary ? &col->offsets : &col->values, rows * width) != OK)
            return NOMEM;
        if (e->presence && buf_reserve(&col->validity, rows) != OK) return NOMEM;
    }
    for (int k = 0; k < pg->nlists; k++)  /* an offset a row: finish_root's lists */
        if (buf_reserve(&pg->list_ends[k].list->offsets, rows * 4) != OK) return NOMEM;
    return OK;
}

static PyObject *finish_run(Program *pr, Py_ssize_t rows, PyObject *codes, int r, int arrow) {
    PyObject *result = NULL;
    if (r == NOMEM) {
        past_size_limit();
    } else if (r == OK && !columns_in_step(pr)) {
        PyErr_SetString(PyExc_SystemError, "_protobufcolumns: columns out of step");
    } else if (r == OK) {
        PyObject *columns = arrow ? column_capsule(pr->cols, pr->ncols, rows)
                                  : column_buffers(pr->cols, pr->ncols, rows);
        if (columns) result = Py_BuildValue("NO", columns, codes);
    }
    free_columns(pr->cols, pr->ncols);
    return result;
}

/* run(program, payloads, arrow=False) -> ([(length, null_count, validity, values, offsets,
 * data)] per column, or with `arrow` a capsule of column 0's ArrowArray (columns.h's
 * column_capsule); bytes: one code per payload) */
static PyObject *run_program(PyObject *self, PyObject *args) {
    PyObject *capsule, *payloads;
    int arrow = 0;
    if (!PyArg_ParseTuple(args, "OO|p", &capsule, &payloads, &arrow)) return NULL;
    Program *pr = PyCapsule_GetPointer(capsule, "protobufcolumns.program");
    if (!pr) return NULL;
    PyObject *seq = PySequence_Fast(payloads, "payloads: a sequence of bytes");
    if (!seq) return NULL;
    Py_ssize_t rows = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *codes = PyBytes_FromStringAndSize(NULL, rows), *result = NULL;
    int r = OK;
    if (!codes || begin_run(pr->cols, pr->ncols, rows) < 0) goto done;
    uint8_t *code = (uint8_t *)PyBytes_AS_STRING(codes);
    r = reserve_direct(pr, rows);
    for (Py_ssize_t row = 0; row < rows && r == OK; row++) {
        Py_buffer view;
        if (PyObject_GetBuffer(items[row], &view, PyBUF_SIMPLE) < 0) {
            free_columns(pr->cols, pr->ncols);
            goto done;
        }
        /* a bytes object's buffer holds a zero byte after its bytes: parse_rows reads it
         * as the byte after the payload, with no copy */
        pr->limit = (const uint8_t *)view.buf + view.len + (PyBytes_CheckExact(items[row]) ? 1 : 0);
        if (pr->root_prog->direct) {
            const int64_t start = 0, stop = view.len;
            r = parse_rows(pr, view.buf, &start, &stop, row, 1, code);
        } else {
            r = decode_row(pr, view.buf, view.len, code, row);
        }
        PyBuffer_Release(&view);
    }
    result = finish_run(pr, rows, codes, r, arrow);
done:
    Py_XDECREF(codes);
    Py_DECREF(seq);
    return result;
}

/* run_spans(program, data, starts, ends, arrow=False): run's result for the payloads
 * data[starts[i]:ends[i]] (int64 buffers), read in place. */
static PyObject *run_spans(PyObject *self, PyObject *args) {
    PyObject *capsule, *result = NULL, *codes = NULL;
    Spans in;
    int arrow = 0;
    if (!PyArg_ParseTuple(args, "Oy*y*y*|p", &capsule, &in.data, &in.starts, &in.ends, &arrow))
        return NULL;
    Program *pr = PyCapsule_GetPointer(capsule, "protobufcolumns.program");
    if (!pr) goto done;
    Py_ssize_t rows = span_rows(&in);
    if (rows < 0) goto done;
    const int64_t *first = in.starts.buf, *last = in.ends.buf;
    codes = PyBytes_FromStringAndSize(NULL, rows);
    if (!codes || begin_run(pr->cols, pr->ncols, rows) < 0) goto done;
    uint8_t *code = (uint8_t *)PyBytes_AS_STRING(codes);
    int r = reserve_direct(pr, rows);
    pr->limit = (const uint8_t *)in.data.buf + in.data.len;
    if (r == OK && pr->root_prog->direct)
        r = parse_rows(pr, in.data.buf, first, last, 0, rows, code);
    for (Py_ssize_t row = 0; row < rows && r == OK && !pr->root_prog->direct; row++)
        r = decode_row(pr, (const uint8_t *)in.data.buf + first[row],
                       (Py_ssize_t)(last[row] - first[row]), code, row);
    result = finish_run(pr, rows, codes, r, arrow);
done:
    Py_XDECREF(codes);
    spans_release(&in);
    return result;
}

static PyMethodDef methods[] = {
    {"compile", compile_program, METH_VARARGS,
     "compile(columns, enums, programs, root, indexes) -> a program"},
    {"run", run_program, METH_VARARGS,
     "run(program, payloads, arrow=False) -> (the columns' buffers, or with arrow an "
     "ArrowArray capsule; a code per payload)"},
    {"run_spans", run_spans, METH_VARARGS, RUN_SPANS_ARROW_DOC},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_protobufcolumns",
                                    "Protobuf payloads decoded into Arrow column buffers.",
                                    -1, methods};

PyMODINIT_FUNC PyInit__protobufcolumns(void) {
    PyObject *created = create_module(&module);
    if (created && PyModule_AddIntConstant(created, "MAX_DEPTH", MAX_DEPTH) < 0) Py_CLEAR(created);
    return created;
}
