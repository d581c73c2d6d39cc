/*
 * Compiled record decoder: magic-2 records straight into Arrow-layout column buffers.
 *
 * DecodedColumns holds one growable buffer per Arrow buffer of the output batch
 * (int64 offsets and timestamps, int32 timestamp types, int32 offsets + data + validity
 * bitmap for keys, values, header keys and header values, int32 list offsets for the
 * headers). decode_v2() parses a whole records section in one call; take_columns()
 * hands the buffers to Python as Chunk objects that expose them through the buffer
 * protocol, so pyarrow wraps them without a copy.
 *
 * Validation mirrors v2.decode_v2_records: every record of the batch is parsed
 * and checked (header keys must be UTF-8) whether or not its offset is kept. A batch
 * that fails leaves the columns as they were before it (MalformedRecords is raised).
 *
 * decode_run() walks a mapped segment itself, batch after batch, while the batches are
 * plain (uncompressed magic 2, nothing for a transaction filter to decide), verifying a
 * batch's checksum in the same pass as its parse; the scan loop pays Python's per-batch
 * cost only for the other entries. Its Python twin is
 * pure.RecordAccumulator.decode_run: same stops, positions and rows.
 *
 * FileMapping maps a segment file so that the file may shrink while it is read: see
 * "mapped segment files" below.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Kafka's layout (layout.py) and the decode_run() states (fastpath/protocol.py) are
 * defined once, in Python: setup.py passes them as macros (fastpath/buildinfo.py lists
 * them), and the module exports the values it was built with. */
#ifndef LOG_OVERHEAD
#error "LOG_OVERHEAD is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_HEADER_SIZE
#error "V2_HEADER_SIZE is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_BASE_OFFSET
#error "V2_BASE_OFFSET is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_LENGTH
#error "V2_LENGTH is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_MAGIC
#error "V2_MAGIC is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_CRC
#error "V2_CRC is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_ATTRIBUTES
#error "V2_ATTRIBUTES is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_LAST_OFFSET_DELTA
#error "V2_LAST_OFFSET_DELTA is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_BASE_TIMESTAMP
#error "V2_BASE_TIMESTAMP is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_MAX_TIMESTAMP
#error "V2_MAX_TIMESTAMP is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_RECORD_COUNT
#error "V2_RECORD_COUNT is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_CRC_START
#error "V2_CRC_START is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ATTR_COMPRESSION_MASK
#error "ATTR_COMPRESSION_MASK is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ATTR_TIMESTAMP_TYPE
#error "ATTR_TIMESTAMP_TYPE is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ATTR_TRANSACTIONAL
#error "ATTR_TRANSACTIONAL is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ATTR_CONTROL
#error "ATTR_CONTROL is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef CREATE_TIME
#error "CREATE_TIME is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef LOG_APPEND_TIME
#error "LOG_APPEND_TIME is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef RUN_ENTRY_FOR_PYTHON
#error "RUN_ENTRY_FOR_PYTHON is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef RUN_FLUSH
#error "RUN_FLUSH is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef RUN_DONE
#error "RUN_DONE is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef RUN_END
#error "RUN_END is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif

#ifndef V2_LEADER_EPOCH
#error "V2_LEADER_EPOCH is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_PRODUCER_ID
#error "V2_PRODUCER_ID is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_PRODUCER_EPOCH
#error "V2_PRODUCER_EPOCH is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef V2_BASE_SEQUENCE
#error "V2_BASE_SEQUENCE is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_END_ROW
#error "ENTRY_END_ROW is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_BASE_OFFSET
#error "ENTRY_BASE_OFFSET is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_PRODUCER_ID
#error "ENTRY_PRODUCER_ID is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_PRODUCER_EPOCH
#error "ENTRY_PRODUCER_EPOCH is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_BASE_SEQUENCE
#error "ENTRY_BASE_SEQUENCE is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_LEADER_EPOCH
#error "ENTRY_LEADER_EPOCH is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_ATTRIBUTES
#error "ENTRY_ATTRIBUTES is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_MAGIC
#error "ENTRY_MAGIC is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_POSITION
#error "ENTRY_POSITION is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_CONTROL_TYPE
#error "ENTRY_CONTROL_TYPE is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_COORDINATOR_EPOCH
#error "ENTRY_COORDINATOR_EPOCH is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef ENTRY_FIELDS
#error "ENTRY_FIELDS is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef NOT_CONTROL
#error "NOT_CONTROL is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif
#ifndef NO_COORDINATOR_EPOCH
#error "NO_COORDINATOR_EPOCH is not defined: build with setup.py (see fastpath/buildinfo.py)"
#endif

#define INT32_LIMIT 0x7fffffffLL /* Arrow's int32 offsets and lengths */

static PyObject *MalformedRecords;

/* ------------------------------------------------------------------ Chunk */

/* Memory handed over from a column buffer; freed when the last Arrow user lets go. */
typedef struct {
    PyObject_HEAD
    char *data;
    Py_ssize_t size;
    size_t cap; /* what was allocated, for the spare blocks below */
} Chunk;

static char empty_chunk_byte;

/* Spare blocks: the large buffers of batches Spark (or any caller) has let go, kept for
 * the next batches' columns. Freed and allocated again, they came back as fresh pages
 * (malloc hands blocks this large to mmap, or trims its heap), and the kernel's faults
 * and zeroing of those pages cost about a tenth of a plain scan. Capacities of large
 * blocks are multiples of SPARE_GRAIN, so that a column's buffer, which starts at the
 * size its largest batch reached, finds the block of a batch like it. At most
 * SPARE_MAX_BYTES stay kept. Used under the GIL only. */
#define SPARE_GRAIN ((size_t)64 << 10)
#define SPARE_SLOTS 32
#define SPARE_MAX_BYTES ((size_t)32 << 20)

static struct {
    char *data;
    size_t cap;
    unsigned long long kept_at; /* spare_clock when it was let go */
} spare_blocks[SPARE_SLOTS];
static int spare_count;
static size_t spare_bytes;
static unsigned long long spare_clock;

static inline size_t
spare_round(size_t size)
{
    return (size + SPARE_GRAIN - 1) & ~(SPARE_GRAIN - 1);
}

/* Keep a block let go of; 0 when it is too small or too large to keep (the caller frees
 * it). Room is made by freeing the blocks let go longest ago: they were sized for earlier
 * batches (a scan of larger records or batches, in a worker that serves many queries),
 * and kept they would turn away every block of the batches now decoded. */
static int
spare_put(char *data, size_t cap)
{
    if (cap < SPARE_GRAIN || cap > SPARE_MAX_BYTES)
        return 0;
    while (spare_count == SPARE_SLOTS || spare_bytes + cap > SPARE_MAX_BYTES) {
        int oldest = 0;
        for (int i = 1; i < spare_count; i++)
            if (spare_blocks[i].kept_at < spare_blocks[oldest].kept_at)
                oldest = i;
        PyMem_RawFree(spare_blocks[oldest].data);
        spare_bytes -= spare_blocks[oldest].cap;
        spare_blocks[oldest] = spare_blocks[--spare_count];
    }
    spare_blocks[spare_count].data = data;
    spare_blocks[spare_count].cap = cap;
    spare_blocks[spare_count].kept_at = ++spare_clock;
    spare_count++;
    spare_bytes += cap;
    return 1;
}

/* A spare block for `want` bytes, its capacity in *cap: the smallest of `want` to twice
 * that, else the largest of half that up, grown (a scan's short last batch cut its block
 * to its size: grown, only the added pages are new). A block much larger is left for the
 * column it came from. NULL when none suits. */
static char *
spare_take(size_t want, size_t *cap)
{
    int best = -1, below = -1;
    for (int i = 0; i < spare_count; i++) {
        size_t size = spare_blocks[i].cap;
        if (size >= want && size / 2 <= want &&
            (best < 0 || size < spare_blocks[best].cap))
            best = i;
        if (size < want && size >= want / 2 &&
            (below < 0 || size > spare_blocks[below].cap))
            below = i;
    }
    int taken = best >= 0 ? best : below;
    if (taken < 0)
        return NULL;
    char *data = spare_blocks[taken].data;
    *cap = spare_blocks[taken].cap;
    if (*cap < want) {
        char *grown = PyMem_RawRealloc(data, want);
        if (grown == NULL)
            return NULL; /* the block stays spare; the caller allocates */
        data = grown;
        *cap = want;
    }
    spare_bytes -= spare_blocks[taken].cap;
    spare_blocks[taken] = spare_blocks[--spare_count];
    return data;
}

static void
Chunk_dealloc(Chunk *self)
{
    if (self->data != &empty_chunk_byte && !spare_put(self->data, self->cap))
        PyMem_RawFree(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
Chunk_getbuffer(Chunk *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, 1, flags);
}

static Py_ssize_t
Chunk_length(Chunk *self)
{
    return self->size;
}

static PyBufferProcs Chunk_as_buffer = {(getbufferproc)Chunk_getbuffer, NULL};
static PySequenceMethods Chunk_as_sequence = {(lenfunc)Chunk_length};

static PyTypeObject ChunkType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "segmentlog_datasource.format.fastpath._fastrecords.Chunk",
    .tp_doc = "Read-only bytes of one decoded column buffer.",
    .tp_basicsize = sizeof(Chunk),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_dealloc = (destructor)Chunk_dealloc,
    .tp_as_buffer = &Chunk_as_buffer,
    .tp_as_sequence = &Chunk_as_sequence,
};

/* ---------------------------------------------------------- growable buffers */

typedef struct {
    char *data;
    size_t len;
    size_t cap;
    size_t next_cap; /* the size the largest taken buffer reached: the next one starts there */
    int hinted;      /* next_cap is the last accumulator's, until this one's first take */
} GrowBuf;

static int
growbuf_reserve_slow(GrowBuf *buf, size_t need)
{
    size_t cap = buf->cap ? buf->cap : (buf->next_cap > 256 ? buf->next_cap : 256);
    while (cap < need)
        cap *= 2;
    if (cap >= SPARE_GRAIN) {
        /* A scan's first batches grow their columns from nothing: into spare blocks too. */
        cap = spare_round(cap);
        size_t spare_cap;
        char *spare = spare_take(cap, &spare_cap);
        if (spare != NULL) {
            if (buf->len)
                memcpy(spare, buf->data, buf->len);
            if (buf->data != NULL && !spare_put(buf->data, buf->cap))
                PyMem_RawFree(buf->data);
            buf->data = spare;
            buf->cap = spare_cap;
            return 0;
        }
    }
    char *data = PyMem_RawRealloc(buf->data, cap);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    buf->data = data;
    buf->cap = cap;
    return 0;
}

static inline int
growbuf_reserve(GrowBuf *buf, size_t extra)
{
    size_t need = buf->len + extra;
    if (need <= buf->cap)
        return 0;
    return growbuf_reserve_slow(buf, need);
}

static inline void
growbuf_put_i64(GrowBuf *buf, int64_t value)
{
    memcpy(buf->data + buf->len, &value, 8);
    buf->len += 8;
}

static inline void
growbuf_put_i32(GrowBuf *buf, int32_t value)
{
    memcpy(buf->data + buf->len, &value, 4);
    buf->len += 4;
}

/* Hand the bytes over to a Chunk and leave the buffer empty. */
static PyObject *
growbuf_detach(GrowBuf *buf)
{
    Chunk *chunk = PyObject_New(Chunk, &ChunkType);
    if (chunk == NULL)
        return NULL;
    if (buf->len == 0) {
        chunk->data = &empty_chunk_byte;
        chunk->size = 0;
        chunk->cap = 0;
        return (PyObject *)chunk;
    }
    char *data = buf->data;
    size_t cap = buf->cap;
    /* Batches can outlive the scan (Spark holds them): give back the doubling slack
     * (a large block keeps its last grain, to be a spare block of its size class). */
    size_t keep = buf->len >= SPARE_GRAIN ? spare_round(buf->len) : buf->len;
    /* A large block less than half used (a scan's short last batch) is cut to its size;
     * one more than half used keeps its slack, so that it serves the next batch as it is
     * (cut, its pages would come back fresh when grown again). */
    if (cap - keep > 4096 && (keep < SPARE_GRAIN || keep <= cap / 2)) {
        char *shrunk = PyMem_RawRealloc(data, keep);
        if (shrunk != NULL) {
            data = shrunk;
            cap = keep;
        }
    }
    chunk->data = data;
    chunk->size = (Py_ssize_t)buf->len;
    chunk->cap = cap;
    /* The largest batch's: a short last one sets nothing. A size inherited from the last
     * accumulator gives way to this one's first batch, which may be much smaller (a query
     * of smaller records or batches in the same worker). */
    if (buf->hinted || buf->len > buf->next_cap)
        buf->next_cap = buf->len;
    buf->hinted = 0;
    buf->data = NULL;
    buf->len = buf->cap = 0;
    return (PyObject *)chunk;
}

