/* The `basal serve` YAML loader and value parsers (spec 06 §4.2): every key
 * with its type and range, the defaults, and the refusals with their messages
 * (unknown keys at any level, duplicates, wrong types, bad models lists). */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "check.h"
#include "server/config.h"

static int parse(const char *yaml, bs_serve_config *c, bs_err *e) {
    bs_serve_config_init(c, e);
    return bs_serve_config_parse_yaml(c, yaml, strlen(yaml), "serve.yml", e);
}

/* The load must fail with a message containing want. */
static void refused(const char *yaml, const char *want) {
    bs_serve_config c;
    bs_err e = { 0 };
    int rc = parse(yaml, &c, &e);
    CHECK(rc < 0);
    CHECK_CONTAINS(e.msg, want);
    bs_serve_config_free(&c);
}

static void test_full(void) {
    const char *y =
        "# every key\n"
        "addr: 0.0.0.0:8000\n"
        "default_model: basal-1.5-4.5B\n"
        "max_inflight: 7\n"
        "long_slice_ms: 0\n"
        "release_date: 2031-02-03\n"
        "access_log: false\n"
        "access_log_file: /var/log/basal/access.log\n"
        "log_format: json\n"
        "metrics: True\n"
        "ui: false\n"
        "gemm_cache: /tmp/gemm\n"
        "api_key_env: MY_KEY\n"
        "max_body_bytes: 1000\n"
        "header_timeout_s: 3\n"
        "body_timeout_s: 4\n"
        "keepalive_timeout_s: 2\n"
        "max_connections: 50\n"
        "max_client_connections: 9\n"
        "backend: cpu\n"
        "threads: 3\n"
        "models:\n"
        "  - path: /srv/models/a\n"
        "    dtype: bf16\n"
        "    gemm_table: none\n"
        "    max_batch_tokens: 100\n"
        "    schedule: fifo\n"
        "    long_tokens: 0\n"
        "    state_cache_mb: 64\n"
        "    tree_max_tokens: 2048\n"
        "    max_questions: 64\n"
        "    max_request_tokens: 100000\n"
        "    no_prefix_cache: true\n"
        "    aliases: [jev-latest, \"other name\"]\n"
        "  - repo: Remek/basal-1.5-mini\n"
        "    revision: 1978d070\n";
    bs_serve_config c;
    bs_err e = { 0 };
    CHECK_INT(parse(y, &c, &e), 0);
    if (e.code) fprintf(stderr, "%s\n", e.msg);
    CHECK_STR(c.addr, "0.0.0.0:8000");
    CHECK_STR(c.default_model, "basal-1.5-4.5B");
    CHECK_INT(c.max_inflight, 7);
    CHECK_INT(c.long_slice_ms, 0);
    CHECK_STR(c.release_date, "2031-02-03");
    CHECK_INT(c.access_log, 0);
    CHECK_STR(c.access_log_file, "/var/log/basal/access.log");
    CHECK_STR(c.log_format, "json");
    CHECK_INT(c.metrics, 1);
    CHECK_INT(c.ui, 0);
    CHECK_STR(c.gemm_cache, "/tmp/gemm");
    CHECK_STR(c.api_key_env, "MY_KEY");
    CHECK_INT(c.max_body_bytes, 1000);
    CHECK_INT(c.header_timeout_s, 3);
    CHECK_INT(c.body_timeout_s, 4);
    CHECK_INT(c.keepalive_timeout_s, 2);
    CHECK_INT(c.max_connections, 50);
    CHECK_INT(c.max_client_connections, 9);
    CHECK_STR(c.backend, "cpu");
    CHECK_INT(c.threads, 3);
    CHECK_INT(c.n_models, 2);
    if (c.n_models == 2) {
        bs_serve_model *a = &c.models[0], *b = &c.models[1];
        CHECK_STR(a->path, "/srv/models/a");
        CHECK(a->repo == NULL);
        CHECK_STR(a->dtype, "bf16");
        CHECK_STR(a->gemm_table, "none");
        CHECK_INT(a->max_batch_tokens, 100);
        CHECK_INT(a->schedule_fifo, 1);
        CHECK_INT(a->long_tokens, 0);
        CHECK_INT(a->state_cache_mb, 64);
        CHECK_INT(a->tree_max_tokens, 2048);
        CHECK_INT(a->max_questions, 64);
        CHECK_INT(a->max_request_tokens, 100000);
        CHECK_INT(a->no_prefix_cache, 1);
        CHECK_INT(a->n_aliases, 2);
        if (a->n_aliases == 2) {
            CHECK_STR(a->aliases[0], "jev-latest");
            CHECK_STR(a->aliases[1], "other name");
        }
        CHECK(b->path == NULL);
        CHECK_STR(b->repo, "Remek/basal-1.5-mini");
        CHECK_STR(b->revision, "1978d070");
        /* per-model defaults (06 §4.2) */
        CHECK_STR(b->dtype, "auto");
        CHECK_STR(b->gemm_table, "auto");
        CHECK_INT(b->max_batch_tokens, 8192);
        CHECK_INT(b->schedule_fifo, 0);
        CHECK_INT(b->long_tokens, 4096);
        CHECK_INT(b->state_cache_mb, 0);
        CHECK_INT(b->tree_max_tokens, 32768);
        CHECK_INT(b->max_questions, 1024);
        CHECK_INT(b->max_request_tokens, 65536);
        CHECK_INT(b->no_prefix_cache, 0);
        CHECK_INT(b->n_aliases, 0);
    }
    bs_serve_config_free(&c);
}

