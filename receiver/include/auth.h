/* SPDX-License-Identifier: Apache-2.0 */
/* Request authentication: a bearer token and/or basic-auth credentials,
 * compared in constant time. */
#ifndef MEDIC_RECEIVER_AUTH_H
#define MEDIC_RECEIVER_AUTH_H

#include <stddef.h>

/* What one class of endpoints accepts; NULL members are not configured.
 * When neither is configured, every request is accepted. */
struct receiver_auth {
    const char *bearer_token;
    const char *basic_username;
    const char *basic_password;
};

/* Compares a candidate with a secret in time that depends only on the
 * secret's length. Returns 1 when equal. */
int receiver_secure_equals(const char *candidate, size_t candidate_len, const char *secret);

/* 1 when the auth requires anything. */
int receiver_auth_required(const struct receiver_auth *auth);

/* Checks an Authorization header value (may be NULL) and, for basic auth,
 * the decoded user and password (may be NULL). Returns 1 when accepted. */
int receiver_auth_check(const struct receiver_auth *auth, const char *authorization,
                        const char *basic_user, const char *basic_password);

#endif
