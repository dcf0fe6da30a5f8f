#include "config.h"

#include <jansson.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void bs_json_show(const json_t *v, char *buf, size_t size) {
    if (!v) {
        snprintf(buf, size, "(absent)");
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!s) {
        snprintf(buf, size, "(unprintable)");
        return;
    }
    if (strlen(s) > 160) snprintf(buf, size, "%.160s...", s);
    else snprintf(buf, size, "%s", s);
    free(s);
}

static int want_string(const json_t *root, const char *key, const char *want, const char *fname,
                       bs_err *e) {
    const json_t *v = json_object_get(root, key);
    if (json_is_string(v) && strcmp(json_string_value(v), want) == 0) return BS_OK;
    char got[200];
    bs_json_show(v, got, sizeof got);
    return bs_fail(e, BS_EUNSUP, "%s: %s must be \"%s\", got %s", fname, key, want, got);
}

/* A positive JSON integer that fits in int. Reals (even 2.0), strings and
 * booleans are refused: the Hugging Face writers emit plain integers, and
 * anything else means the file was produced by something we do not know. */
static int want_posint(const json_t *root, const char *key, int *out, const char *fname, bs_err *e) {
    const json_t *v = json_object_get(root, key);
    if (json_is_integer(v)) {
        json_int_t x = json_integer_value(v);
        if (x > 0 && x <= INT_MAX) {
            *out = (int)x;
            return BS_OK;
        }
    }
    char got[200];
    bs_json_show(v, got, sizeof got);
    return bs_fail(e, BS_EFORMAT, "%s: %s must be a positive integer (at most %d), got %s", fname, key,
                   INT_MAX, got);
}

/* A JSON number (integer or real) > 0; jansson never yields NaN or infinity. */
static int want_posnum(const json_t *obj, const char *key, const char *label, double *out,
                       const char *fname, bs_err *e) {
    const json_t *v = json_object_get(obj, key);
    if (json_is_number(v)) {
        double x = json_number_value(v);
        if (x > 0) {
            *out = x;
            return BS_OK;
        }
    }
    char got[200];
    bs_json_show(v, got, sizeof got);
    return bs_fail(e, BS_EFORMAT, "%s: %s must be a number > 0, got %s", fname, label, got);
}

