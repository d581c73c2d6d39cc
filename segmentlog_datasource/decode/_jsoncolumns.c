/* The compiled twin of decode/json_schema.py's row-by-row decoding (json.loads, then the
 * converters of the column's mapping) for the programs decode/json_program.py compiles:
 * JSON documents parsed straight into Arrow-layout column buffers.
 *
 * compile(columns, step, flags, defer) -> a program (a capsule); run(program,
 * payloads[, arrow]) and run_spans(program, data, starts, ends[, arrow]) -> (the columns'
 * buffers, or with `arrow` an ArrowArray capsule of them; the rows left to Python).
 *
 * A row this parser accepts has the values the row-by-row path gives it, exactly; it
 * decides nothing else. A document that is not JSON as json.loads reads it, a value that
 * does not fit its column, and what is left to Python (NaN and Infinity, integer
 * literals past int64, duplicate keys, lone surrogate escapes, nesting past MAX_DEPTH)
 * make the row "deferred": its partial values are rolled back to a null and its index is
 * returned, and json_program.py decodes it with the Python twin, which gives its value or
 * its error reason. Leaf values outside the fast paths (dates and date-times in other ISO
 * forms, base64 that is not canonical, schema-less JSON text) go to the Python
 * converters one value at a time (the step's `slow` callable).
 *
 * A union (a struct of member0, member1, ...) takes the first member the value fits, as
 * the converters do: a member that does not fit (MISFIT) is rolled back and the next one
 * tried from the same place. A value that misfits inside an object or a map is a misfit
 * only once the whole object is known to hold no key twice (json.loads keeps the last of
 * duplicates, which may fit).
 *
 * An object in the shape most producers write (every property, in the schema's order,
 * compact) is read by a fast path (fast_object): its keys compared whole, its values
 * read by a routine per column kind. At anything else the object is rolled back and read
 * again the general way, so the fast path decides nothing of its own.
 *
 * Every read is bounds-checked against the payload (the fast path's chunks against the
 * buffer, which holds FAST_ROOM bytes past the payload; what they take, against the
 * payload): hostile bytes give deferred rows.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* Column kinds: the Arrow layouts (json_program.py's COL_*). */
enum { COL_BOOL = 1, COL_I8, COL_I16, COL_I32, COL_I64, COL_F32, COL_F64, COL_BINARY, COL_LIST,
       COL_STRUCT };
#define COL_LAST COL_STRUCT
static const int WIDTHS[] = {0, 0, 1, 2, 4, 8, 4, 8, 0, 0, 0};
/* Step kinds: what a _Node's convert does (json_program.py's KINDS). */
enum { K_STRING = 1, K_BOOLEAN, K_INTEGER, K_NUMBER, K_DATE, K_TIMESTAMP, K_BASE64,
       K_CONNECT_DAYS, K_CONNECT_MILLIS, K_TEXT, K_ENUM, K_ARRAY, K_OBJECT, K_MAP, K_UNION };
#define K_LAST K_UNION
/* Flags of compile: which date-time forms this Python's datetime.fromisoformat reads. */
enum { F_Z = 1, F_SPACE = 2, F_MILLIS = 4, F_MICROS = 8, F_OFFSET = 16 };

#define MAX_DEPTH 128

/* The columns, their buffers and a run's plumbing (columns.h), with a flag of their own. */
#define COLUMNS_MODULE "_jsoncolumns"
/* its field's nullability (checked: nulls go only where it is) */
#define COLUMN_FIELDS int nullable;
#include "columns.h"

/* Beside columns.h's OK, NOMEM and ERROR: MISFIT, the value does not fit the step (a
 * union tries its next member); DEFER, the row is left to Python. The fast path of
 * objects (fast_object) says BAIL when an object is not in the shape it reads (what it
 * appended is rolled back, and the general path reads the object again), NOT_FAST when
 * it bailed before appending anything. */
enum { MISFIT = 1, DEFER = 2, BAIL = 3, NOT_FAST = 4 };

typedef struct {
    char *name;
    Py_ssize_t name_len;
    int plain;            /* no quote, backslash or control character: matched in place */
    char *pattern;        /* plain: "name": as compact JSON writes the key */
    int required;
    int has_default;
    char *default_text;   /* the default as JSON text, read with the property's step */
    Py_ssize_t default_len;
} Property;

/* A plain property's pattern of at most 16 bytes ("name":) as two words under masks:
 * what the expected key is compared with first. */
typedef struct {
    uint64_t words[2], masks[2];
    int32_t len, quick;   /* quick: plain, and at most 16 bytes */
} Key;

/* How the fast path of objects reads a property's value: with a routine of its kind, or
 * (FAST_OTHER) the general way. */
enum { FAST_OTHER = 0, FAST_STRING, FAST_I8, FAST_I16, FAST_I32, FAST_I64, FAST_MILLIS,
       FAST_NUMBER, FAST_BOOL, FAST_ARRAY };

/* A property as the fast path expects it: the byte before its key ('{' before the first,
 * ',' before the others), the key as it stands, the colon. Up to 16 bytes, compared as
 * one chunk under a mask of the pattern's bytes; longer, byte by byte. */
typedef struct Step Step;
typedef struct {
    uint8_t chunk[16] __attribute__((aligned(16)));  /* the pattern, zero padded */
    uint64_t masks[2];    /* 0xff for each byte of the pattern among the 16 */
    uint32_t mask;        /* a bit for each */
    int32_t len;
    int32_t kind;         /* FAST_ */
    int32_t item_kind;    /* FAST_ARRAY: its items' (a scalar FAST_ kind) */
    Step *step;           /* the property's */
    Column *column;
    char *bytes;          /* the whole pattern */
} FastKey;

struct Step {
    int kind, col, nullable;
    int64_t low, high;    /* integers: the column's range */
    PyObject *slow;       /* the Python converter of what the fast paths leave */
    int nchildren;
    Step **children;      /* array: [items]; map: [values]; object: properties; union: members */
    Property *props;      /* object: one per child */
    Key *keys;            /* object: one per child */
    FastKey *fast;        /* object: one per child, when every name is plain (else NULL) */
    uint64_t *seen;       /* object of more than 64 properties: which a value has given
                           * (scratch bits; up to 64, a local mask) */
    Column *column;       /* &cols[col] (the columns never move) */
    int key_col;          /* map: the keys' column */
};

typedef struct {
    int ncols;
    Column *cols;
    Step *root;
    int flags;
    PyObject *defer;      /* what a slow converter returns to leave the row to Python */
    int busy;             /* a run is under way (its slow converters run Python code, during
                           * which another thread may call in) */
    Buf scratch;          /* unescaped keys and strings, numbers for strtod */
    Buf keys;             /* a map's duplicate check: its hash table */
    Buf padded;           /* run's payload copied with FAST_ROOM bytes after it */
    const uint8_t *limit; /* the end of what the payloads' buffer lets a run read */
} Program;

typedef struct {
    const uint8_t *p, *end;
} Cursor;

/* A null in column `index` (one whose field is nullable). A null struct's children take
 * empty values (zero, "", [], a struct of empty values), as pa.array builds them: a field
 * that is not nullable holds no null, and a cast to the column's type holds. */
static int append_null(Program *prog, int index) {
    return append_empty(prog->cols, index, 0, 1);
}

/* An integer already checked against the column's range. */
static HOT int append_int(Column *col, int64_t v) {
    switch (col->kind) {
    case COL_I8: { int8_t x = (int8_t)v; if (buf_put(&col->values, &x, 1) != OK) return NOMEM; break; }
    case COL_I16: { int16_t x = (int16_t)v; if (buf_put(&col->values, &x, 2) != OK) return NOMEM; break; }
    case COL_I32: { int32_t x = (int32_t)v; if (buf_put(&col->values, &x, 4) != OK) return NOMEM; break; }
    default: if (buf_put(&col->values, &v, 8) != OK) return NOMEM; break;
    }
    return append_validity(col, 1);
}

/* ------------------------------------------------------------------ JSON text */

static HOT int is_ws(uint8_t b) {
    return b == ' ' || b == '\n' || b == '\r' || b == '\t';
}

/* json.loads's whitespace: space, tab, newline, carriage return (all at most ' ', which
 * most bytes after a token are past: one comparison). */
static HOT void skip_ws(Cursor *c) {
    while (c->p < c->end && *c->p <= ' ' && is_ws(*c->p)) c->p++;
}

static HOT int is_digit(uint8_t b) {
    return (unsigned)(b - '0') < 10;
}

static int hex_value(uint8_t b) {
    if (b >= '0' && b <= '9') return b - '0';
    if (b >= 'a' && b <= 'f') return b - 'a' + 10;
    if (b >= 'A' && b <= 'F') return b - 'A' + 10;
    return -1;
}

/* The 4 hex digits at s (which has 4 bytes), or -1. */
static int hex4(const uint8_t *s) {
    int value = 0;
    for (int k = 0; k < 4; k++) {
        int digit = hex_value(s[k]);
        if (digit < 0) return -1;
        value = value << 4 | digit;
    }
    return value;
}

static HOT int same_bytes(const uint8_t *a, const char *b, Py_ssize_t n) {
    while (n >= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) return 0;
        a += 8;
        b += 8;
        n -= 8;
    }
    if (n >= 4) {
        uint32_t x, y;
        memcpy(&x, a, 4);
        memcpy(&y, b, 4);
        if (x != y) return 0;
        a += 4;
        b += 4;
        n -= 4;
    }
    while (n-- > 0)
        if (*a++ != (uint8_t)*b++) return 0;
    return 1;
}

/* Of 8 bytes (little-endian), the high bit of each that is a quote, a backslash, a
 * control character or not ASCII: exact up to the first such byte (a borrow may mark
 * bytes after it), so the lowest bit set finds the first. */
static HOT uint64_t special8(uint64_t v) {
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t quote = v ^ (ones * '"'), slash = v ^ (ones * '\\');
    uint64_t control = (v - ones * 0x20) & ~v;
    return (v | control | ((quote - ones) & ~quote) | ((slash - ones) & ~slash)) & highs;
}

/* The string whose opening quote is at c->p, as json.loads reads it: its raw content
 * [*s, *s + *n), *escaped when it holds an escape, *lone when an escape is a surrogate
 * without its pair (Python keeps it; UTF-8 cannot). DEFER when json.loads would refuse
 * it: a control character, a bad escape, bytes that are not UTF-8, no closing quote. */
static HOT int scan_string(Cursor *c, const uint8_t **s, Py_ssize_t *n, int *escaped,
                           int *lone) {
    const uint8_t *p = c->p + 1, *end = c->end;
    *s = p;
    *escaped = 0;
    *lone = 0;
    for (;;) {
        while (end - p >= 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            uint64_t found = special8(v);
            if (found) {
                p += __builtin_ctzll(found) >> 3;
                break;
            }
            p += 8;
        }
        if (p >= end) return DEFER;
        uint8_t b = *p;
        if (b == '"') break;
        if (b == '\\') {
            *escaped = 1;
            if (end - p < 2) return DEFER;
            uint8_t e = p[1];
            if (e != 'u') {
                if (e != '"' && e != '\\' && e != '/' && e != 'b' && e != 'f' && e != 'n'
                    && e != 'r' && e != 't') return DEFER;
                p += 2;
                continue;
            }
            int u = end - p >= 6 ? hex4(p + 2) : -1;
            if (u < 0) return DEFER;
            p += 6;
            if (u >= 0xd800 && u <= 0xdbff) {
                /* As Python's scanner: a \u right after a high surrogate must be 4 hex
                 * digits; a low surrogate pairs with it, anything else is read alone. */
                if (end - p >= 2 && p[0] == '\\' && p[1] == 'u') {
                    int u2 = end - p >= 6 ? hex4(p + 2) : -1;
                    if (u2 < 0) return DEFER;
                    if (u2 >= 0xdc00 && u2 <= 0xdfff) {
                        p += 6;
                        continue;
                    }
                }
                *lone = 1;
            } else if (u >= 0xdc00 && u <= 0xdfff) {
                *lone = 1;
            }
            continue;
        }
        if (b < 0x20) return DEFER;
        if (b < 0x80) {
            p++;
            continue;
        }
        int k = utf8_sequence(p, end);
        if (!k) return DEFER;
        p += k;
    }
    *n = p - *s;
    c->p = p + 1;
    return OK;
}

