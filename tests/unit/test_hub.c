/* src/hub without a network (issue 31): model references against spec 06
 * §3 R1 (the pinned commits) and basal-rs's grammar (config.rs model_ref),
 * the environment against huggingface_hub's constants.py precedence, URL
 * segments against CPython's urllib.parse.quote (expected strings printed
 * by it), and the cache primitives (refs, links, a snapshot's completeness,
 * listing, removal) on a temporary directory. The protocol itself is tested
 * end to end against a local Hub in tests/e2e/t_hub.sh. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "base/util.h"
#include "hub/hub.h"
#include "hub/hub_int.h"

static void test_refs(void) {
    static const struct { const char *ref, *rev, *repo, *want_rev; int pinned; } ok[] = {
        { "mini", NULL, "Remek/basal-1.5-mini", "1978d0705ce09cd2d7d8d3e87b304468121e7255", 1 },
        { "4.5B", NULL, "Remek/basal-1.5-4.5B", "784a683bfadcc8865238fc0fc74a83b4000269bc", 1 },
        { "max", NULL, "Remek/basal-1.5-max", "be1b5ee7e7a9755a931262fa7fab4f59be0fd03c", 1 },
        { "4.5b", NULL, "Remek/basal-1.5-4.5B", "784a683bfadcc8865238fc0fc74a83b4000269bc", 1 }, /* any case */
        { "MAX", NULL, "Remek/basal-1.5-max", "be1b5ee7e7a9755a931262fa7fab4f59be0fd03c", 1 },
        { "basal-1.5-mini", NULL, "Remek/basal-1.5-mini", "1978d0705ce09cd2d7d8d3e87b304468121e7255", 1 },
        { "Remek/basal-1.5-max", NULL, "Remek/basal-1.5-max", "be1b5ee7e7a9755a931262fa7fab4f59be0fd03c", 1 },
        { "mini@main", NULL, "Remek/basal-1.5-mini", "main", 0 },
        { "mini", "v2", "Remek/basal-1.5-mini", "v2", 0 },
        { "acme/tiny", NULL, "acme/tiny", "main", 0 },
        { "acme/tiny@v1.0", NULL, "acme/tiny", "v1.0", 0 },
        { "acme/tiny@refs/pr/1", NULL, "acme/tiny", "refs/pr/1", 0 },
        { "acme/tiny@0123abcd", NULL, "acme/tiny", "0123abcd", 0 },
        { "acme/tiny", "feature/x", "acme/tiny", "feature/x", 0 },
        { "tiny-model", NULL, "Remek/tiny-model", "main", 0 }, /* a bare name is one of Remek's */
        { "a_b.c/d-e.f", NULL, "a_b.c/d-e.f", "main", 0 },
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        bs_hub_ref r;
        bs_err e = { 0 };
        CHECK_INT(bs_hub_ref_parse(ok[i].ref, ok[i].rev, &r, &e), BS_OK);
        CHECK_STR(r.repo, ok[i].repo);
        CHECK_STR(r.rev, ok[i].want_rev);
        CHECK_INT(r.pinned, ok[i].pinned);
    }
    static const char *const bad[] = { "", "a/b/c", "a/", "/b", "a b/c", "a/b@", "a/b@..", "a/b@x/../y",
                                       "a/b@/x", "a/b@x//y", "a--b/c", "a/b..c", "-a/b", "a/b-", "a/b@x\ty",
                                       "a/b@x\\y", "über/model" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bs_hub_ref r;
        bs_err e = { 0 };
        int rc = bs_hub_ref_parse(bad[i], NULL, &r, &e);
        CHECK_INT(rc, BS_EINVAL);
        CHECK(e.msg[0] != 0);
    }
    bs_hub_ref r;
    char shown[300];
    { /* an owner and a name of 96 characters each: refused, not cut short into another repository */
        char longref[200];
        bs_err e = { 0 };
        memset(longref, 'a', 96);
        longref[96] = '/';
        memset(longref + 97, 'b', 96);
        longref[193] = 0;
        CHECK_INT(bs_hub_ref_parse(longref, NULL, &r, &e), BS_EINVAL);
        longref[120] = 0; /* 120 characters fit */
        CHECK_INT(bs_hub_ref_parse(longref, NULL, &r, &e), BS_OK);
        CHECK_STR(r.repo, longref);
    }
    bs_hub_ref_parse("mini", NULL, &r, NULL);
    bs_hub_ref_show(&r, shown, sizeof shown);
    CHECK_STR(shown, "Remek/basal-1.5-mini@1978d070");
    bs_hub_ref_parse("acme/x@dev", NULL, &r, NULL);
    bs_hub_ref_show(&r, shown, sizeof shown);
    CHECK_STR(shown, "acme/x@dev");
    /* YAML (06 §4.2): owner/name without revision is main, a short name its pinned commit */
    CHECK_STR(bs_hub_yaml_revision("acme/x", NULL), "main");
    CHECK(bs_hub_yaml_revision("mini", NULL) == NULL);
    CHECK_STR(bs_hub_yaml_revision("acme/x", "v1"), "v1");
    /* repo: owner/name@rev (06 §3 R1) keeps its revision: not overridden by main */
    CHECK(bs_hub_yaml_revision("acme/x@v1", NULL) == NULL);
    CHECK_STR(bs_hub_yaml_revision("acme/x@v1", "v2"), "v2");
    bs_hub_ref_parse("acme/x@v1", bs_hub_yaml_revision("acme/x@v1", NULL), &r, NULL);
    CHECK_STR(r.rev, "v1");
    CHECK_INT(bs_hub_is_commit("1978d0705ce09cd2d7d8d3e87b304468121e7255"), 1);
    CHECK_INT(bs_hub_is_commit("1978D0705CE09CD2D7D8D3E87B304468121E7255"), 0);
    CHECK_INT(bs_hub_is_commit("1978d070"), 0);
}

