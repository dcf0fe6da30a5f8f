/* Safetensors headers (src/model/safetensors.c): the bytes as a
 * model.safetensors file (a memfd, mapped as the loader maps real files):
 * opened or refused with a message naming the file; every tensor of an opened
 * file lies inside it. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "model/safetensors.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int fd = memfd_create("model.safetensors", 0);
    if (fd < 0) return 0;
    if (size && write(fd, data, size) != (ssize_t)size) { close(fd); return 0; }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    bs_weights w;
    bs_err e = {0};
    if (bs_weights_open_file(&w, path, &e) == 0) {
        for (int i = 0; i < w.n_tensors; i++) {
            const bs_tensor *t = &w.tensors[i];
            const bs_mapped_file *f = &w.files[t->file];
            const char *lo = f->base, *p = t->data;
            FUZZ_ASSERT(t->nbytes == 0 || (p >= lo && t->nbytes <= f->size && (uint64_t)(p - lo) <= f->size - t->nbytes),
                        "tensor %s outside its file", t->name);
        }
        bs_weights_close(&w);
    } else {
        FUZZ_ASSERT(strstr(e.msg, path) != NULL, "message does not name the file: %s", e.msg);
    }
    close(fd);
    return 0;
}