static void
growbuf_free(GrowBuf *buf)
{
    if (buf->data != NULL && !spare_put(buf->data, buf->cap))
        PyMem_RawFree(buf->data);
    buf->data = NULL;
    buf->len = buf->cap = 0;
}

/* ------------------------------------------------------ binary/string columns */

/* Arrow binary layout: int32 offsets (length + 1), data, validity bitmap. */
typedef struct {
    GrowBuf offsets;
    GrowBuf data;
    GrowBuf validity;
    Py_ssize_t length;
    Py_ssize_t nulls;
    /* Whether `validity` holds the bits of the rows so far. Until a column mixes nulls
     * and values it is not written (all valid, or all null: nulls == length), so that
     * the usual column costs no bit a row. */
    int has_bitmap;
} BinaryColumn;

static int
column_start(BinaryColumn *col)
{
    col->length = 0;
    col->nulls = 0;
    col->has_bitmap = 0;
    col->validity.len = 0;
    if (growbuf_reserve(&col->offsets, 4) < 0)
        return -1;
    growbuf_put_i32(&col->offsets, 0);
    return 0;
}

/* Write the bits of the column's `rows` rows, all valid or all null so far. */
static int
column_write_bitmap(BinaryColumn *col, Py_ssize_t rows)
{
    size_t bytes = ((size_t)rows + 8) >> 3; /* and room for the next row's bit */
    if (bytes > col->validity.cap && growbuf_reserve_slow(&col->validity, bytes) < 0)
        return -1;
    uint8_t *bits = (uint8_t *)col->validity.data;
    int valid = col->nulls == 0;
    memset(bits, valid ? 0xFF : 0, (size_t)rows >> 3);
    if (rows & 7)
        bits[rows >> 3] = valid ? (uint8_t)((1u << (rows & 7)) - 1) : 0;
    col->validity.len = ((size_t)rows + 7) >> 3;
    col->has_bitmap = 1;
    return 0;
}

/* Note whether row `row` (the column's next) is valid. */
static inline int
column_note_valid(BinaryColumn *col, Py_ssize_t row, int valid)
{
    if (!col->has_bitmap) {
        if (valid ? col->nulls == 0 : col->nulls == row) {
            col->nulls += !valid;
            return 0;
        }
        if (column_write_bitmap(col, row) < 0) /* the first row unlike those before */
            return -1;
    }
    size_t byte = (size_t)row >> 3;
    if (byte >= col->validity.cap && growbuf_reserve_slow(&col->validity, byte + 1) < 0)
        return -1;
    uint8_t bit = (uint8_t)(1u << (row & 7));
    uint8_t *bits = (uint8_t *)col->validity.data;
    if ((row & 7) == 0)
        bits[byte] = 0;
    if (valid)
        bits[byte] |= bit;
    else
        col->nulls++;
    col->validity.len = byte + 1;
    return 0;
}

static inline int
column_set_valid(BinaryColumn *col, int valid)
{
    return column_note_valid(col, col->length, valid);
}

static int
column_overflow(const char *what)
{
    PyErr_Format(PyExc_OverflowError,
                 "more than 2 GiB of %s in one Arrow batch: take() the accumulated rows "
                 "before adding more", what);
    return -1;
}

static inline int
column_append(BinaryColumn *col, const char *bytes, size_t size, const char *what)
{
    if ((long long)col->data.len + (long long)size > INT32_LIMIT)
        return column_overflow(what);
    if (growbuf_reserve(&col->data, size) < 0 || growbuf_reserve(&col->offsets, 4) < 0)
        return -1;
    if (size) {
        memcpy(col->data.data + col->data.len, bytes, size);
        col->data.len += size;
    }
    growbuf_put_i32(&col->offsets, (int32_t)col->data.len);
    if (column_set_valid(col, 1) < 0)
        return -1;
    col->length++;
    return 0;
}

static inline int
column_append_null(BinaryColumn *col)
{
    if (growbuf_reserve(&col->offsets, 4) < 0)
        return -1;
    growbuf_put_i32(&col->offsets, (int32_t)col->data.len);
    if (column_set_valid(col, 0) < 0)
        return -1;
    col->length++;
    return 0;
}

/* (validity or None, null count, offsets, data), then the column starts over empty. */
static PyObject *
column_detach(BinaryColumn *col)
{
    PyObject *validity = NULL, *offsets = NULL, *data = NULL;
    if (col->nulls) {
        if (!col->has_bitmap && column_write_bitmap(col, col->length) < 0)
            return NULL; /* all null */
        validity = growbuf_detach(&col->validity);
    } else {
        col->validity.len = 0;
        validity = Py_NewRef(Py_None);
    }
    if (validity == NULL)
        return NULL;
    offsets = growbuf_detach(&col->offsets);
    data = offsets ? growbuf_detach(&col->data) : NULL;
    if (data == NULL) {
        Py_DECREF(validity);
        Py_XDECREF(offsets);
        return NULL;
    }
    PyObject *result = Py_BuildValue("(NnNN)", validity, col->nulls, offsets, data);
    return result;
}

static void
column_free(BinaryColumn *col)
{
    growbuf_free(&col->offsets);
    growbuf_free(&col->data);
    growbuf_free(&col->validity);
}

/* Lengths of a column, to undo a batch that turned out malformed. */
typedef struct {
    size_t offsets_len, data_len;
    Py_ssize_t length, nulls;
} ColumnMark;

static inline void
column_mark(const BinaryColumn *col, ColumnMark *mark)
{
    mark->offsets_len = col->offsets.len;
    mark->data_len = col->data.len;
    mark->length = col->length;
    mark->nulls = col->nulls;
}

static inline void
column_rewind(BinaryColumn *col, const ColumnMark *mark)
{
    col->offsets.len = mark->offsets_len;
    col->data.len = mark->data_len;
    col->length = mark->length;
    col->nulls = mark->nulls;
    if (!col->has_bitmap)
        return; /* a bitmap written since holds the right bits for the rows kept */
    col->validity.len = (size_t)(mark->length + 7) >> 3;
    /* column_note_valid only sets bits: clear those of the rows undone. */
    if (mark->length & 7)
        ((uint8_t *)col->validity.data)[mark->length >> 3] &=
            (uint8_t)((1u << (mark->length & 7)) - 1);
}

/* ---------------------------------------------------------------- DecodedColumns */

typedef struct {
    PyObject_HEAD
    int include_headers;
    Py_ssize_t rows;
    long long payload_bytes;
    int64_t next_offset;     /* the lowest base offset the next entry may have */
    GrowBuf offsets;         /* int64 */
    GrowBuf timestamps;      /* int64, milliseconds */
    GrowBuf timestamp_types; /* int32 */
    BinaryColumn keys;
    BinaryColumn values;
    GrowBuf header_offsets;  /* int32 list offsets, rows + 1 */
    BinaryColumn header_keys;
    BinaryColumn header_values;
    /* After track_batches(): one entry of ENTRY_FIELDS int64s per run of rows sharing a
     * batch's metadata (fastpath/protocol.py), handed over by take_batch_entries(). */
    int track_batches;
    int stop_at_control;     /* runs leave control batches to Python (their rows go out) */
    GrowBuf batch_entries;
    Py_ssize_t noted_rows;   /* the rows the entries cover */
} DecodedColumns;

/* The column buffers of an accumulator, in one order. */
#define COLUMN_BUFFERS 15

static void
columns_buffers(DecodedColumns *self, GrowBuf **bufs)
{
    GrowBuf *all[COLUMN_BUFFERS] = {
        &self->offsets, &self->timestamps, &self->timestamp_types,
        &self->keys.offsets, &self->keys.data, &self->keys.validity,
        &self->values.offsets, &self->values.data, &self->values.validity,
        &self->header_offsets, &self->header_keys.offsets, &self->header_keys.data,
        &self->header_keys.validity, &self->header_values.offsets, &self->header_values.data};
    memcpy(bufs, all, sizeof all);
}

/* The sizes the last accumulator's buffers reached (a scan's is let go at its end): a new
 * one's buffers start there, and find spare blocks of their size, instead of growing
 * from nothing batch after batch into blocks that suit none. Under the GIL only. */
static size_t column_size_hints[COLUMN_BUFFERS];

static void
columns_take_hints(DecodedColumns *self)
{
    GrowBuf *bufs[COLUMN_BUFFERS];
    columns_buffers(self, bufs);
    for (int i = 0; i < COLUMN_BUFFERS; i++)
        if (bufs[i]->next_cap == 0 && column_size_hints[i] != 0) {
            bufs[i]->next_cap = column_size_hints[i];
            bufs[i]->hinted = 1;
        }
}

static void
columns_leave_hints(DecodedColumns *self)
{
    GrowBuf *bufs[COLUMN_BUFFERS];
    columns_buffers(self, bufs);
    for (int i = 0; i < COLUMN_BUFFERS; i++)
        if (bufs[i]->next_cap != 0)
            column_size_hints[i] = bufs[i]->next_cap;
}

static int
columns_start(DecodedColumns *self)
{
    self->rows = 0;
    self->payload_bytes = 0;
    self->noted_rows = 0;
    if (column_start(&self->keys) < 0 || column_start(&self->values) < 0)
        return -1;
    if (self->include_headers) {
        if (column_start(&self->header_keys) < 0 || column_start(&self->header_values) < 0 ||
            growbuf_reserve(&self->header_offsets, 4) < 0)
            return -1;
        growbuf_put_i32(&self->header_offsets, 0);
    }
    return 0;
}

static void
columns_free(DecodedColumns *self)
{
    growbuf_free(&self->offsets);
    growbuf_free(&self->timestamps);
    growbuf_free(&self->timestamp_types);
    column_free(&self->keys);
    column_free(&self->values);
    growbuf_free(&self->header_offsets);
    column_free(&self->header_keys);
    column_free(&self->header_values);
    growbuf_free(&self->batch_entries);
}

static int
DecodedColumns_init(DecodedColumns *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"include_headers", NULL};
    int include_headers = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "p", kwlist, &include_headers))
        return -1;
    columns_free(self);
    columns_take_hints(self);
    self->include_headers = include_headers;
    self->next_offset = INT64_MIN;
    self->track_batches = 0;
    self->stop_at_control = 0;
    return columns_start(self);
}

