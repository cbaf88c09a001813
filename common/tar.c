/*
 * tar.c — ustar headers for a flat archive of regular files (tar.h).
 *
 * The header's fields (POSIX.1-1988 ustar): name at 0 (100 bytes), mode
 * at 100 (8), uid 108 (8), gid 116 (8), size 124 (12), mtime 136 (12),
 * checksum 148 (8), type flag 156, magic "ustar\0" at 257, version "00"
 * at 263. Numbers are octal text ending in NUL; the checksum is the sum
 * of the header's bytes with its own field counted as spaces.
 */
#include <stdio.h>
#include <string.h>

#include "tar.h"

#define OCTAL_SIZE_MAX 077777777777ULL /* 11 octal digits */

static void octal(unsigned char *field, size_t width, uint64_t v)
{
    /* width - 1 digits and a NUL, zero-padded. */
    snprintf((char *)field, width, "%0*llo", (int)width - 1, (unsigned long long)v);
}

static unsigned checksum(const unsigned char h[TAR_BLOCK])
{
    unsigned sum = 0;
    for (size_t i = 0; i < TAR_BLOCK; i++)
        sum += i >= 148 && i < 156 ? ' ' : h[i];
    return sum;
}

int tar_header(unsigned char out[TAR_BLOCK], const char *name, uint64_t size, uint64_t mtime)
{
    size_t n = strlen(name);
    if (n == 0 || n > TAR_NAME_MAX || strchr(name, '/') != NULL)
        return -1;
    memset(out, 0, TAR_BLOCK);
    memcpy(out, name, n);
    octal(out + 100, 8, 0600);
    octal(out + 108, 8, 0);
    octal(out + 116, 8, 0);
    if (size <= OCTAL_SIZE_MAX) {
        octal(out + 124, 12, size);
    } else {
        /* GNU base-256: the first byte's top bit set, the number big-endian. */
        out[124] = 0x80;
        for (int i = 0; i < 8; i++)
            out[135 - i] = (unsigned char)(size >> (8 * i));
    }
    octal(out + 136, 12, mtime);
    out[156] = '0';
    memcpy(out + 257, "ustar", 6);
    memcpy(out + 263, "00", 2);
    snprintf((char *)out + 148, 8, "%06o", checksum(out));
    out[155] = ' ';
    return 0;
}

uint64_t tar_padded(uint64_t size)
{
    return (size + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
}

/* An octal field: digits, maybe led by spaces, ended by NUL or space. */
static int parse_octal(const unsigned char *f, size_t width, uint64_t *v)
{
    size_t i = 0;
    uint64_t x = 0;
    while (i < width && f[i] == ' ')
        i++;
    size_t digits = 0;
    for (; i < width && f[i] >= '0' && f[i] <= '7'; i++, digits++) {
        if (x > (UINT64_MAX >> 3))
            return -1;
        x = x * 8 + (uint64_t)(f[i] - '0');
    }
    if (digits == 0 || (i < width && f[i] != '\0' && f[i] != ' '))
        return -1;
    *v = x;
    return 0;
}

int tar_parse(const unsigned char in[TAR_BLOCK], char name[TAR_NAME_MAX + 1], uint64_t *size,
              const char **why)
{
    size_t zero = 0;
    while (zero < TAR_BLOCK && in[zero] == 0)
        zero++;
    if (zero == TAR_BLOCK)
        return 0;
    uint64_t sum;
    if (parse_octal(in + 148, 8, &sum) != 0 || sum != checksum(in)) {
        *why = "a header's checksum is wrong (not a tar archive, or damaged)";
        return -1;
    }
    if (memcmp(in + 257, "ustar", 5) != 0) {
        *why = "not a ustar archive";
        return -1;
    }
    if (in[156] != '0' && in[156] != '\0') {
        *why = "a member is not a regular file";
        return -1;
    }
    if (in[345] != '\0') {
        *why = "a member's name has a directory prefix";
        return -1;
    }
    if (memchr(in, '\0', 100) == NULL) {
        *why = "a member's name is too long";
        return -1;
    }
    memcpy(name, in, TAR_NAME_MAX + 1); /* NUL-terminated within */
    if (name[0] == '\0' || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0) {
        *why = "a member's name is not a plain file name";
        return -1;
    }
    if (in[124] & 0x80) {
        uint64_t v = 0;
        for (int i = 128; i < 136; i++) /* the low 8 bytes; the rest must be 0 */
            v = v << 8 | in[i];
        for (int i = 125; i < 128; i++)
            if (in[i] != 0)
                goto bad_size;
        if ((in[124] & 0x7f) != 0)
            goto bad_size;
        if (v > TAR_SIZE_MAX)
            goto bad_size;
        *size = v;
        return 1;
    }
    if (parse_octal(in + 124, 12, size) == 0)
        return 1;
bad_size:
    *why = "a member's size is not readable";
    return -1;
}
