/*
 * fuzz_utf8.c — service/codec.c's UTF-8 check against two others: a
 * reference written from the Unicode standard's table of well-formed byte
 * sequences (Table 3-7: ranges of each byte, not decoded code points, so
 * it shares no logic with codec.c), and jansson's own check, which
 * codec_to_json relies on: if the two disagreed, a key codec.c accepts
 * could fail to become a JSON string (or the reverse).
 */
#include <jansson.h>
#include <string.h>

#include "codec.h"
#include "fuzz.h"

static bool in(uint8_t b, uint8_t lo, uint8_t hi) { return b >= lo && b <= hi; }

static bool ref_utf8_valid(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint8_t b = s[i];
        size_t left = len - i;
        if (b <= 0x7F) {
            i += 1;
        } else if (in(b, 0xC2, 0xDF)) {
            if (left < 2 || !in(s[i + 1], 0x80, 0xBF))
                return false;
            i += 2;
        } else if (in(b, 0xE0, 0xEF)) {
            uint8_t lo = b == 0xE0 ? 0xA0 : 0x80, hi = b == 0xED ? 0x9F : 0xBF;
            if (left < 3 || !in(s[i + 1], lo, hi) || !in(s[i + 2], 0x80, 0xBF))
                return false;
            i += 3;
        } else if (in(b, 0xF0, 0xF4)) {
            uint8_t lo = b == 0xF0 ? 0x90 : 0x80, hi = b == 0xF4 ? 0x8F : 0xBF;
            if (left < 4 || !in(s[i + 1], lo, hi) || !in(s[i + 2], 0x80, 0xBF) ||
                !in(s[i + 3], 0x80, 0xBF))
                return false;
            i += 4;
        } else {
            return false;
        }
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool ok = codec_utf8_valid(data, size);
    FUZZ_CHECK(ok == ref_utf8_valid(data, size));

    /* Text mode turns valid bytes into a JSON string, and only those. */
    json_t *j = codec_to_json(data, size, ENC_TEXT);
    FUZZ_CHECK((j != NULL) == ok);
    if (j != NULL) {
        FUZZ_CHECK(json_string_length(j) == size);
        FUZZ_CHECK(size == 0 || memcmp(json_string_value(j), data, size) == 0);
        json_decref(j);
    }
    return 0;
}