static void
DecodedColumns_dealloc(DecodedColumns *self)
{
    columns_leave_hints(self);
    columns_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Room for one more row in the fixed-width columns. */
static inline int
columns_reserve_row(DecodedColumns *self)
{
    if (self->rows >= INT32_LIMIT) {
        PyErr_SetString(PyExc_OverflowError,
                        "more than 2**31 - 1 rows in one Arrow batch: take() more often");
        return -1;
    }
    if (growbuf_reserve(&self->offsets, 8) < 0 || growbuf_reserve(&self->timestamps, 8) < 0 ||
        growbuf_reserve(&self->timestamp_types, 4) < 0)
        return -1;
    if (self->include_headers && growbuf_reserve(&self->header_offsets, 4) < 0)
        return -1;
    return 0;
}

static inline void
columns_put_row(DecodedColumns *self, int64_t offset, int64_t timestamp, int32_t timestamp_type)
{
    growbuf_put_i64(&self->offsets, offset);
    growbuf_put_i64(&self->timestamps, timestamp);
    growbuf_put_i32(&self->timestamp_types, timestamp_type);
    if (self->include_headers)
        growbuf_put_i32(&self->header_offsets, (int32_t)self->header_keys.length);
    self->rows++;
}

/* The rows added since the last entry share the metadata in `fields` (ENTRY_END_ROW is
 * filled in here): note them as one entry. */
static int
columns_note_entry(DecodedColumns *self, int64_t *fields)
{
    if (self->rows <= self->noted_rows)
        return 0;
    if (growbuf_reserve(&self->batch_entries, ENTRY_FIELDS * sizeof(int64_t)) < 0)
        return -1;
    fields[ENTRY_END_ROW] = (int64_t)self->rows;
    memcpy(self->batch_entries.data + self->batch_entries.len, fields,
           ENTRY_FIELDS * sizeof(int64_t));
    self->batch_entries.len += ENTRY_FIELDS * sizeof(int64_t);
    self->noted_rows = self->rows;
    return 0;
}

typedef struct {
    Py_ssize_t rows;
    long long payload_bytes;
    size_t offsets_len, timestamps_len, timestamp_types_len, header_offsets_len;
    ColumnMark keys, values, header_keys, header_values;
} ColumnsMark;

static void
columns_mark(const DecodedColumns *self, ColumnsMark *mark)
{
    mark->rows = self->rows;
    mark->payload_bytes = self->payload_bytes;
    mark->offsets_len = self->offsets.len;
    mark->timestamps_len = self->timestamps.len;
    mark->timestamp_types_len = self->timestamp_types.len;
    mark->header_offsets_len = self->header_offsets.len;
    column_mark(&self->keys, &mark->keys);
    column_mark(&self->values, &mark->values);
    column_mark(&self->header_keys, &mark->header_keys);
    column_mark(&self->header_values, &mark->header_values);
}

static void
columns_rewind(DecodedColumns *self, const ColumnsMark *mark)
{
    self->rows = mark->rows;
    self->payload_bytes = mark->payload_bytes;
    self->offsets.len = mark->offsets_len;
    self->timestamps.len = mark->timestamps_len;
    self->timestamp_types.len = mark->timestamp_types_len;
    self->header_offsets.len = mark->header_offsets_len;
    column_rewind(&self->keys, &mark->keys);
    column_rewind(&self->values, &mark->values);
    column_rewind(&self->header_keys, &mark->header_keys);
    column_rewind(&self->header_values, &mark->header_values);
}

/* ------------------------------------------------------------------- parsing */

/* The header key check Python's strict UTF-8 decoder makes: no overlongs, no
 * surrogates, nothing above U+10FFFF. */
static int
is_utf8(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c < 0xC2 || c > 0xF4)
            return 0;
        if (c < 0xE0) {
            if (n - i < 2 || (s[i + 1] & 0xC0) != 0x80)
                return 0;
            i += 2;
            continue;
        }
        if (c < 0xF0) {
            if (n - i < 3 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80)
                return 0;
            if ((c == 0xE0 && s[i + 1] < 0xA0) || (c == 0xED && s[i + 1] >= 0xA0))
                return 0;
            i += 3;
            continue;
        }
        if (n - i < 4 || (s[i + 1] & 0xC0) != 0x80 || (s[i + 2] & 0xC0) != 0x80 ||
            (s[i + 3] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xF0 && s[i + 1] < 0x90) || (c == 0xF4 && s[i + 1] >= 0x90))
            return 0;
        i += 4;
    }
    return 1;
}

enum { VARINT_OK = 0, VARINT_TRUNCATED, VARINT_TOO_LONG, VARINT_TOO_BIG };

static const char *const varint_problem[] = {
    "", "is cut off by the end of the record", "is longer than 10 bytes",
    "does not fit in 64 bits",
};

/* Zig-zag varint (int32 or int64 range) in [*pos, end). */
static inline int
read_varint(const uint8_t **pos, const uint8_t *end, int64_t *out)
{
    const uint8_t *p = *pos;
    if (p < end && *p < 0x80) { /* most lengths, deltas and counts are one byte */
        uint64_t v = *p;
        *out = (int64_t)((v >> 1) ^ (0 - (v & 1)));
        *pos = p + 1;
        return VARINT_OK;
    }
    if (end - p >= 2 && p[1] < 0x80) { /* the rest mostly two (record and value lengths) */
        uint64_t v = (uint64_t)(p[0] & 0x7F) | ((uint64_t)p[1] << 7);
        *out = (int64_t)((v >> 1) ^ (0 - (v & 1)));
        *pos = p + 2;
        return VARINT_OK;
    }
    uint64_t result = 0;
    int shift = 0;
    for (;;) {
        if (p >= end)
            return VARINT_TRUNCATED;
        uint8_t byte = *p++;
        if (shift == 63 && (byte & 0x7E))
            return VARINT_TOO_BIG;
        result |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80)
            break;
        shift += 7;
        if (shift > 63)
            return VARINT_TOO_LONG;
    }
    *out = (int64_t)((result >> 1) ^ (0 - (result & 1)));
    *pos = p;
    return VARINT_OK;
}


/* CRC32C: crc32c_update (one stream, on the running value), crc32c_block (a 768-byte
 * block in three), crc32c_continue, have_crc32c_instruction. */
#include "crc32c.h"

/* Offsets kept: first <= offset <= last (inclusive bounds fit int64 where the
 * Python arguments may not). */
typedef struct {
    int64_t first;
    int64_t last;
    int none;
} OffsetRange;

static int
offset_range_from(PyObject *min_offset, PyObject *end_offset, OffsetRange *range)
{
    int overflow;
    range->none = 0;
    long long first = PyLong_AsLongLongAndOverflow(min_offset, &overflow);
    if (first == -1 && PyErr_Occurred())
        return -1;
    if (overflow > 0)
        range->none = 1;
    range->first = overflow < 0 ? INT64_MIN : first;
    long long end = PyLong_AsLongLongAndOverflow(end_offset, &overflow);
    if (end == -1 && PyErr_Occurred())
        return -1;
    if (overflow < 0 || (overflow == 0 && end == INT64_MIN))
        range->none = 1;
    range->last = overflow > 0 ? INT64_MAX : (overflow < 0 ? INT64_MIN : end - 1);
    return 0;
}

static int
as_int64(PyObject *obj, int64_t *out)
{
    long long value = PyLong_AsLongLong(obj);
    if (value == -1 && PyErr_Occurred())
        return -1;
    *out = value;
    return 0;
}

#define MAX_REASON 200
#define PREFETCH_DISTANCE 2048

/* One record's fields, as read_record finds them. */
typedef struct {
    int64_t offset; /* the batch's base offset plus the record's delta, when kept */
    int64_t timestamp_delta;
    const uint8_t *key, *value;
    int64_t key_length, value_length; /* -1: null */
    int keep;                         /* its offset is in the range asked for */
} RecordFields;

#define MALFORMED(...)                                                             \
    do {                                                                           \
        snprintf(reason, MAX_REASON, __VA_ARGS__);                                 \
        return 1;                                                                  \
    } while (0)
#define READ_VARINT(field, limit, var)                                             \
    do {                                                                           \
        if ((status = read_varint(&p, (limit), &(var))) != VARINT_OK)              \
            MALFORMED("record %lld: %s varint %s", i, (field), varint_problem[status]); \
    } while (0)
/* A length varint and the bytes it counts (none for a negative length: null), within
 * the record: `start` points at them and p moves past them. */
#define READ_NULLABLE_BYTES(field, length, start)                                  \
    do {                                                                           \
        READ_VARINT(field " length", record_end, length);                          \
        start = p;                                                                 \
        if ((length) >= 0) {                                                       \
            if ((length) > record_end - p)                                         \
                MALFORMED("record %lld: " field " of %lld bytes runs past the record", \
                          i, (long long)(length));                                 \
            p += (length);                                                         \
        }                                                                          \
    } while (0)

/* Read record `i` of a batch at *pos (the records end at `end`) into `record`, and move
 * *pos past it: the checks of both record loops below, in one place. Every field is
 * checked against the record's length, header keys must be UTF-8. A record is kept when
 * its offset is in `range`, never when `none` (the range's, or 0 where the caller knows
 * it). With `headers`, a kept record's headers are appended to the header columns (a
 * constant 0 where it is inlined leaves that code out). Returns 1 with `reason` filled
 * when the record is malformed, -1 with a Python error set, 0 when it was read. */
static inline __attribute__((always_inline)) int
read_record(DecodedColumns *self, const uint8_t **pos, const uint8_t *end, long long i,
            int64_t base_offset, const OffsetRange *range, const int none, const int headers,
            RecordFields *record, char *reason)
{
    const uint8_t *p = *pos;
    int status;
    int64_t length, offset_delta, key_length, value_length, header_count;
    READ_VARINT("length", end, length);
    if (length < 0 || length > end - p)
        MALFORMED("record %lld: length %lld runs past the batch", i, (long long)length);
    const uint8_t *record_end = p + length;
    if (p >= record_end)
        MALFORMED("record %lld: length %lld leaves no room for its attributes", i,
                  (long long)length);
    p++; /* attributes: no record-level attribute is defined */
    READ_VARINT("timestamp delta", record_end, record->timestamp_delta);
    READ_VARINT("offset delta", record_end, offset_delta);

    int64_t offset = 0;
    const int keep = !none && !__builtin_add_overflow(base_offset, offset_delta, &offset) &&
                     offset >= range->first && offset <= range->last;

    const uint8_t *key, *value;
    READ_NULLABLE_BYTES("key", key_length, key);
    READ_NULLABLE_BYTES("value", value_length, value);
    READ_VARINT("header count", record_end, header_count);
    /* As in the pure decoder, a negative count means no headers. */
    for (int64_t h = 0; h < header_count; h++) {
        int64_t hkey_length, hvalue_length;
        READ_VARINT("header key length", record_end, hkey_length);
        if (hkey_length < 0)
            MALFORMED("record %lld: header key has negative length", i);
        if (hkey_length > record_end - p)
            MALFORMED("record %lld: header key of %lld bytes runs past the record", i,
                      (long long)hkey_length);
        const uint8_t *hkey = p;
        if (!is_utf8(hkey, (size_t)hkey_length))
            MALFORMED("record %lld: header key is not valid UTF-8", i);
        p += hkey_length;
        const uint8_t *hvalue;
        READ_NULLABLE_BYTES("header value", hvalue_length, hvalue);
        if (headers && keep) {
            if (column_append(&self->header_keys, (const char *)hkey, (size_t)hkey_length,
                              "header keys") < 0)
                return -1;
            if ((hvalue_length >= 0
                     ? column_append(&self->header_values, (const char *)hvalue,
                                     (size_t)hvalue_length, "header values")
                     : column_append_null(&self->header_values)) < 0)
                return -1;
        }
    }
    if (p != record_end)
        MALFORMED("record %lld: fields end %lld bytes %s its length says", i,
                  (long long)(p > record_end ? p - record_end : record_end - p),
                  p > record_end ? "after" : "before");
    record->offset = offset;
    record->key = key;
    record->key_length = key_length;
    record->value = value;
    record->value_length = value_length;
    record->keep = keep;
    *pos = p;
    return 0;
}
#undef READ_NULLABLE_BYTES
#undef READ_VARINT
#undef MALFORMED

/* Parse `count` records of `data`; on malformed input fill `reason` and return 1.
 * Returns -1 with a Python error set (memory, int32 overflow), 0 when fine. Record by
 * record, every column checked for room: the general case (decode_records). */
