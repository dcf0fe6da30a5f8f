#include "model/basal_model.h"

#include "model/smooth.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol/prompt.h"
#include "base/util.h"

#define BASAL_15_TEMPLATES "basal-1.0 (unchanged prompt contract)"

static int check_template_lang(json_t *tpl, const char *lang, bs_lang l, bs_err *e) {
    json_t *t = json_object_get(tpl, lang);
    if (!json_is_object(t)) return bs_fail(e, BS_EFORMAT, "basal.json: template %s", lang);
    json_t *sys = json_object_get(t, "system"), *user = json_object_get(t, "user");
    if (!json_is_string(sys) || !json_is_string(user) ||
        strcmp(json_string_value(sys), bs_prompt_system(l)) != 0 ||
        strcmp(json_string_value(user), bs_prompt_user_format(l)) != 0)
        return bs_fail(e, BS_EUNSUP, "basal.json: %s template differs from the implemented prompt", lang);
    return BS_OK;
}

int bs_basal_json_check(const char *text, size_t len, char **name, char **version, int *templates_object,
                        bs_err *e) {
    *name = *version = NULL;
    *templates_object = 0;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    int rc = BS_OK;
    if (!json_is_object(root)) { rc = bs_fail(e, BS_EFORMAT, "basal.json: not a JSON object"); goto done; }
    json_t *ro = json_object_get(root, "readout");
    if (!json_is_object(ro)) { rc = bs_fail(e, BS_EFORMAT, "basal.json: readout missing"); goto done; }
    json_t *kind = json_object_get(ro, "kind"), *letters = json_object_get(ro, "letters");
    json_t *prefill = json_object_get(ro, "prefill"), *tpl = json_object_get(ro, "templates");
    if (!json_is_string(kind) || strcmp(json_string_value(kind), "letter logits"))
        { rc = bs_fail(e, BS_EUNSUP, "basal.json: unsupported readout kind"); goto done; }
    if (!json_is_string(letters) || strcmp(json_string_value(letters), BS_LETTERS))
        { rc = bs_fail(e, BS_EUNSUP, "basal.json: letters differ from ABCDEFGHIJ"); goto done; }
    if (!json_is_string(prefill) || strcmp(json_string_value(prefill), BS_PREFILL))
        { rc = bs_fail(e, BS_EUNSUP, "basal.json: prefill differs"); goto done; }
    if (json_is_string(tpl)) {
        if (strcmp(json_string_value(tpl), BASAL_15_TEMPLATES)) {
            rc = bs_fail(e, BS_EUNSUP,
                         "basal.json: templates \"%s\" (only the basal-1.0 prompt contract is implemented)",
                         json_string_value(tpl));
            goto done;
        }
    } else if (json_is_object(tpl)) {
        if ((rc = check_template_lang(tpl, "pl", BS_LANG_PL, e)) < 0) goto done;
        if ((rc = check_template_lang(tpl, "en", BS_LANG_EN, e)) < 0) goto done;
        *templates_object = 1;
    } else {
        rc = bs_fail(e, BS_EUNSUP, "basal.json: templates must be \"%s\" or the basal-1.0 object",
                     BASAL_15_TEMPLATES);
        goto done;
    }
    json_t *nm = json_object_get(root, "name"), *ver = json_object_get(root, "version");
    if (!json_is_string(nm)) { rc = bs_fail(e, BS_EFORMAT, "basal.json: name"); goto done; }
    /* the served name: requests and logs must be able to carry it */
    const char *nv = json_string_value(nm);
    int ctl = 0;
    for (const char *q = nv; *q; q++) ctl |= (unsigned char)*q < 0x20 || *q == 0x7f;
    if (!*nv || ctl || json_string_length(nm) != strlen(nv)) {
        rc = bs_fail(e, BS_EFORMAT, "basal.json: name must be a non-empty string without control characters");
        goto done;
    }
    if (!(*name = strdup(json_string_value(nm)))) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto done; }
    if (json_is_string(ver) && !(*version = strdup(json_string_value(ver)))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto done;
    }
done:
    json_decref(root);
    if (rc < 0) {
        free(*name);
        free(*version);
        *name = *version = NULL;
    }
    return rc;
}