/* quote(s, safe="") and quote(s, safe="/") of CPython 3.11 */
static void test_url_segment(void) {
    static const struct { const char *in, *noslash, *slash; } v[] = {
        { "refs/pr/1", "refs%2Fpr%2F1", "refs/pr/1" },
        { "v1.5", "v1.5", "v1.5" },
        { "a b+c?#%", "a%20b%2Bc%3F%23%25", "a%20b%2Bc%3F%23%25" },
        { "za\xc5\xbc\xc3\xb3\xc5\x82\xc4\x87", "za%C5%BC%C3%B3%C5%82%C4%87", "za%C5%BC%C3%B3%C5%82%C4%87" },
        { "~_-.", "~_-.", "~_-." },
    };
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        bs_buf a, b;
        bs_buf_init(&a);
        bs_buf_init(&b);
        bs_hub_url_segment(&a, v[i].in, 0);
        bs_hub_url_segment(&b, v[i].in, 1);
        CHECK_STR(a.data, v[i].noslash);
        CHECK_STR(b.data, v[i].slash);
        bs_buf_free(&a);
        bs_buf_free(&b);
    }
    char *j = bs_hub_url_join("https://mirror.example:8443/hf/api/models/a/b/revision/main", "/hf/api/models/c/d");
    CHECK_STR(j, "https://mirror.example:8443/hf/api/models/c/d"); /* the Location's path, not the endpoint's + it */
    free(j);
    j = bs_hub_url_join("https://huggingface.co", "/api/x?cursor=1");
    CHECK_STR(j, "https://huggingface.co/api/x?cursor=1");
    free(j);
    char shown[64];
    bs_hub_url_shown("https://cdn.example/lfs/abc?X-Amz-Signature=secret", shown, sizeof shown);
    CHECK_STR(shown, "https://cdn.example/lfs/abc?...");
}