static int
decode_records_each(DecodedColumns *self, const uint8_t *data, size_t size, long long count,
               int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
               int64_t attributes, const OffsetRange *range, Py_ssize_t *kept_out,
               char *reason)
{
    /* LogAppendTime batches report the broker's append time (maxTimestamp) for all. */
    const int log_append_time = (attributes & ATTR_TIMESTAMP_TYPE) != 0;
    const int32_t timestamp_type = log_append_time ? LOG_APPEND_TIME : CREATE_TIME;
    const uint8_t *p = data;
    const uint8_t *end = data + size;
    const uint8_t *prefetched = data;
    const int headers = self->include_headers;
    Py_ssize_t kept = 0;

    for (long long i = 0; i < count; i++) {
        /* Records are read once, front to back, from memory that is rarely cached:
         * keep the cache lines a few records ahead on their way. */
        while (prefetched < p + PREFETCH_DISTANCE && prefetched < end) {
            __builtin_prefetch(prefetched);
            prefetched += 64;
        }
        RecordFields record;
        int status = read_record(self, &p, end, i, base_offset, range, range->none, headers,
                                 &record, reason);
        if (status != 0)
            return status;
        if (!record.keep)
            continue;
        if (columns_reserve_row(self) < 0)
            return -1;
        if ((record.key_length >= 0
                 ? column_append(&self->keys, (const char *)record.key,
                                 (size_t)record.key_length, "keys")
                 : column_append_null(&self->keys)) < 0)
            return -1;
        if ((record.value_length >= 0
                 ? column_append(&self->values, (const char *)record.value,
                                 (size_t)record.value_length, "values")
                 : column_append_null(&self->values)) < 0)
            return -1;
        self->payload_bytes += (record.key_length > 0 ? record.key_length : 0) +
                               (record.value_length > 0 ? record.value_length : 0);
        /* Kafka's long arithmetic: a delta past the int64 range wraps. */
        int64_t timestamp = log_append_time ? max_timestamp
                                            : (int64_t)((uint64_t)base_timestamp +
                                                        (uint64_t)record.timestamp_delta);
        columns_put_row(self, record.offset, timestamp, timestamp_type);
        kept++;
    }
    if (p != end) {
        snprintf(reason, MAX_REASON, "%lld bytes follow the batch's %lld records",
                 (long long)(end - p), count);
        return 1;
    }
    *kept_out = kept;
    return 0;
}

/* Where decode_records is to verify a batch's checksum as it parses: the bytes covered
 * before the records section, and the checksum stored. */
typedef struct {
    const uint8_t *start;
    uint32_t stored;
} Checksum;

/* Bytes the checksum is computed ahead of the parse: it is the first read of a mapped
 * page, and leaves the records in the cache for the parse. */
#define CHECKSUM_AHEAD 1024

/* decode_records_each without headers, where the batch cannot overflow a column: the
 * fixed-width columns and the key and value offsets get room for all `count` rows
 * first, and are written through local pointers. The same checks (read_record), the
 * same results. With
 * `checksum`, the batch's CRC32C is computed in the same pass, a little ahead of the
 * parse while the bytes are in the cache; a mismatch returns 2 (the caller undoes the
 * rows and leaves the batch to Python, which reports it). */
static int
decode_records_plain(DecodedColumns *self, const uint8_t *data, size_t size, long long count,
                     int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
                     int64_t attributes, const OffsetRange *range, Py_ssize_t *kept_out,
                     char *reason, const Checksum *checksum)
{
    if (growbuf_reserve(&self->offsets, 8 * (size_t)count) < 0 ||
        growbuf_reserve(&self->timestamps, 8 * (size_t)count) < 0 ||
        growbuf_reserve(&self->timestamp_types, 4 * (size_t)count) < 0 ||
        growbuf_reserve(&self->keys.offsets, 4 * (size_t)count) < 0 ||
        growbuf_reserve(&self->values.offsets, 4 * (size_t)count) < 0)
        return -1;
    const int log_append_time = (attributes & ATTR_TIMESTAMP_TYPE) != 0;
    const int32_t timestamp_type = log_append_time ? LOG_APPEND_TIME : CREATE_TIME;
    const uint8_t *p = data;
    const uint8_t *end = data + size;
    const uint8_t *prefetched = data;
    char *out_offsets = self->offsets.data + self->offsets.len;
    char *out_timestamps = self->timestamps.data + self->timestamps.len;
    char *out_types = self->timestamp_types.data + self->timestamp_types.len;
    char *out_key_offsets = self->keys.offsets.data + self->keys.offsets.len;
    char *out_value_offsets = self->values.offsets.data + self->values.offsets.len;
    BinaryColumn *keys = &self->keys, *values = &self->values;
    const Py_ssize_t first_row = self->rows; /* == keys->length == values->length */
#ifdef HAVE_CRC32C_INSTRUCTION
    const uint8_t *crc_at = data;
    const uint8_t *crc_blocks_end = data + size / CRC_BLOCK * CRC_BLOCK;
    uint64_t crc = 0xFFFFFFFFu;
    if (checksum != NULL)
        crc = crc32c_update(crc, checksum->start, (size_t)(data - checksum->start));
#endif
    long long payload = 0;
    Py_ssize_t kept = 0;

    for (long long i = 0; i < count; i++) {
#ifdef HAVE_CRC32C_INSTRUCTION
        if (checksum != NULL) {
            /* A block at a time, some way ahead of the parse. */
            const uint8_t *to = p + CHECKSUM_AHEAD < crc_blocks_end ? p + CHECKSUM_AHEAD
                                                                    : crc_blocks_end;
            for (; crc_at < to; crc_at += CRC_BLOCK)
                crc = crc32c_block(crc, crc_at);
        }
#endif
        while (prefetched < p + PREFETCH_DISTANCE && prefetched < end) {
            __builtin_prefetch(prefetched);
            prefetched += 64;
        }
        RecordFields record;
        int status = read_record(self, &p, end, i, base_offset, range, 0, 0, &record, reason);
        if (status != 0)
            return status;
        if (!record.keep)
            continue;
        const int64_t key_length = record.key_length, value_length = record.value_length;
        Py_ssize_t row = first_row + kept;
        int32_t end_at;
        if (key_length >= 0) {
            if (growbuf_reserve(&keys->data, (size_t)key_length) < 0)
                return -1;
            memcpy(keys->data.data + keys->data.len, record.key, (size_t)key_length);
            keys->data.len += (size_t)key_length;
            payload += key_length;
        }
        if (column_note_valid(keys, row, key_length >= 0) < 0)
            return -1;
        end_at = (int32_t)keys->data.len;
        memcpy(out_key_offsets + 4 * kept, &end_at, 4);
        if (value_length >= 0) {
            if (growbuf_reserve(&values->data, (size_t)value_length) < 0)
                return -1;
            memcpy(values->data.data + values->data.len, record.value, (size_t)value_length);
            values->data.len += (size_t)value_length;
            payload += value_length;
        }
        if (column_note_valid(values, row, value_length >= 0) < 0)
            return -1;
        end_at = (int32_t)values->data.len;
        memcpy(out_value_offsets + 4 * kept, &end_at, 4);
        /* Kafka's long arithmetic: a delta past the int64 range wraps. */
        int64_t timestamp = log_append_time ? max_timestamp
                                            : (int64_t)((uint64_t)base_timestamp +
                                                        (uint64_t)record.timestamp_delta);
        memcpy(out_offsets + 8 * kept, &record.offset, 8);
        memcpy(out_timestamps + 8 * kept, &timestamp, 8);
        memcpy(out_types + 4 * kept, &timestamp_type, 4);
        kept++;
    }
    if (p != end) {
        snprintf(reason, MAX_REASON, "%lld bytes follow the batch's %lld records",
                 (long long)(end - p), count);
        return 1;
    }
#ifdef HAVE_CRC32C_INSTRUCTION
    if (checksum != NULL &&
        (crc32c_update((uint32_t)crc, crc_at, (size_t)(end - crc_at)) ^ 0xFFFFFFFFu) !=
            checksum->stored)
        return 2;
#endif
    self->offsets.len += 8 * (size_t)kept;
    self->timestamps.len += 8 * (size_t)kept;
    self->timestamp_types.len += 4 * (size_t)kept;
    keys->offsets.len += 4 * (size_t)kept;
    values->offsets.len += 4 * (size_t)kept;
    keys->length += kept;
    values->length += kept;
    self->rows += kept;
    self->payload_bytes += payload;
    *kept_out = kept;
    return 0;
}

/* Parse `count` records of `data` into the columns (see decode_records_each); with
 * `checksum` (only where the CRC instruction is), verify the batch's checksum too: 2 when
 * it does not match, nothing added. */
static int
decode_records(DecodedColumns *self, const uint8_t *data, size_t size, long long count,
               int64_t base_offset, int64_t base_timestamp, int64_t max_timestamp,
               int64_t attributes, const OffsetRange *range, Py_ssize_t *kept_out,
               char *reason, const Checksum *checksum)
{
    /* A record takes at least 7 bytes, so more records than bytes is malformed; keys and
     * values of a batch take at most its size. */
    if (!self->include_headers && !range->none && count > 0 && (size_t)count <= size &&
        self->rows + count <= INT32_LIMIT &&
        (long long)self->keys.data.len + (long long)size <= INT32_LIMIT &&
        (long long)self->values.data.len + (long long)size <= INT32_LIMIT)
        return decode_records_plain(self, data, size, count, base_offset, base_timestamp,
                                    max_timestamp, attributes, range, kept_out, reason,
                                    checksum);
    if (checksum != NULL) {
#ifdef HAVE_CRC32C_INSTRUCTION
        if (crc32c_instruction(checksum->start, (size_t)(data + size - checksum->start)) !=
            checksum->stored)
            return 2;
#endif
    }
    return decode_records_each(self, data, size, count, base_offset, base_timestamp,
                               max_timestamp, attributes, range, kept_out, reason);
}

PyDoc_STRVAR(decode_v2_doc,
"decode_v2(data, count, base_offset, base_timestamp, max_timestamp, attributes,\n"
"          min_offset, end_offset) -> rows kept\n\n"
"Append the records of a magic-2 batch's (decompressed) records section whose offset\n"
"is in [min_offset, end_offset). Raises MalformedRecords, leaving the columns as they\n"
"were, when the bytes are not `count` well-formed records.");

static PyObject *
DecodedColumns_decode_v2(DecodedColumns *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 8) {
        PyErr_Format(PyExc_TypeError, "decode_v2() takes 8 arguments (%zd given)", nargs);
        return NULL;
    }
    int64_t base_offset, base_timestamp, max_timestamp, attributes, count;
    OffsetRange range;
    if (as_int64(args[1], &count) < 0 || as_int64(args[2], &base_offset) < 0 ||
        as_int64(args[3], &base_timestamp) < 0 || as_int64(args[4], &max_timestamp) < 0 ||
        as_int64(args[5], &attributes) < 0 || offset_range_from(args[6], args[7], &range) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    ColumnsMark mark;
    columns_mark(self, &mark);
    char reason[MAX_REASON];
    Py_ssize_t kept = 0;
    int status = decode_records(self, (const uint8_t *)view.buf, (size_t)view.len, count,
                                base_offset, base_timestamp, max_timestamp, attributes, &range,
                                &kept, reason, NULL);
    PyBuffer_Release(&view);
    if (status != 0) {
        columns_rewind(self, &mark);
        if (status > 0)
            PyErr_Format(MalformedRecords, "malformed records in batch at offset %lld: %s",
                         (long long)base_offset, reason);
        return NULL;
    }
    return PyLong_FromSsize_t(kept);
}

/* --------------------------------------------------------- runs of plain batches */

static inline uint64_t
be64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline uint32_t
be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static inline uint16_t
be16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

/* A Python int bound clamped into int64; `above` / `below` say it did not fit. */
typedef struct {
    int64_t value;
    int above;
    int below;
} Bound;

static int
bound_from(PyObject *obj, Bound *bound)
{
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
    if (value == -1 && PyErr_Occurred())
        return -1;
    bound->above = overflow > 0;
    bound->below = overflow < 0;
    bound->value = overflow > 0 ? INT64_MAX : overflow < 0 ? INT64_MIN : value;
    return 0;
}

