/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the bodies of a person's requests over HTTP (an answer
 * to a pending step, a pause or its end, a release of a quarantined node,
 * the on-call page's forms) must
 * never crash or leak, whatever the bytes; what parses holds what the API
 * records (a reason within its cap, an answer that is approve or deny, no
 * control character from a form). */
#include "engine_requests.h"
#include "page.h"
#include "timeutil.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *body = (const char *)data;
    char why[300];
    struct engine_answer answer;
    if (engine_parse_answer(body, size, &answer, why, sizeof(why)) == 0 &&
        (strlen(answer.reason) > 500 || (answer.approve != 0 && answer.approve != 1) ||
         (!answer.approve && !answer.reason[0])))
        abort();
    for (int pause = 0; pause <= 1; pause++) {
        struct engine_pause p;
        int64_t now = INT64_C(1795334400) * MEDIC_NS_PER_SEC;
        if (engine_parse_pause(body, size, pause, now, &p, why, sizeof(why)) == 0 &&
            (strlen(p.reason) > 500 || (pause && !p.reason[0]) ||
             (!pause && p.until != MEDIC_TIME_UNSET)))
            abort();
    }
    struct engine_release release;
    if (engine_parse_release("gpu-node-01", body, size, &release, why, sizeof(why)) == 0 &&
        (!release.reason[0] || strlen(release.reason) > 500 ||
         strcmp(release.node, "gpu-node-01") != 0))
        abort();
    struct page_form_fields form;
    if (page_parse_form(body, size, &form, why, sizeof(why)) == 0) {
        if (strlen(form.reason) > 500)
            abort();
        for (const char *c = form.reason; *c; c++)
            if ((unsigned char)*c < 0x20 && *c != '\n' && *c != '\r' && *c != '\t')
                abort();
    }
    return 0;
}
