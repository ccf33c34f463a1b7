/* SPDX-License-Identifier: Apache-2.0 */
/* The model built into medic: model/default.safetensors, trained by
 * model/train/ on synthetic DCGM telemetry (docs/model-evaluation.md says
 * how well it does), embedded in the binary at build time. Used when the
 * configuration names no model file. */
#ifndef MEDIC_MODEL_DEFAULT_MODEL_H
#define MEDIC_MODEL_DEFAULT_MODEL_H

#include "error.h"
#include "lstm.h"

#define MODEL_BUILTIN_NAME "built-in"

/* Loads the built-in model (a copy of the embedded bytes). */
int model_load_builtin(struct model *out, struct medic_error *err);

/* model_load(path) or, with path NULL, model_load_builtin. */
int model_load_or_builtin(const char *path, struct model *out, struct medic_error *err);

#endif