static HOT uint8_t *put_utf8(uint8_t *out, uint32_t cp) {
    if (cp < 0x80) {
        *out++ = (uint8_t)cp;
    } else if (cp < 0x800) {
        *out++ = (uint8_t)(0xc0 | cp >> 6);
        *out++ = (uint8_t)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *out++ = (uint8_t)(0xe0 | cp >> 12);
        *out++ = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        *out++ = (uint8_t)(0x80 | (cp & 0x3f));
    } else {
        *out++ = (uint8_t)(0xf0 | cp >> 18);
        *out++ = (uint8_t)(0x80 | (cp >> 12 & 0x3f));
        *out++ = (uint8_t)(0x80 | (cp >> 6 & 0x3f));
        *out++ = (uint8_t)(0x80 | (cp & 0x3f));
    }
    return out;
}

/* The content of a string scan_string read (escaped, no lone surrogate) as UTF-8,
 * appended to `b`: never longer than the raw content. */
static int unescape(const uint8_t *s, Py_ssize_t n, Buf *b) {
    if (buf_reserve(b, n) != OK) return NOMEM;
    uint8_t *out = (uint8_t *)b->data + b->len;
    const uint8_t *end = s + n;
    while (s < end) {
        const uint8_t *slash = memchr(s, '\\', (size_t)(end - s));
        if (!slash) slash = end;
        memcpy(out, s, (size_t)(slash - s));
        out += slash - s;
        s = slash;
        if (s >= end) break;
        if (end - s < 2) return DEFER;
        uint8_t e = s[1];
        if (e != 'u') {
            *out++ = e == 'b' ? '\b' : e == 'f' ? '\f' : e == 'n' ? '\n' : e == 'r' ? '\r'
                   : e == 't' ? '\t' : e;
            s += 2;
            continue;
        }
        int u = end - s >= 6 ? hex4(s + 2) : -1;
        if (u < 0) return DEFER;
        s += 6;
        uint32_t cp = (uint32_t)u;
        if (u >= 0xd800 && u <= 0xdbff && end - s >= 6 && s[0] == '\\' && s[1] == 'u') {
            int u2 = hex4(s + 2);
            if (u2 >= 0xdc00 && u2 <= 0xdfff) {
                cp = 0x10000 + (((uint32_t)u - 0xd800) << 10) + ((uint32_t)u2 - 0xdc00);
                s += 6;
            }
        }
        if (cp >= 0xd800 && cp <= 0xdfff) return DEFER;  /* lone: scan_string said so */
        out = put_utf8(out, cp);
    }
    b->len = (char *)out - b->data;
    return OK;
}

/* A number literal, as json.loads's scanner matches it. */
typedef struct {
    const uint8_t *start, *end;
    int negative;
    int is_int;         /* no fraction, no exponent: Python's int */
    int big;            /* an int literal past int64 (left to Python) */
    int64_t i;          /* an int's value */
    int exact;          /* a float's value is w * 10^q, w of at most 19 digits */
    uint64_t w;
    int64_t q;
} Num;

/* Whether the 8 bytes at p are all ASCII digits. */
static HOT int eight_digits(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return ((v & 0xf0f0f0f0f0f0f0f0ULL)
            | (((v + 0x0606060606060606ULL) & 0xf0f0f0f0f0f0f0f0ULL) >> 4))
           == 0x3333333333333333ULL;
}

/* The value of the 8 ASCII digits at p. */
static HOT uint64_t eight_value(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    v = (v & 0x0f0f0f0f0f0f0f0fULL) * 2561 >> 8;
    v = (v & 0x00ff00ff00ff00ffULL) * 6553601 >> 16;
    return (v & 0x0000ffff0000ffffULL) * 42949672960001ULL >> 32;
}

/* How many of the 8 bytes of v (little-endian: the first byte lowest) are ASCII digits
 * before the first that is not: 0 to 8. (A byte's + 6 carries only out of a byte past
 * '9', and only into the bytes after it.) */
static HOT int leading_digits(uint64_t v) {
    uint64_t t = (v & 0xf0f0f0f0f0f0f0f0ULL) | (((v + 0x0606060606060606ULL) & 0xf0f0f0f0f0f0f0f0ULL) >> 4);
    uint64_t other = t ^ 0x3333333333333333ULL;
    return other ? __builtin_ctzll(other) >> 3 : 8;
}

static const uint64_t POW10_U64[20] = {
    1ULL, 10ULL, 100ULL, 1000ULL, 10000ULL, 100000ULL, 1000000ULL, 10000000ULL, 100000000ULL,
    1000000000ULL, 10000000000ULL, 100000000000ULL, 1000000000000ULL, 10000000000000ULL,
    100000000000000ULL, 1000000000000000ULL, 10000000000000000ULL, 100000000000000000ULL,
    1000000000000000000ULL, 10000000000000000000ULL};

/* The value of the first k (1 to 8) digits of the 8 bytes of v: shifted to the top, the
 * bytes after them out and zeros before them, then 8 digits' value. */
static HOT uint64_t digits_value(uint64_t v, int k) {
    v <<= 8 * (8 - k);
    v = (v & 0x0f0f0f0f0f0f0f0fULL) * 2561 >> 8;
    v = (v & 0x00ff00ff00ff00ffULL) * 6553601 >> 16;
    return (v & 0x0000ffff0000ffffULL) * 42949672960001ULL >> 32;
}

/* A run of digits at p (before end) taken into w, at most 19 significant ones: *digits
 * counts those in w (leading zeros not counted when `skip_zeros`: *zeros counts them),
 * *dropped those past 19. Returns the end of the run. */
static HOT const uint8_t *digit_run(const uint8_t *p, const uint8_t *end, uint64_t *w,
                                     int *digits, int *dropped, int skip_zeros, int *zeros) {
    if (skip_zeros && *digits == 0) {
        while (p < end && *p == '0') {
            p++;
            (*zeros)++;
        }
    }
    while (end - p >= 8) {  /* 8 bytes a step: the digits among them, as one number */
        uint64_t x;
        memcpy(&x, p, 8);
        int k = leading_digits(x);
        if (!k || *digits + k > 19) break;  /* none, or more than 19: the byte loop's */
        *w = *w * POW10_U64[k] + digits_value(x, k);
        *digits += k;
        p += k;
        if (k < 8) return p;
    }
    while (p < end && is_digit(*p)) {
        if (*digits < 19) {
            *w = *w * 10 + (uint64_t)(*p - '0');
            (*digits)++;
        } else {
            (*dropped)++;
        }
        p++;
    }
    return p;
}

/* The number at c->p; DEFER when there is none there (json.loads's NaN, Infinity and
 * -Infinity included: Python reads them, and leaves them to Python). */
static HOT int scan_number(Cursor *c, Num *n) {
    const uint8_t *p = c->p, *end = c->end;
    n->start = p;
    n->negative = 0;
    n->is_int = 1;
    n->big = 0;
    if (p < end && *p == '-') {
        n->negative = 1;
        p++;
    }
    if (p >= end) return DEFER;
    uint64_t w = 0;
    int digits = 0, dropped = 0, zeros = 0;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        p = digit_run(p, end, &w, &digits, &dropped, 0, &zeros);
    } else {
        return DEFER;
    }
    /* an int's value, when it fits int64 (19 digits at most; then checked) */
    if (!dropped && (n->negative ? w <= (uint64_t)INT64_MAX + 1 : w <= (uint64_t)INT64_MAX))
        n->i = n->negative ? (int64_t)(0 - w) : (int64_t)w;
    else
        n->big = 1;
    int64_t q = dropped;
    if (end - p >= 2 && *p == '.' && is_digit(p[1])) {
        n->is_int = 0;
        const uint8_t *fraction = ++p;
        int before = dropped;
        p = digit_run(p, end, &w, &digits, &dropped, 1, &zeros);
        /* each fraction digit taken into w (or a leading zero) scales by 1/10 */
        q -= (p - fraction) - (dropped - before);
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        const uint8_t *e = p + 1;
        int negative = 0;
        if (e < end && (*e == '+' || *e == '-')) negative = *e++ == '-';
        if (e < end && is_digit(*e)) {  /* else Python backtracks: the number ends at 'e' */
            int64_t x = 0;
            while (e < end && is_digit(*e)) {
                if (x < 100000000) x = x * 10 + (*e - '0');
                e++;
            }
            q += negative ? -x : x;
            n->is_int = 0;
            p = e;
        }
    }
    if (!n->is_int) n->big = 0;
    n->exact = dropped == 0;
    n->w = w;
    n->q = q;
    n->end = p;
    c->p = p;
    return OK;
}

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
                                 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
                                 1e20, 1e21, 1e22};

/* ------------------------------------------------------------------ w * 10^q, rounded */

/* 5^q for q in [POW5_MIN, POW5_MAX] as P * 2^e, P of 128 bits (its top bit set), cut
 * down: P * 2^e <= 5^q < (P + 1) * 2^e, exactly equal for q in [0, 55]. Computed when the
 * module loads, from exact big integers (pow5_table). A double's decimal exponents with
 * up to 19 digits lie within; others go to strtod. */
#define POW5_MIN (-342)
#define POW5_MAX 308
typedef struct {
    uint64_t hi, lo;
    int32_t e;
} Pow5;
static Pow5 POW5[POW5_MAX - POW5_MIN + 1];
static int pow5_ready;

/* A big integer of 32 limbs of 32 bits (little-endian): 1024 bits, past 2^1023 / 5^342. */
#define BIG_LIMBS 32

static int big_bits(const uint32_t *x) {
    for (int k = BIG_LIMBS - 1; k >= 0; k--)
        if (x[k]) return 32 * k + 32 - __builtin_clz(x[k]);
    return 0;
}

/* The 128 bits of x from bit `from` up (bits past x's top are zero; `from` may be
 * negative: x shifted left). */
static void big_take128(const uint32_t *x, int from, uint64_t *hi, uint64_t *lo) {
    uint64_t words[2] = {0, 0};
    for (int b = 0; b < 128; b++) {
        int at = from + b;
        if (at < 0 || at >= 32 * BIG_LIMBS) continue;
        if (x[at / 32] >> (at % 32) & 1) words[b / 64] |= (uint64_t)1 << (b % 64);
    }
    *lo = words[0];
    *hi = words[1];
}

/* POW5, from exact integers: 5^q by multiplying by 5, and for q < 0 floor(2^1023 / 5^n)
 * by dividing by 5 n times (floors of floors of a quotient by integers are the floor of
 * the whole quotient), each cut to its top 128 bits. */
static void pow5_table(void) {
    uint32_t power[BIG_LIMBS] = {1}, inverse[BIG_LIMBS] = {0};
    inverse[BIG_LIMBS - 1] = 0x80000000u;  /* 2^1023 */
    for (int q = 0; q <= POW5_MAX || -q >= POW5_MIN; q++) {
        if (q) {  /* power *= 5; inverse = floor(inverse / 5) */
            uint64_t carry = 0;
            for (int k = 0; k < BIG_LIMBS; k++) {
                uint64_t v = (uint64_t)power[k] * 5 + carry;
                power[k] = (uint32_t)v;
                carry = v >> 32;
            }
            uint64_t rest = 0;
            for (int k = BIG_LIMBS - 1; k >= 0; k--) {
                uint64_t v = rest << 32 | inverse[k];
                inverse[k] = (uint32_t)(v / 5);
                rest = v % 5;
            }
        }
        int bits = big_bits(power);  /* 2^(bits-1) <= 5^q < 2^bits */
        if (q <= POW5_MAX) {
            Pow5 *t = &POW5[q - POW5_MIN];
            big_take128(power, bits - 128, &t->hi, &t->lo);
            t->e = bits - 128;
        }
        if (q && -q >= POW5_MIN) {
            /* 5^-q = 2^-1023 * (2^1023 / 5^q), whose top bit is bit 1023 - bits, or the
             * one above it: P = floor(2^(127 + bits) / 5^q) = the 128 bits from bit
             * 1023 - 127 - bits of floor(2^1023 / 5^q), P in [2^127, 2^128) */
            Pow5 *t = &POW5[-q - POW5_MIN];
            int from = 1023 - 127 - bits;
            big_take128(inverse, from, &t->hi, &t->lo);
            t->e = from - 1023;
            if (!(t->hi >> 63)) return;  /* not expected: the fast path stays off */
        }
    }
    pow5_ready = 1;
}

