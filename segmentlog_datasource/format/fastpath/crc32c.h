/* crc32c.h: CRC32C (Castagnoli), the checksum of magic-2 record batches, for both
 * compiled modules (_fastrecords.c parses with it, _fastencode.c writes it): the CPU's
 * instruction where it has one, three interleaved streams over 768-byte blocks, else
 * slice-by-8 tables. The functions are static: each module compiles its own copy of this
 * one source. A module calls crc32c_init() once, when it is imported. */
#ifndef SEGMENTLOG_CRC32C_H
#define SEGMENTLOG_CRC32C_H
#include <stdint.h>
#include <string.h>

static uint32_t crc_table[8][256];

static void
crc_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* Slice-by-8: where the CPU has no CRC32 instruction. */
__attribute__((unused)) static uint32_t
crc32c_tables(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
        n--;
    }
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        word ^= crc;  /* the word's first byte is its low byte */
        crc = crc_table[7][word & 0xFF] ^ crc_table[6][(word >> 8) & 0xFF] ^
              crc_table[5][(word >> 16) & 0xFF] ^ crc_table[4][(word >> 24) & 0xFF] ^
              crc_table[3][(word >> 32) & 0xFF] ^ crc_table[2][(word >> 40) & 0xFF] ^
              crc_table[1][(word >> 48) & 0xFF] ^ crc_table[0][word >> 56];
        p += 8;
        n -= 8;
    }
#endif
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

/* CRC32C with the SSE4.2 instruction, on the running (not inverted) value. One dependent
 * stream runs at about a third of what three interleaved streams reach: it takes the
 * ends of buffers, and crc32c_block (below) their 768-byte blocks, beside the parse and
 * apart from it (crc32c_continue, the module's crc32c()). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_CRC32C_INSTRUCTION 1
__attribute__((target("sse4.2"))) static uint32_t
crc32c_update(uint32_t crc32, const uint8_t *p, size_t n)
{
    uint64_t crc = crc32;
    for (; n && ((uintptr_t)p & 7); n--)
        crc = __builtin_ia32_crc32qi((uint32_t)crc, *p++);
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        crc = __builtin_ia32_crc32di(crc, word);
    }
    for (; n; n--)
        crc = __builtin_ia32_crc32qi((uint32_t)crc, *p++);
    return (uint32_t)crc;
}

/* One word into the running value, inline (the instruction needs no target attribute
 * here; it runs only where have_crc32c_instruction says the CPU has it). */
static inline uint64_t
crc32c_word(uint64_t crc, uint64_t word)
{
    __asm__("crc32q %1, %0" : "+r"(crc) : "rm"(word));
    return crc;
}

/* The checksum beside the parse runs three independent streams over the three
 * CRC_STRIPE-byte stripes of each block of the batch (one stream would wait on each
 * instruction's result), then joins them: the value is linear, so a stream's value
 * carried over CRC_STRIPE more bytes is its value through CRC_STRIPE zero bytes (the
 * tables: that map of each byte of the value) XOR the next stripe's own. */
#define CRC_STRIPE 256
#define CRC_BLOCK (3 * CRC_STRIPE)
static uint32_t crc_stripe_shift[4][256];

static void
crc_stripe_shift_init(void)
{
    static const uint8_t zeros[CRC_STRIPE];
    uint32_t bit_image[32];
    for (int bit = 0; bit < 32; bit++)
        bit_image[bit] = crc32c_update(1u << bit, zeros, CRC_STRIPE);
    for (int k = 0; k < 4; k++)
        for (int v = 0; v < 256; v++) {
            uint32_t image = 0;
            for (int bit = 0; bit < 8; bit++)
                if (v & (1 << bit))
                    image ^= bit_image[8 * k + bit];
            crc_stripe_shift[k][v] = image;
        }
}

static inline uint64_t
crc_past_stripe(uint64_t crc)
{
    return crc_stripe_shift[0][crc & 0xFF] ^ crc_stripe_shift[1][(crc >> 8) & 0xFF] ^
           crc_stripe_shift[2][(crc >> 16) & 0xFF] ^ crc_stripe_shift[3][(crc >> 24) & 0xFF];
}

/* The running value carried over one CRC_BLOCK of bytes at p. */
static inline uint64_t
crc32c_block(uint64_t crc, const uint8_t *p)
{
    uint64_t b = 0, c = 0;
    for (int i = 0; i < CRC_STRIPE; i += 8) {
        uint64_t wa, wb, wc;
        memcpy(&wa, p + i, 8);
        memcpy(&wb, p + CRC_STRIPE + i, 8);
        memcpy(&wc, p + 2 * CRC_STRIPE + i, 8);
        crc = crc32c_word(crc, wa);
        b = crc32c_word(b, wb);
        c = crc32c_word(c, wc);
    }
    return crc_past_stripe(crc_past_stripe(crc) ^ b) ^ c;
}

__attribute__((unused)) static uint32_t
crc32c_instruction(const uint8_t *p, size_t n)
{
    return crc32c_update(0xFFFFFFFFu, p, n) ^ 0xFFFFFFFFu;
}

/* The checksum of n bytes at p continued from `value` (the checksum of the bytes before
 * them; 0 for none): three streams a block, as beside the parse, then the rest. */
static uint32_t
crc32c_continue(uint32_t value, const uint8_t *p, size_t n)
{
    uint64_t crc = value ^ 0xFFFFFFFFu;
    for (; n >= CRC_BLOCK; n -= CRC_BLOCK, p += CRC_BLOCK)
        crc = crc32c_block(crc, p);
    return crc32c_update((uint32_t)crc, p, n) ^ 0xFFFFFFFFu;
}
#endif
static int have_crc32c_instruction;

/* Where the instruction is, and the tables the functions above use built. */
static void
crc32c_init(void)
{
    crc_tables();
#ifdef HAVE_CRC32C_INSTRUCTION
    __builtin_cpu_init();
    have_crc32c_instruction = __builtin_cpu_supports("sse4.2") != 0;
    if (have_crc32c_instruction)
        crc_stripe_shift_init();
#endif
}
#endif