static int
checksum_matches(PyObject *crc32c, const uint8_t *data, size_t size, uint32_t stored)
{
#ifdef HAVE_CRC32C_INSTRUCTION
    if (have_crc32c_instruction)
        return crc32c_continue(0, data, size) == stored;
#endif
    PyObject *view = PyMemoryView_FromMemory((char *)data, (Py_ssize_t)size, PyBUF_READ);
    if (view == NULL)
        return -1;
    PyObject *computed = PyObject_CallOneArg(crc32c, view);
    Py_DECREF(view);
    if (computed == NULL)
        return -1;
    unsigned long value = PyLong_AsUnsignedLong(computed);
    Py_DECREF(computed);
    if (value == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return value == stored;
}

PyDoc_STRVAR(checksum_matches_doc,
"checksum_matches(data, stored, crc32c) -> bool\n\n"
"Whether CRC32C(data) == stored, computed the way decode_run() computes it.");

static PyObject *
fastrecords_checksum_matches(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "checksum_matches() takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    unsigned long stored = PyLong_AsUnsignedLong(args[1]);
    if (stored == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int matches = checksum_matches(args[2], view.buf, (size_t)view.len, (uint32_t)stored);
    PyBuffer_Release(&view);
    if (matches < 0)
        return NULL;
    return PyBool_FromLong(matches);
}

PyDoc_STRVAR(crc32c_doc,
"crc32c(data, value=0) -> int\n\n"
"CRC32C of data, continued from value (the checksum of the bytes before it). Only where\n"
"CRC32C_INSTRUCTION is true; RuntimeError elsewhere.");

static PyObject *
fastrecords_crc32c(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 2) {
        PyErr_Format(PyExc_TypeError, "crc32c() takes 1 or 2 arguments (%zd given)", nargs);
        return NULL;
    }
    unsigned long value = 0;
    if (nargs == 2) {
        value = PyLong_AsUnsignedLong(args[1]);
        if (value == (unsigned long)-1 && PyErr_Occurred())
            return NULL;
        if (value > 0xFFFFFFFFul) {
            PyErr_SetString(PyExc_OverflowError, "crc32c() value does not fit 32 bits");
            return NULL;
        }
    }
#ifdef HAVE_CRC32C_INSTRUCTION
    if (have_crc32c_instruction) {
        Py_buffer view;
        if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
            return NULL;
        uint32_t crc;
        if (view.len < (1 << 16)) {
            crc = crc32c_continue((uint32_t)value, view.buf, (size_t)view.len);
        } else {
            Py_BEGIN_ALLOW_THREADS
            crc = crc32c_continue((uint32_t)value, view.buf, (size_t)view.len);
            Py_END_ALLOW_THREADS
        }
        PyBuffer_Release(&view);
        return PyLong_FromUnsignedLong(crc);
    }
#endif
    PyErr_SetString(PyExc_RuntimeError, "crc32c(): this CPU has no CRC32C instruction");
    return NULL;
}

/* Tests only (set_run_hook): called with the position after each batch decode_run
 * decodes, to change the file at a chosen point inside a run. */
static PyObject *run_hook;

static int
call_run_hook(int64_t position)
{
    PyObject *at = PyLong_FromLongLong(position);
    if (at == NULL)
        return -1;
    PyObject *result = PyObject_CallOneArg(run_hook, at);
    Py_DECREF(at);
    if (result == NULL)
        return -1;
    Py_DECREF(result);
    return 0;
}

PyDoc_STRVAR(set_run_hook_doc,
"set_run_hook(hook)\n\n"
"For tests: call hook(position) after each batch decode_run() decodes (None: no hook).");

static PyObject *
fastrecords_set_run_hook(PyObject *Py_UNUSED(module), PyObject *hook)
{
    if (hook != Py_None && !PyCallable_Check(hook)) {
        PyErr_SetString(PyExc_TypeError, "set_run_hook() takes a callable or None");
        return NULL;
    }
    Py_XSETREF(run_hook, hook == Py_None ? NULL : Py_NewRef(hook));
    Py_RETURN_NONE;
}

PyDoc_STRVAR(decode_run_doc,
"decode_run(view, position, end_position, size, crc32c, min_offset, end_offset,\n"
"           max_rows, max_bytes, transactions) -> (position, state)\n\n"
"Walk the entries of a mapped segment `view` from `position`, doing in C what\n"
"scan_segment's loop does for plain batches: uncompressed, non-transactional (or any,\n"
"when `transactions` is false) magic-2 batches, control (unless track_batches(True)) and\n"
"empty batches, and batches outside [min_offset, end_offset). crc32c is the checksum function, or None to skip\n"
"verification. Stops, returning the position reached and a state of bit flags\n"
"(fastpath/protocol.py), when:\n"
"  RUN_ENTRY_FOR_PYTHON  the entry at `position` needs the Python loop (another magic,\n"
"     compression, a transactional batch, a torn or damaged entry: Python reports it);\n"
"  RUN_FLUSH  max_rows rows or max_bytes key/value bytes are accumulated (take() them);\n"
"  RUN_DONE  the batch just read reaches end_offset - 1, or the next starts at end_offset;\n"
"  RUN_END  position reached end_position.\n"
"RUN_FLUSH and RUN_DONE can come together.");

static PyObject *
DecodedColumns_decode_run(DecodedColumns *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10) {
        PyErr_Format(PyExc_TypeError, "decode_run() takes 10 arguments (%zd given)", nargs);
        return NULL;
    }
    int64_t position, end_position, size, max_rows, max_bytes;
    Bound min_bound, end_bound;
    OffsetRange range;
    PyObject *crc32c = args[4];
    int transactions = PyObject_IsTrue(args[9]);
    if (transactions < 0 || as_int64(args[1], &position) < 0 ||
        as_int64(args[2], &end_position) < 0 || as_int64(args[3], &size) < 0 ||
        bound_from(args[5], &min_bound) < 0 || bound_from(args[6], &end_bound) < 0 ||
        offset_range_from(args[5], args[6], &range) < 0 || as_int64(args[7], &max_rows) < 0 ||
        as_int64(args[8], &max_bytes) < 0)
        return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (size > view.len)
        size = view.len;
    if (end_position > size)
        end_position = size;
    const uint8_t *base = (const uint8_t *)view.buf;
    int state = RUN_END;
    char reason[MAX_REASON];

    while (position < end_position) {
        const uint8_t *entry = base + position;
        int64_t remaining = size - position;
        /* Anything but a complete, sane magic-2 header goes to read_entry_header. */
        if (remaining < V2_HEADER_SIZE || entry[V2_MAGIC] != 2) {
            state = RUN_ENTRY_FOR_PYTHON;
            break;
        }
        int32_t length = (int32_t)be32(entry + V2_LENGTH);
        int64_t base_offset = (int64_t)be64(entry + V2_BASE_OFFSET);
        uint32_t stored_crc = be32(entry + V2_CRC);
        uint16_t attributes = be16(entry + V2_ATTRIBUTES);
        int32_t last_delta = (int32_t)be32(entry + V2_LAST_OFFSET_DELTA);
        int64_t base_timestamp = (int64_t)be64(entry + V2_BASE_TIMESTAMP);
        int64_t max_timestamp = (int64_t)be64(entry + V2_MAX_TIMESTAMP);
        int32_t count = (int32_t)be32(entry + V2_RECORD_COUNT);
        int64_t last_offset;
        if (length < V2_HEADER_SIZE - LOG_OVERHEAD || LOG_OVERHEAD + (int64_t)length > remaining ||
            last_delta < 0 || count < 0 ||
            __builtin_add_overflow(base_offset, (int64_t)last_delta, &last_offset) ||
            last_offset == INT64_MAX) {
            state = RUN_ENTRY_FOR_PYTHON; /* errors, torn tails, offsets at the int64 edge */
            break;
        }
        if (base_offset < self->next_offset) {
            state = RUN_ENTRY_FOR_PYTHON; /* offsets going backwards: the loop reports it */
            break;
        }
        int64_t entry_size = LOG_OVERHEAD + (int64_t)length;
        int skip = min_bound.above || last_offset < min_bound.value;
        int done = !skip && (end_bound.below || (!end_bound.above && base_offset >= end_bound.value));
        int for_python = (attributes & ATTR_COMPRESSION_MASK) ||
            (transactions && (attributes & ATTR_TRANSACTIONAL) && !(attributes & ATTR_CONTROL)) ||
            (self->stop_at_control && (attributes & ATTR_CONTROL));
        /* Skipping or stopping decides from the header's offsets, so the header is verified
         * first; entries left to Python are verified there, once. */
        /* A batch to decode has its checksum verified as it is parsed, where the CRC
         * instruction is. */
        int fused = crc32c != Py_None && have_crc32c_instruction && !self->include_headers &&
                    !skip && !done &&
                    !for_python && !(attributes & ATTR_CONTROL) && count != 0;
        if (crc32c != Py_None && !fused && (skip || done || !for_python)) {
            int matches = checksum_matches(crc32c, entry + V2_CRC_START,
                                           (size_t)(entry_size - V2_CRC_START), stored_crc);
            if (matches < 0) {
                PyBuffer_Release(&view);
                return NULL;
            }
            if (!matches) {
                state = RUN_ENTRY_FOR_PYTHON;
                break;
            }
        }
        if (skip) {
            self->next_offset = last_offset + 1;
            position += entry_size;
            continue;
        }
        if (done) {
            state = RUN_DONE;
            break;
        }
        if (for_python) {
            state = RUN_ENTRY_FOR_PYTHON;
            break;
        }
        if ((attributes & ATTR_CONTROL) || count == 0) {
            self->next_offset = last_offset + 1;
            position += entry_size; /* nothing to read; the range checks below do not run */
            continue;
        }
        ColumnsMark mark;
        columns_mark(self, &mark);
        Py_ssize_t kept;
        Checksum checksum = {entry + V2_CRC_START, stored_crc};
        int status = decode_records(self, entry + V2_HEADER_SIZE,
                                    (size_t)(entry_size - V2_HEADER_SIZE), count, base_offset,
                                    base_timestamp, max_timestamp, attributes, &range, &kept,
                                    reason, fused ? &checksum : NULL);
        if (status != 0) {
            columns_rewind(self, &mark);
            if (status < 0) {
                PyBuffer_Release(&view);
                return NULL;
            }
            /* malformed (add_v2_batch raises the error) or damaged (verify_checksum) */
            state = RUN_ENTRY_FOR_PYTHON;
            break;
        }
        if (self->track_batches) {
            int64_t fields[ENTRY_FIELDS];
            fields[ENTRY_BASE_OFFSET] = base_offset;
            fields[ENTRY_PRODUCER_ID] = (int64_t)be64(entry + V2_PRODUCER_ID);
            fields[ENTRY_PRODUCER_EPOCH] = (int16_t)be16(entry + V2_PRODUCER_EPOCH);
            fields[ENTRY_BASE_SEQUENCE] = (int32_t)be32(entry + V2_BASE_SEQUENCE);
            fields[ENTRY_LEADER_EPOCH] = (int32_t)be32(entry + V2_LEADER_EPOCH);
            fields[ENTRY_ATTRIBUTES] = attributes;
            fields[ENTRY_MAGIC] = 2;
            fields[ENTRY_POSITION] = position;
            fields[ENTRY_CONTROL_TYPE] = NOT_CONTROL;
            fields[ENTRY_COORDINATOR_EPOCH] = NO_COORDINATOR_EPOCH;
            if (columns_note_entry(self, fields) < 0) {
                PyBuffer_Release(&view);
                return NULL;
            }
        }
        self->next_offset = last_offset + 1;
        position += entry_size;
        if (run_hook != NULL && call_run_hook(position) < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
        state = 0;
        if (self->rows >= max_rows || self->payload_bytes >= max_bytes)
            state |= RUN_FLUSH;
        if (!end_bound.above && (end_bound.below || last_offset >= end_bound.value - 1))
            state |= RUN_DONE;
        if (state)
            break;
        state = RUN_END;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("(Li)", (long long)position, state);
}

/* Bytes of a key or value given to add(): None or any bytes-like object. */
static int
append_nullable(BinaryColumn *col, PyObject *obj, const char *what, long long *payload)
{
    if (obj == Py_None)
        return column_append_null(col);
    Py_buffer view;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0)
        return -1;
    int status = column_append(col, view.buf, (size_t)view.len, what);
    if (payload)
        *payload += view.len;
    PyBuffer_Release(&view);
    return status;
}

static int
append_headers(DecodedColumns *self, PyObject *headers)
{
    PyObject *items = PySequence_Fast(headers, "headers must be a sequence of (key, value)");
    if (items == NULL)
        return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(items);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Fast_GET_ITEM(items, i);
        PyObject *hkey, *hvalue;
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "each header must be a (key, value) tuple");
            goto fail;
        }
        hkey = PyTuple_GET_ITEM(pair, 0);
        hvalue = PyTuple_GET_ITEM(pair, 1);
        Py_ssize_t key_size;
        const char *key_utf8 = PyUnicode_AsUTF8AndSize(hkey, &key_size);
        if (key_utf8 == NULL)
            goto fail;
        if (column_append(&self->header_keys, key_utf8, (size_t)key_size, "header keys") < 0 ||
            append_nullable(&self->header_values, hvalue, "header values", NULL) < 0)
            goto fail;
    }
    Py_DECREF(items);
    return 0;