/* The double of sign `negative`, binary exponent `exponent` (of its top bit) and 53-bit
 * significand m (its top bit set, or 2^53 after rounding up); 0 (no value) when it is
 * not a normal double. */
static HOT int make_double(uint64_t m, int64_t exponent, int negative, double *out) {
    if (m >> 53) {  /* rounded up to the next power of two */
        m >>= 1;
        exponent++;
    }
    if (exponent < -1022 || exponent > 1023) return 0;  /* subnormal, or past the largest */
    uint64_t bits = (uint64_t)(exponent + 1023) << 52 | (m & (((uint64_t)1 << 52) - 1));
    if (negative) bits |= (uint64_t)1 << 63;
    memcpy(out, &bits, 8);
    return 1;
}

/* w * 10^q as product_double reads it, from the whole 64 x 128-bit product: what the
 * first half of it (product_double) leaves undecided. */
static int full_product_double(uint64_t w, int64_t q, int negative, double *out) {
#ifdef __SIZEOF_INT128__
    if (!pow5_ready || q < POW5_MIN || q > POW5_MAX) return 0;
    const Pow5 *t = &POW5[q - POW5_MIN];
    int lz = __builtin_clzll(w);
    uint64_t v = w << lz;
    unsigned __int128 low = (unsigned __int128)v * t->lo, high = (unsigned __int128)v * t->hi;
    /* the product, 192 bits: z2:z1:z0 */
    uint64_t z0 = (uint64_t)low;
    unsigned __int128 upper = high + (uint64_t)(low >> 64);
    uint64_t z2 = (uint64_t)(upper >> 64), z1 = (uint64_t)upper;
    int top = z2 >> 63 ? 191 : 190;  /* the product is in [2^190, 2^192) */
    int s = top - 52 - 128;           /* z2's bits below the 53 kept */
    uint64_t m = z2 >> s;
    /* the rest below the kept bits, in units of 2^64: rest = (z2's s low bits):z1 */
    unsigned __int128 rest = (unsigned __int128)(z2 & (((uint64_t)1 << s) - 1)) << 64 | z1;
    unsigned __int128 half = (unsigned __int128)1 << (s + 63);
    int up;
    if (q >= 0 && q <= 55) {  /* the entry is 5^q exactly: so is the product */
        if (rest != half) up = rest > half;
        else if (z0) up = 1;
        else up = (int)(m & 1);  /* a tie: to even */
    } else {
        /* the value is within [product, product + v), v < 2^64: its rest within
         * [rest, rest + 2) in units of 2^64 */
        if (rest + 2 <= half) up = 0;
        else if (rest > half) up = 1;
        else return 0;
    }
    return make_double(m + (uint64_t)up, top + t->e + q - lz, negative, out);
#else
    (void)w; (void)q; (void)negative; (void)out;
    return 0;
#endif
}

/* w * 10^q (w > 0, of at most 19 digits) correctly rounded, by a product with 5^q's table
 * entry P (128 bits) after Eisel and Lemire: most often its first half alone, v * P's
 * high word (v: w shifted to the top), decides. The value, scaled, lies within
 * [v * P, v * P + v); so within [H * 2^64, (H + 2^64) * 2^64), H = v * P_hi: the bits of
 * H below the 53 kept decide the rounding unless the halfway point may lie in that
 * window, which the whole product (full_product_double) then decides, or CPython's
 * strtod. 0 (no value) when neither does, or past the normal range. */
static HOT int product_double(uint64_t w, int64_t q, int negative, double *out) {
#ifdef __SIZEOF_INT128__
    /* w * 10^q in [10^q, 10^(q + 19)): a normal double for these q, whatever w */
    if (!pow5_ready || (uint64_t)(q + 307) > 307 + 289) return full_product_double(w, q, negative, out);
    const Pow5 *t = &POW5[q - POW5_MIN];
    int lz = __builtin_clzll(w);
    unsigned __int128 first = (unsigned __int128)(w << lz) * t->hi;
    uint64_t h1 = (uint64_t)(first >> 64), h0 = (uint64_t)first;
    int upper = (int)(h1 >> 63);     /* H's top bit: 63 or 62 */
    int s = 10 + upper;              /* h1's bits below the 53 kept */
    uint64_t below = h1 & (((uint64_t)1 << s) - 1), half = (uint64_t)1 << (s - 1);
    /* the rest lies in [below:h0, below:h0 + 2^64): the halfway point half:0 within
     * reach when below is half with h0 zero, or half - 1 with h0 not */
    if (below + (h0 != 0) == half) return full_product_double(w, q, negative, out);
    /* 54 bits rounded to 53 (a carry past them is 2^53: the next exponent, as the sum
     * below makes it) */
    uint64_t m = ((h1 >> (s - 1)) + 1) >> 1;
    int64_t exponent = 190 + upper + t->e + q - lz;
    uint64_t bits = (m + ((uint64_t)(exponent + 1022) << 52)) | (uint64_t)negative << 63;
    memcpy(out, &bits, 8);
    return 1;
#else
    (void)w; (void)q; (void)negative; (void)out;
    return 0;
#endif
}

/* A float literal's value as Python's float() gives it: correctly rounded. An exact
 * shortcut first (one double operation on exact operands: Clinger's), then the product
 * with a power of 5 (product_double), then CPython's own strtod. */
static int strtod_double(Program *prog, const Num *n, double *out);

static HOT int num_double(Program *prog, const Num *n, double *out) {
    if (n->exact) {
        uint64_t w = n->w;
        int64_t q = n->q;
        if (w == 0) {
            *out = n->negative ? -0.0 : 0.0;
            return OK;
        }
        if (w <= (1ULL << 53) && q >= -22 && q <= 22) {  /* Clinger's: one rounding */
            double d = (double)w;
            d = q < 0 ? d / POW10[-q] : d * POW10[q];
            *out = n->negative ? -d : d;
            return OK;
        }
        if (product_double(w, q, n->negative, out)) return OK;
    }
    return strtod_double(prog, n, out);
}

/* The literal read by CPython's own strtod, as float() reads it. */
static int strtod_double(Program *prog, const Num *n, double *out) {
    Py_ssize_t len = n->end - n->start;
    prog->scratch.len = 0;
    if (buf_reserve(&prog->scratch, len + 1) != OK) return NOMEM;
    memcpy(prog->scratch.data, n->start, (size_t)len);
    prog->scratch.data[len] = 0;
    char *stop;
    double d = PyOS_string_to_double(prog->scratch.data, &stop, NULL);  /* overflow: inf */
    if (d == -1.0 && PyErr_Occurred()) return ERROR;
    if (stop != prog->scratch.data + len) return DEFER;
    *out = d;
    return OK;
}

/* A literal (true, false, null) at c->p. */
static HOT int literal(Cursor *c, const char *word, Py_ssize_t n) {
    if (c->end - c->p < n || memcmp(c->p, word, (size_t)n) != 0) return 0;
    c->p += n;
    return 1;
}

/* Reads past one JSON value at c->p, checking it as json.loads would; OK or DEFER. */
static int skip_value(Cursor *c, int depth) {
    if (depth > MAX_DEPTH || c->p >= c->end) return DEFER;
    const uint8_t *s;
    Py_ssize_t n;
    int escaped, lone;
    switch (*c->p) {
    case '"':
        return scan_string(c, &s, &n, &escaped, &lone);
    case '{':
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == '}') {
            c->p++;
            return OK;
        }
        for (;;) {
            if (c->p >= c->end || *c->p != '"') return DEFER;
            if (scan_string(c, &s, &n, &escaped, &lone) != OK) return DEFER;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':') return DEFER;
            c->p++;
            skip_ws(c);
            if (skip_value(c, depth + 1) != OK) return DEFER;
            skip_ws(c);
            if (c->p >= c->end) return DEFER;
            if (*c->p == '}') {
                c->p++;
                return OK;
            }
            if (*c->p != ',') return DEFER;
            c->p++;
            skip_ws(c);
        }
    case '[':
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
            return OK;
        }
        for (;;) {
            if (skip_value(c, depth + 1) != OK) return DEFER;
            skip_ws(c);
            if (c->p >= c->end) return DEFER;
            if (*c->p == ']') {
                c->p++;
                return OK;
            }
            if (*c->p != ',') return DEFER;
            c->p++;
            skip_ws(c);
        }
    case 't':
        return literal(c, "true", 4) ? OK : DEFER;
    case 'f':
        return literal(c, "false", 5) ? OK : DEFER;
    case 'n':
        return literal(c, "null", 4) ? OK : DEFER;
    default: {
        Num num;
        if (scan_number(c, &num) != OK) return DEFER;
        return num.big ? DEFER : OK;  /* Python's int() of a long literal may refuse it */
    }
    }
}

/* ------------------------------------------------------------------ dates */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits_at(const uint8_t *s, int count, int *out) {
    int value = 0;
    for (int k = 0; k < count; k++) {
        if (!is_digit(s[k])) return 0;
        value = value * 10 + (s[k] - '0');
    }
    *out = value;
    return 1;
}