static void test_defaults(void) {
    bs_serve_config c;
    bs_err e = { 0 };
    CHECK_INT(parse("models:\n- path: m\n", &c, &e), 0);
    CHECK(c.addr == NULL); /* the caller applies 127.0.0.1:8000 after --addr and BASAL_ADDR */
    CHECK(c.default_model == NULL);
    CHECK_INT(c.max_inflight, 1024);
    CHECK_INT(c.long_slice_ms, 100);
    CHECK_STR(c.release_date, "2026-10-05");
    CHECK_INT(c.access_log, 1); /* on by default (issue 18) */
    CHECK(c.access_log_file == NULL);
    CHECK_STR(c.log_format, "text");
    CHECK_INT(c.metrics, 0);
    CHECK_INT(c.ui, 1); /* the playground page is on unless turned off */
    CHECK(c.api_key_env == NULL);
    CHECK_INT(c.max_body_bytes, 16777216);
    CHECK_INT(c.header_timeout_s, 10);
    CHECK_INT(c.body_timeout_s, 60);
    CHECK_INT(c.keepalive_timeout_s, 5);
    CHECK_INT(c.max_connections, 0);
    CHECK_INT(c.max_client_connections, 128);
    CHECK_STR(c.backend, "auto");
    CHECK_INT(c.threads, 0);
    CHECK_INT(c.n_models, 1);
    bs_serve_config_free(&c);
    /* null values leave the defaults; flow style works */
    CHECK_INT(parse("{default_model: ~, api_key_env: null, models: [{path: m, aliases: []}]}", &c, &e), 0);
    CHECK(c.default_model == NULL && c.api_key_env == NULL);
    bs_serve_config_free(&c);
}

