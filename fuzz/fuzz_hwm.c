/*
 * fuzz_hwm.c — oracle/hwm.c's state file text.
 *
 * Input: one mode byte, then bytes.
 *   even mode: the bytes are a state file. Parsing never reads past them;
 *              a file that parses is exactly the text its mark formats to
 *              (so nothing but the one valid form is accepted).
 *   odd mode:  a mark (8 bytes), a position and a byte. The mark formats
 *              and parses back; the text with that one byte changed
 *              (or cut short there) does not parse: the CRC and the exact
 *              form catch every such corruption.
 */
#include <string.h>

#include "fuzz.h"
#include "hwm.h"

static void parse_any(const uint8_t *p, size_t len)
{
    char *text = malloc(len ? len : 1); /* exact size */
    FUZZ_CHECK(text != NULL);
    memcpy(text, p, len);
    uint64_t mark = 0;
    if (hwm_parse(text, len, &mark) == 0) {
        char expect[128];
        int n = hwm_format(mark, expect, sizeof expect);
        FUZZ_CHECK(n > 0 && (size_t)n == len && memcmp(expect, text, len) == 0);
    }
    free(text);
}

static void corrupt_one(const uint8_t *p, size_t left)
{
    uint64_t mark = fuzz_take(&p, &left, 8);
    size_t pos = (size_t)fuzz_take(&p, &left, 1);
    uint8_t x = (uint8_t)fuzz_take(&p, &left, 1);

    char text[128];
    int n = hwm_format(mark, text, sizeof text);
    FUZZ_CHECK(n > 0);
    uint64_t back = ~mark;
    FUZZ_CHECK(hwm_parse(text, (size_t)n, &back) == 0 && back == mark);

    pos %= (size_t)n;
    FUZZ_CHECK(hwm_parse(text, pos, &back) != 0); /* a torn file */
    if (x != 0) {
        text[pos] = (char)(text[pos] ^ x);
        FUZZ_CHECK(hwm_parse(text, (size_t)n, &back) != 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0)
        parse_any(data + 1, size - 1);
    else
        corrupt_one(data + 1, size - 1);
    return 0;
}
