/* SPDX-License-Identifier: Apache-2.0 */
/* Running a program without a shell: an argv array handed to posix_spawnp,
 * its output (stdout and stderr) captured, a deadline after which it is
 * killed. Nothing a label or a request holds ever reaches a shell. */
#ifndef MEDIC_RUN_H
#define MEDIC_RUN_H

#include <stddef.h>

/* Runs argv[0] (looked up in PATH) with argv, standard input /dev/null,
 * the environment env (NULL: this process's). Its output, cut to size - 1
 * bytes, trailing blanks removed, into out. Returns its exit status, -1
 * when it could not run or died of a signal (out says why), -2 when it
 * ran past timeout_ms and was killed. */
int medic_run(const char *const *argv, char *const *env, long timeout_ms, char *out, size_t size);

#endif