static void test_errors(void) {
    refused("models:\n  - path: m\n    colour: blue\n", "serve.yml:3: unknown field colour");
    refused("adress: 1.2.3.4:5\nmodels:\n  - path: m\n", "serve.yml:1: unknown field adress");
    refused("models:\n  - path: m\nmetrics: true\nmetrics: false\n", "duplicate field metrics");
    refused("models:\n  - path: m\n    dtype: bf16\n    dtype: f32\n", "duplicate field dtype");
    refused("models: []\n", "no models");
    refused("metrics: true\n", "missing field models");
    refused("", "empty configuration");
    refused("models: m\n", "models: expected a list of models");
    refused("models:\n  - m\n", "a models entry must be a mapping");
    refused("- a\n- b\n", "the configuration must be a mapping");
    refused("models:\n  - dtype: f32\n", "exactly one of path and repo");
    refused("models:\n  - path: m\n    repo: a/b\n", "exactly one of path and repo");
    refused("models:\n  - path: m\n    revision: abc\n", "revision is only allowed with repo");
    refused("max_inflight: \"8\"\nmodels:\n  - path: m\n", "max_inflight: expected an integer");
    refused("max_inflight: 8x\nmodels:\n  - path: m\n", "max_inflight: expected an integer");
    refused("max_inflight: 1.5\nmodels:\n  - path: m\n", "max_inflight: expected an integer");
    refused("max_inflight: 0\nmodels:\n  - path: m\n", "max_inflight: must be between 1 and");
    refused("max_inflight: 99999999999999999999\nmodels:\n  - path: m\n", "max_inflight: expected an integer");
    refused("long_slice_ms: -1\nmodels:\n  - path: m\n", "long_slice_ms: must be between 0 and");
    refused("max_body_bytes: 0\nmodels:\n  - path: m\n", "max_body_bytes: must be at least 1");
    refused("header_timeout_s: 0\nmodels:\n  - path: m\n", "header_timeout_s: must be between 1 and 2147483647");
    refused("max_client_connections: 0\nmodels:\n  - path: m\n", "max_client_connections: must be between 1 and 2147483647");
    refused("threads: [1]\nmodels:\n  - path: m\n", "threads: expected an integer");
    refused("metrics: yes\nmodels:\n  - path: m\n", "metrics: expected true or false");
    refused("ui: 0\nmodels:\n  - path: m\n", "ui: expected true or false");
    refused("access_log: \"true\"\nmodels:\n  - path: m\n", "access_log: expected true or false");
    refused("log_format: xml\nmodels:\n  - path: m\n", "log_format: expected one of text, json");
    refused("backend: gpu\nmodels:\n  - path: m\n", "backend: expected one of auto, cpu, cuda");
    refused("addr: localhost:8000\nmodels:\n  - path: m\n", "host names are not accepted");
    refused("addr: 127.0.0.1\nmodels:\n  - path: m\n", "invalid address");
    refused("addr: 127.0.0.1:70000\nmodels:\n  - path: m\n", "invalid address");
    refused("release_date: [1]\nmodels:\n  - path: m\n", "release_date: expected a string");
    refused("models:\n  - path: m\n    dtype: f8\n", "dtype: expected one of auto, f16, bf16, f32");
    refused("models:\n  - path: m\n    schedule: lifo\n", "schedule: expected one of hrrn, fifo");
    refused("models:\n  - path: m\n    max_batch_tokens: 0\n", "max_batch_tokens: must be between 1 and");
    refused("models:\n  - path: m\n    tree_max_tokens: 4294967296\n", "tree_max_tokens: must be between 1 and");
    refused("models:\n  - path: m\n    max_questions: 0\n", "max_questions: must be between 1 and");
    refused("models:\n  - path: m\n    long_tokens: -5\n", "long_tokens: must be between 0 and");
    refused("models:\n  - path: m\n    no_prefix_cache: 1\n", "no_prefix_cache: expected true or false");
    refused("models:\n  - path: m\n    aliases: jev\n", "aliases: expected a list of strings");
    refused("models:\n  - path: m\n    aliases: [[a]]\n", "aliases: expected a list of strings");
    refused("models:\n  - path: m\n   bad: [\n", "serve.yml:");
    refused("models:\n  - path: m\n  x: {\n", "serve.yml:");
    /* one document, as serde_yaml::from_str (basal-rs) requires: a second one
     * was read past unseen, with its unknown key */
    refused("models:\n  - path: m\n---\nfoo: 1\n", "serve.yml:4: more than one YAML document");
    refused("---\nmodels:\n  - path: m\n---\nmodels:\n  - path: n\n", "more than one YAML document");
    refused("models:\n  - path: m\n---\n[\n", "serve.yml:");
    /* markers around one document are fine */
    bs_serve_config c;
    bs_err e = { 0 };
    CHECK_INT(parse("---\nmodels:\n  - path: m\n...\n", &c, &e), 0);
    CHECK_INT(c.n_models, 1);
    bs_serve_config_free(&c);
    /* a trailing "---" starts a second (empty) document: PyYAML's safe_load
     * refuses it too ("expected a single document in the stream") */
    refused("models:\n  - path: m\n---\n", "serve.yml:4: more than one YAML document");
}

