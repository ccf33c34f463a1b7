/* SPDX-License-Identifier: Apache-2.0 */
/* The page's forms as they arrive (application/x-www-form-urlencoded), and
 * their anti-forgery tokens. */
#include "page.h"
#include "sha256.h"
#include "timeutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define REASON_MAX 500

static int fail(char *why, size_t size, const char *message)
{
    snprintf(why, size, "%s", message);
    return MEDIC_E_INVALID;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Decodes value (len bytes, '+' a space, %XX a byte) into out (size):
 * 0, or -1 when it is malformed, too long, or holds a control character
 * other than a line break. */
static int decode(const char *value, size_t len, char *out, size_t size)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int c = (unsigned char)value[i];
        if (c == '+')
            c = ' ';
        else if (c == '%') {
            int hi = i + 2 < len ? hex_digit(value[i + 1]) : -1;
            int lo = i + 2 < len ? hex_digit(value[i + 2]) : -1;
            if (hi < 0 || lo < 0)
                return -1;
            c = hi * 16 + lo;
            i += 2;
        }
        if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f)
            return -1;
        if (n + 1 >= size)
            return -1;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 0;
}

int page_parse_form(const char *body, size_t len, struct page_form_fields *out, char *why,
                    size_t size)
{
    memset(out, 0, sizeof(*out));
    if (len > PAGE_FORM_MAX_BYTES)
        return fail(why, size, "the form is over 16 KiB");
    for (size_t at = 0; at < len;) {
        size_t end = at;
        while (end < len && body[end] != '&')
            end++;
        const char *eq = memchr(body + at, '=', end - at);
        size_t key_len = eq ? (size_t)(eq - (body + at)) : end - at;
        const char *value = eq ? eq + 1 : body + end;
        size_t value_len = eq ? (size_t)(body + end - value) : 0;
        struct {
            const char *name;
            char *to;
            size_t size;
        } fields[] = {{"csrf", out->csrf, sizeof(out->csrf)},
                      {"decision", out->decision, sizeof(out->decision)},
                      {"reason", out->reason, sizeof(out->reason)},
                      {"until", out->until, sizeof(out->until)},
                      {"undo", out->undo, sizeof(out->undo)}};
        int known = 0;
        for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]) && !known; f++) {
            if (key_len != strlen(fields[f].name) ||
                memcmp(body + at, fields[f].name, key_len) != 0)
                continue;
            known = 1;
            if (decode(value, value_len, fields[f].to, fields[f].size))
                return fail(why, size, "a field of the form is malformed or too long");
        }
        if (!known && key_len)
            return fail(why, size, "the form has a field medic does not know");
        at = end + 1;
    }
    if (strlen(out->reason) > REASON_MAX)
        return fail(why, size, "reason: at most 500 bytes");
    return 0;
}

/* The daemon's form secret: drawn once, at random, never stored. */
static char form_secret[65];
static pthread_once_t form_secret_once = PTHREAD_ONCE_INIT;

static void draw_form_secret(void)
{
    unsigned char bytes[32];
    size_t got = 0;
    while (got < sizeof(bytes)) {
        ssize_t n = getrandom(bytes + got, sizeof(bytes) - got, 0);
        if (n <= 0 && errno != EINTR)
            MEDIC_BUG("getrandom failed: no secret for the page's forms");
        if (n > 0)
            got += (size_t)n;
    }
    for (size_t i = 0; i < sizeof(bytes); i++)
        snprintf(form_secret + 2 * i, 3, "%02x", bytes[i]);
}

/* The token of one hour's window (tokens last the window they were made
 * in and the next). */
static void token_for(const char *authorization, const char *path, int64_t window, char out[33])
{
    pthread_once(&form_secret_once, draw_form_secret);
    struct medic_sha256 *h = medic_sha256_new();
    char hex[MEDIC_SHA256_HEX_LEN + 1] = "", w[32];
    snprintf(w, sizeof(w), "%lld", (long long)window);
    if (h) {
        medic_sha256_field(h, "medic on-call page form");
        medic_sha256_field(h, form_secret);
        medic_sha256_field(h, w);
        medic_sha256_field(h, authorization ? authorization : "");
        medic_sha256_field(h, path);
        medic_sha256_finish(h, hex);
    }
    snprintf(out, 33, "%.32s", hex);
}

#define FORM_WINDOW (PAGE_FORM_TOKEN_LIFE / 2)

void page_form_token(const char *authorization, const char *path, int64_t now, char out[33])
{
    token_for(authorization, path, now / FORM_WINDOW, out);
}

int page_form_token_valid(const char *authorization, const char *path, const char *token,
                          int64_t now)
{
    if (strlen(token) != 32) /* its length is no secret */
        return 0;
    int ok = 0;
    for (int64_t back = 0; back < 2; back++) {
        char want[33];
        token_for(authorization, path, now / FORM_WINDOW - back, want);
        unsigned diff = 0; /* every byte compared, whatever matched before */
        for (size_t i = 0; i < 32; i++)
            diff |= (unsigned)(token[i] ^ want[i]);
        ok |= diff == 0;
    }
    return ok;
}