fail:
    Py_DECREF(items);
    return -1;
}

PyDoc_STRVAR(add_doc,
"add(offset, timestamp, timestamp_type, key, value, headers)\n\n"
"Append one decoded record (the legacy magic-0/1 path).");

static PyObject *
DecodedColumns_add(DecodedColumns *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_Format(PyExc_TypeError, "add() takes 6 arguments (%zd given)", nargs);
        return NULL;
    }
    int64_t offset, timestamp, timestamp_type;
    if (as_int64(args[0], &offset) < 0 || as_int64(args[1], &timestamp) < 0 ||
        as_int64(args[2], &timestamp_type) < 0)
        return NULL;
    ColumnsMark mark;
    columns_mark(self, &mark);
    long long payload = 0;
    if (columns_reserve_row(self) < 0 ||
        append_nullable(&self->keys, args[3], "keys", &payload) < 0 ||
        append_nullable(&self->values, args[4], "values", &payload) < 0 ||
        (self->include_headers && append_headers(self, args[5]) < 0)) {
        columns_rewind(self, &mark);
        return NULL;
    }
    self->payload_bytes += payload;
    columns_put_row(self, offset, timestamp, (int32_t)timestamp_type);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(track_batches_doc,
"track_batches(include_control_records)\n\n"
"From now on note the metadata of the rows' batches (take_batch_entries); with\n"
"include_control_records, decode_run leaves control batches to the scan loop, which\n"
"adds their records as rows.");

static PyObject *
DecodedColumns_track_batches(DecodedColumns *self, PyObject *include_control_records)
{
    int stop = PyObject_IsTrue(include_control_records);
    if (stop < 0)
        return NULL;
    self->track_batches = 1;
    self->stop_at_control = stop;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(note_batch_doc,
"note_batch(base_offset, producer_id, producer_epoch, base_sequence, leader_epoch,\n"
"           attributes, magic, position, control_type, coordinator_epoch)\n\n"
"The rows added since the last entry (by add or decode_v2) share this metadata: note\n"
"them as one entry (nothing when no row was added).");

static PyObject *
DecodedColumns_note_batch(DecodedColumns *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != ENTRY_FIELDS - 1) {
        PyErr_Format(PyExc_TypeError, "note_batch() takes %d arguments (%zd given)",
                     ENTRY_FIELDS - 1, nargs);
        return NULL;
    }
    int64_t fields[ENTRY_FIELDS];
    for (Py_ssize_t i = 0; i < nargs; i++)
        if (as_int64(args[i], &fields[i + 1]) < 0)
            return NULL;
    if (columns_note_entry(self, fields) < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(take_batch_entries_doc,
"take_batch_entries() -> bytes-like\n\n"
"Hand over the entries noted since the last take (native int64s, ENTRY_FIELDS per\n"
"entry): call it with take_columns(), whose rows they cover.");

static PyObject *
DecodedColumns_take_batch_entries(DecodedColumns *self, PyObject *Py_UNUSED(ignored))
{
    return growbuf_detach(&self->batch_entries);
}

PyDoc_STRVAR(take_columns_doc,
"take_columns(micros=False) -> (rows, offsets, timestamps, timestamp_types, keys, values,\n"
"                              headers)\n\n"
"Hand over the accumulated buffers and start empty. timestamps are epoch milliseconds,\n"
"or with micros microseconds (multiplied in place, wrapping as int64 does). keys and values are\n"
"(validity or None, null count, int32 offsets, data); headers is None without\n"
"include_headers, else (int32 list offsets, header count, header keys, header values).");

static PyObject *
DecodedColumns_take_columns(DecodedColumns *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"micros", NULL};
    int micros = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p:take_columns", keywords, &micros))
        return NULL;
    PyObject *offsets = NULL, *timestamps = NULL, *types = NULL, *keys = NULL,
             *values = NULL, *headers = NULL, *list_offsets = NULL, *hkeys = NULL,
             *hvalues = NULL;
    Py_ssize_t rows = self->rows;
    Py_ssize_t header_count = self->header_keys.length;
    if (micros) {
        /* Here, while the column is in the cache: a numpy pass per batch costs more. */
        char *at = self->timestamps.data;
        for (Py_ssize_t i = 0; i < rows; i++, at += 8) {
            uint64_t value;
            memcpy(&value, at, 8);
            value *= 1000u;
            memcpy(at, &value, 8);
        }
    }
    if (!(offsets = growbuf_detach(&self->offsets)) ||
        !(timestamps = growbuf_detach(&self->timestamps)) ||
        !(types = growbuf_detach(&self->timestamp_types)) ||
        !(keys = column_detach(&self->keys)) || !(values = column_detach(&self->values)))
        goto fail;
    if (self->include_headers) {
        if (!(list_offsets = growbuf_detach(&self->header_offsets)) ||
            !(hkeys = column_detach(&self->header_keys)) ||
            !(hvalues = column_detach(&self->header_values)))
            goto fail;
        headers = Py_BuildValue("(NnNN)", list_offsets, header_count, hkeys, hvalues);
        list_offsets = hkeys = hvalues = NULL;
        if (headers == NULL)
            goto fail;
    } else {
        headers = Py_NewRef(Py_None);
    }
    if (columns_start(self) < 0)
        goto fail;
    return Py_BuildValue("(nNNNNNN)", rows, offsets, timestamps, types, keys, values, headers);
fail:
    Py_XDECREF(offsets);
    Py_XDECREF(timestamps);
    Py_XDECREF(types);
    Py_XDECREF(keys);
    Py_XDECREF(values);
    Py_XDECREF(headers);
    Py_XDECREF(list_offsets);
    Py_XDECREF(hkeys);
    Py_XDECREF(hvalues);
    /* Whatever was detached is gone: start over rather than keep half the columns. */
    columns_free(self);
    if (columns_start(self) < 0)
        PyErr_Clear();
    return NULL;
}

static Py_ssize_t
DecodedColumns_length(DecodedColumns *self)
{
    return self->rows;
}

static PyObject *
DecodedColumns_get_payload_bytes(DecodedColumns *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->payload_bytes);
}

static PyObject *
DecodedColumns_get_next_offset(DecodedColumns *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong(self->next_offset);
}

static int
DecodedColumns_set_next_offset(DecodedColumns *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_AttributeError, "next_offset cannot be deleted");
        return -1;
    }
    return as_int64(value, &self->next_offset);
}

static PyObject *
DecodedColumns_get_include_headers(DecodedColumns *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->include_headers);
}

static PyMethodDef DecodedColumns_methods[] = {
    {"decode_v2", (PyCFunction)(void (*)(void))DecodedColumns_decode_v2, METH_FASTCALL,
     decode_v2_doc},
    {"decode_run", (PyCFunction)(void (*)(void))DecodedColumns_decode_run, METH_FASTCALL,
     decode_run_doc},
    {"add", (PyCFunction)(void (*)(void))DecodedColumns_add, METH_FASTCALL, add_doc},
    {"take_columns", (PyCFunction)(void (*)(void))DecodedColumns_take_columns,
     METH_VARARGS | METH_KEYWORDS, take_columns_doc},
    {"track_batches", (PyCFunction)DecodedColumns_track_batches, METH_O, track_batches_doc},
    {"note_batch", (PyCFunction)(void (*)(void))DecodedColumns_note_batch, METH_FASTCALL,
     note_batch_doc},
    {"take_batch_entries", (PyCFunction)DecodedColumns_take_batch_entries, METH_NOARGS,
     take_batch_entries_doc},
    {NULL},
};

static PyGetSetDef DecodedColumns_getset[] = {
    {"payload_bytes", (getter)DecodedColumns_get_payload_bytes, NULL,
     "Key and value bytes accumulated since the last take.", NULL},
    {"next_offset", (getter)DecodedColumns_get_next_offset,
     (setter)DecodedColumns_set_next_offset,
     "The lowest base offset the next entry may have: decode_run stops (for the scan loop\n"
     "to report) at an entry below it, and raises it past each entry it walks.", NULL},
    {"include_headers", (getter)DecodedColumns_get_include_headers, NULL,
     "Whether header columns are collected.", NULL},
    {NULL},
};

static PySequenceMethods DecodedColumns_as_sequence = {(lenfunc)DecodedColumns_length};

static PyTypeObject DecodedColumnsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "segmentlog_datasource.format.fastpath._fastrecords.DecodedColumns",
    .tp_doc = "DecodedColumns(include_headers)\n\nDecoded records as Arrow column buffers.",
    .tp_basicsize = sizeof(DecodedColumns),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)DecodedColumns_init,
    .tp_dealloc = (destructor)DecodedColumns_dealloc,
    .tp_methods = DecodedColumns_methods,
    .tp_getset = DecodedColumns_getset,
    .tp_as_sequence = &DecodedColumns_as_sequence,
};

/* ------------------------------------------------------ batch entry expansion */

/* Kafka's DefaultRecordBatch.incrementSequence, in Java's wrapping int arithmetic. */
static inline int32_t
increment_sequence(int32_t sequence, int32_t increment)
{
    if (sequence > (int32_t)((uint32_t)INT32_MAX - (uint32_t)increment))
        return (int32_t)((uint32_t)increment - ((uint32_t)INT32_MAX - (uint32_t)sequence) - 1u);
    return (int32_t)((uint32_t)sequence + (uint32_t)increment);
}

PyDoc_STRVAR(expand_batch_entries_doc,
"expand_batch_entries(entries, offsets, columns)\n\n"
"Write the per-row metadata columns of the rows that batch entries (native int64s,\n"
"ENTRY_FIELDS per entry, as take_batch_entries gives them) cover, whose offsets are\n"
"`offsets` (native int64s), into `columns`: seven writable buffers, or None for a column\n"
"not wanted, of the rows' int64 producer ids, int32 producer epochs, int32 sequences,\n"
"int32 leader epochs, int32 magics, int64 batch offsets and int64 positions. A record's sequence\n"
"is Kafka's DefaultRecord one: -1 in a batch without a base sequence, else\n"
"incrementSequence(baseSequence, offset - baseOffset). format.arrow.expanded_entries is\n"
"its pure-Python twin.");

