/*
 * tar.h — the one archive format a backup travels in: POSIX ustar, flat
 * (regular files, no directories), as `tar -xf` reads it.
 *
 * A file is a 512-byte header, its bytes, and zeros up to a multiple of
 * 512; the archive ends with two zero blocks. Sizes of 8 GiB and more are
 * written in GNU tar's base-256 form (the ustar field holds 11 octal
 * digits), which GNU tar and bsdtar read.
 */
#ifndef PERCOLATOR_TAR_H
#define PERCOLATOR_TAR_H

#include <stddef.h>
#include <stdint.h>

#define TAR_BLOCK 512
#define TAR_NAME_MAX 99     /* a name's bytes, without its NUL */
#define TAR_SIZE_MAX ((uint64_t)1 << 62) /* larger is refused: no sum can wrap */

/* The header of a regular file `name` (1..TAR_NAME_MAX bytes, no '/')
 * with `size` bytes, mode 0600, modified at `mtime` (seconds). 0, or -1
 * when the name does not fit. */
int tar_header(unsigned char out[TAR_BLOCK], const char *name, uint64_t size, uint64_t mtime);

/* Bytes of a member's data once padded to whole blocks. */
uint64_t tar_padded(uint64_t size);

/* Read a header. 1: a regular file (name in `name`, NUL-terminated;
 * size in *size); 0: a zero block (the end); -1: anything else, with the
 * reason in *why (a bad checksum, not ustar, not a regular file, a name
 * with '/', "." or ".."). */
int tar_parse(const unsigned char in[TAR_BLOCK], char name[TAR_NAME_MAX + 1], uint64_t *size,
              const char **why);

#endif