static void test_addr(void) {
    struct sockaddr_storage ss;
    socklen_t sl;
    bs_err e = { 0 };
    CHECK_INT(bs_parse_addr("127.0.0.1:8000", &ss, &sl, &e), 0);
    CHECK_INT(ss.ss_family, AF_INET);
    CHECK_INT(ntohs(((struct sockaddr_in *)&ss)->sin_port), 8000);
    CHECK_INT(bs_parse_addr("[::1]:80", &ss, &sl, &e), 0);
    CHECK_INT(ss.ss_family, AF_INET6);
    CHECK_INT(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 80);
    CHECK_INT(bs_parse_addr("0.0.0.0:0", &ss, &sl, &e), 0);
    const char *bad[] = { "localhost:80", "127.0.0.1", ":80", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:-1",
                          "127.0.0.1:+80", "[::1]", "::1:80", "[127.0.0.1]:80", "1.2.3:80", "[::1]:8x" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc = bs_parse_addr(bad[i], &ss, &sl, &e);
        if (rc == 0) fprintf(stderr, "accepted %s\n", bad[i]);
        CHECK(rc < 0);
    }
}

static void test_values(void) {
    long long v = 0;
    CHECK_INT(bs_cfg_parse_int("42", 0, 100, &v), 0);
    CHECK_INT(v, 42);
    CHECK(bs_cfg_parse_int("101", 0, 100, &v) < 0);
    CHECK(bs_cfg_parse_int("", 0, 100, &v) < 0);
    CHECK(bs_cfg_parse_int("4 2", 0, 100, &v) < 0);
    CHECK(bs_cfg_parse_int("0x10", 0, 100, &v) < 0);
    CHECK(bs_cfg_parse_int("-", -5, 100, &v) < 0);
    CHECK_INT(bs_cfg_parse_int("-5", -5, 100, &v), 0);
    CHECK_INT(v, -5);
    int fifo = -1;
    CHECK_INT(bs_cfg_check_schedule("fifo", &fifo), 0);
    CHECK_INT(fifo, 1);
    CHECK(bs_cfg_check_schedule("FIFO", &fifo) < 0);
    CHECK_INT(bs_cfg_check_dtype("f16"), 0);
    CHECK(bs_cfg_check_dtype("fp16") < 0);
    CHECK_INT(bs_cfg_check_backend("cuda"), 0);
    CHECK(bs_cfg_check_backend("metal") < 0);
}

/* 06 §4.1 as amended by issue 18: flag > environment > YAML > default, for
 * the address, the access log (on by default), its file and the log format. */