/* YYYY-MM-DD at s (10 bytes) as days since 1970-01-01, or 0 when it is not a date. */
static int ymd(const uint8_t *s, int64_t *days) {
    int y, m, d;
    if (!digits_at(s, 4, &y) || s[4] != '-' || !digits_at(s + 5, 2, &m) || s[7] != '-'
        || !digits_at(s + 8, 2, &d)) return 0;
    static const int month_days[] = {0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (y < 1 || m < 1 || m > 12 || d < 1 || d > month_days[m]) return 0;
    if (m == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) return 0;
    *days = days_from_civil(y, (unsigned)m, (unsigned)d);
    return 1;
}

/* The forms date.fromisoformat reads alike in every Python: YYYY-MM-DD. */
static int fast_date(const uint8_t *s, Py_ssize_t n, int64_t *days) {
    return n == 10 && ymd(s, days);
}

/* The forms datetime.fromisoformat(value.upper()) reads alike here (the flags say which
 * this Python reads): YYYY-MM-DD, T (t) or a space, HH:MM:SS, then .fff or .ffffff, then
 * Z (z) or +HH:MM / -HH:MM, as microseconds since the epoch (UTC when no offset). */
static int fast_timestamp(int flags, const uint8_t *s, Py_ssize_t n, int64_t *micros) {
    int64_t days;
    int hour, minute, second, fraction = 0;
    if (n < 19 || !ymd(s, &days)) return 0;
    if (!(s[10] == 'T' || s[10] == 't' || (s[10] == ' ' && (flags & F_SPACE)))) return 0;
    if (!digits_at(s + 11, 2, &hour) || s[13] != ':' || !digits_at(s + 14, 2, &minute)
        || s[16] != ':' || !digits_at(s + 17, 2, &second)) return 0;
    if (hour > 23 || minute > 59 || second > 59) return 0;
    Py_ssize_t at = 19;
    if (at < n && s[at] == '.') {
        if (n - at >= 7 && (flags & F_MICROS) && digits_at(s + at + 1, 6, &fraction)
            && (n - at == 7 || !is_digit(s[at + 7]))) {
            at += 7;
        } else if (n - at >= 4 && (flags & F_MILLIS) && digits_at(s + at + 1, 3, &fraction)
                   && (n - at == 4 || !is_digit(s[at + 4]))) {
            fraction *= 1000;
            at += 4;
        } else {
            return 0;
        }
    }
    int64_t offset = 0;
    if (at < n) {
        if ((s[at] == 'Z' || s[at] == 'z') && n - at == 1 && (flags & F_Z)) {
            at++;
        } else if ((s[at] == '+' || s[at] == '-') && n - at == 6 && (flags & F_OFFSET)) {
            int oh, om;
            if (!digits_at(s + at + 1, 2, &oh) || s[at + 3] != ':'
                || !digits_at(s + at + 4, 2, &om) || oh > 23 || om > 59) return 0;
            offset = (int64_t)(oh * 3600 + om * 60) * (s[at] == '-' ? -1 : 1);
            at += 6;
        } else {
            return 0;
        }
    }
    if (at != n) return 0;
    *micros = ((days * 86400 + hour * 3600 + minute * 60 + second) - offset) * 1000000
              + fraction;
    return 1;
}

static const int8_t BASE64[256] = {
    ['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7, ['H'] = 8,
    ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14, ['O'] = 15,
    ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21, ['V'] = 22,
    ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29,
    ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36,
    ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42, ['q'] = 43,
    ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49, ['x'] = 50,
    ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56, ['4'] = 57,
    ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63, ['/'] = 64};

/* Canonical base64 (groups of 4, "=" only as the last one or two characters), which
 * base64.b64decode(validate=True) decodes alike in every Python, appended to `col`'s
 * bytes; 0 (nothing appended) otherwise. */
static int fast_base64(Column *col, const uint8_t *s, Py_ssize_t n, int *status) {
    if (n % 4) return 0;
    Py_ssize_t pad = n >= 1 && s[n - 1] == '=' ? (n >= 2 && s[n - 2] == '=' ? 2 : 1) : 0;
    for (Py_ssize_t k = 0; k < n - pad; k++)
        if (!BASE64[s[k]]) return 0;
    if (pad && n - pad < 2) return 0;
    if ((*status = buf_reserve(&col->data, n / 4 * 3)) != OK) return 1;
    uint8_t *out = (uint8_t *)col->data.data + col->data.len;
    uint32_t bits = 0;
    int held = 0;
    for (Py_ssize_t k = 0; k < n - pad; k++) {
        bits = bits << 6 | (uint32_t)(BASE64[s[k]] - 1);
        held += 6;
        if (held >= 8) {
            held -= 8;
            *out++ = (uint8_t)(bits >> held);
            bits &= (1u << held) - 1;
        }
    }
    col->data.len = (char *)out - col->data.data;
    if ((*status = end_offset(col, col->data.len)) == OK) *status = append_validity(col, 1);
    return 1;
}

/* ------------------------------------------------------------------ the Python converters */

/* What a step's `slow` converter returned for a value: appended to its column, MISFIT
 * for None, DEFER for the program's defer marker. Takes the reference. */
static int slow_result(Program *prog, Step *step, PyObject *result) {
    if (!result) return ERROR;
    Column *col = &prog->cols[step->col];
    int r;
    if (result == Py_None) {
        r = MISFIT;
    } else if (result == prog->defer) {
        r = DEFER;
    } else if (col->kind == COL_BINARY && PyUnicode_Check(result)) {
        Py_ssize_t n;
        const char *text = PyUnicode_AsUTF8AndSize(result, &n);
        r = text ? append_bytes(col, text, n) : ERROR;
    } else if (col->kind == COL_BINARY && PyBytes_Check(result)) {
        r = append_bytes(col, PyBytes_AS_STRING(result), PyBytes_GET_SIZE(result));
    } else if ((col->kind == COL_I32 || col->kind == COL_I64) && PyLong_Check(result)) {
        int overflow;
        long long v = PyLong_AsLongLongAndOverflow(result, &overflow);
        if (v == -1 && PyErr_Occurred()) {
            r = ERROR;
        } else if (overflow || v < step->low || v > step->high) {
            PyErr_Format(PyExc_ValueError, "a converter's value %R is out of its column's "
                         "range", result);
            r = ERROR;
        } else {
            r = append_int(col, v);
        }
    } else {
        PyErr_Format(PyExc_TypeError, "a converter returned %R for a column of kind %d",
                     result, col->kind);
        r = ERROR;
    }
    Py_DECREF(result);
    return r;
}

/* The slow converter of a string value (its UTF-8 content). */
static int slow_string(Program *prog, Step *step, const uint8_t *s, Py_ssize_t n) {
    PyObject *text = PyUnicode_DecodeUTF8((const char *)s, n, "strict");
    if (!text) return ERROR;
    PyObject *result = PyObject_CallOneArg(step->slow, text);
    Py_DECREF(text);
    return slow_result(prog, step, result);
}

/* The slow converter of a whole JSON value (its text), read past at the cursor. */
static int slow_value(Program *prog, Step *step, Cursor *c, int depth) {
    const uint8_t *start = c->p;
    int r = skip_value(c, depth);
    if (r != OK) return r;
    PyObject *span = PyBytes_FromStringAndSize((const char *)start, c->p - start);
    if (!span) return ERROR;
    PyObject *result = PyObject_CallOneArg(step->slow, span);
    Py_DECREF(span);
    return slow_result(prog, step, result);
}

/* ------------------------------------------------------------------ steps */

static int parse_value(Program *prog, Step *step, Cursor *c, int depth);

/* A string value's content into the scratch buffer when it has escapes: (s, n) then
 * point at UTF-8 text. */
static HOT int string_content(Program *prog, Cursor *c, const uint8_t **s, Py_ssize_t *n) {
    int escaped, lone;
    int r = scan_string(c, s, n, &escaped, &lone);
    if (r != OK) return r;
    if (lone) return DEFER;
    if (escaped) {
        prog->scratch.len = 0;
        if ((r = unescape(*s, *n, &prog->scratch)) != OK) return r;
        *s = (const uint8_t *)prog->scratch.data;
        *n = prog->scratch.len;
    }
    return OK;
}

/* A string value straight into a binary column. */
static HOT int parse_string(Program *prog, Column *col, Cursor *c) {
    const uint8_t *s;
    Py_ssize_t n;
    int escaped, lone;
    int r = scan_string(c, &s, &n, &escaped, &lone);
    if (r != OK) return r;
    if (lone) return DEFER;
    if (!escaped) {
        /* short strings copied in 16-byte moves, where the source (the payloads' buffer,
         * not only this document) and the column have the room */
        if (n <= 16 && prog->limit - s >= 16
            && (col->data.cap - col->data.len >= 16 || buf_reserve(&col->data, 16) == OK)) {
            memcpy(col->data.data + col->data.len, s, 16);
            col->data.len += n;
            if (end_offset(col, col->data.len) != OK) return NOMEM;
            return append_validity(col, 1);
        }
        return append_bytes(col, s, n);
    }
    if ((r = unescape(s, n, &col->data)) != OK) return r;
    if (end_offset(col, col->data.len) != OK) return NOMEM;
    return append_validity(col, 1);
}

/* An integer of the step's range, from an int or an integral float (JSON Schema counts
 * 1.0 as an integer). */
static HOT int parse_integer(Program *prog, Step *step, Cursor *c, int64_t *out) {
    uint8_t b = *c->p;
    if (b != '-' && !is_digit(b)) return MISFIT;  /* NaN, Infinity: not integers either */
    {   /* an int literal of at most 18 digits: its value as it is read */
        const uint8_t *p = c->p + (b == '-'), *end = c->end;
        if (p < end && *p >= '1' && *p <= '9') {
            const uint8_t *first = p;
            uint64_t v = 0;
            /* 8 bytes a step: the digits among them, as one number (left-aligned: the
             * bytes after them shifted out, zeros before them) */
            while (end - p >= 8 && p - first <= 10) {
                uint64_t x;
                memcpy(&x, p, 8);
                int k = leading_digits(x);
                if (!k) break;
                v = v * POW10_U64[k] + digits_value(x, k);
                p += k;
                if (k < 8) break;
            }
            while (p < end && is_digit(*p) && p - first < 18) v = v * 10 + (uint64_t)(*p++ - '0');
            if (p == end || (!is_digit(*p) && *p != '.' && *p != 'e' && *p != 'E')) {
                int64_t value = b == '-' ? -(int64_t)v : (int64_t)v;
                if (value < step->low || value > step->high) return MISFIT;
                c->p = p;
                *out = value;
                return OK;
            }
        }
    }
    Num n;
    int r = scan_number(c, &n);
    if (r != OK) return r;
    int64_t v;
    if (n.is_int) {
        if (n.big) return DEFER;
        v = n.i;
    } else {
        double d;
        if ((r = num_double(prog, &n, &d)) != OK) return r;
        if (!isfinite(d) || d != floor(d) || d < -9223372036854775808.0
            || d >= 9223372036854775808.0) return MISFIT;
        v = (int64_t)d;
    }
    if (v < step->low || v > step->high) return MISFIT;
    *out = v;
    return OK;
}

static int parse_object(Program *prog, Step *step, Cursor *c, int depth);
static int parse_map(Program *prog, Step *step, Cursor *c, int depth);

/* A value of the scalar kinds most columns are (string, boolean, integer, number),
 * inlined where values are read. */
static HOT int parse_scalar(Program *prog, Step *step, Cursor *c) {
    if (c->p >= c->end) return DEFER;
    Column *col = step->column;
    uint8_t b = *c->p;
    int r;
    switch (step->kind) {
    case K_STRING:
        return b == '"' ? parse_string(prog, col, c) : MISFIT;
    case K_BOOLEAN:
        if (literal(c, "true", 4)) r = buf_byte(&col->values, 1);
        else if (literal(c, "false", 5)) r = buf_byte(&col->values, 0);
        else return MISFIT;
        return r != OK ? r : append_validity(col, 1);
    case K_INTEGER: case K_CONNECT_DAYS: {
        int64_t v;
        if ((r = parse_integer(prog, step, c, &v)) != OK) return r;
        return append_int(col, v);
    }
    case K_CONNECT_MILLIS: {
        int64_t v;
        if ((r = parse_integer(prog, step, c, &v)) != OK) return r;
        if (__builtin_mul_overflow(v, (int64_t)1000, &v)) return MISFIT;
        return append_int(col, v);
    }
    default: {  /* K_NUMBER */
        if (b != '-' && !is_digit(b)) return b == 'N' || b == 'I' ? DEFER : MISFIT;
        Num n;
        double d;
        if ((r = scan_number(c, &n)) != OK) return r;
        if (n.is_int) {
            if (n.big) return DEFER;
            d = (double)n.i;  /* as Python's float(int): rounded to nearest, ties to even */
        } else if ((r = num_double(prog, &n, &d)) != OK) {
            return r;
        }
        if (isinf(d)) return MISFIT;
        return append_real(col, d);
    }
    }
}

static HOT int is_scalar(int kind) {
    return (1u << kind) & (1u << K_STRING | 1u << K_BOOLEAN | 1u << K_INTEGER | 1u << K_NUMBER
                           | 1u << K_CONNECT_DAYS | 1u << K_CONNECT_MILLIS);
}

/* A value where the column may take null (an object's property, an array's item, a
 * map's value, the document): null as the step's nullability says, else the value. */
static HOT int parse_slot(Program *prog, Step *step, Cursor *c, int depth) {
    if (c->p < c->end && *c->p == 'n') {
        if (!literal(c, "null", 4)) return DEFER;
        return step->nullable ? append_null(prog, step->col) : MISFIT;
    }
    if (is_scalar(step->kind)) return parse_scalar(prog, step, c);
    Cursor inner = *c;  /* a copy: *c may be a caller's local kept in registers */
    int r = parse_value(prog, step, &inner, depth);
    *c = inner;
    return r;
}

static int parse_value(Program *prog, Step *step, Cursor *c, int depth) {
    if (c->p >= c->end || depth > MAX_DEPTH) return DEFER;
    if (is_scalar(step->kind)) return parse_scalar(prog, step, c);
    Column *col = &prog->cols[step->col];
    uint8_t b = *c->p;
    int r;
    switch (step->kind) {
    case K_ENUM:
        if (b == '"') return parse_string(prog, col, c);
        return slow_value(prog, step, c, depth);
    case K_TEXT:
        return slow_value(prog, step, c, depth);
    case K_DATE: case K_TIMESTAMP: case K_BASE64: {
        if (b != '"') return MISFIT;
        const uint8_t *s;
        Py_ssize_t n;
        if ((r = string_content(prog, c, &s, &n)) != OK) return r;
        int64_t v;
        if (step->kind == K_DATE && fast_date(s, n, &v)) return append_int(col, v);
        if (step->kind == K_TIMESTAMP && fast_timestamp(prog->flags, s, n, &v))
            return append_int(col, v);
        if (step->kind == K_BASE64 && fast_base64(col, s, n, &r)) return r;
        return slow_string(prog, step, s, n);
    }
    case K_ARRAY: {
        if (b != '[') return MISFIT;
        Step *item = step->children[0];
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == ']') {
            c->p++;
        } else {
            for (;;) {
                if ((r = parse_slot(prog, item, c, depth + 1)) != OK) return r;
                skip_ws(c);
                if (c->p >= c->end) return DEFER;
                if (*c->p == ']') {
                    c->p++;
                    break;
                }
                if (*c->p != ',') return DEFER;
                c->p++;
                skip_ws(c);
            }
        }
        if (end_offset(col, prog->cols[col->children[0]].length) != OK) return NOMEM;
        return append_validity(col, 1);
    }
    case K_OBJECT:
        return b == '{' ? parse_object(prog, step, c, depth) : MISFIT;
    case K_MAP:
        return b == '{' ? parse_map(prog, step, c, depth) : MISFIT;
    case K_UNION: {
        const uint8_t *start = c->p;
        for (int k = 0; k < step->nchildren; k++) {
            Step *member = step->children[k];
            Py_ssize_t length = prog->cols[member->col].length;
            c->p = start;
            r = parse_value(prog, member, c, depth + 1);
            if (r == MISFIT) {
                roll_back(prog->cols, member->col, length);
                continue;
            }
            if (r != OK) return r;
            for (int j = 0; j < step->nchildren; j++)
                if (j != k && append_null(prog, step->children[j]->col) != OK) return NOMEM;
            return append_validity(col, 1);
        }
        return MISFIT;
    }
    }
    return DEFER;
}

/* The property a key names: the one after the last matched first (values mostly come in
 * the schema's order), else any; -1 for none. */
static HOT int property_of(Step *step, const uint8_t *key, Py_ssize_t n, int hint) {
    if (hint < step->nchildren) {
        Property *p = &step->props[hint];
        if (p->name_len == n && same_bytes(key, p->name, n)) return hint;
    }
    for (int k = 0; k < step->nchildren; k++) {
        Property *p = &step->props[k];
        if (p->name_len == n && same_bytes(key, p->name, n)) return k;
    }
    return -1;
}

/* Past the ':' after a key. */
static HOT int colon(Cursor *c) {
    if (c->p < c->end && *c->p == ':') {  /* compact JSON: no whitespace */
        c->p++;
        skip_ws(c);
        return OK;
    }
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') return DEFER;
    c->p++;
    skip_ws(c);
    return OK;
}

/* Whether the key at c->p is property `k`'s plain name as it stands, then a colon (then
 * past them and the whitespace after): the raw bytes are the name, so the key is. */
static HOT int key_is(Step *step, Cursor *c, int k) {
    if (k >= step->nchildren) return 0;
    const Key *key = &step->keys[k];
    if (key->quick && c->end - c->p >= 16) {  /* two loads, compared under the masks */
        uint64_t a, b;
        memcpy(&a, c->p, 8);
        memcpy(&b, c->p + 8, 8);
        if (((a ^ key->words[0]) & key->masks[0]) | ((b ^ key->words[1]) & key->masks[1]))
            return 0;
        c->p += key->len;
    } else {
        Property *p = &step->props[k];
        Py_ssize_t n = p->name_len + 3;
        if (!p->plain || c->end - c->p < n || !same_bytes(c->p, p->pattern, n)) return 0;
        c->p += n;
    }
    skip_ws(c);
    return 1;
}

/* A key at c->p ('"'), unescaped when it needs to be; then past the ':'. */
static HOT int read_key(Program *prog, Cursor *c, const uint8_t **key, Py_ssize_t *n) {
    if (c->p >= c->end || *c->p != '"') return DEFER;
    int r = string_content(prog, c, key, n);
    return r != OK ? r : colon(c);
}

/* After a member: past a ',' (0) or the closing `close` (1); -1: neither. */
static HOT int next_member(Cursor *c, uint8_t close) {
    if (c->p < c->end && *c->p == ',') {  /* compact JSON: no whitespace */
        c->p++;
        skip_ws(c);
        return 0;
    }
    skip_ws(c);
    if (c->p >= c->end) return -1;
    if (*c->p == close) {
        c->p++;
        return 1;
    }
    if (*c->p != ',') return -1;
    c->p++;
    skip_ws(c);
    return 0;
}

/* Whether the object at `start` ('{') names one of the step's properties twice (DEFER:
 * json.loads keeps the last value, which may fit), else MISFIT: what a value that did
 * not fit returns, once the whole object is checked. */
static int misfit_unless_repeated(Program *prog, Step *step, const uint8_t *start,
                                  const uint8_t *end, int depth) {
    Cursor c = {start + 1, end};
    uint64_t local = 0, *seen = step->nchildren > 64 ? step->seen : &local;
    if (seen != &local) memset(seen, 0, sizeof(uint64_t) * ((size_t)step->nchildren + 63) / 64);
    skip_ws(&c);
    if (c.p < c.end && *c.p == '}') return MISFIT;
    for (;;) {
        const uint8_t *key;
        Py_ssize_t n;
        if (read_key(prog, &c, &key, &n) != OK) return DEFER;
        int k = property_of(step, key, n, 0);
        if (k >= 0) {
            if (seen[k >> 6] >> (k & 63) & 1) return DEFER;
            seen[k >> 6] |= (uint64_t)1 << (k & 63);
        }
        if (skip_value(&c, depth + 1) != OK) return DEFER;
        int closed = next_member(&c, '}');
        if (closed < 0) return DEFER;
        if (closed) return MISFIT;
    }
}

/* An object's properties, read in one pass. The cursor is a local copy (its address goes
 * only to inlined functions, so it stays in registers: a store to a column would make the
 * compiler reload it from memory); the functions that are not inlined take copies of it.
 * Which properties came: bits, a local mask up to 64 properties, else the step's words. */
static HOT int object_of(Program *prog, Step *step, Cursor *outer, int depth, int many) {
    Cursor cur = *outer, *c = &cur;
    const uint8_t *start = c->p;
    int r, hint = 0, given = 0;
    uint64_t mask = 0;
    if (many) memset(step->seen, 0, sizeof(uint64_t) * ((size_t)step->nchildren + 63) / 64);
#define SEEN(k) (many ? step->seen[(k) >> 6] >> ((k) & 63) & 1 : mask >> (k) & 1)
#define MARK(k) do {                                                           \
        if (many) step->seen[(k) >> 6] |= (uint64_t)1 << ((k) & 63);          \
        else mask |= (uint64_t)1 << (k);                                       \
    } while (0)
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            int k;
            if (key_is(step, c, hint)) {  /* the expected property, its name as it stands */
                k = hint;
            } else {
                const uint8_t *key;
                Py_ssize_t n;
                if ((r = read_key(prog, c, &key, &n)) != OK) return r;
                k = property_of(step, key, n, hint);
            }
            if (k < 0) {
                Cursor skipped = cur;
                r = skip_value(&skipped, depth + 1);  /* a property the column lacks: dropped */
                cur = skipped;
            } else {
                if (SEEN(k)) return DEFER;  /* json.loads keeps the last */
                MARK(k);
                given++;
                hint = k + 1;
                r = parse_slot(prog, step->children[k], c, depth + 1);
                if (r == MISFIT) return misfit_unless_repeated(prog, step, start, c->end, depth);
            }
            if (r != OK) return r;
            int closed = next_member(c, '}');
            if (closed < 0) return DEFER;
            if (closed) break;
        }
    }
    for (int k = 0; given < step->nchildren && k < step->nchildren; k++) {
        if (SEEN(k)) continue;
        Property *p = &step->props[k];
        if (p->has_default) {  /* the schema's default, read as a value would be */
            Cursor d = {(const uint8_t *)p->default_text,
                        (const uint8_t *)p->default_text + p->default_len};
            const uint8_t *limit = prog->limit;
            prog->limit = d.end;  /* its own text is all a read of it may reach */
            r = parse_slot(prog, step->children[k], &d, depth + 1);
            prog->limit = limit;
            if (r != OK) return r == MISFIT ? DEFER : r;
            skip_ws(&d);
            if (d.p != d.end) return DEFER;
        } else if (p->required) {
            return MISFIT;  /* no duplicates: they were deferred on the way */
        } else if (append_null(prog, step->children[k]->col) != OK) {
            return NOMEM;
        }
    }
