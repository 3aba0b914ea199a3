/* The fuzz target's strict checks of rendered bytes (fuzz_checks.c; fuzz_snapshot.c says which promise
 * each one keeps). Each aborts through broken() when the promise is broken, so libFuzzer keeps the input. */
#ifndef FUZZ_CHECKS_H
#define FUZZ_CHECKS_H
#include <stdbool.h>
#include <stddef.h>

/* Reports what is broken, near byte `at` of out[0..len), on the sanitizer's channel, and aborts. */
void broken(const char *what, const char *out, size_t len, size_t at);
/* UTF-8 without control characters but newlines; c1: U+0080..U+009F count as control characters too. */
void check_plain(const char *out, size_t len, bool c1);
/* One well-formed JSON value, in strict UTF-8. */
void check_json(const char *out, size_t len);
/* Every folded line ends in a byte count. */
void check_folded(const char *out, size_t len);
/* The page's embedded data is well-formed JSON without '<'; no snapshot string opens or closes <script>. */
void check_html(const char *out, size_t len);

#endif
