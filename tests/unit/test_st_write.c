/* The safetensors writer (src/model/st_write.c) against the format rules of
 * spec 05 §4.1–4.2, checked on the raw bytes and by reading the files back
 * with the project's strict reader (single file and sharded). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "base/util.h"
#include "model/safetensors.h"
#include "model/st_write.h"

static char tmpdir[256];

static char *path_in(const char *sub, const char *name) {
    char *d = bs_path_join(tmpdir, sub);
    char *p = name ? bs_path_join(d, name) : strdup(d);
    free(d);
    return p;
}

/* Declares the test tensors (deliberately not in name order). */
static int add_all(bs_st_writer *w, bs_err *e) {
    int64_t s_b[2] = {3, 5}, s_a[1] = {7}, s_c[3] = {2, 2, 3}, s_e[1] = {0};
    int rc = bs_st_add(w, "b.bf16", BS_BF16, 2, s_b, e);
    if (!rc) rc = bs_st_add(w, "a.f32", BS_F32, 1, s_a, e);
    if (!rc) rc = bs_st_add(w, "c.f16", BS_F16, 3, s_c, e);
    if (!rc) rc = bs_st_add(w, "d.scalar", BS_F32, 0, NULL, e);
    if (!rc) rc = bs_st_add(w, "e.empty", BS_BF16, 1, s_e, e);
    return rc;
}

static float val(int t, int i) { return (float)(t * 100 + i) * 0.37f - 3.0f; }

static int fill(bs_st_writer *w, bs_err *e) {
    for (int t = 0; t < bs_st_count(w); t++) {
        int64_t n = bs_st_numel(w, t);
        /* two writes per tensor, second half first: any order is allowed */
        float v[64];
        for (int i = 0; i < n; i++) v[i] = val(t, i);
        int64_t h = n / 2;
        int rc = bs_st_write_f32(w, t, h, v + h, (size_t)(n - h), e);
        if (!rc && h) rc = bs_st_write_f32(w, t, 0, v, (size_t)h, e);
        if (rc) return rc;
    }
    return BS_OK;
}

static void check_values(const bs_weights *ws, const char *what) {
    static const char *names[] = {"a.f32", "b.bf16", "c.f16", "d.scalar", "e.empty"};
    for (int t = 0; t < 5; t++) {
        const bs_tensor *x = bs_weights_get(ws, names[t]);
        CHECK(x != NULL);
        if (!x) continue;
        for (int64_t i = 0; i < x->numel; i++) {
            float want = val(t, (int)i);
            if (x->dtype == BS_BF16) want = bs_bf16_to_f32(bs_f32_to_bf16(want));
            if (x->dtype == BS_F16) want = bs_f16_to_f32(bs_f32_to_f16(want));
            float got = bs_tensor_get_f32(x, i);
            if (memcmp(&got, &want, 4)) {
                fprintf(stderr, "%s: %s[%lld] = %g, want %g\n", what, names[t], (long long)i, got, want);
                CHECK(0);
            }
        }
    }
    CHECK_INT(bs_weights_get(ws, "b.bf16")->dtype, BS_BF16);
    CHECK_INT(bs_weights_get(ws, "c.f16")->ndim, 3);
    CHECK_INT(bs_weights_get(ws, "d.scalar")->ndim, 0);
    CHECK_INT(bs_weights_get(ws, "d.scalar")->numel, 1);
    CHECK_INT(bs_weights_get(ws, "e.empty")->numel, 0);
}

static void test_single(void) {
    bs_err e = {0};
    bs_st_writer *w = NULL;
    char *dir = path_in("single", NULL), *file = path_in("single", "model.safetensors");
    mkdir(dir, 0755);
    CHECK_INT(bs_st_new(&w, &e), 0);
    CHECK_INT(add_all(w, &e), 0);
    CHECK_INT(bs_st_begin(w, dir, 1, &e), 0);
    /* name order after begin */
    CHECK_STR(bs_st_name(w, 0), "a.f32");
    CHECK_STR(bs_st_name(w, 4), "e.empty");
    CHECK_INT(bs_st_find(w, "c.f16"), 2);
    CHECK_INT(bs_st_find(w, "zzz"), -1);
    CHECK_INT(fill(w, &e), 0);
    CHECK_INT(bs_st_finish(w, &e), 0);
    bs_st_free(w);

    char *buf = NULL;
    size_t len = 0;
    CHECK_INT(bs_read_file(file, &buf, &len, &e), 0);
    if (buf && len > 8) {
        uint64_t n = 0;
        for (int k = 0; k < 8; k++) n |= (uint64_t)(unsigned char)buf[k] << (8 * k);
        CHECK_INT((8 + n) % 8, 0);
        CHECK(n < len);
        CHECK(!strncmp(buf + 8, "{\"__metadata__\":{\"format\":\"pt\"},\"a.f32\":", 40));
        /* data: 7*4 + 15*2 + 12*2 + 4 + 0 bytes, nothing else */
        CHECK_INT(len - 8 - n, 28 + 30 + 24 + 4);
        const char *close = buf + 8 + n - 1;
        while (*close == ' ') close--;
        CHECK(*close == '}');
    }
    free(buf);

    bs_weights ws;
    memset(&ws, 0, sizeof ws);
    int rc = bs_weights_open_file(&ws, file, &e);
    CHECK_INT(rc, 0);
    if (rc) fprintf(stderr, "reader: %s\n", e.msg);
    else {
        CHECK_INT(ws.n_tensors, 5);
        check_values(&ws, "single");
        bs_weights_close(&ws);
    }
    free(dir);
    free(file);
}