static int check_config(bs_config *c, const json_t *root, const char *fname, bs_err *e) {
    char got[200];
    int rc;
    const json_t *v;

    if ((rc = want_string(root, "model_type", "llama", fname, e))) return rc;

    v = json_object_get(root, "architectures");
    if (!(json_is_array(v) && json_array_size(v) == 1 && json_is_string(json_array_get(v, 0)) &&
          strcmp(json_string_value(json_array_get(v, 0)), "LlamaForCausalLM") == 0)) {
        bs_json_show(v, got, sizeof got);
        return bs_fail(e, BS_EUNSUP, "%s: architectures must be [\"LlamaForCausalLM\"], got %s", fname, got);
    }

    if ((rc = want_string(root, "hidden_act", "silu", fname, e))) return rc;

    /* A tied head would make lm_head.weight optional; the runtime always wants
     * the separate tensor, so only an explicit or implied false is accepted. */
    v = json_object_get(root, "tie_word_embeddings");
    if (v && !json_is_false(v)) {
        bs_json_show(v, got, sizeof got);
        return bs_fail(e, BS_EUNSUP, "%s: tie_word_embeddings must be false (or absent), got %s", fname, got);
    }

    v = json_object_get(root, "attention_bias");
    if (!json_is_boolean(v)) {
        bs_json_show(v, got, sizeof got);
        return bs_fail(e, BS_EFORMAT, "%s: attention_bias must be present and boolean, got %s", fname, got);
    }
    c->attn_bias = json_is_true(v);

    v = json_object_get(root, "mlp_bias");
    if (v && !json_is_boolean(v)) {
        bs_json_show(v, got, sizeof got);
        return bs_fail(e, BS_EFORMAT, "%s: mlp_bias must be boolean (or absent), got %s", fname, got);
    }
    c->mlp_bias = v ? json_is_true(v) : false;
    if (c->mlp_bias != c->attn_bias)
        return bs_fail(e, BS_EUNSUP,
                       "%s: mlp_bias (%s%s) must equal attention_bias (%s): mixed bias settings are not "
                       "implemented",
                       fname, c->mlp_bias ? "true" : "false", v ? "" : ", absent", c->attn_bias ? "true" : "false");

    v = json_object_get(root, "pretraining_tp");
    if (v && !(json_is_integer(v) && json_integer_value(v) == 1)) {
        bs_json_show(v, got, sizeof got);
        return bs_fail(e, BS_EUNSUP, "%s: pretraining_tp must be 1 (or absent), got %s", fname, got);
    }

    v = json_object_get(root, "rope_scaling");
    if (v && !json_is_null(v)) {
        bs_json_show(v, got, sizeof got);
        return bs_fail(e, BS_EUNSUP, "%s: rope_scaling must be absent or null (no RoPE scaling), got %s", fname,
                       got);
    }

    const json_t *rp = json_object_get(root, "rope_parameters");
    if (!json_is_object(rp)) {
        bs_json_show(rp, got, sizeof got);
        return bs_fail(e, BS_EFORMAT, "%s: rope_parameters must be an object, got %s", fname, got);
    }
    v = json_object_get(rp, "rope_type");
    if (v && !(json_is_string(v) && strcmp(json_string_value(v), "default") == 0)) {
        bs_json_show(v, got, sizeof got);
        return bs_fail(e, BS_EUNSUP, "%s: rope_parameters.rope_type must be \"default\" (or absent), got %s",
                       fname, got);
    }
    if ((rc = want_posnum(rp, "rope_theta", "rope_parameters.rope_theta", &c->rope_theta, fname, e))) return rc;

    /* The top-level key is what transformers 4 wrote; with the 5.x layout it
     * may linger with a stale value (the θ trap of spec 05 §7.3). It is never
     * read as θ, only compared so that the caller can warn. */
    v = json_object_get(root, "rope_theta");
    c->decoy_rope_theta = v && !(json_is_number(v) && json_number_value(v) == c->rope_theta);

    static const struct { const char *key; size_t off; } ints[] = {
        { "num_hidden_layers", offsetof(bs_config, n_layers) },
        { "hidden_size", offsetof(bs_config, hidden) },
        { "intermediate_size", offsetof(bs_config, inter) },
        { "num_attention_heads", offsetof(bs_config, n_heads) },
        { "num_key_value_heads", offsetof(bs_config, n_kv_heads) },
        { "head_dim", offsetof(bs_config, head_dim) },
        { "vocab_size", offsetof(bs_config, vocab) },
        { "max_position_embeddings", offsetof(bs_config, max_pos) },
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int *dst = (int *)((char *)c + ints[i].off);
        if ((rc = want_posint(root, ints[i].key, dst, fname, e))) return rc;
    }

    if ((rc = want_posnum(root, "rms_norm_eps", "rms_norm_eps", &c->rms_eps, fname, e))) return rc;

    if ((int64_t)c->n_heads * c->head_dim != c->hidden)
        return bs_fail(e, BS_EFORMAT,
                       "%s: num_attention_heads * head_dim must equal hidden_size, got %d * %d = %lld, "
                       "hidden_size %d",
                       fname, c->n_heads, c->head_dim, (long long)c->n_heads * c->head_dim, c->hidden);
    if (c->n_heads % c->n_kv_heads != 0)
        return bs_fail(e, BS_EFORMAT,
                       "%s: num_attention_heads (%d) must be a multiple of num_key_value_heads (%d)", fname,
                       c->n_heads, c->n_kv_heads);
    if (c->head_dim % 2 != 0)
        return bs_fail(e, BS_EFORMAT, "%s: head_dim must be even (RoPE rotates pairs), got %d", fname,
                       c->head_dim);
    return BS_OK;
}

int bs_config_parse(bs_config *c, const char *text, size_t len, const char *fname, bs_err *e) {
    memset(c, 0, sizeof *c);
    json_error_t je;
    /* Duplicate keys would make the meaning depend on which one a reader keeps. */
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (!root) {
        if (json_error_code(&je) == json_error_duplicate_key)
            return bs_fail(e, BS_EFORMAT, "%s: duplicate key: %s (line %d)", fname, je.text, je.line);
        return bs_fail(e, BS_EFORMAT, "%s: not valid JSON: %s (line %d, column %d)", fname, je.text, je.line,
                       je.column);
    }
    int rc;
    if (!json_is_object(root)) {
        rc = bs_fail(e, BS_EFORMAT, "%s: must be a JSON object", fname);
        goto done;
    }
    rc = check_config(c, root, fname, e);
done:
    json_decref(root);
    if (rc) memset(c, 0, sizeof *c);
    return rc;
}

int bs_config_load(bs_config *c, const char *model_dir, bs_err *e) {
    memset(c, 0, sizeof *c);
    char *path = bs_path_join(model_dir, "config.json");
    if (!path) return bs_fail(e, BS_ENOMEM, "%s/config.json: out of memory", model_dir);
    char *text = NULL;
    size_t len = 0;
    int rc = bs_read_regular_file(path, &text, &len, BS_MODEL_FILE_MAX, e);
    if (rc == BS_OK) rc = bs_config_parse(c, text, len, path, e);
    free(text);
    free(path);
    return rc;
}