static void test_apply_env(void) {
    const char *vars[] = { "BASAL_ADDR", "BASAL_ACCESS_LOG", "BASAL_ACCESS_LOG_FILE", "BASAL_LOG_FORMAT" };
    for (size_t i = 0; i < 4; i++) unsetenv(vars[i]);
    bs_serve_config c;
    bs_err e = { 0 };
    /* defaults */
    CHECK_INT(parse("models:\n- path: m\n", &c, &e), 0);
    CHECK_INT(bs_serve_config_apply_env(&c, NULL, NULL, NULL, NULL, &e), 0);
    CHECK_STR(c.addr, "127.0.0.1:8000");
    CHECK_INT(c.access_log, 1);
    CHECK(c.access_log_file == NULL);
    CHECK_STR(c.log_format, "text");
    bs_serve_config_free(&c);
    /* YAML over the defaults */
    const char *y = "addr: 10.0.0.1:1\naccess_log: false\naccess_log_file: /y.log\nlog_format: json\nmodels:\n- path: m\n";
    CHECK_INT(parse(y, &c, &e), 0);
    CHECK_INT(bs_serve_config_apply_env(&c, NULL, NULL, NULL, NULL, &e), 0);
    CHECK_STR(c.addr, "10.0.0.1:1");
    CHECK_INT(c.access_log, 0);
    CHECK_STR(c.access_log_file, "/y.log");
    CHECK_STR(c.log_format, "json");
    bs_serve_config_free(&c);
    /* the environment over YAML; BASAL_ACCESS_LOG: any non-empty value but 0/off/false is on */
    setenv("BASAL_ADDR", "10.0.0.2:2", 1);
    setenv("BASAL_ACCESS_LOG", "yes", 1);
    setenv("BASAL_ACCESS_LOG_FILE", "/e.log", 1);
    setenv("BASAL_LOG_FORMAT", "text", 1);
    CHECK_INT(parse(y, &c, &e), 0);
    CHECK_INT(bs_serve_config_apply_env(&c, NULL, NULL, NULL, NULL, &e), 0);
    CHECK_STR(c.addr, "10.0.0.2:2");
    CHECK_INT(c.access_log, 1);
    CHECK_STR(c.access_log_file, "/e.log");
    CHECK_STR(c.log_format, "text");
    bs_serve_config_free(&c);
    setenv("BASAL_ACCESS_LOG", "off", 1);
    CHECK_INT(parse("models:\n- path: m\n", &c, &e), 0);
    CHECK_INT(bs_serve_config_apply_env(&c, NULL, NULL, NULL, NULL, &e), 0);
    CHECK_INT(c.access_log, 0);
    bs_serve_config_free(&c);
    /* the flags over the environment */
    CHECK_INT(parse(y, &c, &e), 0);
    CHECK_INT(bs_serve_config_apply_env(&c, "10.0.0.3:3", "on", "/f.log", "json", &e), 0);
    CHECK_STR(c.addr, "10.0.0.3:3");
    CHECK_INT(c.access_log, 1);
    CHECK_STR(c.access_log_file, "/f.log");
    CHECK_STR(c.log_format, "json");
    CHECK_INT(bs_serve_config_apply_env(&c, NULL, "off", NULL, NULL, &e), 0);
    CHECK_INT(c.access_log, 0);
    /* invalid values */
    CHECK(bs_serve_config_apply_env(&c, NULL, "maybe", NULL, NULL, &e) < 0);
    CHECK_CONTAINS(e.msg, "--access-log must be on or off");
    CHECK(bs_serve_config_apply_env(&c, NULL, NULL, NULL, "xml", &e) < 0);
    CHECK_CONTAINS(e.msg, "--log-format must be text or json");
    setenv("BASAL_LOG_FORMAT", "yaml", 1);
    CHECK(bs_serve_config_apply_env(&c, NULL, NULL, NULL, NULL, &e) < 0);
    CHECK_CONTAINS(e.msg, "BASAL_LOG_FORMAT must be text or json");
    unsetenv("BASAL_LOG_FORMAT");
    /* a bad BASAL_ADDR is named (basal-rs: `BASAL_ADDR "..."`); --addr wins over it unread */
    setenv("BASAL_ADDR", "localhost:8000", 1);
    CHECK(bs_serve_config_apply_env(&c, NULL, NULL, NULL, NULL, &e) < 0);
    CHECK_CONTAINS(e.msg, "BASAL_ADDR: invalid IP address localhost");
    CHECK_INT(bs_serve_config_apply_env(&c, "10.0.0.4:4", NULL, NULL, NULL, &e), 0);
    CHECK_STR(c.addr, "10.0.0.4:4");
    bs_serve_config_free(&c);
    for (size_t i = 0; i < 4; i++) unsetenv(vars[i]);
}

int main(void) {
    test_apply_env();
    test_full();
    test_defaults();
    test_errors();
    test_addr();
    test_values();
    return check_report("test_serve_config");
}