#undef SEEN
#undef MARK
    *outer = cur;
    return append_validity(step->column, 1);
}

/* ------------------------------------------------------------------ the fast path */

/* Most producers write an object one way: every property, in the schema's order, compact
 * JSON (no whitespace), each key as it stands. fast_object reads that shape alone, each
 * key compared whole (with the byte before it) and each value read by a routine of its
 * column's kind; at anything else it bails, and the general path (object_of) reads the
 * object again and decides it. What it accepts, it reads as the general path would.
 *
 * It runs only where the payloads' buffer holds FAST_ROOM bytes past the document's end:
 * its routines read whole chunks without checking each against the buffer, less than
 * FAST_ROOM bytes past the document's end (a key matched up to 16 bytes past it, then a
 * value's chunks), and check what they take against the document's end. */
#define FAST_ROOM 96

/* The index of the first of the 16 bytes at p that is a quote, a backslash, a control
 * character or not ASCII; 16 for none. */
static HOT int first_special16(const uint8_t *p) {
#if defined(__SSE2__)
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    /* as signed bytes, those below 0x20 are the control characters and those past 0x7f */
    __m128i found = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                              _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                 _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
    int bits = _mm_movemask_epi8(found);
    return bits ? __builtin_ctz((unsigned)bits) : 16;
#else
    uint64_t a, b;
    memcpy(&a, p, 8);
    memcpy(&b, p + 8, 8);
    uint64_t found = special8(a);
    if (found) return __builtin_ctzll(found) >> 3;
    found = special8(b);
    return found ? 8 + (__builtin_ctzll(found) >> 3) : 16;
#endif
}

/* What an out-of-line routine returns to the fast path: a status, and where it stopped. */
typedef struct {
    int status;
    const uint8_t *p;
} Read;

/* The general routines, out of line on a copy of the fast path's cursor: the fast path's
 * own cursor then never has its address taken, so it stays in a register instead of being
 * stored and reloaded around every byte the routines write to a column (a char store may
 * alias anything whose address escaped). */
static __attribute__((noinline)) Read string_apart(Program *prog, Column *col, const uint8_t *p,
                                                  const uint8_t *end) {
    Cursor t = {p, end};
    int r = parse_string(prog, col, &t);
    return (Read){r, t.p};
}

/* A string value (c->p at its quote) into a binary column: plain ASCII without escapes
 * found 16 bytes a step; any other string read by parse_string. */
static HOT int fast_string(Program *prog, Column *col, Cursor *c) {
    const uint8_t *s = c->p + 1, *p = s;
    while (p < c->end) {
        int at = first_special16(p);
        if (at == 16) {
            p += 16;
            continue;
        }
        p += at;
        if (*p != '"' || p >= c->end) break;
        Py_ssize_t n = p - s;
        if (n <= 16) {  /* one 16-byte move */
            if (col->data.cap - col->data.len < 16 && buf_reserve(&col->data, 16) != OK)
                return NOMEM;
            memcpy(col->data.data + col->data.len, s, 16);
            col->data.len += n;
        } else if (buf_put(&col->data, s, n) != OK) {
            return NOMEM;
        }
        c->p = p + 1;
        if (end_offset(col, col->data.len) != OK) return NOMEM;
        return append_validity(col, 1);
    }
    /* the cursor by value both ways: its address taken here would keep it in memory */
    Read read = string_apart(prog, col, c->p, c->end);
    c->p = read.p;
    return read.status == DEFER ? BAIL : read.status;
}

#if !defined(__SSE2__)
/* Bit i set where byte i of v (the first byte lowest) is an ASCII digit: its high nibble
 * 3 and its low one at most 9, tested in each byte without carries between them. */
static HOT uint32_t digit_mask8(uint64_t v) {
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    uint64_t x = v ^ 0x3030303030303030ULL;
    uint64_t other = (x & 0xf0f0f0f0f0f0f0f0ULL)
                     | (((x & 0x0f0f0f0f0f0f0f0fULL) + 0x0606060606060606ULL) & 0x1010101010101010ULL);
    uint64_t digit = ~((((other & low7) + low7) | other)) & ~low7;  /* 0x80 in each digit */
    return (uint32_t)(((digit >> 7) * 0x0102040810204080ULL) >> 56);
}
#endif

/* Bit i set where byte i of the 16 at p is an ASCII digit. */
static HOT uint32_t digit_mask16(const uint8_t *p) {
#if defined(__SSE2__)
    __m128i d = _mm_sub_epi8(_mm_loadu_si128((const __m128i *)p), _mm_set1_epi8('0'));
    return (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8(9)), d));
#else
    uint64_t a, b;
    memcpy(&a, p, 8);
    memcpy(&b, p + 8, 8);
    return digit_mask8(a) | digit_mask8(b) << 8;
#endif
}

