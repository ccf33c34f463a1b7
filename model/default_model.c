/* SPDX-License-Identifier: Apache-2.0 */
#include "default_model.h"

#include <stdlib.h>
#include <string.h>

/* The file's bytes, placed in .rodata by the assembler (GCC 12 has no
 * #embed); MEDIC_DEFAULT_MODEL_FILE is its absolute path, set by CMake. */
__asm__(".pushsection .rodata\n"
        ".balign 16\n"
        ".globl medic_default_model_begin\n"
        ".hidden medic_default_model_begin\n"
        "medic_default_model_begin:\n"
        ".incbin \"" MEDIC_DEFAULT_MODEL_FILE "\"\n"
        ".globl medic_default_model_end\n"
        ".hidden medic_default_model_end\n"
        "medic_default_model_end:\n"
        ".popsection\n");

extern const unsigned char medic_default_model_begin[];
extern const unsigned char medic_default_model_end[];

int model_load_builtin(struct model *out, struct medic_error *err)
{
    size_t size = (size_t)(medic_default_model_end - medic_default_model_begin);
    unsigned char *copy = malloc(size ? size : 1);
    if (!copy)
        return medic_error_set(err, MEDIC_E_NOMEM, "out of memory");
    memcpy(copy, medic_default_model_begin, size);
    return model_load_bytes(copy, size, out, err); /* owns copy from here */
}

int model_load_or_builtin(const char *path, struct model *out, struct medic_error *err)
{
    return path ? model_load(path, out, err) : model_load_builtin(out, err);
}