static void test_sharded(void) {
    bs_err e = {0};
    bs_st_writer *w = NULL;
    char *dir = path_in("sharded", NULL);
    mkdir(dir, 0755);
    CHECK_INT(bs_st_new(&w, &e), 0);
    CHECK_INT(add_all(w, &e), 0);
    CHECK_INT(bs_st_begin(w, dir, 3, &e), 0);
    CHECK_INT(fill(w, &e), 0);
    CHECK_INT(bs_st_finish(w, &e), 0);
    bs_st_free(w);
    for (int s = 1; s <= 3; s++) {
        char name[64];
        snprintf(name, sizeof name, "model-%05d-of-00003.safetensors", s);
        char *p = path_in("sharded", name);
        CHECK(bs_file_exists(p));
        free(p);
    }
    char *idx = path_in("sharded", "model.safetensors.index.json");
    CHECK(bs_file_exists(idx));
    free(idx);
    bs_weights ws;
    memset(&ws, 0, sizeof ws);
    int rc = bs_weights_open(&ws, dir, &e);
    CHECK_INT(rc, 0);
    if (rc) fprintf(stderr, "reader: %s\n", e.msg);
    else {
        CHECK_INT(ws.n_files, 3);
        check_values(&ws, "sharded");
        bs_weights_close(&ws);
    }
    free(dir);
}

static void test_errors(void) {
    bs_err e = {0};
    bs_st_writer *w = NULL;
    char *dir = path_in("errors", NULL), *file = path_in("errors", "model.safetensors");
    mkdir(dir, 0755);
    int64_t s[1] = {4};
    /* a tensor left short: finish fails and freeing removes the file */
    CHECK_INT(bs_st_new(&w, &e), 0);
    CHECK_INT(bs_st_add(w, "x", BS_F32, 1, s, &e), 0);
    CHECK_INT(bs_st_begin(w, dir, 1, &e), 0);
    float v[4] = {1, 2, 3, 4};
    CHECK_INT(bs_st_write_f32(w, 0, 0, v, 3, &e), 0);
    CHECK(bs_st_write_f32(w, 0, 2, v, 3, &e) != 0); /* past the end */
    CHECK(bs_st_finish(w, &e) != 0);
    CHECK_CONTAINS(e.msg, "12 of 16 bytes");
    bs_st_free(w);
    CHECK(!bs_file_exists(file));
    /* duplicate names, no tensors, too many shards */
    CHECK_INT(bs_st_new(&w, &e), 0);
    CHECK_INT(bs_st_add(w, "x", BS_F32, 1, s, &e), 0);
    CHECK_INT(bs_st_add(w, "x", BS_F32, 1, s, &e), 0);
    CHECK(bs_st_begin(w, dir, 1, &e) != 0);
    CHECK_CONTAINS(e.msg, "duplicate tensor x");
    bs_st_free(w);
    CHECK_INT(bs_st_new(&w, &e), 0);
    CHECK(bs_st_begin(w, dir, 1, &e) != 0);
    bs_st_free(w);
    CHECK_INT(bs_st_new(&w, &e), 0);
    CHECK_INT(bs_st_add(w, "x", BS_F32, 1, s, &e), 0);
    CHECK(bs_st_begin(w, dir, 2, &e) != 0);
    bs_st_free(w);
    /* an existing file is never overwritten, nor removed */
    CHECK_INT(bs_write_file(file, "keep", 4, &e), 0);
    CHECK_INT(bs_st_new(&w, &e), 0);
    CHECK_INT(bs_st_add(w, "x", BS_F32, 1, s, &e), 0);
    CHECK(bs_st_begin(w, dir, 1, &e) != 0);
    CHECK_CONTAINS(e.msg, "model.safetensors");
    bs_st_free(w);
    struct stat st;
    CHECK(stat(file, &st) == 0 && st.st_size == 4);
    unlink(file);
    rmdir(dir);
    free(dir);
    free(file);
}

static void rm_tree(void) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/basal-st-write-XXXXXX", check_env("TMPDIR", "/tmp"));
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_single();
    test_sharded();
    test_errors();
    rm_tree();
    return check_report("test_st_write");
}