/* How many of the 16 bytes at p are ASCII digits before the first that is not: 0 to 16. */
static HOT int digit_count16(const uint8_t *p) {
    return __builtin_ctz(~digit_mask16(p));
}

/* The value of the first k (1 to 4) digits of the 4 bytes of v, as digits_value: two
 * multiplies instead of three (most integers and integer parts are this short). */
static HOT uint32_t digits4_value(uint32_t v, int k) {
    v <<= 8 * (4 - k);
    v = (v & 0x0f0f0f0fu) * 2561 >> 8;
    return (v & 0x00ff00ffu) * 6553601 >> 16;
}

/* The value of the k digits at p (1 to 16). */
static HOT uint64_t digits16_value(const uint8_t *p, int k) {
    if (k <= 4) {
        uint32_t x;
        memcpy(&x, p, 4);
        return digits4_value(x, k);
    }
    uint64_t a;
    memcpy(&a, p, 8);
    if (k <= 8) return digits_value(a, k);
    uint64_t b;
    memcpy(&b, p + 8, 8);
    return digits_value(a, 8) * POW10_U64[k - 8] + digits_value(b, k - 8);
}

/* An int literal of 1 to 15 digits in the step's range; BAIL for any other. What follows
 * it is the caller's to check (a ',', '}' or ']': a fraction or exponent bails there). */
static HOT int fast_integer(const Step *step, Cursor *c, int64_t *out) {
    const uint8_t *p = c->p;
    int negative = *p == '-';
    /* the sign among the digits' bits: the end found from the one load at p, which the
     * next value's reads then wait for alone */
    int len = __builtin_ctz(~(digit_mask16(p) | (uint32_t)negative)), k = len - negative;
    p += negative;
    /* also: a leading zero. One branch, its terms joined without branches of their own:
     * k > 1 goes either way from one value to the next (1 or 2 digits), and mispredicts */
    if ((k == 0) | (len == 16) | ((k > 1) & (*p == '0'))) return BAIL;
    if (c->end - p < k) return BAIL;  /* digits past the document's end */
    uint64_t v = digits16_value(p, k);
    int64_t value = negative ? -(int64_t)v : (int64_t)v;
    if (value < step->low || value > step->high) return BAIL;
    c->p = p + k;
    *out = value;
    return OK;
}

/* A number literal without exponent, of at most 19 digits, fewer than 16 before its point,
 * as Python's float() gives it (an int literal: float(int)); BAIL for others. */
static HOT int fast_double(Program *prog, Cursor *c, double *out) {
    const uint8_t *start = c->p, *p = start;
    int negative = *p == '-';
    p += negative;
    /* the reads below stay within 48 bytes of p */
    int k = digit_count16(p);
    if ((k == 0) | (k == 16) | ((k > 1) & (*p == '0'))) return BAIL;  /* as fast_integer */
    uint64_t w = digits16_value(p, k);
    int64_t q = 0;
    p += k;
    if (*p == '.') {
        p++;
        /* the fraction's digits counted over 32 bytes at once, and those past the first
         * 16 (0 to 2) valued without a branch: whether there are any goes either way
         * from one value to the next */
        int fraction = __builtin_ctzll(~(uint64_t)(digit_mask16(p)
                                                   | digit_mask16(p + 16) << 16));
        if (!fraction || k + fraction > 19) return BAIL;  /* a point needs a digit after it */
        int more = fraction < 16 ? fraction : 16, rest = fraction - more;
        w = w * POW10_U64[more] + digits16_value(p, more);
        uint32_t tail;
        memcpy(&tail, p + 16, 4);
        w = w * POW10_U64[rest] + digits4_value((uint32_t)((uint64_t)tail << 8 * (4 - rest)), 4);
        q = -fraction;
        p += fraction;
    }
    if (*p == 'e' || *p == 'E' || p > c->end) return BAIL;
    double d;
    if (!q) {
        d = (double)(negative ? -(int64_t)w : (int64_t)w);  /* float(int): -0 gives 0.0 */
    } else if (!w) {
        d = negative ? -0.0 : 0.0;
    } else if (!product_double(w, q, negative, &d)) {  /* not Clinger's divide: its
                                                          * latency held up the row */
        Num n = {.start = start, .end = p};  /* near a halfway point: CPython's strtod */
        int r = strtod_double(prog, &n, &d);
        if (r != OK) return r == DEFER ? BAIL : r;
    }
    c->p = p;
    *out = d;
    return OK;
}

/* The null at c->p of a step that takes one; BAIL for anything else. The routines below
 * look for it only where their value's first byte did not come. */
static HOT int fast_null(Program *prog, Step *step, Cursor *c) {
    if (!step->nullable || c->p >= c->end || *c->p != 'n' || !literal(c, "null", 4))
        return BAIL;
    Column *col = step->column;
    if (col->kind == COL_BINARY) {  /* most nulls: a string's, an empty slot in place */
        if (end_offset(col, col->data.len) != OK) return NOMEM;
        return append_validity(col, 0);
    }
    return append_null(prog, step->col);
}

/* A value of a scalar step, `kind` its FAST_ kind, or its null where the step takes one. */
static HOT int fast_scalar(Program *prog, Step *step, Column *col, int kind, Cursor *c) {
    int64_t v;
    double d;
    int r;
    switch (kind) {
    case FAST_STRING:
        if (c->p < c->end && *c->p == '"') return fast_string(prog, col, c);
        break;
    case FAST_I8: case FAST_I16: case FAST_I32: case FAST_I64:
        if ((r = fast_integer(step, c, &v)) == OK) {
            int8_t v8 = (int8_t)v;
            int16_t v16 = (int16_t)v;
            int32_t v32 = (int32_t)v;
            r = kind == FAST_I64 ? buf_put(&col->values, &v, 8)
                : kind == FAST_I32 ? buf_put(&col->values, &v32, 4)
                : kind == FAST_I16 ? buf_put(&col->values, &v16, 2)
                : buf_put(&col->values, &v8, 1);
            return r != OK ? r : append_validity(col, 1);
        }
        break;
    case FAST_MILLIS:
        if ((r = fast_integer(step, c, &v)) == OK) {
            if (__builtin_mul_overflow(v, (int64_t)1000, &v)) return BAIL;
            return append_int(col, v);
        }
        break;
    case FAST_NUMBER:
        if ((r = fast_double(prog, c, &d)) == OK) return append_real(col, d);
        if (r != BAIL) return r;  /* strtod's */
        break;
    default:  /* FAST_BOOL */
        if (literal(c, "true", 4)) r = buf_byte(&col->values, 1);
        else if (literal(c, "false", 5)) r = buf_byte(&col->values, 0);
        else break;
        return r != OK ? r : append_validity(col, 1);
    }
    return fast_null(prog, step, c);
}

/* An array of scalars (c->p at its '['), compact, each item read by its kind's routine. */
static HOT int fast_array(Program *prog, Step *step, int item_kind, Cursor *c) {
    Step *item = step->children[0];
    Column *items = item->column;
    int r;
    c->p++;
    if (c->p < c->end && *c->p == ']') {
        c->p++;
    } else {
        for (;;) {
            if ((r = fast_scalar(prog, item, items, item_kind, c)) != OK) return r;
            if (c->p >= c->end) return BAIL;
            uint8_t b = *c->p++;
            if (b == ']') break;
            if (b != ',') return BAIL;
        }
    }
    if (end_offset(step->column, items->length) != OK) return NOMEM;
    return append_validity(step->column, 1);
}

/* Whether the bytes at p (at most the document's end) are the key's pattern. A short
 * one may match bytes past the end: the value after it is then past it too, and its
 * routine bails. */
static HOT int fast_key_is(const FastKey *key, const uint8_t *p, const uint8_t *end) {
    if (key->len <= 16) {
#if defined(__SSE2__)
        __m128i same = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p),
                                      _mm_load_si128((const __m128i *)key->chunk));
        return !(~(uint32_t)_mm_movemask_epi8(same) & key->mask);
#else
        uint64_t a, b, x, y;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        memcpy(&x, key->chunk, 8);
        memcpy(&y, key->chunk + 8, 8);
        return !(((a ^ x) & key->masks[0]) | ((b ^ y) & key->masks[1]));
#endif
    }
    return end - p >= key->len && same_bytes(p, key->bytes, key->len);
}

/* The object at *at ('{', before end) in the common shape: OK with its values in and *at
 * past it; NOT_FAST (nothing appended) or BAIL (values appended) when it is not in that
 * shape; NOMEM, ERROR. Its cursor comes as two words, not a Cursor in memory: a 16-byte
 * copy of one just stored waits for the stores (no store forwarding). */
static HOT int fast_object(Program *prog, Step *step, const uint8_t **at, const uint8_t *end,
                           int depth) {
    Cursor cur = {*at, end}, *c = &cur;
    const FastKey *key = step->fast, *last = key + step->nchildren;
    int r;
    if (!fast_key_is(key, c->p, c->end)) return NOT_FAST;
    for (;;) {
        c->p += key->len;
        switch (key->kind) {
        case FAST_STRING:
            r = c->p < c->end && *c->p == '"' ? fast_string(prog, key->column, c)
                                               : fast_null(prog, key->step, c);
            break;
        case FAST_ARRAY:
            if (c->p < c->end && *c->p == '[') {
                /* arrays of strings (the most common) read by a copy of their own */
                r = key->item_kind == FAST_STRING
                    ? fast_array(prog, key->step, FAST_STRING, c)
                    : fast_array(prog, key->step, key->item_kind, c);
                break;
            }
            /* fall through: null, or not an array */
        case FAST_OTHER: {
            Cursor t = cur;  /* a copy to the general path: see string_apart */
            r = parse_slot(prog, key->step, &t, depth + 1);
            cur.p = t.p;
            break;
        }
        /* each kind a copy of fast_scalar of its own (the kind a constant): one dispatch
         * a value, not two */
        case FAST_I8:
            r = fast_scalar(prog, key->step, key->column, FAST_I8, c);
            break;
        case FAST_I16:
            r = fast_scalar(prog, key->step, key->column, FAST_I16, c);
            break;
        case FAST_I32:
            r = fast_scalar(prog, key->step, key->column, FAST_I32, c);
            break;
        case FAST_I64:
            r = fast_scalar(prog, key->step, key->column, FAST_I64, c);
            break;
        case FAST_MILLIS:
            r = fast_scalar(prog, key->step, key->column, FAST_MILLIS, c);
            break;
        case FAST_NUMBER:
            r = fast_scalar(prog, key->step, key->column, FAST_NUMBER, c);
            break;
        default:
            r = fast_scalar(prog, key->step, key->column, FAST_BOOL, c);
            break;
        }
        if (r != OK) return r == MISFIT || r == DEFER ? BAIL : r;
        if (++key == last) break;
        if (!fast_key_is(key, c->p, c->end)) return BAIL;
    }
    if (c->p >= c->end || *c->p != '}') return BAIL;
    *at = c->p + 1;
    return append_validity(step->column, 1);
}

/* The two objects' shapes compiled apart: up to 64 properties (a mask in a register),
 * and more. */
static __attribute__((noinline)) int parse_object_general(Program *prog, Step *step,
                                                          Cursor *c, int depth) {
    return step->nchildren <= 64 ? object_of(prog, step, c, depth, 0)
                                 : object_of(prog, step, c, depth, 1);
}

/* An object: by the fast path where the step has one, the object's values lie within
 * MAX_DEPTH (deeper, the general path defers) and the buffer has the room past the
 * document; else, or where it bails, the general way. */
static int parse_object(Program *prog, Step *step, Cursor *c, int depth) {
    if (step->fast && depth < MAX_DEPTH && prog->limit - c->end >= FAST_ROOM) {
        Py_ssize_t length = step->column->length;
        int r = fast_object(prog, step, &c->p, c->end, depth);
        if (r != BAIL && r != NOT_FAST) return r;
        if (r == BAIL) roll_back(prog->cols, step->col, length);
    }
    return parse_object_general(prog, step, c, depth);
}

static uint64_t hash_bytes(const char *s, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t k = 0; k < n; k++) h = (h ^ (uint8_t)s[k]) * 1099511628211ULL;
    return h;
}