/* The headers the protocol reads; a Location or Link that does not fit is
 * dropped, never cut short (a signed CDN URL cut is another URL). */
static void test_headers(void) {
    bs_hub_resp r;
    memset(&r, 0, sizeof r);
    bs_hub_resp_reset(&r);
    bs_hub_header_line(&r, "HTTP/1.1 302 Found\r\n", 20);
    CHECK_INT((int)r.status, 302);
    bs_buf b;
    bs_buf_init(&b);
    bs_buf_puts(&b, "Location: https://cdn.example/repos/ab/cd/file?Policy=");
    for (int i = 0; i < 3000; i++) bs_buf_putc(&b, 'A' + i % 26);
    bs_buf_puts(&b, "&Signature=xyz");
    bs_hub_header_line(&r, b.data, b.len);
    CHECK_STR(r.location, b.data + strlen("Location: ")); /* 3 kB: whole */
    for (int i = 0; i < 9000; i++) bs_buf_putc(&b, 'z');
    bs_hub_header_line(&r, "HTTP/1.1 302 Found", 18);
    bs_hub_header_line(&r, b.data, b.len);
    CHECK_STR(r.location, ""); /* too long: absent, not cut */
    bs_buf_free(&b);
    bs_buf_init(&b);
    bs_buf_puts(&b, "Link: <https://hub.example/api/models/a/b/tree/main?cursor=");
    for (int i = 0; i < 9000; i++) bs_buf_putc(&b, 'c');
    bs_buf_puts(&b, ">; rel=\"next\"");
    bs_hub_header_line(&r, b.data, b.len);
    CHECK_STR(r.next, "");
    bs_hub_header_line(&r, "Link: <https://hub.example/p?cursor=x>; rel=\"next\"", 50);
    CHECK_STR(r.next, "https://hub.example/p?cursor=x");
    bs_buf_free(&b);
    /* huggingface_hub's parse_ratelimit_headers: '"api";r=0;t=55' -> remaining 0, reset in 55 s */
    static const struct { const char *line; long want; } rl[] = {
        { "RateLimit: \"api\";r=0;t=55", 55 },   { "ratelimit: \"resolvers\"; r = 0 ; t = 7", 7 },
        { "RateLimit: \"api\";r=3;t=55", -1 },   { "RateLimit: \"api\";t=9", -1 },
        { "RateLimit: garbage", -1 },           { "RateLimit: \"api\";r=0;t=99999", 3600 },
    };
    for (size_t i = 0; i < sizeof rl / sizeof *rl; i++) {
        bs_hub_header_line(&r, "HTTP/1.1 429 Too Many Requests", 30);
        bs_hub_header_line(&r, rl[i].line, strlen(rl[i].line));
        CHECK_INT((int)r.ratelimit_reset, (int)rl[i].want);
        CHECK_INT((int)r.retry_after, -1);
    }
    bs_hub_header_line(&r, "Retry-After: 12", 15);
    CHECK_INT((int)r.retry_after, 12);
    bs_hub_header_line(&r, "Retry-After: Wed, 21 Oct 2015 07:28:00 GMT", 42); /* a date: not used */
    CHECK_INT((int)r.retry_after, -1);
    bs_hub_header_line(&r, "ETag: W/\"abc\"", 13);
    CHECK_STR(r.etag, "abc");
    bs_hub_header_line(&r, "X-Linked-Etag: \"0123\"", 20);
    CHECK_STR(r.linked_etag, "0123");
}

/* One page of /api/models/<repo>/tree/<commit>: only top-level files become
 * cache paths ("../x", "/abs", "a/../b", "..", folders are dropped); a
 * malformed entry of a file a Basal model never reads is dropped, of one it
 * may read (05 §1, a .safetensors shard) it is an error. */