int bs_tokenizer_config_bos(const char *text, size_t len, char **bos, bs_err *e) {
    *bos = NULL;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    json_t *b = json_object_get(root, "bos_token");
    if (json_is_object(b)) b = json_object_get(b, "content"); /* older Hugging Face form */
    int rc = BS_OK;
    if (!root) /* the spec's message stays the prefix; the parse error says where */
        rc = bs_fail(e, BS_EFORMAT, "tokenizer_config.json: bos_token: the file is not valid JSON (line %d, column %d: %s)",
                     je.line, je.column, je.text);
    else if (!json_is_string(b)) rc = bs_fail(e, BS_EFORMAT, "tokenizer_config.json: bos_token");
    else if (!(*bos = strdup(json_string_value(b)))) rc = bs_fail(e, BS_ENOMEM, "out of memory");
    json_decref(root);
    return rc;
}

/* Reads <dir>/<name> into a malloc'd buffer; a missing file is named. */
static int read_in(const char *dir, const char *name, char **text, size_t *len, bs_err *e) {
    char *path = bs_path_join(dir, name);
    if (!path) return bs_fail(e, BS_ENOMEM, "out of memory");
    int rc = bs_file_exists(path) ? bs_read_regular_file(path, text, len, BS_MODEL_FILE_MAX, e)
                                  : bs_fail(e, BS_EIO, "%s: missing (a Basal model directory needs it)", path);
    free(path);
    return rc;
}

/* The int8 mode's calibration text as this model reads it (model/smooth.h):
 * BOS, then the text. */
static int calibration_tokens(bs_basal_model *b, bs_err *e) {
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = bs_tokenizer_encode(b->tok, bs_int8_calib_text, (size_t)bs_int8_calib_text_len, &ids, &n, NULL, e);
    if (rc < 0) return rc;
    int32_t *all = malloc((n + 1) * sizeof *all);
    if (!all) {
        free(ids);
        return bs_fail(e, BS_ENOMEM, "out of memory");
    }
    all[0] = b->bos_id;
    memcpy(all + 1, ids, n * sizeof *ids);
    free(ids);
    b->model.calib_ids = all;
    b->model.n_calib = (int)n + 1;
    return BS_OK;
}