/* Whether keys [first, last) of the binary column `keys` hold one twice; -1: no memory. */
static int repeated_keys(Program *prog, Column *keys, Py_ssize_t first, Py_ssize_t last) {
    const int32_t *offsets = (const int32_t *)keys->offsets.data;
    const char *data = keys->data.data;
    Py_ssize_t count = last - first;
    if (count < 2) return 0;
    if (count <= 16) {
        for (Py_ssize_t a = first; a < last; a++)
            for (Py_ssize_t b = a + 1; b < last; b++) {
                int32_t n = offsets[a + 1] - offsets[a];
                if (n == offsets[b + 1] - offsets[b]
                    && memcmp(data + offsets[a], data + offsets[b], (size_t)n) == 0) return 1;
            }
        return 0;
    }
    Py_ssize_t size = 64;
    while (size < count * 2) size *= 2;
    prog->keys.len = 0;
    if (buf_reserve(&prog->keys, size * (Py_ssize_t)sizeof(int64_t)) != OK) return -1;
    int64_t *table = (int64_t *)prog->keys.data;
    for (Py_ssize_t k = 0; k < size; k++) table[k] = -1;
    for (Py_ssize_t a = first; a < last; a++) {
        int32_t n = offsets[a + 1] - offsets[a];
        Py_ssize_t slot = (Py_ssize_t)(hash_bytes(data + offsets[a], n) & (uint64_t)(size - 1));
        while (table[slot] >= 0) {
            int64_t b = table[slot];
            if (n == offsets[b + 1] - offsets[b]
                && memcmp(data + offsets[a], data + offsets[b], (size_t)n) == 0) return 1;
            slot = (slot + 1) & (size - 1);
        }
        table[slot] = a;
    }
    return 0;
}

/* A map's keys when one of its values did not fit: MISFIT, or DEFER for a key given
 * twice (json.loads keeps the last value) or an object that is not JSON. */
static int misfit_unless_repeated_key(Program *prog, Step *step, const uint8_t *start,
                                      const uint8_t *end, int depth) {
    Column *keys = &prog->cols[step->key_col];
    Cursor c = {start + 1, end};
    Py_ssize_t length = keys->length;
    int r = MISFIT;
    skip_ws(&c);
    if (!(c.p < c.end && *c.p == '}')) {
        for (;;) {
            const uint8_t *key;
            Py_ssize_t n;
            if (read_key(prog, &c, &key, &n) != OK || append_bytes(keys, key, n) != OK
                || skip_value(&c, depth + 1) != OK) {
                r = DEFER;
                break;
            }
            int closed = next_member(&c, '}');
            if (closed < 0) {
                r = DEFER;
                break;
            }
            if (closed) break;
        }
    }
    if (r == MISFIT) {
        int repeated = repeated_keys(prog, keys, length, keys->length);
        r = repeated < 0 ? NOMEM : repeated ? DEFER : MISFIT;
    }
    roll_back(prog->cols, step->key_col, length);
    return r;
}

static int parse_map(Program *prog, Step *step, Cursor *c, int depth) {
    const uint8_t *start = c->p;
    Column *col = &prog->cols[step->col];
    Column *entries = &prog->cols[col->children[0]];
    Column *keys = &prog->cols[step->key_col];
    Step *values = step->children[0];
    Py_ssize_t first = keys->length;
    int r;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
    } else {
        for (;;) {
            const uint8_t *key;
            Py_ssize_t n;
            if ((r = read_key(prog, c, &key, &n)) != OK) return r;
            if (append_bytes(keys, key, n) != OK) return NOMEM;
            r = parse_slot(prog, values, c, depth + 1);
            if (r == MISFIT)
                return misfit_unless_repeated_key(prog, step, start, c->end, depth);
            if (r != OK) return r;
            if (append_validity(entries, 1) != OK) return NOMEM;
            int closed = next_member(c, '}');
            if (closed < 0) return DEFER;
            if (closed) break;
        }
    }
    int repeated = repeated_keys(prog, keys, first, keys->length);
    if (repeated) return repeated < 0 ? NOMEM : DEFER;
    if (end_offset(col, entries->length) != OK) return NOMEM;
    return append_validity(col, 1);
}

/* ------------------------------------------------------------------ compiling */

static void free_step(Step *step) {
    if (!step) return;
    for (int k = 0; k < step->nchildren; k++) free_step(step->children[k]);
    PyMem_Free(step->children);
    if (step->props) {
        for (int k = 0; k < step->nchildren; k++) {
            PyMem_Free(step->props[k].name);
            PyMem_Free(step->props[k].pattern);
            PyMem_Free(step->props[k].default_text);
        }
        PyMem_Free(step->props);
    }
    PyMem_Free(step->seen);
    PyMem_Free(step->keys);
    if (step->fast) {
        for (int k = 0; k < step->nchildren; k++) PyMem_Free(step->fast[k].bytes);
        PyMem_Free(step->fast);
    }
    Py_XDECREF(step->slow);
    PyMem_Free(step);
}

static void free_program(PyObject *capsule) {
    Program *prog = PyCapsule_GetPointer(capsule, "jsoncolumns.program");
    if (!prog) return;
    free_columns(prog->cols, prog->ncols);
    for (int k = 0; k < prog->ncols; k++) PyMem_Free(prog->cols[k].children);
    PyMem_Free(prog->cols);
    free_step(prog->root);
    PyMem_RawFree(prog->scratch.data);
    PyMem_RawFree(prog->keys.data);
    PyMem_RawFree(prog->padded.data);
    Py_XDECREF(prog->defer);
    PyMem_Free(prog);
}

/* The FAST_ kind of a scalar step; FAST_OTHER for the other kinds. */
static int fast_scalar_kind(const Step *step) {
    switch (step->kind) {
    case K_STRING: return FAST_STRING;
    case K_INTEGER: case K_CONNECT_DAYS:  /* by the column's width */
        return step->column->kind == COL_I8 ? FAST_I8 : step->column->kind == COL_I16 ? FAST_I16
             : step->column->kind == COL_I32 ? FAST_I32 : FAST_I64;
    case K_CONNECT_MILLIS: return FAST_MILLIS;
    case K_NUMBER: return FAST_NUMBER;
    case K_BOOLEAN: return FAST_BOOL;
    }
    return FAST_OTHER;
}

/* An object step's fast path (step->fast), when all its properties' names are plain:
 * each property's pattern and how its value is read. 0, or -1 with an exception set. */
static int fast_keys(Step *step) {
    int n = step->nchildren;
    if (n < 1) return 0;
    for (int k = 0; k < n; k++)
        if (!step->props[k].plain) return 0;
    if (!(step->fast = PyMem_Calloc((size_t)n, sizeof(FastKey)))) {
        PyErr_NoMemory();
        return -1;
    }
    for (int k = 0; k < n; k++) {
        Property *p = &step->props[k];
        FastKey *key = &step->fast[k];
        Py_ssize_t len = p->name_len + 4;
        if (len > INT32_MAX || !(key->bytes = PyMem_Malloc((size_t)len))) {
            PyErr_NoMemory();
            return -1;
        }
        key->bytes[0] = k ? ',' : '{';
        memcpy(key->bytes + 1, p->pattern, (size_t)p->name_len + 3);
        key->len = (int32_t)len;
        if (len <= 16) {
            uint8_t keep[16] = {0};
            memset(keep, 0xff, (size_t)len);
            memcpy(key->masks, keep, 16);
            memcpy(key->chunk, key->bytes, (size_t)len);
            key->mask = ((uint32_t)1 << len) - 1;
        }
        Step *child = step->children[k];
        key->step = child;
        key->column = child->column;
        key->kind = fast_scalar_kind(child);
        if (child->kind == K_ARRAY && fast_scalar_kind(child->children[0]) != FAST_OTHER) {
            key->kind = FAST_ARRAY;
            key->item_kind = fast_scalar_kind(child->children[0]);
        }
    }
    return 0;
}

/* The column kinds a step kind fills. */
static int fits(int kind, int col) {
    switch (kind) {
    case K_STRING: case K_TEXT: case K_ENUM: case K_BASE64: return col == COL_BINARY;
    case K_BOOLEAN: return col == COL_BOOL;
    case K_INTEGER: return col >= COL_I8 && col <= COL_I64;
    case K_CONNECT_DAYS: case K_DATE: return col == COL_I32;
    case K_CONNECT_MILLIS: case K_TIMESTAMP: return col == COL_I64;
    case K_NUMBER: return col == COL_F32 || col == COL_F64;
    case K_ARRAY: case K_MAP: return col == COL_LIST;
    case K_OBJECT: case K_UNION: return col == COL_STRUCT;
    }
    return 0;
}

/* step: (kind, col, nullable, low, high, slow, children, extra); `filled` counts the
 * steps filling each column (one each). */
static Step *build_step(Program *prog, PyObject *obj, int depth, int *filled) {
    if (depth > MAX_DEPTH) {
        PyErr_SetString(PyExc_ValueError, "program nested too deeply");
        return NULL;
    }
    PyObject *slow, *children, *extra;
    long long low, high;
    Step *step = PyMem_Calloc(1, sizeof(Step));
    if (!step) {
        PyErr_NoMemory();
        return NULL;
    }
    if (!PyTuple_Check(obj)) REFUSE("a step is a tuple");
    if (!PyArg_ParseTuple(obj, "iiiLLOO!O", &step->kind, &step->col, &step->nullable, &low,
                          &high, &slow, &PyTuple_Type, &children, &extra))
        goto fail;
    step->low = low;
    step->high = high;
    if (step->kind < K_STRING || step->kind > K_LAST) REFUSE("step kind");
    if (step->col < 0 || step->col >= prog->ncols) REFUSE("a step's column");
    Column *col = &prog->cols[step->col];
    step->column = col;
    if (!fits(step->kind, col->kind)) REFUSE("a step fills a column of another kind");
    if (filled[step->col]++) REFUSE("two steps fill one column");
    if (step->nullable && !col->nullable) REFUSE("a step takes null for a column that does not");
    if (step->kind == K_INTEGER || step->kind == K_CONNECT_DAYS
        || step->kind == K_CONNECT_MILLIS) {
        int bits = col->width * 8;
        int64_t most = bits == 64 ? INT64_MAX : ((int64_t)1 << (bits - 1)) - 1;
        if (low > high || low < -most - 1 || high > most) REFUSE("an integer range");
    } else if (step->kind == K_DATE) {
        step->low = INT32_MIN;
        step->high = INT32_MAX;
    } else if (step->kind == K_TIMESTAMP) {
        step->low = INT64_MIN;
        step->high = INT64_MAX;
    }
    if (slow != Py_None) {
        if (!PyCallable_Check(slow)) REFUSE("slow: a callable");
        step->slow = Py_NewRef(slow);
    }
    int needs_slow = step->kind == K_DATE || step->kind == K_TIMESTAMP
        || step->kind == K_BASE64 || step->kind == K_TEXT || step->kind == K_ENUM;
    if (needs_slow && !step->slow) REFUSE("this step needs its Python converter");
    Py_ssize_t n = PyTuple_GET_SIZE(children);
    if (n > 100000) REFUSE("too many children");
    step->children = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Step *));
    if (!step->children) {
        PyErr_NoMemory();
        goto fail;
    }
    step->nchildren = (int)n;  /* the children not built yet are NULL: free_step skips them */
    /* the column layout each kind's children have */
    switch (step->kind) {
    case K_ARRAY:
        if (n != 1) REFUSE("an array step has one child");
        break;
    case K_MAP:
        if (n != 1) REFUSE("a map step has one child");
        break;
    case K_OBJECT: case K_UNION:
        if (n != col->nchildren) REFUSE("a struct step has a child per field");
        if (step->kind == K_UNION && n < 1) REFUSE("a union has members");
        break;
    default:
        if (n != 0) REFUSE("a leaf step has no children");
    }
    if (step->kind == K_OBJECT) {
        if (!PyTuple_Check(extra) || PyTuple_GET_SIZE(extra) != n)
            REFUSE("properties: a tuple, one per child");
        step->props = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Property));
        step->seen = PyMem_Calloc((size_t)(n + 63) / 64 + 1, sizeof(uint64_t));
        step->keys = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Key));
        if (!step->props || !step->seen || !step->keys) {
            PyErr_NoMemory();
            goto fail;
        }
    }
    for (Py_ssize_t k = 0; k < n; k++)
        if (!(step->children[k] = build_step(prog, PyTuple_GET_ITEM(children, k), depth + 1,
                                             filled)))
            goto fail;
    switch (step->kind) {
    case K_ARRAY:
        if (col->nchildren != 1 || step->children[0]->col != col->children[0])
            REFUSE("an array's items fill its list's child");
        break;
    case K_MAP: {
        long key = PyLong_AsLong(extra);
        if (key == -1 && PyErr_Occurred()) goto fail;
        if (col->nchildren != 1) REFUSE("a map's list has one child");
        Column *entries = &prog->cols[col->children[0]];
        if (entries->kind != COL_STRUCT || entries->nchildren != 2
            || entries->children[0] != key || entries->children[1] != step->children[0]->col
            || prog->cols[key].kind != COL_BINARY)
            REFUSE("a map's list holds structs of its keys and values");
        if (filled[key]++ || filled[col->children[0]]++) REFUSE("two steps fill one column");
        step->key_col = (int)key;
        break;
    }
    case K_OBJECT: case K_UNION:
        for (Py_ssize_t k = 0; k < n; k++) {
            if (step->children[k]->col != col->children[k])
                REFUSE("a struct's fields fill its children");
            if (step->kind == K_UNION && !prog->cols[col->children[k]].nullable)
                REFUSE("a union's members are nullable");
        }
        break;
    }
    if (step->kind == K_OBJECT) {
        for (Py_ssize_t k = 0; k < n; k++) {
            Property *p = &step->props[k];
            PyObject *name, *fallback;
            if (!PyArg_ParseTuple(PyTuple_GET_ITEM(extra, k), "O!pO", &PyBytes_Type, &name,
                                  &p->required, &fallback))
                goto fail;
            if (!(p->name = copy_bytes(name, &p->name_len))) goto fail;
            p->plain = 1;
            for (Py_ssize_t j = 0; j < p->name_len; j++) {
                uint8_t b = (uint8_t)p->name[j];
                if (b == '"' || b == '\\' || b < 0x20) p->plain = 0;
            }
            if (!(p->pattern = PyMem_Malloc((size_t)p->name_len + 3))) {
                PyErr_NoMemory();
                goto fail;
            }
            p->pattern[0] = '"';
            memcpy(p->pattern + 1, p->name, (size_t)p->name_len);
            p->pattern[p->name_len + 1] = '"';
            p->pattern[p->name_len + 2] = ':';
            Key *key = &step->keys[k];
            if (p->plain && p->name_len + 3 <= 16) {
                key->len = (int32_t)(p->name_len + 3);
                uint8_t bytes[16] = {0}, keep[16] = {0};
                memcpy(bytes, p->pattern, (size_t)p->name_len + 3);
                memset(keep, 0xff, (size_t)p->name_len + 3);
                memcpy(key->words, bytes, 16);
                memcpy(key->masks, keep, 16);
                key->quick = 1;
            }
            if (fallback != Py_None) {
                if (!PyBytes_Check(fallback)) REFUSE("a default: JSON text, or None");
                if (!(p->default_text = copy_bytes(fallback, &p->default_len))) goto fail;
                p->has_default = 1;
            } else if (!p->required && !prog->cols[col->children[k]].nullable) {
                REFUSE("a property that may be absent has a nullable column");
            }
        }
        if (fast_keys(step) < 0) goto fail;
    }
    return step;