static void test_listing(void) {
    const char *sha1 = "0123456789abcdef0123456789abcdef01234567";
    const char *sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    bs_buf j;
    bs_buf_init(&j);
    bs_buf_printf(&j, "[{\"type\":\"file\",\"path\":\"config.json\",\"oid\":\"%s\",\"size\":12},"
                  "{\"type\":\"file\",\"path\":\"model.safetensors\",\"oid\":\"%s\",\"size\":134,"
                  "\"lfs\":{\"oid\":\"%s\",\"size\":9000000000,\"pointerSize\":134}},"
                  "{\"type\":\"file\",\"path\":\"../../x.json\",\"oid\":\"%s\",\"size\":1},"
                  "{\"type\":\"file\",\"path\":\"/etc/passwd\",\"oid\":\"%s\",\"size\":1},"
                  "{\"type\":\"file\",\"path\":\"a/../../b\",\"oid\":\"%s\",\"size\":1},"
                  "{\"type\":\"file\",\"path\":\"\",\"oid\":\"%s\",\"size\":1},"
                  "{\"type\":\"directory\",\"path\":\"..\",\"oid\":\"%s\",\"size\":0},"
                  "{\"type\":\"file\",\"path\":\"notes.txt\",\"oid\":\"zz\",\"size\":-1},"
                  "{\"type\":\"file\"},{\"path\":\"x\"},7]",
                  sha1, sha1, sha256, sha1, sha1, sha1, sha1, sha1);
    bs_hub_files f = { 0 };
    bs_err e = { 0 };
    CHECK_INT(bs_hub_listing_page(&f, j.data, j.len, "u", &e), BS_OK);
    CHECK_INT((int)f.n, 2);
    if (f.n == 2) {
        CHECK_STR(f.v[0].path, "config.json");
        CHECK_STR(f.v[0].etag, sha1);
        CHECK_INT(f.v[0].lfs, 0);
        CHECK_STR(f.v[1].path, "model.safetensors");
        CHECK_STR(f.v[1].etag, sha256); /* an LFS file's blob is its SHA-256, its size the LFS one */
        CHECK(f.v[1].size == 9000000000ULL);
        CHECK_INT(f.v[1].lfs, 1);
    }
    bs_hub_files_free(&f);
    static const char *const bad[] = {
        "[{\"type\":\"file\",\"path\":\"config.json\",\"oid\":\"../../../etc/passwd\",\"size\":1}]",
        "[{\"type\":\"file\",\"path\":\"CALIBRATION.json\",\"oid\":\"0123456789ABCDEF0123456789ABCDEF01234567\",\"size\":1}]",
        "[{\"type\":\"file\",\"path\":\"model-1.safetensors\",\"oid\":\"0123456789abcdef0123456789abcdef01234567\","
        "\"size\":1,\"lfs\":{\"oid\":\"0123\",\"size\":1}}]",
        "[{\"type\":\"file\",\"path\":\"basal.json\",\"oid\":\"0123456789abcdef0123456789abcdef01234567\",\"size\":-1}]",
        "[{\"type\":\"file\",\"path\":\"basal.json\",\"oid\":\"0123456789abcdef0123456789abcdef01234567\",\"size\":1e3}]",
        "{\"path\":\"config.json\"}",
        "[",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        bs_hub_files g = { 0 };
        CHECK_INT(bs_hub_listing_page(&g, bad[i], strlen(bad[i]), "u", &e), BS_EIO);
        bs_hub_files_free(&g);
    }
    bs_buf_free(&j);
}

static void test_wipe(void) {
    char s[] = "hf_secret";
    bs_hub_wipe(s);
    for (size_t i = 0; i < sizeof s; i++) CHECK_INT(s[i], 0);
    bs_hub_wipe(NULL);
}

static void clear_env(void) {
    static const char *const vars[] = { "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                                        "HF_ENDPOINT", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_TOKEN_PATH",
                                        "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE" };
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) unsetenv(vars[i]);
}

