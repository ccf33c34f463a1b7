/* SPDX-License-Identifier: Apache-2.0 */
#include "auth.h"
#include "secure.h"

#include <string.h>
#include <strings.h>

int receiver_secure_equals(const char *candidate, size_t candidate_len, const char *secret)
{
    return medic_secure_equals(candidate, candidate_len, secret);
}

int receiver_auth_required(const struct receiver_auth *auth)
{
    return auth->bearer_token || auth->basic_username;
}

int receiver_auth_check(const struct receiver_auth *auth, const char *authorization,
                        const char *basic_user, const char *basic_password)
{
    if (!receiver_auth_required(auth))
        return 1;
    int ok = 0;
    if (auth->bearer_token && authorization && strncasecmp(authorization, "Bearer ", 7) == 0) {
        const char *token = authorization + 7;
        while (*token == ' ')
            token++;
        size_t len = strlen(token);
        while (len && token[len - 1] == ' ')
            len--;
        ok |= receiver_secure_equals(token, len, auth->bearer_token);
    }
    if (auth->basic_username && basic_user && basic_password) {
        /* evaluate both comparisons whatever the first gives */
        int user_ok = receiver_secure_equals(basic_user, strlen(basic_user), auth->basic_username);
        int pass_ok =
            receiver_secure_equals(basic_password, strlen(basic_password), auth->basic_password);
        ok |= user_ok & pass_ok;
    }
    return ok;
}
