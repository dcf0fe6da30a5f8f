/* Small shared helpers: whole-file reads, path joins, the monotonic clock, the
 * stored number formats and their conversions, a growable byte buffer. */
#ifndef BS_UTIL_H
#define BS_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include "basal.h"

/* Reads a whole file into a NUL-terminated malloc'd buffer. */
int bs_read_file(const char *path, char **out, size_t *len, bs_err *e);
/* bs_read_file for the files of a model directory: only a regular file of at
 * most max_bytes (a FIFO or a device there would block or never end). */
int bs_read_regular_file(const char *path, char **out, size_t *len, size_t max_bytes, bs_err *e);
/* The most any JSON or text file of a model directory is read into memory. */
#define BS_MODEL_FILE_MAX ((size_t)1 << 30)
/* Writes len bytes to path (truncating). */
int bs_write_file(const char *path, const void *data, size_t len, bs_err *e);
/* snprintf into a malloc'd string; NULL on allocation failure. */
char *bs_strfmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *bs_path_join(const char *dir, const char *name);
int bs_file_exists(const char *path);
/* Creates the missing directories above path, like `mkdir -p` of its parent
 * (path itself is left to the caller). *top: the uppermost directory it
 * created (malloc'd), NULL when none was missing; on failure none is left.
 * bs_rmdir_parents(path, top) removes them again, deepest first. */
int bs_mkdir_parents(const char *path, char **top, bs_err *e);
void bs_rmdir_parents(const char *path, const char *top);

/* Exact widening of 16-bit float formats to f32. */
static inline float bs_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = { (uint32_t)h << 16 };
    return v.f;
}
float bs_f16_to_f32(uint16_t h);
/* Round-to-nearest-even narrowing (finite inputs; NaN stays NaN). */
uint16_t bs_f32_to_bf16(float f);
uint16_t bs_f32_to_f16(float f);

/* The element types a tensor is stored in (safetensors F32/F16/BF16), shared
 * by the loader, the kernels and the backends. */
/* BS_I8: int8 weights with per-row scales (the int8w mode's copies,
 * cpu/gemm.h); never a tensor of a model file. */
typedef enum { BS_F32 = 0, BS_F16 = 1, BS_BF16 = 2, BS_I8 = 3 } bs_dtype;
size_t bs_dtype_size(bs_dtype d);
const char *bs_dtype_name(bs_dtype d);

/* malloc for large working buffers (activations): a block of 2 MiB or more
 * is aligned to 2 MiB and asks the kernel for transparent huge pages
 * (MADV_HUGEPAGE), as a GEMM writing rows kilobytes apart touches a new
 * 4 KiB page per row and waits on the TLB. Released with free(); NULL when
 * out of memory. */
void *bs_malloc_big(size_t bytes);

/* Gives the heap's free pages back to the system (glibc malloc_trim; no-op
 * elsewhere): after a load that made and freed large temporaries, so that
 * they do not stay in the resident memory. */
void bs_trim_heap(void);

/* Monotonic clock in milliseconds (CLOCK_MONOTONIC). */
double bs_now_ms(void);
/* The cache directory of 06 §3 R3: $BASAL_HOME/.cache when BASAL_HOME is set
 * and not empty, else $XDG_CACHE_HOME/basal when that is absolute, else
 * $HOME/.cache/basal. *dir is malloc'd; *source names the rule that chose it. */
int bs_cache_dir(char **dir, const char **source, bs_err *e);
/* Wall-clock time, ms since the epoch (for timestamps; bs_now_ms measures). */
double bs_wall_ms(void);

/* Growable byte buffer; data is always NUL-terminated. On allocation failure
 * the buffer sets oom and later appends are no-ops (check once at the end). */
typedef struct bs_buf {
    char *data;
    size_t len, cap;
    int oom;
} bs_buf;

void bs_buf_init(bs_buf *b);
void bs_buf_free(bs_buf *b);
void bs_buf_reserve(bs_buf *b, size_t extra);
void bs_buf_put(bs_buf *b, const void *p, size_t n);
void bs_buf_puts(bs_buf *b, const char *s);
void bs_buf_putc(bs_buf *b, char c);
void bs_buf_printf(bs_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s (NULL: nothing) as HTML text or a quoted attribute value: & < > " ' escaped. */
void bs_buf_put_html(bs_buf *b, const char *s);
#endif