/* huggingface_hub constants.py: HF_HOME = $HF_HOME or $XDG_CACHE_HOME/huggingface
 * or ~/.cache/huggingface; HF_HUB_CACHE = $HF_HUB_CACHE or
 * $HUGGINGFACE_HUB_CACHE or $HF_HOME/hub; the token from HF_TOKEN, else the
 * file HF_TOKEN_PATH (default $HF_HOME/token) without CR/LF; offline when
 * HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is 1/ON/YES/TRUE. */
static void test_env(const char *tmp) {
    bs_hub_env h;
    char *home = bs_strfmt("%s/home", tmp), *want = NULL;
    clear_env();
    setenv("HOME", home, 1);
    CHECK_INT(bs_hub_env_load(&h, NULL), BS_OK);
    want = bs_strfmt("%s/.cache/huggingface/hub", home);
    CHECK_STR(h.cache, want);
    CHECK_STR(h.endpoint, "https://huggingface.co");
    CHECK(h.token == NULL);
    CHECK_INT(h.offline, 0);
    bs_hub_env_free(&h);
    free(want);
    setenv("XDG_CACHE_HOME", "/x/cache", 1);
    bs_hub_env_load(&h, NULL);
    CHECK_STR(h.cache, "/x/cache/huggingface/hub");
    bs_hub_env_free(&h);
    setenv("HF_HOME", "~/hf", 1); /* expanduser */
    setenv("HF_ENDPOINT", "http://127.0.0.1:9/", 1);
    bs_hub_env_load(&h, NULL);
    want = bs_strfmt("%s/hf/hub", home);
    CHECK_STR(h.cache, want);
    CHECK_STR(h.cache_from, "HF_HOME");
    CHECK_STR(h.endpoint, "http://127.0.0.1:9"); /* rstrip("/") */
    bs_hub_env_free(&h);
    free(want);
    setenv("HF_HUB_CACHE", "/c/hub", 1);
    bs_hub_env_load(&h, NULL);
    CHECK_STR(h.cache, "/c/hub");
    bs_hub_env_free(&h);
    /* the token file of HF_HOME, its line ends removed */
    char *hfdir = bs_strfmt("%s/hf", home), *tokf = bs_strfmt("%s/hf/token", home);
    char *top = NULL;
    bs_mkdir_parents(tokf, &top, NULL);
    free(top);
    bs_write_file(tokf, "  hf_abc\r\n", 10, NULL);
    bs_hub_env_load(&h, NULL);
    CHECK_STR(h.token, "hf_abc");
    CHECK_STR(h.token_from, tokf);
    bs_hub_env_free(&h);
    setenv("HF_TOKEN", "hf_env", 1);
    bs_hub_env_load(&h, NULL);
    CHECK_STR(h.token, "hf_env");
    CHECK_STR(h.token_from, "HF_TOKEN");
    bs_hub_env_free(&h);
    setenv("HF_TOKEN", " hf_env\r\n", 1); /* _clean_token applies to the variable too */
    bs_hub_env_load(&h, NULL);
    CHECK_STR(h.token, "hf_env");
    bs_hub_env_free(&h);
    setenv("HF_TOKEN", " \n", 1); /* blank: none, and the file is read */
    bs_hub_env_load(&h, NULL);
    CHECK_STR(h.token, "hf_abc");
    CHECK_STR(h.token_from, tokf);
    bs_hub_env_free(&h);
    unsetenv("HF_TOKEN");
    setenv("HUGGING_FACE_HUB_TOKEN", "hf_old", 1); /* the older name */
    bs_hub_env_load(&h, NULL);
    CHECK_STR(h.token, "hf_old");
    CHECK_STR(h.token_from, "HUGGING_FACE_HUB_TOKEN");
    bs_hub_env_free(&h);
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    setenv("HF_TOKEN_PATH", "~/elsewhere", 1); /* HF_TOKEN_PATH instead of $HF_HOME/token, expanduser */
    char *elsewhere = bs_strfmt("%s/elsewhere", home);
    bs_write_file(elsewhere, "hf_path", 7, NULL);
    bs_hub_env_load(&h, NULL);
    CHECK_STR(h.token, "hf_path");
    CHECK_STR(h.token_from, elsewhere);
    bs_hub_env_free(&h);
    unsetenv("HF_TOKEN_PATH");
    free(elsewhere);
    static const struct { const char *v; int off; } off[] = { { "1", 1 }, { "true", 1 }, { "YES", 1 }, { "On", 1 },
                                                               { "0", 0 }, { "no", 0 }, { "", 0 }, { "2", 0 } };
    for (size_t i = 0; i < sizeof off / sizeof *off; i++) {
        setenv("HF_HUB_OFFLINE", off[i].v, 1);
        bs_hub_env_load(&h, NULL);
        CHECK_INT(h.offline, off[i].off);
        bs_hub_env_free(&h);
    }
    clear_env();
    free(hfdir);
    free(tokf);
    free(home);
}