int bs_basal_load(bs_basal_model *b, const char *dir, bs_pool *pool, int load_weights, bs_err *e) {
    memset(b, 0, sizeof *b);
    char *text = NULL, *path = NULL;
    size_t len = 0;
    int rc;
    if (!(b->dir = strdup(dir))) return bs_fail(e, BS_ENOMEM, "out of memory");
    if ((rc = bs_config_load(&b->cfg, dir, e)) < 0) goto fail;

    if ((rc = read_in(dir, "basal.json", &text, &len, e)) < 0) goto fail;
    rc = bs_basal_json_check(text, len, &b->name, &b->version, &b->templates_object, e);
    free(text), text = NULL;
    if (rc < 0) goto fail;

    if ((rc = read_in(dir, "chat_template.jinja", &text, &len, e)) < 0) goto fail;
    if (len != BS_CHAT_TEMPLATE_LEN || memcmp(text, BS_CHAT_TEMPLATE, len) != 0) {
        rc = bs_fail(e, BS_EUNSUP, "chat_template.jinja differs from the implemented template");
        goto fail;
    }
    free(text), text = NULL;

    if ((rc = read_in(dir, "tokenizer_config.json", &text, &len, e)) < 0) goto fail;
    rc = bs_tokenizer_config_bos(text, len, &b->bos, e);
    free(text), text = NULL;
    if (rc < 0) goto fail;

    if (!(path = bs_path_join(dir, "tokenizer.json"))) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto fail; }
    if ((rc = bs_tokenizer_load(&b->tok, path, e)) < 0) goto fail;
    if ((rc = bs_tokenizer_check_basal(b->tok, e)) < 0) goto fail;
    if ((b->bos_id = bs_tokenizer_token_to_id(b->tok, b->bos)) < 0) {
        rc = bs_fail(e, BS_EFORMAT, "bos token %s is not in the vocabulary", b->bos);
        goto fail;
    }
    if ((b->im_start_id = bs_tokenizer_token_to_id(b->tok, "<|im_start|>")) < 0) {
        rc = bs_fail(e, BS_EFORMAT, "tokenizer.json: <|im_start|> is not a token");
        goto fail;
    }
    if ((b->im_end_id = bs_tokenizer_token_to_id(b->tok, "<|im_end|>")) < 0) {
        rc = bs_fail(e, BS_EFORMAT, "tokenizer.json: <|im_end|> is not a token");
        goto fail;
    }
    if (bs_tokenizer_max_id(b->tok) >= b->cfg.vocab) {
        rc = bs_fail(e, BS_EFORMAT, "tokenizer.json: token id %d is not below vocab_size %d of config.json",
                     bs_tokenizer_max_id(b->tok), b->cfg.vocab);
        goto fail;
    }

    if (load_weights) {
        if ((rc = bs_model_load(&b->model, dir, pool, e)) < 0) goto fail;
        b->has_weights = 1;
        if ((rc = calibration_tokens(b, e)) < 0) goto fail;
    }
    if ((rc = bs_calibration_load(&b->calib, dir, e)) < 0) goto fail;
    b->orders = 2;
    free(path);
    if (!(path = bs_path_join(dir, "CALIBRATION.json"))) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto fail; }
    if (!(b->calib_source = strdup(bs_file_exists(path) ? path : "none"))) {
        rc = bs_fail(e, BS_ENOMEM, "out of memory");
        goto fail;
    }
    /* 05 §1 D2: last, optional; a broken head is a load error (03 §6) */
    free(path);
    if (!(path = bs_path_join(dir, BS_EVIDENCE_FILE))) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto fail; }
    if (bs_file_exists(path)) {
        if (!(b->evidence = malloc(sizeof *b->evidence))) { rc = bs_fail(e, BS_ENOMEM, "out of memory"); goto fail; }
        if ((rc = bs_evidence_head_load(b->evidence, path, b->cfg.hidden, e)) < 0) {
            free(b->evidence);
            b->evidence = NULL;
            goto fail;
        }
    }
    free(path);
    return BS_OK;
fail:
    free(text);
    free(path);
    bs_basal_free(b);
    return rc;
}

void bs_basal_free(bs_basal_model *b) {
    if (b->has_weights) bs_model_free(&b->model);
    bs_tokenizer_free(b->tok);
    bs_calibration_free(&b->calib);
    if (b->evidence) bs_evidence_head_free(b->evidence);
    free(b->evidence);
    free(b->dir);
    free(b->calib_source);
    free(b->name);
    free(b->version);
    free(b->bos);
    memset(b, 0, sizeof *b);
}

int bs_basal_set_calibration(bs_basal_model *b, const char *file, bs_err *e) {
    bs_calibration c;
    memset(&c, 0, sizeof c);
    char *text = NULL, *src = strdup(file ? file : "off");
    size_t len = 0;
    int rc = BS_OK;
    if (!src) return bs_fail(e, BS_ENOMEM, "out of memory");
    if (file) {
        if (!bs_file_exists(file)) {
            rc = bs_fail(e, BS_EIO, "calibration file %s does not exist (give a CALIBRATION.json, or --no-calibration)",
                         file);
            goto done;
        }
        if ((rc = bs_read_regular_file(file, &text, &len, BS_MODEL_FILE_MAX, e)) < 0) goto done;
        if ((rc = bs_calibration_parse(&c, text, len, e)) < 0) {
            /* the parser names CALIBRATION.json; this one may be called otherwise */
            const char *why = strncmp(e->msg, "CALIBRATION.json: ", 18) ? e->msg : e->msg + 18;
            char tmp[sizeof e->msg];
            snprintf(tmp, sizeof tmp, "%s", why);
            bs_fail(e, rc, "%s: %s", file, tmp);
            goto done;
        }
    }
    bs_calibration_free(&b->calib);
    b->calib = c;
    free(b->calib_source);
    b->calib_source = src;
    src = NULL;
done:
    free(src);
    free(text);
    return rc;
}
