/* SPDX-License-Identifier: Apache-2.0 */
/* The format of the engine's state rows, shared by the writer (persist.c)
 * and the reader (restore.c). Private to policies/. */
#ifndef MEDIC_POLICIES_ROWS_H
#define MEDIC_POLICIES_ROWS_H

/* The rows' format; 2 was one document for the whole state; 2 and 3 named
 * action kinds and incident states by their position in medic's tables,
 * 4 names them. */
#define ENGINE_STATE_VERSION 4
#define ENGINE_STATE_POSITIONS_VERSION 3
#define ENGINE_STATE_LEGACY_VERSION 2

/* The kinds of rows by name, indexed by enum row_kind. */
extern const char *const policy__row_kind_names[];

#endif