static void put(const char *dir, const char *name, const char *text) {
    char *p = bs_path_join(dir, name);
    bs_write_file(p, text, strlen(text), NULL);
    free(p);
}

#define INDEX "{\"weight_map\": {\"a\": \"s1.safetensors\", \"b\": \"s2.safetensors\"}}"

static void test_cache(const char *tmp) {
    bs_hub_env env = { 0 };
    env.cache = bs_strfmt("%s/cache", tmp);
    bs_hub_ref r;
    bs_hub_ref_parse("acme/m@main", NULL, &r, NULL);
    char *repo_dir = bs_hub_repo_dir(&env, r.repo), *blobs = bs_strfmt("%s/blobs", repo_dir);
    char *want = bs_strfmt("%s/cache/models--acme--m", tmp);
    CHECK_STR(repo_dir, want);
    free(want);
    const char *commit = "0123456789abcdef0123456789abcdef01234567";
    bs_err e = { 0 };
    char *dir = NULL, *got = NULL;
    CHECK_INT(bs_hub_find_cached(&env, &r, &dir, &got, &e), BS_EIO);
    CHECK_CONTAINS(e.msg, "the cache has no copy of acme/m");
    CHECK_INT(bs_hub_mkdir_p(blobs, &e), BS_OK);
    static const char *const files[] = { "config.json", "basal.json", "tokenizer.json", "tokenizer_config.json",
                                         "chat_template.jinja", "model.safetensors.index.json", "s1.safetensors" };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        char etag[41];
        snprintf(etag, sizeof etag, "%040zu", i);
        put(blobs, etag, i == 5 ? INDEX : "x");
        CHECK_INT(bs_hub_link(repo_dir, commit, files[i], etag, &e), BS_OK);
    }
    char *link = bs_strfmt("%s/snapshots/%s/config.json", repo_dir, commit), target[256] = "";
    ssize_t n = readlink(link, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    CHECK_STR(target, "../../blobs/0000000000000000000000000000000000000000");
    /* linking again to another blob replaces the link */
    CHECK_INT(bs_hub_link(repo_dir, commit, "config.json", "0000000000000000000000000000000000000009", &e), BS_OK);
    n = readlink(link, target, sizeof target - 1);
    target[n > 0 ? n : 0] = 0;
    CHECK_STR(target, "../../blobs/0000000000000000000000000000000000000009");
    /* a dangling link counts as missing */
    CHECK_INT(bs_hub_find_cached(&env, &r, &dir, &got, &e), BS_EIO);
    CHECK_CONTAINS(e.msg, "the cache holds acme/m but no snapshot of revision main");
    CHECK_INT(bs_hub_write_ref(repo_dir, "main", commit, &e), BS_OK);
    char *refp = bs_strfmt("%s/refs/main", repo_dir), *text = NULL;
    size_t len = 0;
    bs_read_file(refp, &text, &len, NULL);
    CHECK_STR(text, commit); /* no newline, as huggingface_hub writes it */
    free(text);
    free(refp);
    CHECK_INT(bs_hub_find_cached(&env, &r, &dir, &got, &e), BS_EIO);
    CHECK_CONTAINS(e.msg, "lacks config.json");
    CHECK_INT(bs_hub_link(repo_dir, commit, "config.json", "0000000000000000000000000000000000000000", &e), BS_OK);
    CHECK_INT(bs_hub_find_cached(&env, &r, &dir, &got, &e), BS_EIO);
    CHECK_CONTAINS(e.msg, "lacks s2.safetensors"); /* the index's second shard */
    put(blobs, "0000000000000000000000000000000000000007", "y");
    CHECK_INT(bs_hub_link(repo_dir, commit, "s2.safetensors", "0000000000000000000000000000000000000007", &e), BS_OK);
    CHECK_INT(bs_hub_find_cached(&env, &r, &dir, &got, &e), BS_OK);
    CHECK_STR(got, commit);
    free(dir);
    free(got);
    /* a unique commit prefix, offline; a ref under a folder (refs/pr/1) */
    bs_hub_ref_parse("acme/m@01234567", NULL, &r, NULL);
    CHECK_INT(bs_hub_find_cached(&env, &r, &dir, &got, &e), BS_OK);
    free(dir);
    free(got);
    CHECK_INT(bs_hub_write_ref(repo_dir, "refs/pr/1", commit, &e), BS_OK);
    bs_hub_ref_parse("acme/m@refs/pr/1", NULL, &r, NULL);
    CHECK_INT(bs_hub_find_cached(&env, &r, &dir, &got, &e), BS_OK);
    free(dir);
    free(got);
    /* listing: one snapshot, complete, both refs */
    bs_hub_cached *v = NULL;
    size_t nv = 0;
    CHECK_INT(bs_hub_cache_list(&env, &v, &nv, &e), BS_OK);
    CHECK_INT(nv, 1);
    if (nv == 1) {
        CHECK_STR(v[0].repo, "acme/m");
        CHECK_INT(v[0].complete, 1);
        CHECK(strstr(v[0].refs, "main") && strstr(v[0].refs, "refs/pr/1"));
        CHECK_INT(v[0].bytes, 7 + strlen(INDEX)); /* the blob sizes the links point to */
    }
    bs_hub_cached_free(v, nv);
    /* removal: the snapshot, its refs, its blobs, then the empty repository folder */
    uint64_t freed = 0;
    bs_hub_ref_parse("acme/m@main", NULL, &r, NULL);
    CHECK_INT(bs_hub_cache_remove(&env, &r, 0, &freed, &e), BS_OK);
    struct stat st;
    CHECK(stat(repo_dir, &st) != 0);
    CHECK_INT(bs_hub_cache_remove(&env, &r, 0, &freed, &e), BS_EIO);
    CHECK_INT(bs_hub_cache_list(&env, &v, &nv, &e), BS_OK);
    CHECK_INT(nv, 0);
    bs_hub_cached_free(v, nv);
    CHECK(bs_hub_free_bytes("/no/such/dir/at/all") > 0); /* its nearest existing parent: / */
    free(link);
    free(blobs);
    free(repo_dir);
    free(env.cache);
}

int main(void) {
    char tmpl[] = "/tmp/test_hub.XXXXXX";
    const char *tmp = mkdtemp(tmpl);
    if (!tmp) return 1;
    test_refs();
    test_url_segment();
    test_headers();
    test_listing();
    test_wipe();
    test_env(tmp);
    test_cache(tmp);
    char *rm = bs_strfmt("rm -rf '%s'", tmp);
    if (rm && system(rm) != 0) fprintf(stderr, "could not remove %s\n", tmp);
    free(rm);
    return check_report("test_hub");
}