static PyObject *
fastrecords_expand_batch_entries(PyObject *Py_UNUSED(module), PyObject *const *args,
                                 Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "expand_batch_entries() takes 3 arguments (%zd given)",
                     nargs);
        return NULL;
    }
    static const Py_ssize_t widths[7] = {8, 4, 4, 4, 4, 8, 8};
    Py_buffer entries_view, offsets_view, out_views[7];
    void *out[7] = {NULL};
    int taken = 0; /* out_views held */
    PyObject *result = NULL;
    if (!PyTuple_Check(args[2]) || PyTuple_GET_SIZE(args[2]) != 7) {
        PyErr_SetString(PyExc_TypeError, "expand_batch_entries(): columns must be a tuple of 7");
        return NULL;
    }
    if (PyObject_GetBuffer(args[0], &entries_view, PyBUF_SIMPLE) < 0)
        return NULL;
    if (PyObject_GetBuffer(args[1], &offsets_view, PyBUF_SIMPLE) < 0) {
        PyBuffer_Release(&entries_view);
        return NULL;
    }
    const int64_t *entries = (const int64_t *)entries_view.buf;
    const int64_t *offsets = (const int64_t *)offsets_view.buf;
    Py_ssize_t count = entries_view.len / (Py_ssize_t)(ENTRY_FIELDS * sizeof(int64_t));
    Py_ssize_t rows = offsets_view.len / (Py_ssize_t)sizeof(int64_t);
    for (; taken < 7; taken++) {
        PyObject *column = PyTuple_GET_ITEM(args[2], taken);
        out_views[taken].obj = NULL;
        if (column == Py_None)
            continue;
        if (PyObject_GetBuffer(column, &out_views[taken], PyBUF_WRITABLE) < 0)
            goto done;
        if (out_views[taken].len < widths[taken] * rows) {
            PyErr_Format(PyExc_ValueError, "expand_batch_entries(): column %d holds %zd bytes, "
                         "not the %zd of %zd rows", taken, out_views[taken].len,
                         widths[taken] * rows, rows);
            taken++;
            goto done;
        }
        out[taken] = out_views[taken].buf;
    }
    long long covered = count ? (long long)entries[(count - 1) * ENTRY_FIELDS + ENTRY_END_ROW] : 0;
    if (covered != rows) {
        PyErr_Format(PyExc_ValueError, "expand_batch_entries(): the entries cover %lld rows, "
                     "not the %zd offsets given", covered, rows);
        goto done;
    }
    int64_t *producer_ids = out[0], *batch_offsets = out[5], *positions = out[6];
    int32_t *producer_epochs = out[1], *sequences = out[2], *leader_epochs = out[3],
            *magics = out[4];
    Py_ssize_t row = 0;
    for (Py_ssize_t e = 0; e < count; e++) {
        const int64_t *entry = entries + e * ENTRY_FIELDS;
        Py_ssize_t end = (Py_ssize_t)entry[ENTRY_END_ROW];
        if (end < row || end > rows) {
            PyErr_SetString(PyExc_ValueError, "expand_batch_entries(): entries out of order");
            goto done;
        }
        const int64_t base_offset = entry[ENTRY_BASE_OFFSET];
        const int32_t base_sequence = (int32_t)entry[ENTRY_BASE_SEQUENCE];
#define FILL(column, value)                                                        \
        if (column != NULL)                                                        \
            for (Py_ssize_t r = row; r < end; r++)                                 \
                column[r] = (value);
        FILL(producer_ids, entry[ENTRY_PRODUCER_ID])
        FILL(producer_epochs, (int32_t)entry[ENTRY_PRODUCER_EPOCH])
        FILL(leader_epochs, (int32_t)entry[ENTRY_LEADER_EPOCH])
        FILL(magics, (int32_t)entry[ENTRY_MAGIC])
        FILL(batch_offsets, base_offset)
        FILL(positions, entry[ENTRY_POSITION])
#undef FILL
        if (sequences != NULL) {
            for (Py_ssize_t r = row; r < end; r++)
                sequences[r] = base_sequence < 0 ? -1 : increment_sequence(
                    base_sequence, (int32_t)(uint32_t)(uint64_t)(offsets[r] - base_offset));
        }
        row = end;
    }
    result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < taken; i++)
        if (out_views[i].obj != NULL)
            PyBuffer_Release(&out_views[i]);
    PyBuffer_Release(&entries_view);
    PyBuffer_Release(&offsets_view);
    return result;
}

/* ---------------------------------------------------------- batch headers */

PyDoc_STRVAR(v2_batch_headers_doc,
"v2_batch_headers(source, position, end, next_offset) -> (stop, last, rows)\n\n"
"Walk the magic-2 batches of `source` (a buffer, or the descriptor of an open file,\n"
"whose headers are then read with pread) from `position` while each lies whole before\n"
"`end`, declares no negative count or offset delta, and starts at or past the offset\n"
"after the previous one (`next_offset` first): rows is bytes of native int64 triples\n"
"(base offset, last offset, CRC), one per batch; stop is where the walk stopped (`end`,\n"
"or the first entry it does not take: the caller looks at it); last is where the last\n"
"batch walked starts (-1: none). Nothing is checksummed.");

static PyObject *
fastrecords_v2_batch_headers(PyObject *Py_UNUSED(module), PyObject *const *args,
                             Py_ssize_t nargs)
{
    if (nargs != 4) {
        PyErr_Format(PyExc_TypeError, "v2_batch_headers() takes 4 arguments (%zd given)", nargs);
        return NULL;
    }
    int64_t position, end, next_offset, last_start = -1;
    if (as_int64(args[1], &position) < 0 || as_int64(args[2], &end) < 0 ||
        as_int64(args[3], &next_offset) < 0)
        return NULL;
    Py_buffer view = {0};
    int fd = -1;
    const uint8_t *data = NULL;
    if (PyLong_Check(args[0])) {
        fd = (int)PyLong_AsLong(args[0]);
        if (fd < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "v2_batch_headers(): a negative descriptor");
            return NULL;
        }
    } else {
        if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
            return NULL;
        if (end > (int64_t)view.len)
            end = (int64_t)view.len;
        data = (const uint8_t *)view.buf;
    }
    int64_t *rows = NULL;
    size_t count = 0, capacity = 0;
    int out_of_memory = 0;
    uint8_t head[V2_HEADER_SIZE];
    Py_BEGIN_ALLOW_THREADS
    while (position >= 0 && position + V2_HEADER_SIZE <= end) {
        const uint8_t *entry;
        if (data != NULL) {
            entry = data + position;
        } else {
            if (pread(fd, head, V2_HEADER_SIZE, (off_t)position) != V2_HEADER_SIZE)
                break;  /* the caller's own walk says why */
            entry = head;
        }
        int32_t length = (int32_t)be32(entry + V2_LENGTH);
        if (entry[V2_MAGIC] != 2 || length < V2_HEADER_SIZE - LOG_OVERHEAD ||
            position + LOG_OVERHEAD + (int64_t)length > end)
            break;
        int64_t base_offset = (int64_t)be64(entry + V2_BASE_OFFSET);
        int32_t last_delta = (int32_t)be32(entry + V2_LAST_OFFSET_DELTA);
        if (last_delta < 0 || (int32_t)be32(entry + V2_RECORD_COUNT) < 0 ||
            base_offset < next_offset || base_offset > INT64_MAX - 1 - last_delta)
            break;
        if (count == capacity) {
            size_t grown = capacity ? capacity * 2 : 1024;
            int64_t *more = PyMem_RawRealloc(rows, grown * 3 * sizeof(int64_t));
            if (more == NULL) {
                out_of_memory = 1;
                break;
            }
            rows = more;
            capacity = grown;
        }
        int64_t *row = rows + 3 * count++;
        row[0] = base_offset;
        row[1] = base_offset + last_delta;
        row[2] = (int64_t)be32(entry + V2_CRC);
        next_offset = row[1] + 1;
        last_start = position;
        position += LOG_OVERHEAD + (int64_t)length;
    }
    Py_END_ALLOW_THREADS
    if (data != NULL)
        PyBuffer_Release(&view);
    if (out_of_memory) {
        PyMem_RawFree(rows);
        return PyErr_NoMemory();
    }
    PyObject *packed = PyBytes_FromStringAndSize(
        (const char *)rows, (Py_ssize_t)(count * 3 * sizeof(int64_t)));
    PyMem_RawFree(rows);
    if (packed == NULL)
        return NULL;
    return Py_BuildValue("(LLN)", (long long)position, (long long)last_start, packed);
}

/* ------------------------------------------------------- mapped segment files */

/* A segment can shrink while it is read (retention, a follower truncating its log), and
 * touching a mapped page past a file's end raises SIGBUS, which kills the process. A
 * FileMapping registers its address range in mapping_slots; the SIGBUS handler looks the
 * faulting address up there and, for a FileMapping's, maps zero pages over the rest of
 * it and notes where the first fault was. The access is then made again and reads zeros,
 * wherever it was made: in decode_run, in Python slicing the buffer, in a checksum or
 * decompression library. The reader checks the mapping's fault_position and the file's
 * size before it trusts what it read (storage/local.py MappedLog.check). A writable
 * mapping (the writer setting batch headers in place) gets writable zero pages: the write
 * is made again there and lost, and the writer, seeing the fault, writes another way. Any other
 * SIGBUS goes to the disposition there was before (a crash, as without this module).
 *
 * Slots change only under the GIL; the handler (any thread, GIL or not) reads them
 * through a sequence number, odd while a slot changes, and skips a slot that changed
 * under it: only slots of mappings nobody can be reading change (a mapping goes only when
 * no buffer of it is exported). */

#define MAPPING_SLOTS 4096

typedef struct {
    unsigned long sequence;
    uintptr_t start;
    uintptr_t end;   /* page-rounded; 0: the slot is free */
    uintptr_t fault; /* the first faulting address, 0: none */
    int writable;    /* the zero pages put over it take writes too */
} MappingSlot;

static MappingSlot mapping_slots[MAPPING_SLOTS];
static int mapping_slots_next; /* where the search for a free slot starts */
static uintptr_t page_size;
static struct sigaction sigbus_before; /* the disposition ours replaced */
static volatile sig_atomic_t sigbus_handed_over; /* to sigbus_before, since installed */

#define LOAD(field) __atomic_load_n(&(field), __ATOMIC_SEQ_CST)
#define STORE(field, value) __atomic_store_n(&(field), (value), __ATOMIC_SEQ_CST)

static void
on_sigbus(int signum, siginfo_t *info, void *Py_UNUSED(context))
{
    /* si_code > 0: the kernel's, for an access (not a kill() or raise()). */
    if (info != NULL && info->si_code > 0) {
        uintptr_t address = (uintptr_t)info->si_addr;
        for (int i = 0; i < MAPPING_SLOTS; i++) {
            MappingSlot *slot = &mapping_slots[i];
            unsigned long sequence = LOAD(slot->sequence);
            if (sequence & 1)
                continue;
            uintptr_t start = LOAD(slot->start), end = LOAD(slot->end);
            if (LOAD(slot->sequence) != sequence || address < start || address >= end)
                continue;
            uintptr_t page = address & ~(page_size - 1);
            int protection = LOAD(slot->writable) ? PROT_READ | PROT_WRITE : PROT_READ;
            if (mmap((void *)page, end - page, protection, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
                     -1, 0) == MAP_FAILED)
                break;
            uintptr_t none = 0;
            __atomic_compare_exchange_n(&slot->fault, &none, address, 0, __ATOMIC_SEQ_CST,
                                        __ATOMIC_SEQ_CST);
            return; /* the access is made again, over zeros */
        }
    }
    /* Not ours: the previous disposition takes over. A fault happens again on return; a
     * signal sent is sent again (it stays blocked until this handler returns). A handler
     * that hands it back (faulthandler, enabled after ours, restores ours and raises) ends
     * in the default action, not in a loop. */
    if (sigbus_handed_over) {
        struct sigaction fallback;
        memset(&fallback, 0, sizeof fallback);
        fallback.sa_handler = SIG_DFL;
        sigemptyset(&fallback.sa_mask);
        sigaction(SIGBUS, &fallback, NULL);
    } else {
        sigbus_handed_over = 1;
        sigaction(SIGBUS, &sigbus_before, NULL);
    }
    if (info == NULL || info->si_code <= 0)
        raise(signum);
}

/* Ours, unless it is already: called before each mapping, so a handler installed since
 * (faulthandler.enable(), say) comes after ours for the faults that are not ours. */