fail:
    free_step(step);
    return NULL;
}

/* compile(columns, step, flags, defer): columns a list of (kind, children tuple, nullable),
 * children after their parent; step the root's, filling column 0; flags the F_* the date-time fast
 * path may take; defer what slow converters return to leave a row to Python. */
static PyObject *compile_program(PyObject *self, PyObject *args) {
    PyObject *columns, *root, *defer;
    int flags;
    if (!PyArg_ParseTuple(args, "O!O!iO", &PyList_Type, &columns, &PyTuple_Type, &root,
                          &flags, &defer))
        return NULL;
    Program *prog = PyMem_Calloc(1, sizeof(Program));
    if (!prog) return PyErr_NoMemory();
    PyObject *capsule = PyCapsule_New(prog, "jsoncolumns.program", free_program);
    if (!capsule) {
        PyMem_Free(prog);
        return NULL;
    }
    int *filled = NULL;
    prog->flags = flags;
    prog->defer = Py_NewRef(defer);
    Py_ssize_t n = PyList_GET_SIZE(columns);
    if (n < 1 || n > 100000) REFUSE("column count");
    prog->cols = PyMem_Calloc((size_t)n, sizeof(Column));
    filled = PyMem_Calloc((size_t)n, sizeof(int));
    if (!prog->cols || !filled) {
        PyErr_NoMemory();
        goto fail;
    }
    prog->ncols = (int)n;
    for (Py_ssize_t k = 0; k < n; k++) {
        Column *col = &prog->cols[k];
        PyObject *children;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(columns, k), "iO!p", &col->kind, &PyTuple_Type,
                              &children, &col->nullable))
            goto fail;
        if (col->kind < COL_BOOL || col->kind > COL_LAST) REFUSE("column kind");
        col->width = WIDTHS[col->kind];
        if (column_children(col, children, k, n) < 0) goto fail;
    }
    if (!(prog->root = build_step(prog, root, 0, filled))) goto fail;
    if (prog->root->col != 0) REFUSE("the root step fills column 0");
    for (Py_ssize_t k = 0; k < n; k++)
        if (filled[k] != 1) REFUSE("every column is filled by one step");
    PyMem_Free(filled);
    return capsule;
fail:
    PyMem_Free(filled);
    Py_DECREF(capsule);
    return NULL;
}

/* ------------------------------------------------------------------ running */

/* One document as row `row`: OK (its values in, or a null with the row in `deferred`),
 * NOMEM or ERROR (the run stops). */
static HOT int decode_row(Program *prog, const uint8_t *start, Py_ssize_t size, Py_ssize_t row,
                          PyObject *deferred) {
    Cursor c = {start, start + size};
    Step *root = prog->root;
    int r;
    if (root->fast && size && *start == '{' && prog->limit - c.end >= FAST_ROOM) {
        /* an object in the common shape; else the general path, as parse_slot would go
         * (without a second try of the fast path) */
        const uint8_t *p = start;
        r = fast_object(prog, root, &p, c.end, 0);
        c.p = p;
        if (r == BAIL) roll_back(prog->cols, 0, row);
        if (r == BAIL || r == NOT_FAST) r = parse_object_general(prog, root, &c, 0);
    } else {
        skip_ws(&c);
        r = parse_slot(prog, root, &c, 0);
    }
    if (r == OK) {
        skip_ws(&c);
        if (c.p == c.end) return OK;
    }
    if (r == NOMEM || r == ERROR) return r;
    PyObject *index = PyLong_FromSsize_t(row);
    if (!index || PyList_Append(deferred, index) < 0) {
        Py_XDECREF(index);
        return ERROR;
    }
    Py_DECREF(index);
    roll_back(prog->cols, 0, row);
    return append_null(prog, 0);
}

/* One payload (run's): decode_row out of line. */
static __attribute__((noinline)) int decode_one(Program *prog, const uint8_t *start,
                                                Py_ssize_t size, Py_ssize_t row,
                                                PyObject *deferred) {
    return decode_row(prog, start, size, row, deferred);
}

/* Rows data[first[row]:last[row]] (run_spans'), the loop around decode_row in one
 * function: its registers saved and restored once a run, not once a row. */
static __attribute__((noinline)) int decode_spans(Program *prog, const uint8_t *data,
                                                  const int64_t *first, const int64_t *last,
                                                  Py_ssize_t rows, PyObject *deferred) {
    for (Py_ssize_t row = 0; row < rows; row++) {
        int r = decode_row(prog, data + first[row], (Py_ssize_t)(last[row] - first[row]), row,
                           deferred);
        if (r != OK) return r;
    }
    return OK;
}

static int run_failed(int r) {
    if (r == NOMEM && !PyErr_Occurred()) past_size_limit();
    return r;
}

/* run(program, payloads, arrow=False) -> ([(length, null_count, validity, values, offsets,
 * data)] per column, or with `arrow` a capsule of column 0's ArrowArray (columns.h's
 * column_capsule); [the rows left to Python]) */
static PyObject *run_program(PyObject *self, PyObject *args) {
    PyObject *capsule, *payloads;
    int arrow = 0;
    if (!PyArg_ParseTuple(args, "OO|p", &capsule, &payloads, &arrow)) return NULL;
    Program *prog = PyCapsule_GetPointer(capsule, "jsoncolumns.program");
    if (!prog) return NULL;
    if (prog->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a program runs one run at a time");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(payloads, "payloads: a sequence of bytes");
    if (!seq) return NULL;
    prog->busy = 1;
    Py_ssize_t rows = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *deferred = PyList_New(0), *result = NULL;
    if (!deferred || begin_run(prog->cols, prog->ncols, rows) < 0) goto done;
    for (Py_ssize_t row = 0; row < rows; row++) {
        Py_buffer view;
        if (PyObject_GetBuffer(items[row], &view, PyBUF_SIMPLE) < 0) goto done;
        const uint8_t *doc = view.buf;
        prog->limit = doc + view.len;
        /* a bytes object has no room past its end for the fast path: a copy that has */
        if (view.len <= 65536 && buf_reserve(&prog->padded, view.len + FAST_ROOM) == OK) {
            memcpy(prog->padded.data, doc, (size_t)view.len);
            memset(prog->padded.data + view.len, 0, FAST_ROOM);
            doc = (const uint8_t *)prog->padded.data;
            prog->limit = doc + view.len + FAST_ROOM;
        }
        int r = decode_one(prog, doc, view.len, row, deferred);
        PyBuffer_Release(&view);
        if (r != OK) {
            run_failed(r);
            goto done;
        }
    }
    PyObject *columns = arrow ? column_capsule(prog->cols, prog->ncols, rows)
                              : column_buffers(prog->cols, prog->ncols, rows);
    if (columns) result = Py_BuildValue("NO", columns, deferred);
done:
    free_columns(prog->cols, prog->ncols);
    prog->busy = 0;
    Py_XDECREF(deferred);
    Py_DECREF(seq);
    return result;
}

/* run_spans(program, data, starts, ends, arrow=False): run's result for
 * data[starts[i]:ends[i]] (starts and ends: int64 buffers), read in place. */
static PyObject *run_spans(PyObject *self, PyObject *args) {
    PyObject *capsule, *result = NULL, *deferred = NULL;
    Spans in;
    int arrow = 0;
    if (!PyArg_ParseTuple(args, "Oy*y*y*|p", &capsule, &in.data, &in.starts, &in.ends, &arrow))
        return NULL;
    Program *prog = PyCapsule_GetPointer(capsule, "jsoncolumns.program");
    if (!prog) goto done;
    if (prog->busy) {
        PyErr_SetString(PyExc_RuntimeError, "a program runs one run at a time");
        prog = NULL;
        goto done;
    }
    prog->busy = 1;
    Py_ssize_t rows = span_rows(&in);
    if (rows < 0) goto done;
    const int64_t *first = in.starts.buf, *last = in.ends.buf;
    if (!(deferred = PyList_New(0)) || begin_run(prog->cols, prog->ncols, rows) < 0) goto done;
    prog->limit = (const uint8_t *)in.data.buf + in.data.len;
    int r = decode_spans(prog, (const uint8_t *)in.data.buf, first, last, rows, deferred);
    if (r != OK) {
        run_failed(r);
        goto done;
    }
    PyObject *columns = arrow ? column_capsule(prog->cols, prog->ncols, rows)
                              : column_buffers(prog->cols, prog->ncols, rows);
    if (columns) result = Py_BuildValue("NO", columns, deferred);
done:
    if (prog) {
        free_columns(prog->cols, prog->ncols);
        prog->busy = 0;
    }
    Py_XDECREF(deferred);
    spans_release(&in);
    return result;
}

static PyMethodDef methods[] = {
    {"compile", compile_program, METH_VARARGS,
     "compile(columns, step, flags, defer) -> a program"},
    {"run", run_program, METH_VARARGS,
     "run(program, payloads, arrow=False) -> (the columns' buffers, or with arrow an "
     "ArrowArray capsule; the rows left to Python)"},
    {"run_spans", run_spans, METH_VARARGS, RUN_SPANS_ARROW_DOC},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jsoncolumns",
                                    "JSON documents decoded into Arrow column buffers.", -1,
                                    methods};

PyMODINIT_FUNC PyInit__jsoncolumns(void) {
    if (!pow5_ready) pow5_table();
    return create_module(&module);
}