static int
sigbus_handler_install(void)
{
    struct sigaction current, ours;
    if (sigaction(SIGBUS, NULL, &current) < 0)
        return -1;
    sigbus_handed_over = 0; /* the process lived on after any hand-over */
    if ((current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_sigbus)
        return 0;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_sigbus;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    sigbus_before = current;
    return sigaction(SIGBUS, &ours, NULL);
}

static int
mapping_slot_claim(uintptr_t start, uintptr_t end, int writable)
{
    for (int n = 0; n < MAPPING_SLOTS; n++) {
        int i = (mapping_slots_next + n) % MAPPING_SLOTS;
        MappingSlot *slot = &mapping_slots[i];
        if (LOAD(slot->end) != 0)
            continue;
        STORE(slot->sequence, slot->sequence + 1);
        STORE(slot->fault, 0);
        STORE(slot->writable, writable);
        STORE(slot->start, start);
        STORE(slot->end, end);
        STORE(slot->sequence, slot->sequence + 1);
        mapping_slots_next = (i + 1) % MAPPING_SLOTS;
        return i;
    }
    return -1;
}

static void
mapping_slot_release(int i)
{
    MappingSlot *slot = &mapping_slots[i];
    STORE(slot->sequence, slot->sequence + 1);
    STORE(slot->end, 0);
    STORE(slot->start, 0);
    STORE(slot->fault, 0);
    STORE(slot->sequence, slot->sequence + 1);
}

typedef struct {
    PyObject_HEAD
    char *data;  /* NULL once closed */
    Py_ssize_t size;
    Py_ssize_t exports;
    int slot;
    Py_ssize_t fault_position; /* once closed: the slot's fault, -1: none */
    int writable;
} FileMapping;

static PyObject *
FileMapping_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"fd", "size", "writable", NULL};
    int fd, writable = 0;
    Py_ssize_t size;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "in|p", kwlist, &fd, &size, &writable))
        return NULL;
    if (size <= 0) {
        PyErr_SetString(PyExc_ValueError, "FileMapping() maps at least one byte");
        return NULL;
    }
    if (sigbus_handler_install() < 0)
        return PyErr_SetFromErrno(PyExc_OSError);
    void *data = mmap(NULL, (size_t)size, writable ? PROT_READ | PROT_WRITE : PROT_READ,
                      MAP_SHARED, fd, 0);
    if (data == MAP_FAILED)
        return PyErr_SetFromErrno(PyExc_OSError);
    uintptr_t start = (uintptr_t)data;
    int slot = mapping_slot_claim(
        start, start + (((uintptr_t)size + page_size - 1) & ~(page_size - 1)), writable);
    if (slot < 0) {
        munmap(data, (size_t)size);
        errno = EMFILE;
        return PyErr_Format(PyExc_OSError, "more than %d segment files mapped at once",
                            MAPPING_SLOTS);
    }
    FileMapping *self = (FileMapping *)type->tp_alloc(type, 0);
    if (self == NULL) {
        mapping_slot_release(slot);
        munmap(data, (size_t)size);
        return NULL;
    }
    self->data = data;
    self->size = size;
    self->exports = 0;
    self->slot = slot;
    self->fault_position = -1;
    self->writable = writable;
    return (PyObject *)self;
}

static void
file_mapping_unmap(FileMapping *self)
{
    if (self->data == NULL)
        return;
    uintptr_t fault = LOAD(mapping_slots[self->slot].fault);
    if (fault != 0)
        self->fault_position = (Py_ssize_t)(fault - (uintptr_t)self->data);
    mapping_slot_release(self->slot); /* first: nothing reads it any more */
    munmap(self->data, (size_t)self->size);
    self->data = NULL;
}

static void
FileMapping_dealloc(FileMapping *self)
{
    file_mapping_unmap(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
FileMapping_getbuffer(FileMapping *self, Py_buffer *view, int flags)
{
    if (self->data == NULL) {
        PyErr_SetString(PyExc_ValueError, "the file mapping is closed");
        view->obj = NULL;
        return -1;
    }
    if (PyBuffer_FillInfo(view, (PyObject *)self, self->data, self->size, !self->writable,
                          flags) < 0)
        return -1;
    self->exports++;
    return 0;
}

static void
FileMapping_releasebuffer(FileMapping *self, Py_buffer *Py_UNUSED(view))
{
    self->exports--;
}

static PyObject *
FileMapping_close(FileMapping *self, PyObject *Py_UNUSED(ignored))
{
    if (self->exports > 0) {
        PyErr_SetString(PyExc_BufferError, "cannot close a file mapping while its bytes "
                                           "are in use (exported buffers exist)");
        return NULL;
    }
    file_mapping_unmap(self);
    Py_RETURN_NONE;
}

static PyObject *
FileMapping_get_fault_position(FileMapping *self, void *Py_UNUSED(closure))
{
    if (self->data == NULL)
        return self->fault_position < 0 ? Py_NewRef(Py_None)
                                        : PyLong_FromSsize_t(self->fault_position);
    uintptr_t fault = LOAD(mapping_slots[self->slot].fault);
    if (fault == 0)
        Py_RETURN_NONE;
    return PyLong_FromSize_t((size_t)(fault - (uintptr_t)self->data));
}

static PyObject *
FileMapping_get_closed(FileMapping *self, void *Py_UNUSED(closure))
{
    return PyBool_FromLong(self->data == NULL);
}

static PyBufferProcs FileMapping_as_buffer = {(getbufferproc)FileMapping_getbuffer,
                                              (releasebufferproc)FileMapping_releasebuffer};

static PyMethodDef FileMapping_methods[] = {
    {"close", (PyCFunction)FileMapping_close, METH_NOARGS,
     "Unmap now (BufferError while buffers of it are in use; they unmap it when released)."},
    {NULL},
};

static PyGetSetDef FileMapping_getset[] = {
    {"fault_position", (getter)FileMapping_get_fault_position, NULL,
     "None, or the position of the first byte touched past the file's end (the file shrank\n"
     "under the mapping) or written where the file could not take it: that page and those\n"
     "after it read as zeros since (and writes there are lost). Kept after close().", NULL},
    {"closed", (getter)FileMapping_get_closed, NULL, "Whether it is unmapped.", NULL},
    {NULL},
};

static PyTypeObject FileMappingType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "segmentlog_datasource.format.fastpath._fastrecords.FileMapping",
    .tp_doc = "FileMapping(fd, size, writable=False)\n\n"
              "The first `size` bytes of an open file, mapped read-only (writable: shared\n"
              "and writable, fd open for writing), as a buffer. A page lost to the file\n"
              "shrinking (or, written, one the system could not give the file) reads as\n"
              "zeros and takes writes that never reach the file, instead of killing the\n"
              "process, and fault_position says where that happened.",
    .tp_basicsize = sizeof(FileMapping),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = FileMapping_new,
    .tp_dealloc = (destructor)FileMapping_dealloc,
    .tp_as_buffer = &FileMapping_as_buffer,
    .tp_methods = FileMapping_methods,
    .tp_getset = FileMapping_getset,
};

/* ------------------------------------------------------------------ module */

static PyMethodDef fastrecords_functions[] = {
    {"checksum_matches", (PyCFunction)(void (*)(void))fastrecords_checksum_matches,
     METH_FASTCALL, checksum_matches_doc},
    {"crc32c", (PyCFunction)(void (*)(void))fastrecords_crc32c, METH_FASTCALL, crc32c_doc},
    {"v2_batch_headers", (PyCFunction)(void (*)(void))fastrecords_v2_batch_headers,
     METH_FASTCALL, v2_batch_headers_doc},
    {"set_run_hook", (PyCFunction)fastrecords_set_run_hook, METH_O, set_run_hook_doc},
    {"expand_batch_entries", (PyCFunction)(void (*)(void))fastrecords_expand_batch_entries,
     METH_FASTCALL, expand_batch_entries_doc},
    {NULL},
};

static struct PyModuleDef fastrecords_module = {
    PyModuleDef_HEAD_INIT,
    .m_methods = fastrecords_functions,
    .m_name = "segmentlog_datasource.format.fastpath._fastrecords",
    .m_doc = "Compiled decoder of Kafka magic-2 records into Arrow column buffers.",
    .m_size = -1,
};

/* The values this build was compiled with, for a test to compare with Python's. */
#define COMPILED_CONSTANT(name) {#name, (long)(name)}
static const struct {
    const char *name;
    long value;
} compiled_constants[] = {
    COMPILED_CONSTANT(LOG_OVERHEAD),
    COMPILED_CONSTANT(V2_HEADER_SIZE),
    COMPILED_CONSTANT(V2_BASE_OFFSET),
    COMPILED_CONSTANT(V2_LENGTH),
    COMPILED_CONSTANT(V2_MAGIC),
    COMPILED_CONSTANT(V2_CRC),
    COMPILED_CONSTANT(V2_ATTRIBUTES),
    COMPILED_CONSTANT(V2_LAST_OFFSET_DELTA),
    COMPILED_CONSTANT(V2_BASE_TIMESTAMP),
    COMPILED_CONSTANT(V2_MAX_TIMESTAMP),
    COMPILED_CONSTANT(V2_RECORD_COUNT),
    COMPILED_CONSTANT(V2_CRC_START),
    COMPILED_CONSTANT(ATTR_COMPRESSION_MASK),
    COMPILED_CONSTANT(ATTR_TIMESTAMP_TYPE),
    COMPILED_CONSTANT(ATTR_TRANSACTIONAL),
    COMPILED_CONSTANT(ATTR_CONTROL),
    COMPILED_CONSTANT(CREATE_TIME),
    COMPILED_CONSTANT(LOG_APPEND_TIME),
    COMPILED_CONSTANT(RUN_ENTRY_FOR_PYTHON),
    COMPILED_CONSTANT(RUN_FLUSH),
    COMPILED_CONSTANT(RUN_DONE),
    COMPILED_CONSTANT(RUN_END),
    COMPILED_CONSTANT(V2_LEADER_EPOCH),
    COMPILED_CONSTANT(V2_PRODUCER_ID),
    COMPILED_CONSTANT(V2_PRODUCER_EPOCH),
    COMPILED_CONSTANT(V2_BASE_SEQUENCE),
    COMPILED_CONSTANT(ENTRY_END_ROW),
    COMPILED_CONSTANT(ENTRY_BASE_OFFSET),
    COMPILED_CONSTANT(ENTRY_PRODUCER_ID),
    COMPILED_CONSTANT(ENTRY_PRODUCER_EPOCH),
    COMPILED_CONSTANT(ENTRY_BASE_SEQUENCE),
    COMPILED_CONSTANT(ENTRY_LEADER_EPOCH),
    COMPILED_CONSTANT(ENTRY_ATTRIBUTES),
    COMPILED_CONSTANT(ENTRY_MAGIC),
    COMPILED_CONSTANT(ENTRY_POSITION),
    COMPILED_CONSTANT(ENTRY_CONTROL_TYPE),
    COMPILED_CONSTANT(ENTRY_COORDINATOR_EPOCH),
    COMPILED_CONSTANT(ENTRY_FIELDS),
    COMPILED_CONSTANT(NOT_CONTROL),
    COMPILED_CONSTANT(NO_COORDINATOR_EPOCH),
};
#undef COMPILED_CONSTANT

PyMODINIT_FUNC
PyInit__fastrecords(void)
{
    if (PyType_Ready(&ChunkType) < 0 || PyType_Ready(&DecodedColumnsType) < 0 ||
        PyType_Ready(&FileMappingType) < 0)
        return NULL;
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    crc32c_init();
    PyObject *module = PyModule_Create(&fastrecords_module);
    if (module == NULL)
        return NULL;
    MalformedRecords = PyErr_NewExceptionWithDoc(
        "segmentlog_datasource.format.fastpath._fastrecords.MalformedRecords",
        "The records section of a batch is not the records its header declares.",
        PyExc_ValueError, NULL);
    if (MalformedRecords == NULL ||
        PyModule_AddObjectRef(module, "MalformedRecords", MalformedRecords) < 0 ||
        PyModule_AddObjectRef(module, "DecodedColumns", (PyObject *)&DecodedColumnsType) < 0 ||
        PyModule_AddObjectRef(module, "Chunk", (PyObject *)&ChunkType) < 0 ||
        PyModule_AddObjectRef(module, "FileMapping", (PyObject *)&FileMappingType) < 0 ||
        PyModule_AddIntConstant(module, "CRC32C_INSTRUCTION", have_crc32c_instruction) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    for (size_t i = 0; i < sizeof(compiled_constants) / sizeof(compiled_constants[0]); i++) {
        if (PyModule_AddIntConstant(module, compiled_constants[i].name,
                                    compiled_constants[i].value) < 0) {
            Py_DECREF(module);
            return NULL;
        }
    }
#ifdef SEGMENTLOG_SOURCE_SHA256
    /* buildinfo.source_sha256() of this file and the values above: compiled.py, run
     * from a checkout, loads a build only when it matches the checkout's. */
    if (PyModule_AddStringConstant(module, "SOURCE_SHA256", SEGMENTLOG_SOURCE_SHA256) < 0) {
        Py_DECREF(module);
        return NULL;
    }
#endif
    return module;
}
